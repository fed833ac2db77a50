# Crash notes, included into _core.pyx: the C side (loader/native/crash_note.c) names the file
# and the stage when a backend kills, exits or hangs the process while it is loaded. A scan holds
# the handlers for all its loads (CrashNotes), so a note costs no system call: the owner is
# pthread_self(), and one note covers a whole load, its stage moved along as the load goes.

from crash_note cimport (DBK_INTERRUPT_CHAIN, DBK_INTERRUPT_END, dbk_hold_handler,
                        dbk_note_close, dbk_note_open, dbk_note_stage, dbk_release_handler,
                        dbk_set_interrupt_mode)


def set_interrupt_ends_loading(bint end):
    """Whether the first SIGINT during a load ends the process at once, naming the file (a
    command-line scan), or only names it and lets the interrupt take effect when the backend
    returns (the default: a host may want its KeyboardInterrupt)."""
    dbk_set_interrupt_mode(DBK_INTERRUPT_END if end else DBK_INTERRUPT_CHAIN)


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
