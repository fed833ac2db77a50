/* Fault: _exit(3) in the call MOCK_FAULT_IN names (fault.h). The backend host ends with status
   3 in the middle of a call; the caller gets BackendCrashedError naming the status. */
#include <unistd.h>

#define MOCK_FAULT_NAME "Exit"
#define MOCK_FAULT() _exit(3)
#include "fault.h"
