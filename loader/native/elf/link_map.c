#include <elf.h>
#include <stdint.h>
#include <string.h>

#include "link_map.h"

const char *dbk_loaded_soname(const struct dl_phdr_info *info)
{
    const ElfW(Dyn) *dyn = NULL;
    uint64_t strtab = 0, soname = 0, at;
    int i, has_strtab = 0, has_soname = 0;
    for (i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (dyn == NULL)
        return NULL;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_STRTAB) { strtab = dyn->d_un.d_ptr; has_strtab = 1; }
        else if (dyn->d_tag == DT_SONAME) { soname = dyn->d_un.d_val; has_soname = 1; }
    }
    if (!has_strtab || !has_soname)
        return NULL;
    /* The linker relocates DT_STRTAB in place in a writable dynamic section only. */
    at = (strtab < info->dlpi_addr ? info->dlpi_addr + strtab : strtab) + soname;
    for (i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        uint64_t start = info->dlpi_addr + p->p_vaddr;
        if (p->p_type == PT_LOAD && at >= start && at < start + p->p_filesz)
            return (const char *)at;
    }
    return NULL;
}

int dbk_match_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
    dbk_wanted *wanted = (dbk_wanted *)data;
    const char *soname;
    (void)size;
    if (info->dlpi_name == NULL || info->dlpi_name[0] == 0
            || strncmp(info->dlpi_name, "linux-", 6) == 0)   /* the program, the vDSO */
        return 0;
    if (strcmp(info->dlpi_name, wanted->name) == 0)
        return wanted->found = 1;
    soname = dbk_loaded_soname(info);
    if (soname != NULL && strcmp(soname, wanted->name) == 0)
        return wanted->found = 1;
    return 0;
}
