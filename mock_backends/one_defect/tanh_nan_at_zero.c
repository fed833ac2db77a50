/* Defect: tanh is computed from |x| and the sign x / |x|, which is 0 / 0 = NaN for +0 and -0.
   Requirement: LAYER-1 */
#define OD_BACKEND_ID "DefectTanhZero"
#define OD_TANH(v) ((v) / fabsf(v) * tanhf(fabsf(v))) /* the defect */
#include "base.h"
