/* Defect: sigmoid is computed as e^x / (1 + e^x), which is inf / inf = NaN once e^x overflows
   (x above about 88).
   Requirement: LAYER-1 */
#define OD_BACKEND_ID "DefectSigmoid"
#define OD_SIGMOID(v) (expf(v) / (1.0f + expf(v))) /* the defect */
#include "base.h"
