/* The library missing_dependency.c links against at build time. It is built into the build
   directory only and never installed, so the installed mock's DT_NEEDED entry cannot be found. */
int dbk_absent_dependency_marker(void)
{
    return 1;
}
