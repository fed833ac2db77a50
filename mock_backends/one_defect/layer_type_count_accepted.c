/* Defect: the layer-type check compares with <= BACKEND_LAYER_TYPE_COUNT_1_3, so the value equal
   to the count (one past the last layer type of Backend API 1.3) is accepted.
   Requirement: SUP-2 */
#define OD_BACKEND_ID "DefectLayerTypeCount"
#define OD_LAYER_TYPE_KNOWN(t) ((t) <= BACKEND_LAYER_TYPE_COUNT_1_3) /* the defect */
#include "base.h"
