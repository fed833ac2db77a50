/* Defect: the memory manager's acquire() does not check whether memory is already acquired:
   a second acquire without a release answers OK.
   Requirement: LIFE-4 */
#define OD_BACKEND_ID "DefectDoubleAcquire"
#define OD_OWN_ACQUIRE
#include "base.h"

static BackendStatus od_acquire(BackendMemoryManager *self, char *message, size_t message_size)
{
    (void)message, (void)message_size;
    ((OdManager *)self)->acquired = 1; /* the defect: no check */
    return BACKEND_STATUS_OK;
}
