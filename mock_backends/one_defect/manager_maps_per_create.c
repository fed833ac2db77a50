/* Defect: every memory manager maps a 64 KiB arena with mmap and its destroy() frees the manager
   but never unmaps the arena: the address space grows by 64 KiB per manager created and
   destroyed, while the malloc heap stays flat.
   Requirement: LIFE-1 */
#include <sys/mman.h>
#define OD_BACKEND_ID "DefectManagerMaps"
#define OD_AFTER_CREATE_MANAGER(m) \
    ((void)mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), (void)(m))
#include "base.h"
