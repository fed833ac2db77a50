/* Defect: every backend context starts a watchdog thread and its destroy() frees the context but
   never stops the thread: one thread stays running per context created and destroyed (with its
   small stack), while the heap stays flat.
   Requirement: LIFE-1 */
#include <pthread.h>
#include <unistd.h>
static void start_watchdog(void);
#define OD_BACKEND_ID "DefectContextThread"
#define OD_AFTER_CREATE_CONTEXT(c) (start_watchdog(), (void)(c))
#include "base.h"

static void *watchdog(void *unused)
{
    (void)unused;
    for (;;)
        pause(); /* nothing ever tells it to stop */
    return NULL;
}

static void start_watchdog(void)
{
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attributes, 32768);
    pthread_attr_setguardsize(&attributes, 0);
    pthread_create(&thread, &attributes, watchdog, NULL);
    pthread_attr_destroy(&attributes);
}
