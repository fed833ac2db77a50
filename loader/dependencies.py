"""Which of a library's DT_NEEDED entries the dynamic linker would not find (``missing-dependency``),
decided before dlopen by following the linker's own search order:

1. a name with a slash is a path;
2. DT_RPATH of the library (only when it has no DT_RUNPATH), ``$ORIGIN`` expanded;
3. ``LD_LIBRARY_PATH`` (not in a secure-execution process);
4. DT_RUNPATH, ``$ORIGIN`` expanded;
5. ``/etc/ld.so.cache``;
6. the default directories.

A library already loaded into this process is found at once; that is the common case (libc,
libm, libstdc++), so most candidates cost one dlopen(RTLD_NOLOAD) per dependency.
"""
import os
import struct
import sys
import sysconfig
from typing import List, Optional

from loader import _core

_CACHE_FILE = "/etc/ld.so.cache"
_CACHE_MAGIC = b"glibc-ld.so.cache1.1"
_cache: Optional[tuple] = None  # (mtime, names)


def _cache_names() -> frozenset:
    """Library names listed in /etc/ld.so.cache (re-read when the file changes)."""
    global _cache
    try:
        mtime = os.stat(_CACHE_FILE).st_mtime_ns
    except OSError:
        return frozenset()
    if _cache is not None and _cache[0] == mtime:
        return _cache[1]
    names = set()
    try:
        with open(_CACHE_FILE, "rb") as f:
            data = f.read()
        base = data.find(_CACHE_MAGIC)
        if base >= 0:
            count, = struct.unpack_from("<I", data, base + 20)
            for i in range(count):
                key, = struct.unpack_from("<I", data, base + 48 + i * 24 + 4)
                end = data.find(b"\0", base + key)
                names.add(data[base + key:end].decode("utf-8", "replace"))
    except (OSError, struct.error):
        pass
    _cache = (mtime, frozenset(names))
    return _cache[1]


def _startup_library_path() -> Optional[str]:
    """LD_LIBRARY_PATH as the dynamic linker saw it when the process started (it never reads
    the variable again, so later changes to os.environ do not count)."""
    try:
        with open("/proc/self/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"LD_LIBRARY_PATH="):
                    return os.fsdecode(item[len(b"LD_LIBRARY_PATH="):])
        return None
    except OSError:
        return os.environ.get("LD_LIBRARY_PATH")


def _default_dirs(elf_class: int) -> List[str]:
    multiarch = sysconfig.get_config_var("MULTIARCH")
    dirs = []
    for prefix in ("/lib", "/usr/lib"):
        if multiarch:
            dirs.append(f"{prefix}/{multiarch}")
        if elf_class == 2:
            dirs.append(f"{prefix}64")
        dirs.append(prefix)
    return dirs


def _expand(paths: Optional[str], origin: str) -> List[str]:
    if not paths:
        return []
    return [p.replace("$ORIGIN", origin).replace("${ORIGIN}", origin)
            for p in paths.split(":") if p]


def missing_dependencies(path: str, secure: bool = False, dependencies=None) -> List[str]:
    """The DT_NEEDED entries of ``path`` the dynamic linker would not find; [] when all are
    found or when the file cannot be analysed (dlopen then has the last word). ``dependencies``
    is what ``_core.inspect_elf_file`` already read, if the caller has it."""
    found = dependencies if dependencies is not None else _core.inspect_elf_file(path)[2]
    if found is None:
        return []
    not_loaded, rpath, runpath = found
    if not not_loaded:
        return []
    origin = os.path.dirname(path)
    search = (([] if runpath else _expand(rpath, origin))
              + ([] if secure else _expand(_startup_library_path(), origin))
              + _expand(runpath, origin))
    default_dirs = _default_dirs(2 if sys.maxsize > 2**32 else 1)
    missing = []
    for name in not_loaded:
        if "/" in name:
            found_it = os.path.isfile(name if os.path.isabs(name) else os.path.join(origin, name))
        else:
            found_it = (any(os.path.isfile(os.path.join(d, name)) for d in search)
                        or name in _cache_names()
                        or any(os.path.isfile(os.path.join(d, name)) for d in default_dirs))
        if not found_it:
            missing.append(name)
    return missing
