/* Defect: every compiled program keeps the addresses of its tensors, during an execute, in one
   table shared by all programs of the library: two different compiled sub-graphs executed at the
   same time from two threads read and write each other's buffers.
   Requirement: NET-10 */
#define OD_BACKEND_ID "DefectSharedBindings"
#include <stddef.h>
static float *od_shared_bindings[1 << 16];     /* the defect: one table for every program */
#define OD_PROGRAM_BINDINGS(p) od_shared_bindings
#include "base.h"
