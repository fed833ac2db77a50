# Cython mirror of crash_note.h: declarations only.

cdef extern from "crash_note.h" nogil:
    enum:
        DBK_INTERRUPT_CHAIN
        DBK_INTERRUPT_END
    int dbk_note_open(const char *path, const char *stage)
    void dbk_note_stage(int slot, const char *stage)
    void dbk_note_close(int slot)
    void dbk_hold_handler()
    void dbk_release_handler()
    void dbk_set_interrupt_mode(int mode)
