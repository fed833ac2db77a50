/* Defect: every instance opens /dev/urandom (to seed its scratch layout) and destroy() never
   closes it: one file descriptor stays open per instance created and destroyed, while the heap
   stays flat.
   Requirement: LIFE-1 */
#include <fcntl.h>
#define OD_BACKEND_ID "DefectInstanceFd"
#define OD_AFTER_CREATE_INSTANCE(i) ((void)open("/dev/urandom", O_RDONLY | O_CLOEXEC), (void)(i))
#include "base.h"
