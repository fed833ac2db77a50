/*
 * backend_api.h - the C ABI between a runtime and a dynamic backend.
 *
 * This header is the single source of truth for the Backend API version, the
 * entry points a backend shared object exports and the layout of every struct
 * that crosses the boundary. The loader's Cython declarations
 * (abi/backend_api.pxd) mirror it name for name.
 *
 * VERSIONING POLICY
 *
 *   The Backend API version is MAJOR.MINOR.
 *
 *   MAJOR is bumped by any change that breaks a backend built against the
 *   previous version: removing, renaming, retyping or reordering a struct
 *   member, function parameter or enum value, or changing the meaning of one.
 *
 *   MINOR is bumped by changes that keep every existing backend working:
 *   appending members at the end of a struct, appending enum values, adding
 *   entry points a runtime treats as optional.
 *
 *   A backend reports the version it was built against through GetVersion().
 *   A runtime accepts it iff
 *
 *       backend.major == runtime.major && backend.minor <= runtime.minor
 *
 *   Every struct begins with `struct_size`, set by whoever fills the struct to
 *   sizeof() as compiled against its own copy of this header. A runtime reads
 *   only the members that struct_size covers, so a backend built against an
 *   older minor version keeps working: the members it lacks count as absent.
 *   For each struct, BACKEND_<STRUCT>_SIZE_<MAJOR>_<MINOR> gives the size the
 *   struct had at that version, computed through its last member.
 *
 *   abi/CHANGELOG.md has one entry per version.
 *
 * RULES FOR EVERY BACKEND
 *
 *   - The three entry points below are exported with C linkage and default
 *     visibility.
 *   - A backend never aborts, exits or throws across this boundary.
 *   - Strings returned by a backend are NUL-terminated, 7-bit ASCII.
 */
#ifndef DYNAMIC_BACKENDS_BACKEND_API_H
#define DYNAMIC_BACKENDS_BACKEND_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The Backend API version this header describes. */
#define BACKEND_API_VERSION_MAJOR 1
#define BACKEND_API_VERSION_MINOR 0

/* Longest backend id a runtime accepts, in bytes, not counting the NUL. */
#define BACKEND_ID_MAX_LENGTH 256

/* Marks a symbol a backend exports to the runtime. */
#if defined(__GNUC__)
#define BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define BACKEND_EXPORT
#endif

/* Size of a struct at a given version: offset of its last member plus that
   member's size (trailing padding is not part of the contract). */
#define BACKEND_STRUCT_SIZE_THROUGH(type, last_member) \
    (offsetof(type, last_member) + sizeof(((type *)0)->last_member))

/* ========================================================================
 * Backend instance
 *
 * What BackendFactory() returns. An instance is a light, stateless entry
 * point: the runtime may create and destroy instances at any time and
 * assumes nothing about how long one lives compared with the objects it
 * creates.
 *
 * Ownership: the backend allocates the instance; the runtime owns it from the
 * moment BackendFactory() returns and releases it exactly once through
 * destroy(). The library stays loaded until every instance is destroyed.
 * ======================================================================== */
typedef struct BackendInstance BackendInstance;

struct BackendInstance {
    /* sizeof(BackendInstance) as the backend was compiled. At least
       BACKEND_INSTANCE_SIZE_<major>_<minor> for the version in api_major and
       api_minor. */
    uint32_t struct_size;

    /* The Backend API version this instance implements; equal to what the
       library's GetVersion() reports. */
    uint32_t api_major;
    uint32_t api_minor;

    /* Returns the backend id, identical to GetBackendId(). The string is
       owned by the backend and lives as long as the library is loaded.
       Required (non-NULL). */
    const char *(*get_id)(const BackendInstance *self);

    /* Releases the instance. Called exactly once; `self` is invalid
       afterwards. Must not fail. Required (non-NULL). */
    void (*destroy)(BackendInstance *self);

    /* Append new members at the end only. */
};

#define BACKEND_INSTANCE_SIZE_1_0 BACKEND_STRUCT_SIZE_THROUGH(BackendInstance, destroy)

/* ========================================================================
 * Entry points
 *
 * Every backend shared object exports these three functions with C linkage.
 * Define BACKEND_API_NO_ENTRY_POINT_PROTOTYPES before including this header
 * to leave them undeclared (only test doubles have a reason to).
 * ======================================================================== */
/* Types of the entry points, for a runtime that looks them up with dlsym(). */
typedef const char *(*GetBackendIdFunction)(void);
typedef void (*GetVersionFunction)(uint32_t *major /* out */, uint32_t *minor /* out */);
typedef void *(*BackendFactoryFunction)(void);

#ifndef BACKEND_API_NO_ENTRY_POINT_PROTOTYPES

/* The backend's unique id: non-empty, printable ASCII without spaces, at most
   BACKEND_ID_MAX_LENGTH bytes, never "Unknown". Owned by the backend; lives
   as long as the library is loaded; the same string on every call. */
BACKEND_EXPORT const char *GetBackendId(void);

/* The Backend API version the backend was built against. */
BACKEND_EXPORT void GetVersion(uint32_t *major /* out */, uint32_t *minor /* out */);

/* A new backend instance (a BackendInstance *), or NULL on failure. The
   caller owns it and releases it with instance->destroy(instance). */
BACKEND_EXPORT void *BackendFactory(void);

#endif /* BACKEND_API_NO_ENTRY_POINT_PROTOTYPES */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DYNAMIC_BACKENDS_BACKEND_API_H */
