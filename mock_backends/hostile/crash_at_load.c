/* Defect: a constructor that crashes the process as soon as the library is loaded.
   Breaks conformance ENTRY-1 (the library loads) -> CRASH at stage load; in a scanning process,
   the loader's isolated probing reports probe-crashed. */
#include <signal.h>

#define MOCK_BACKEND_ID "MockCrashAtLoad"
#include "../skeleton.h"

__attribute__((constructor)) static void crash_on_load(void)
{
    raise(SIGSEGV);
}
