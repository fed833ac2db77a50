/*
 * The least deferred loading can do to reach one usable backend among many installed: stat()
 * every installed file (to know it is unchanged), then dlopen the one used, look up its three
 * entry points and call them (as dlopen_inprocess.c does).
 *
 *     stat_dlopen_floor USED FILE...    prints "<loaded> <nanoseconds>"
 *
 * Built with -DFLOOR_LIBRARY -shared, it is the same function for a Python process to call
 * through ctypes (the in-process floor).
 */
#include <stdio.h>
#include <sys/stat.h>

#include "dlopen_inprocess.c"

/* stat() each of `files`, then load `used` as dlopen_inprocess.c does; nanoseconds taken, *ok
   set when every file was stat-ed and the used one loaded. */
int64_t stat_and_load(const char *used, const char *const *files, int count, int *ok)
{
    struct timespec a, b;
    struct stat st;
    int stated = 0, loaded = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < count; i++)
        stated += stat(files[i], &st) == 0;
    load_all(&used, 1, &loaded);
    clock_gettime(CLOCK_MONOTONIC, &b);
    *ok = loaded && stated == count;
    return (int64_t)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
}

#ifndef FLOOR_LIBRARY
int main(int argc, char **argv)
{
    int ok = 0;
    if (argc < 2)
        return 2;
    int64_t ns = stat_and_load(argv[1], (const char *const *)(argv + 2), argc - 2, &ok);
    printf("%d %lld\n", ok, (long long)ns);
    return 0;
}
#endif
