/* Version records: DT_VERNEED chains (files among DT_NEEDED, names inside the string table) and
 * DT_VERDEF chains, each of which must end; the version indexes they define, for the symbols. */
#include <string.h>

#include "internal.h"

int dbk_check_versions(dbk_elf *e, const dbk_dynamic *d, uint64_t *defined, uint32_t *highest)
{
    uint32_t steps = 0;
    *highest = 0;
    if (d->has_verneed) {
        uint64_t at = d->verneed;
        uint32_t files = 0;
        for (;;) {
            const unsigned char *bytes = dbk_table(e, at, sizeof(dbk_Verneed));
            dbk_Verneed need;
            uint64_t aux_at;
            uint32_t i, found = 0;
            if (bytes == NULL || ++steps > DBK_MAX_VERSION_RECORDS)
                return dbk_fail(e, "DT_VERNEED records lie outside the file or do not end");
            memcpy(&need, bytes, sizeof(need));
            if (need.vn_version != 1 || need.vn_file >= e->strsz)
                return dbk_fail(e, "a DT_VERNEED record has a bad vn_version or vn_file");
            for (i = 0; i < e->n_needed && !found; i++)
                found = strcmp(e->strtab + need.vn_file, e->strtab + e->needed[i]) == 0;
            if (!found)
                return dbk_fail(e, "a DT_VERNEED record names a file that is not a DT_NEEDED entry");
            if (++files > e->n_needed)
                return dbk_fail(e, "more DT_VERNEED records than DT_NEEDED entries");
            aux_at = at + need.vn_aux;
            for (i = 0; need.vn_aux != 0; i++) {
                dbk_Vernaux aux;
                bytes = dbk_table(e, aux_at, sizeof(dbk_Vernaux));
                if (bytes == NULL || ++steps > DBK_MAX_VERSION_RECORDS)
                    return dbk_fail(e, "DT_VERNEED auxiliary records lie outside the file or do not end");
                memcpy(&aux, bytes, sizeof(aux));
                if (aux.vna_name >= e->strsz)
                    return dbk_fail(e, "a DT_VERNEED version name lies outside the string table");
                DBK_SET(defined, aux.vna_other & 0x7fff);
                if ((aux.vna_other & 0x7fff) > *highest)
                    *highest = aux.vna_other & 0x7fff;
                if (aux.vna_next == 0)
                    break;
                aux_at += aux.vna_next;
            }
            if (need.vn_next == 0)
                break;
            at += need.vn_next;
        }
    }
    if (d->has_verdef) {
        uint64_t at = d->verdef;
        for (;;) {
            const unsigned char *bytes = dbk_table(e, at, sizeof(dbk_Verdef));
            dbk_Verdef def;
            dbk_Verdaux aux;
            if (bytes == NULL || ++steps > DBK_MAX_VERSION_RECORDS)
                return dbk_fail(e, "DT_VERDEF records lie outside the file or do not end");
            memcpy(&def, bytes, sizeof(def));
            if (def.vd_version != 1)
                return dbk_fail(e, "a DT_VERDEF record has a bad vd_version");
            bytes = dbk_table(e, at + def.vd_aux, sizeof(dbk_Verdaux));
            if (bytes == NULL)
                return dbk_fail(e, "a DT_VERDEF name record lies outside the file");
            memcpy(&aux, bytes, sizeof(aux));
            if (aux.vda_name >= e->strsz)
                return dbk_fail(e, "a DT_VERDEF version name lies outside the string table");
            DBK_SET(defined, def.vd_ndx & 0x7fff);
            if ((def.vd_ndx & 0x7fff) > *highest)
                *highest = def.vd_ndx & 0x7fff;
            if (def.vd_next == 0)
                break;
            at += def.vd_next;
        }
    }
    return 0;
}
