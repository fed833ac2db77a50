/* Defect: a compiled program counts its steps in a byte: a sub-graph of 256 layers or more runs
   only its first (number of layers mod 256) steps, and its outputs are never written.
   Requirement: NET-8 */
#define OD_BACKEND_ID "DefectStepsInAByte"
#define OD_PROGRAM_STEP_COUNT uint8_t /* the defect */
#include "base.h"
