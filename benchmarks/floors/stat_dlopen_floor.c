/*
 * The least deferred loading can do to reach one usable backend among many installed: stat()
 * every installed file (to know it is unchanged), then dlopen the one used, look up its three
 * entry points and call them (as dlopen_inprocess.c does).
 *
 *     stat_dlopen_floor USED FILE...    prints "<loaded> <nanoseconds>"
 */
#include <stdio.h>
#include <sys/stat.h>

#include "dlopen_inprocess.c"

int main(int argc, char **argv)
{
    struct timespec a, b;
    struct stat st;
    int stated = 0, loaded = 0;
    if (argc < 2)
        return 2;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 2; i < argc; i++)
        stated += stat(argv[i], &st) == 0;
    load_all((const char *const *)(argv + 1), 1, &loaded);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%d %lld\n", loaded && stated == argc - 2,
           (long long)((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec)));
    return 0;
}
