/* Defect: GetBackendId answers a different id on every other call.
   Breaks conformance ENTRY-3 (the id is the same on every call) -> FAIL. */
#define MOCK_BACKEND_ID "MockUnstable"
#define MOCK_NO_GET_BACKEND_ID
#include "../skeleton.h"

BACKEND_EXPORT const char *GetBackendId(void)
{
    static unsigned calls;
    return calls++ % 2 ? "MockUnstableToo" : "MockUnstable";
}
