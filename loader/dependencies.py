"""Whether the dynamic linker will find each library a backend needs (DT_NEEDED), decided before
dlopen without opening anything, by following the linker's own search order:

1. a name the linker has already loaded (its path or soname) is found without a search;
2. a name with a slash is a path;
3. DT_RPATH of the library (only when it has no DT_RUNPATH), ``$ORIGIN`` expanded;
4. ``LD_LIBRARY_PATH`` as the process started with it (not in a secure-execution process),
   split on ``:`` and ``;``, ``$ORIGIN`` being the program's directory;
5. DT_RUNPATH, ``$ORIGIN`` expanded;
6. ``/etc/ld.so.cache``;
7. the default directories.

In each list an empty element is the current directory. The linker opens the first file of that
name it reaches. When that is not a regular file (a
FIFO, socket, device or directory) it would block on it or read it, so the backend is refused
(``missing-dependency``, naming the library and what kind of file is there). Only ``stat`` is
used: the loader never opens a non-regular file. DT_AUXILIARY and DT_FILTER names, which the
linker also loads, get the same check; their absence is not an error.
"""
import functools
import os
import stat
import sys
from typing import List, Optional, Tuple

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
            count = int.from_bytes(data[base + 20:base + 24], "little")
            for i in range(count):
                at = base + 48 + i * 24 + 4
                if at + 4 > len(data):
                    break
                key = int.from_bytes(data[at:at + 4], "little")
                end = data.find(b"\0", base + key)
                if end < 0:
                    break
                names.add(data[base + key:end].decode("utf-8", "replace"))
    except OSError:
        pass
    _cache = (mtime, frozenset(names))
    return _cache[1]


@functools.lru_cache(maxsize=None)
def _startup_library_path() -> Optional[str]:
    """LD_LIBRARY_PATH as the dynamic linker saw it when the process started (it never reads
    the variable again, so later changes to os.environ do not count; read once)."""
    try:
        value = _core.startup_environment_value(b"LD_LIBRARY_PATH")
    except OSError:
        return os.environ.get("LD_LIBRARY_PATH")
    return None if value is None else os.fsdecode(value)


@functools.lru_cache(maxsize=None)
def _default_dirs(elf_class: int) -> Tuple[str, ...]:
    # sys.implementation._multiarch is what sysconfig's MULTIARCH says, without the ~1 ms
    # sysconfig takes to load its tables on first use
    multiarch = getattr(sys.implementation, "_multiarch", None)
    if not multiarch:
        import sysconfig  # imported only here: importing it takes about 1 ms
        multiarch = sysconfig.get_config_var("MULTIARCH")
    dirs = []
    for prefix in ("/lib", "/usr/lib"):
        if multiarch:
            dirs.append(f"{prefix}/{multiarch}")
        if elf_class == 2:
            dirs.append(f"{prefix}64")
        dirs.append(prefix)
    return tuple(dirs)


def _expand(paths: Optional[str], origin: str, separators: str = ":") -> List[str]:
    """The directories of a search list as the dynamic linker reads it: split on each of
    ``separators``, ``$ORIGIN`` replaced by ``origin``, and an empty element standing for the
    current directory (the linker then opens the bare name, relative to it)."""
    if not paths:
        return []
    for separator in separators[1:]:
        paths = paths.replace(separator, separators[0])
    return [p.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) if p else _current_directory()
            for p in paths.split(separators[0])]


def _current_directory() -> str:
    try:
        return os.getcwd()
    except OSError:  # removed: the bare name is still looked for relative to it
        return ""


@functools.lru_cache(maxsize=None)
def _program_origin() -> str:
    """$ORIGIN of LD_LIBRARY_PATH: the directory of the program, as the linker resolved it."""
    try:
        return os.path.dirname(os.readlink("/proc/self/exe"))
    except OSError:
        return os.path.dirname(os.path.realpath(sys.executable))


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _first_reached(candidates) -> Tuple[Optional[str], Optional[str]]:
    """(path, None) for the first candidate that is a regular file, (path, kind) for the first
    that exists but is not one, (None, None) when none exists."""
    for candidate in candidates:
        try:
            mode = os.stat(candidate).st_mode
        except (OSError, ValueError):
            continue  # absent, unreachable, or a name the kernel refuses: the linker moves on
        return (candidate, None) if stat.S_ISREG(mode) else (candidate, _kind(mode))
    return None, None


def _locate(name: str, search: List[str], default_dirs: List[str]):
    """Where the linker would find ``name``: (path or None, kind of non-regular file or None).
    A name only ld.so.cache lists is found at the cache's own (system-maintained) path."""
    if "/" in name:
        return _first_reached([name])
    path, kind = _first_reached(os.path.join(d, name) for d in search)
    if path is not None:
        return path, kind
    if name in _cache_names():
        return name, None
    return _first_reached(os.path.join(d, name) for d in default_dirs)


def check_dependencies(path: str, secure: bool = False, dependencies=None):
    """``(missing, unsafe)`` for the libraries ``path`` needs: the DT_NEEDED names the dynamic
    linker would not find, and ``(name, path, kind)`` for each name it would reach as a file that
    is not regular. Both empty when the file cannot be analysed (dlopen then has the last word).
    ``dependencies`` is what ``_core.inspect_elf_file`` already read, if the caller has it."""
    found = dependencies if dependencies is not None else _core.inspect_elf_file(path)[2]
    if found is None:
        return [], []
    # The names come without those already loaded (step 1): each was looked for in the link
    # map, which with many libraries loaded costs microseconds, and is not looked for again.
    needed, rpath, runpath, filters = found
    unresolved = [(name, True) for name in needed] + [(name, False) for name in filters]
    if not unresolved:
        return [], []
    origin = os.path.dirname(path)
    library_path = None if secure else _startup_library_path()
    program_origin = _program_origin() if library_path and "ORIGIN" in library_path else ""
    search = (([] if runpath else _expand(rpath, origin))
              + _expand(library_path, program_origin, ":;")
              + _expand(runpath, origin))
    default_dirs = _default_dirs(2 if sys.maxsize > 2**32 else 1)
    missing, unsafe = [], []
    for name, required in unresolved:
        where, kind = _locate(name, search, default_dirs)
        if kind is not None:
            unsafe.append((name, where, kind))
        elif where is None and required:
            missing.append(name)
    return missing, unsafe


def dependency_problem(path: str, secure: bool = False, dependencies=None) -> Optional[str]:
    """The ``missing-dependency`` detail for ``path``, or None when every library it needs will
    be found, each a regular file."""
    missing, unsafe = check_dependencies(path, secure, dependencies)
    if unsafe:
        name, where, kind = unsafe[0]
        return (f"needs {name}, which the dynamic linker would reach as {where}: {kind}, "
                f"not a regular file")
    if missing:
        return f"needs {', '.join(missing)}, which the dynamic linker cannot find"
    return None


def missing_dependencies(path: str, secure: bool = False, dependencies=None) -> List[str]:
    """The DT_NEEDED entries of ``path`` the dynamic linker would not find as regular files;
    [] when all are found or when the file cannot be analysed."""
    missing, unsafe = check_dependencies(path, secure, dependencies)
    return missing + [name for name, _, _ in unsafe]
