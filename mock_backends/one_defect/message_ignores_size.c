/* Defect: messages are formatted with vsprintf, ignoring message_size: a caller's buffer
   shorter than the message is overrun.
   Requirement: MSG-1 */
#define OD_BACKEND_ID "DefectMessageOverrun"
#define OD_OWN_FAIL
#include "base.h"

static BackendStatus od_fail(char *message, size_t size, BackendStatus status, const char *format, ...)
{
    va_list args;
    if (message == NULL || size == 0)
        return status;
    va_start(args, format);
    vsprintf(message, format, args); /* the defect */
    va_end(args);
    return status;
}
