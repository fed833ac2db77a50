/* Defect: every execution allocates a 256-byte bookkeeping record with malloc and never frees
   it: the heap grows with each execute, whatever the layer.
   Requirement: LIFE-6 */
#include <stdlib.h>
static void *volatile leaked_record; /* the pointer is kept nowhere else */
#define OD_BACKEND_ID "DefectLeaksHeap"
#define OD_AFTER_EXECUTE(w) (leaked_record = malloc(256), (void)(w)) /* the defect: never freed */
#include "base.h"
