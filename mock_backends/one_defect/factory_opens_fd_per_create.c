/* Defect: every workload factory opens an eventfd (to signal finished work) and its destroy()
   never closes it: one file descriptor stays open per factory created and destroyed, while the
   heap stays flat.
   Requirement: LIFE-1 */
#include <sys/eventfd.h>
#define OD_BACKEND_ID "DefectFactoryFd"
#define OD_AFTER_CREATE_FACTORY(f) ((void)eventfd(0, EFD_CLOEXEC), (void)(f))
#include "base.h"
