/* Defect: every execution maps a 64 KiB scratch area with mmap and never unmaps it: the address
   space grows with each execute, while the malloc heap stays flat.
   Requirement: LIFE-6 */
#include <sys/mman.h>
static void *leaked_scratch;
#define OD_BACKEND_ID "DefectLeaksMapping"
#define OD_AFTER_EXECUTE(w) \
    (leaked_scratch = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), (void)(w))
#include "base.h"
