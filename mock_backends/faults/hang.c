/* Fault: the call MOCK_FAULT_IN names (fault.h) never returns. The runtime's call_timeout
   kills the backend host; the caller gets BackendTimeoutError. */
#include <unistd.h>

#define MOCK_FAULT_NAME "Hang"
#define MOCK_FAULT() for (;;) pause()
#include "fault.h"
