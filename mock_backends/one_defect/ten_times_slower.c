/* Defect: execute recomputes its output 40 times (a debugging loop left in): results are right,
   but every layer runs many times slower than the reference backend.
   Requirement: PERF-1 */
#define OD_BACKEND_ID "DefectSlow"
#define OD_AFTER_EXECUTE(w) \
    for (int again = 0; again < 40; again++) /* the defect */ \
        (w)->kernel((w), in, outputs[0].data)
#include "base.h"
