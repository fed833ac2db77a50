/* Fault: a segmentation fault (a write through NULL) in the call MOCK_FAULT_IN names (fault.h).
   The backend host dies of SIGSEGV; the caller gets BackendCrashedError naming the call. */
#define MOCK_FAULT_NAME "Crash"
#define MOCK_FAULT() (*(volatile int *)0 = 1)
#include "fault.h"
