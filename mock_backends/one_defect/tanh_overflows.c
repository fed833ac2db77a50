/* Defect: tanh is computed as (e^2x - 1) / (e^2x + 1), which is NaN once e^2x overflows (x above
   about 44).
   Requirement: LAYER-1 */
#define OD_BACKEND_ID "DefectTanh"
#define OD_TANH(v) ((expf(2 * (v)) - 1) / (expf(2 * (v)) + 1)) /* the defect */
#include "base.h"
