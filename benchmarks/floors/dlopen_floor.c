/*
 * The least a loader can do per backend, as a bare C program: the loop of dlopen_inprocess.c
 * (dlopen(RTLD_NOW | RTLD_LOCAL), three dlsym() and a call of each entry point).
 *
 *     dlopen_floor FILE...    prints "<loaded> <nanoseconds>"
 */
#include <stdio.h>

#include "dlopen_inprocess.c"

int main(int argc, char **argv)
{
    int loaded;
    int64_t elapsed = load_all((const char *const *)(argv + 1), argc - 1, &loaded);
    printf("%d %lld\n", loaded, (long long)elapsed);
    return 0;
}
