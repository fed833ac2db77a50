/* Fault: abort() in the call MOCK_FAULT_IN names (fault.h), after a line on stderr. The backend
   host dies of SIGABRT; the caller gets BackendCrashedError with that line. */
#include <stdio.h>

#define MOCK_FAULT_NAME "Abort"
#define MOCK_FAULT() (fprintf(stderr, "fault: giving up in %s\n", call), abort())
#include "fault.h"
