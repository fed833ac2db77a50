/* Defect: memory obtained from the runtime's allocator is handed back with free() instead of the
   allocator's deallocate(): allocations and deallocations do not balance.
   Requirement: ABI-5 */
#define OD_BACKEND_ID "DefectAllocatorUnbalanced"
#define OD_OWN_FREE
#include "base.h"

static void od_free(const BackendAllocator *allocator, void *pointer)
{
    (void)allocator;
    free(pointer); /* the defect: deallocate() is never called */
}
