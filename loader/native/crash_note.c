/* Crash notes: see crash_note.h. */
#include "crash_note.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
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
static int dbk_interrupt_mode = DBK_INTERRUPT_CHAIN;
static volatile sig_atomic_t dbk_interrupted = 0;  /* SIGINTs seen since the handlers went in */
static const int dbk_fatal_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE};
#define DBK_FATAL_COUNT ((int)(sizeof dbk_fatal_signals / sizeof dbk_fatal_signals[0]))
static struct sigaction dbk_replaced[DBK_FATAL_COUNT];
static struct sigaction dbk_replaced_interrupt;

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
static void dbk_on_interrupt(int sig, siginfo_t *info, void *context);

static void dbk_restore_handlers(void)
{
    struct sigaction current;
    for (int i = 0; i < DBK_FATAL_COUNT; i++) {
        /* Put back what was there, unless someone replaced our handler meanwhile. */
        if (sigaction(dbk_fatal_signals[i], NULL, &current) == 0
                && current.sa_handler == dbk_on_fatal_signal)
            sigaction(dbk_fatal_signals[i], &dbk_replaced[i], NULL);
    }
    if (sigaction(SIGINT, NULL, &current) == 0 && current.sa_sigaction == dbk_on_interrupt)
        sigaction(SIGINT, &dbk_replaced_interrupt, NULL);
}

static void dbk_write_one(const dbk_crash_note *note, const char *what, const char *advice)
{
    dbk_write("backend-loader: ");
    dbk_write(what);
    dbk_write(" while loading ");
    dbk_write(note->path);
    dbk_write(" (in ");
    dbk_write(__atomic_load_n(&note->stage, __ATOMIC_ACQUIRE));
    dbk_write(")");
    dbk_write(advice);
}

static const char dbk_isolated_advice[] =
    ": rerun with --isolated (backend-loader scan --isolated), or set "
    "DYNAMIC_BACKEND_PROBE=isolated, to load each backend in a child process first and skip "
    "those that crash, exit or hang\n";

/* Writes the note of the calling thread, if it has one open. */
static void dbk_write_note(const char *what)
{
    unsigned long self = (unsigned long)pthread_self();
    for (int i = 0; i < DBK_NOTE_SLOTS; i++) {
        if (__atomic_load_n(&dbk_notes[i].owner, __ATOMIC_ACQUIRE) == self) {
            dbk_write_one(&dbk_notes[i], what, dbk_isolated_advice);
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

/* SIGINT arrives in whichever thread the kernel picks (in Python, the main thread), not
   necessarily the one loading: every open note is written. */
static int dbk_write_every_note(const char *what, const char *advice)
{
    int written = 0;
    for (int i = 0; i < DBK_NOTE_SLOTS; i++) {
        if (__atomic_load_n(&dbk_notes[i].owner, __ATOMIC_ACQUIRE) != 0) {
            dbk_write_one(&dbk_notes[i], what, advice);
            written++;
        }
    }
    return written;
}

static void dbk_end_by_interrupt(void)
{
    struct sigaction plain;
    memset(&plain, 0, sizeof plain);
    plain.sa_handler = SIG_DFL;
    sigemptyset(&plain.sa_mask);
    sigaction(SIGINT, &plain, NULL);
    raise(SIGINT);      /* delivered when this handler returns: the process ends by SIGINT */
}

static void dbk_on_interrupt(int sig, siginfo_t *info, void *context)
{
    const struct sigaction *before = &dbk_replaced_interrupt;
    int first = dbk_interrupted++ == 0;
    if (before->sa_handler == SIG_IGN)
        return;
    if (dbk_interrupt_mode == DBK_INTERRUPT_END || !first || before->sa_handler == SIG_DFL) {
        dbk_write_every_note("interrupted", ": the backend did not return (a hang); load it with "
                             "--isolated (or DYNAMIC_BACKEND_PROBE=isolated) to skip a backend "
                             "that hangs as probe-timeout\n");
        dbk_end_by_interrupt();
        return;
    }
    dbk_write_every_note("interrupt received", ": the interrupt takes effect when the backend "
                         "returns; interrupt again to end the process now\n");
    if (before->sa_flags & SA_SIGINFO)
        before->sa_sigaction(sig, info, context);
    else
        before->sa_handler(sig);
}

void dbk_set_interrupt_mode(int mode)
{
    dbk_interrupt_mode = mode;
}

void dbk_hold_handler(void)
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
        memset(&action, 0, sizeof action);
        action.sa_sigaction = dbk_on_interrupt;
        action.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&action.sa_mask);
        dbk_interrupted = 0;
        sigaction(SIGINT, &action, &dbk_replaced_interrupt);
    }
}

void dbk_release_handler(void)
{
    if (dbk_holders > 0 && --dbk_holders == 0)
        dbk_restore_handlers();
}

int dbk_note_open(const char *path, const char *stage)
{
    for (int slot = 0; slot < DBK_NOTE_SLOTS; slot++) {
        size_t length;
        if (dbk_notes[slot].owner != 0)
            continue;
        length = strnlen(path, DBK_NOTE_PATH - 1);
        memcpy(dbk_notes[slot].path, path, length);
        dbk_notes[slot].path[length] = 0;
        dbk_notes[slot].stage = stage;
        __atomic_store_n(&dbk_notes[slot].owner, (unsigned long)pthread_self(), __ATOMIC_RELEASE);
        dbk_hold_handler();
        return slot;
    }
    return -1;  /* more threads loading at once than slots: no note, nothing else changes */
}

void dbk_note_stage(int slot, const char *stage)
{
    if (slot >= 0)
        __atomic_store_n(&dbk_notes[slot].stage, stage, __ATOMIC_RELEASE);
}

void dbk_note_close(int slot)
{
    if (slot < 0)
        return;
    __atomic_store_n(&dbk_notes[slot].owner, 0UL, __ATOMIC_RELEASE);
    dbk_release_handler();
}
