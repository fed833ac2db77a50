/* Defect: the layer-type check compares the type as a signed int, so UINT32_MAX (-1) passes as
   a known layer type.
   Requirement: SUP-2 */
#define OD_BACKEND_ID "DefectLayerTypeSign"
#define OD_LAYER_TYPE_KNOWN(t) ((int32_t)(t) < BACKEND_LAYER_TYPE_COUNT_1_3) /* the defect */
#include "base.h"
