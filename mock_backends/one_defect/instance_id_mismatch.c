/* Defect: instances' get_id() returns another id than GetBackendId() (a leftover from a
   renamed product).
   Requirement: ENTRY-5 */
#define OD_BACKEND_ID "DefectIdMismatch"
#define OD_INSTANCE_ID "DefectIdOld" /* the defect */
#include "base.h"
