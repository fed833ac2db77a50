/* Defect: the profiling event of a fused step (a layer and the activation fused into it) names
   only the first layer: the activation's time is counted, but it appears in no event.
   Requirement: NET-6 */
#define OD_BACKEND_ID "DefectFusedEventFirstLayer"
#define OD_EVENT_LAYERS(n) ((void)(n), 1u) /* the defect: one layer, however many ran */
#include "base.h"
