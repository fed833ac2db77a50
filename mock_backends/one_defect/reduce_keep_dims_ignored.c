/* Defect: Reduce's check ignores keep_dims and expects the reduced axes kept: a description
   with keep_dims 0 whose output info keeps them is accepted (and one that drops them, as the
   runtime sends, is refused).
   Requirement: SUP-4 */
#define OD_BACKEND_ID "DefectReduceKeepDims"
#define OD_REDUCE_KEEPS_DIMS(d) ((void)(d), 1) /* the defect */
#include "base.h"
