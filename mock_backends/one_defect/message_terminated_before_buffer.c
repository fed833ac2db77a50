/* Defect: after formatting, the message is terminated with message[size - 1] = 0, whatever the
   size: with message_size 0 that writes one byte before the buffer (or through NULL).
   Requirement: MSG-1 */
#define OD_BACKEND_ID "DefectMessageTerminator"
#define OD_OWN_FAIL
#include "base.h"

static BackendStatus od_fail(char *message, size_t size, BackendStatus status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(message, size, format, args);
    va_end(args);
    message[size - 1] = '\0'; /* the defect */
    return status;
}
