/* Fault: the call MOCK_FAULT_IN names (fault.h) starts a thread that never ends, then returns
   normally. The thread lives in the backend host and ends with it, when the runtime closes. */
#include <pthread.h>
#include <unistd.h>

static void *mock_forever(void *unused)
{
    (void)unused;
    for (;;)
        pause();
    return NULL;
}

static void mock_leak_thread(void)
{
    pthread_t thread;
    if (pthread_create(&thread, NULL, mock_forever, NULL) == 0)
        pthread_detach(thread);
}

#define MOCK_FAULT_NAME "LeakThread"
#define MOCK_FAULT() mock_leak_thread()
#include "fault.h"
