/* Defect: BackendFactory never returns.
   Breaks conformance ENTRY-5 (the factory returns a well-formed instance) -> TIMEOUT; the
   loader's isolated probing reports probe-timeout. */
#include <unistd.h>

#define MOCK_BACKEND_ID "MockHangInFactory"
#define MOCK_NO_BACKEND_FACTORY
#include "../skeleton.h"

BACKEND_EXPORT void *BackendFactory(void)
{
    for (;;)
        pause();
}
