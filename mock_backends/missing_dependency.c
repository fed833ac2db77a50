/* Defect: needs libdbk_absent_dependency.so (DT_NEEDED), which is never installed.
   Breaks the dlopen check (the dynamic linker must load it) -> missing-dependency. */
#define MOCK_BACKEND_ID "MockMissingDependency"
#include "skeleton.h"

/* Defined only in support/absent_dependency.c, the library this mock is linked against. */
extern int dbk_absent_dependency_marker(void);

BACKEND_EXPORT int mock_uses_absent_dependency(void)
{
    return dbk_absent_dependency_marker();
}
