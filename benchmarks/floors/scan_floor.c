/*
 * The fewest system calls a backend discovery can make: per directory, list it once and sort
 * the names; per entry, match the name in C; per candidate, one fstatat() without following
 * links, and for links only, realpath() plus stat() of the target; de-duplicate by
 * (st_dev, st_ino) in an open-addressing table.
 *
 *     scan_floor DIR...    prints "<distinct files> <nanoseconds>"
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int word(const char **p)
{
    const char *start = *p;
    while ((**p >= 'a' && **p <= 'z') || (**p >= 'A' && **p <= 'Z') || (**p >= '0' && **p <= '9'))
        (*p)++;
    return *p > start;
}

static int valid_name(const char *p)
{
    if (!word(&p) || *p++ != '_' || !word(&p) || strncmp(p, "_backend.so", 11) != 0)
        return 0;
    for (p += 11; *p == '.';) {
        const char *digits = ++p;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p == digits)
            return 0;
    }
    return *p == '\0';
}

static uint64_t *table;
static size_t table_size = 1 << 20;

static int first_time(uint64_t dev, uint64_t ino)
{
    size_t i = (size_t)((ino * 0x9E3779B97F4A7C15ull) ^ dev) & (table_size - 1);
    while (table[2 * i] || table[2 * i + 1]) {
        if (table[2 * i] == dev + 1 && table[2 * i + 1] == ino)
            return 0;
        i = (i + 1) & (table_size - 1);
    }
    table[2 * i] = dev + 1;
    table[2 * i + 1] = ino;
    return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    struct timespec t0, t1;
    size_t found = 0;
    char dir[PATH_MAX], path[PATH_MAX], target[PATH_MAX];
    table = calloc(2 * table_size, sizeof *table);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int a = 1; a < argc; a++) {
        struct dirent **names;
        int fd, n;
        if (!realpath(argv[a], dir) || (fd = open(dir, O_RDONLY | O_DIRECTORY)) < 0)
            continue;
        n = scandir(dir, &names, NULL, by_name);
        for (int i = 0; i < n; i++) {
            struct stat st;
            const char *name = names[i]->d_name;
            if (valid_name(name) && fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                int ok = S_ISREG(st.st_mode);
                if (S_ISLNK(st.st_mode)) {
                    snprintf(path, sizeof path, "%s/%s", dir, name);
                    ok = realpath(path, target) && stat(target, &st) == 0 && S_ISREG(st.st_mode);
                }
                if (ok && first_time((uint64_t)st.st_dev, (uint64_t)st.st_ino))
                    found++;
            }
            free(names[i]);
        }
        free(names);
        close(fd);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%zu %lld\n", found, (long long)((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec)));
    return 0;
}
