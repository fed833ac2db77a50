/* Defect: use_custom_allocator answers OK, but the backend keeps allocating with malloc and
   never calls the runtime's allocator.
   Requirement: ABI-5 */
#define OD_BACKEND_ID "DefectAllocatorUnused"
#define OD_OWN_USE_CUSTOM_ALLOCATOR
#include "base.h"

static BackendStatus od_use_custom_allocator(const BackendInstance *self, const BackendAllocator *allocator,
                                             char *message, size_t message_size)
{
    (void)self, (void)allocator, (void)message, (void)message_size;
    return BACKEND_STATUS_OK; /* the defect: accepted, never stored, never used */
}
