/* Defect: calls a function no library defines, so binding every symbol at load fails.
   Breaks the dlopen check (dlopen with RTLD_NOW) -> dlopen-failed. */
#define MOCK_BACKEND_ID "MockUnresolvedSymbol"
#include "skeleton.h"

extern int dbk_symbol_nobody_defines(void);

BACKEND_EXPORT int mock_uses_unresolved_symbol(void)
{
    return dbk_symbol_nobody_defines();
}
