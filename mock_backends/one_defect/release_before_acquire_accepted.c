/* Defect: the memory manager's release() does not check that memory was acquired: release
   before acquire answers OK.
   Requirement: LIFE-4 */
#define OD_BACKEND_ID "DefectReleaseFirst"
#define OD_OWN_RELEASE
#include "base.h"

static BackendStatus od_release(BackendMemoryManager *self, char *message, size_t message_size)
{
    (void)message, (void)message_size;
    ((OdManager *)self)->acquired = 0; /* the defect: no check */
    return BACKEND_STATUS_OK;
}
