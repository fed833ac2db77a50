/* Libraries already loaded: the dynamic linker matches a DT_NEEDED name against the objects it
 * has loaded (their path and soname) before it searches, and opens nothing for a match. The
 * names are read from the link map (dl_iterate_phdr); nothing is opened. */
#ifndef DBK_LINK_MAP_H
#define DBK_LINK_MAP_H

#include <link.h>

typedef struct {
    const char *name;
    int found;
} dbk_wanted;

/* The DT_SONAME of a loaded object, or NULL; only memory its own segments map is read. */
const char *dbk_loaded_soname(const struct dl_phdr_info *info);

/* dl_iterate_phdr callback, ``data`` a dbk_wanted: stops (returns 1) at the first loaded object
 * whose path or soname is the wanted name. */
int dbk_match_loaded(struct dl_phdr_info *info, size_t size, void *data);

#endif
