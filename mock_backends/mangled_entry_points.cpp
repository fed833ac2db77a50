/* Defect: the entry points are compiled as C++ without extern "C", so they are exported only
   under mangled names (_Z12GetBackendIdv, ...).
   Breaks the entry-point check (C linkage) -> missing-symbol, with a hint about name mangling. */
#define BACKEND_API_NO_ENTRY_POINT_PROTOTYPES
#include "backend_api.h"

BACKEND_EXPORT const char *GetBackendId() { return "MockMangled"; }

BACKEND_EXPORT void GetVersion(uint32_t *major, uint32_t *minor)
{
    *major = BACKEND_API_VERSION_MAJOR;
    *minor = BACKEND_API_VERSION_MINOR;
}

BACKEND_EXPORT void *BackendFactory() { return 0; }
