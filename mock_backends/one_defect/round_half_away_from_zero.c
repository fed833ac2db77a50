/* Defect: ElementwiseUnary's round rounds halves away from zero (C's roundf: 2.5 -> 3) where
   ONNX rounds them to even (2.5 -> 2).
   Requirement: LAYER-3 */
#define OD_BACKEND_ID "DefectRoundHalfAway"
#define OD_ROUND(v) roundf(v) /* the defect */
#include "base.h"
