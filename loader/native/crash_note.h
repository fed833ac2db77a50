/* Crash notes: when a backend's own code kills the process while it is being loaded (its
 * constructors in dlopen, GetBackendId, GetVersion, the BackendFactory probe), the last words on
 * stderr name the file and the stage instead of a bare "Segmentation fault". A backend that calls
 * exit() there gets the same note, from an atexit(3) handler; one that hangs there is named when
 * the user interrupts the process (SIGINT).
 *
 * A note is a slot holding the loading thread's id, the file and the stage. While any note is
 * open, handlers for the fatal signals and SIGINT are installed; they write with write(2) only
 * (async-signal-safe). A fatal signal then goes to the handler that was replaced (by default the
 * process dies of it, and faulthandler or a host's own handler still runs). Notes are opened and
 * closed with the GIL held, which serializes them. */
#ifndef DBK_CRASH_NOTE_H
#define DBK_CRASH_NOTE_H

/* What the first SIGINT during a load does. */
#define DBK_INTERRUPT_CHAIN 0   /* name the file, then the replaced handler runs (Python's sets
                                   KeyboardInterrupt for when the load returns); a second SIGINT
                                   while the load has not returned ends the process */
#define DBK_INTERRUPT_END   1   /* name the file and end the process at once, by SIGINT (a
                                   command-line scan, which has nothing to keep) */

/* Until the matching dbk_note_close, a fatal signal, an exit or an interrupt in or during the
   load names ``path`` and ``stage`` (a string literal). Returns the slot to close, or -1 when
   every slot is taken (then nothing changes). */
int dbk_note_open(const char *path, const char *stage);
/* The load moved on to another stage (another call into the backend's code). */
void dbk_note_stage(int slot, const char *stage);
void dbk_note_close(int slot);
/* Keep the handlers installed across many notes (a scan), saving the system calls per note. */
void dbk_hold_handler(void);
void dbk_release_handler(void);
/* DBK_INTERRUPT_CHAIN (the default) or DBK_INTERRUPT_END. */
void dbk_set_interrupt_mode(int mode);

#endif
