# Crash notes, included into _core.pyx: when a backend's own code kills the process while it is
# being loaded (its constructors in dlopen, GetBackendId, GetVersion, the BackendFactory probe),
# the last words on stderr name the file and the way out (isolated probing) instead of a bare
# "Segmentation fault". A backend that calls exit() there gets the same note, from an atexit(3)
# handler.
#
# A note is a slot holding the loading thread's id, the file and the stage. While any note is
# open, a handler for the fatal signals is installed; it writes the note of the crashing thread
# with write(2) only (async-signal-safe), puts back the handler it replaced and re-raises, so the
# process still dies of the same signal (and faulthandler or a host's own handler still runs).
# Notes are opened and closed with the GIL held, which serializes them. A scan holds the handler
# for all its loads (CrashNotes), so a note costs no system call: the owner is pthread_self(),
# and one note covers a whole load, its stage moved along as the load goes.

cdef extern from *:
    """
    #include <signal.h>
    #include <stdlib.h>
    #include <string.h>
    #include <pthread.h>
    #include <unistd.h>

    #define DBK_NOTE_SLOTS 8
    #define DBK_NOTE_PATH 4096

    typedef struct {
        unsigned long owner;        /* pthread_self() of the loading thread; 0: free */
        const char *stage;          /* a string literal */
        char path[DBK_NOTE_PATH];
    } dbk_crash_note;

    static dbk_crash_note dbk_notes[DBK_NOTE_SLOTS];
    static int dbk_holders = 0;
    static const int dbk_fatal_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE};
    #define DBK_FATAL_COUNT ((int)(sizeof dbk_fatal_signals / sizeof dbk_fatal_signals[0]))
    static struct sigaction dbk_replaced[DBK_FATAL_COUNT];

    static void dbk_write(const char *text)
    {
        size_t left = strlen(text);
        while (left > 0) {
            ssize_t written = write(2, text, left);
            if (written <= 0)
                return;
            text += written;
            left -= (size_t)written;
        }
    }

    static void dbk_on_fatal_signal(int sig);

    static void dbk_restore_handlers(void)
    {
        struct sigaction current;
        for (int i = 0; i < DBK_FATAL_COUNT; i++) {
            /* Put back what was there, unless someone replaced our handler meanwhile. */
            if (sigaction(dbk_fatal_signals[i], NULL, &current) == 0
                    && current.sa_handler == dbk_on_fatal_signal)
                sigaction(dbk_fatal_signals[i], &dbk_replaced[i], NULL);
        }
    }

    /* Writes the note of the calling thread, if it has one open. */
    static void dbk_write_note(const char *what)
    {
        unsigned long self = (unsigned long)pthread_self();
        for (int i = 0; i < DBK_NOTE_SLOTS; i++) {
            if (__atomic_load_n(&dbk_notes[i].owner, __ATOMIC_ACQUIRE) == self) {
                dbk_write("backend-loader: ");
                dbk_write(what);
                dbk_write(" while loading ");
                dbk_write(dbk_notes[i].path);
                dbk_write(" (in ");
                dbk_write(__atomic_load_n(&dbk_notes[i].stage, __ATOMIC_ACQUIRE));
                dbk_write("): rerun with --isolated (backend-loader scan --isolated), or set "
                          "DYNAMIC_BACKEND_PROBE=isolated, to load each backend in a child "
                          "process first and skip those that crash or exit\\n");
                return;
            }
        }
    }

    /* A backend that calls exit() while it is loaded ends the process quietly: say so. */
    static void dbk_on_exit(void)
    {
        dbk_write_note("the process exited");
    }

    static void dbk_on_fatal_signal(int sig)
    {
        switch (sig) {
        case SIGSEGV: dbk_write_note("crashed (SIGSEGV)"); break;
        case SIGBUS: dbk_write_note("crashed (SIGBUS)"); break;
        case SIGABRT: dbk_write_note("crashed (SIGABRT)"); break;
        case SIGILL: dbk_write_note("crashed (SIGILL)"); break;
        case SIGFPE: dbk_write_note("crashed (SIGFPE)"); break;
        default: dbk_write_note("crashed"); break;
        }
        /* The signal stays blocked until this handler returns; it is then delivered to the
           handler we replaced (by default: the process dies of it). */
        dbk_restore_handlers();
        raise(sig);
    }

    /* The handler is installed while anyone holds it: each note, and a scan around all its
       notes (which saves the sigaction calls per note). */
    static void dbk_hold_handler(void)
    {
        static int exit_note_registered = 0;
        if (!exit_note_registered)
            exit_note_registered = atexit(dbk_on_exit) == 0;
        if (dbk_holders++ == 0) {
            struct sigaction action;
            memset(&action, 0, sizeof action);
            action.sa_handler = dbk_on_fatal_signal;
            action.sa_flags = SA_ONSTACK;   /* faulthandler's alternate stack, if any */
            sigemptyset(&action.sa_mask);
            for (int i = 0; i < DBK_FATAL_COUNT; i++)
                sigaction(dbk_fatal_signals[i], &action, &dbk_replaced[i]);
        }
    }

    static void dbk_release_handler(void)
    {
        if (dbk_holders > 0 && --dbk_holders == 0)
            dbk_restore_handlers();
    }

    static int dbk_note_open(const char *path, const char *stage)
    {
        for (int slot = 0; slot < DBK_NOTE_SLOTS; slot++) {
            size_t length;
            if (dbk_notes[slot].owner != 0)
                continue;
            length = strnlen(path, DBK_NOTE_PATH - 1);
            memcpy(dbk_notes[slot].path, path, length);
            dbk_notes[slot].path[length] = 0;
            dbk_notes[slot].stage = stage;
            __atomic_store_n(&dbk_notes[slot].owner, (unsigned long)pthread_self(),
                             __ATOMIC_RELEASE);
            dbk_hold_handler();
            return slot;
        }
        return -1;  /* more threads loading at once than slots: no note, nothing else changes */
    }

    /* The load moved on to another stage (another call into the backend's code). */
    static void dbk_note_stage(int slot, const char *stage)
    {
        if (slot >= 0)
            __atomic_store_n(&dbk_notes[slot].stage, stage, __ATOMIC_RELEASE);
    }

    static void dbk_note_close(int slot)
    {
        if (slot < 0)
            return;
        __atomic_store_n(&dbk_notes[slot].owner, 0UL, __ATOMIC_RELEASE);
        dbk_release_handler();
    }
    """
    int dbk_note_open(const char *path, const char *stage)
    void dbk_note_stage(int slot, const char *stage)
    void dbk_note_close(int slot)
    void dbk_hold_handler()
    void dbk_release_handler()


cdef int _crash_note_open(bytes path, const char *stage):
    """Until the matching _crash_note_close, a fatal signal in this thread names ``path`` and
    ``stage`` on stderr. Returns the slot to close."""
    return dbk_note_open(path, stage)


cdef void _crash_note_close(int slot):
    dbk_note_close(slot)


cdef class CrashNotes:
    """``with CrashNotes():`` keeps the crash-note handler installed across many loads (a scan),
    instead of installing and removing it around each call. Re-entrant."""
    cdef int held

    def __enter__(self):
        dbk_hold_handler()
        self.held += 1
        return self

    def __exit__(self, *exc_info):
        if self.held > 0:
            self.held -= 1
            dbk_release_handler()
