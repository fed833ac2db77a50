"""File cases (FILE-*): the controlling process reads the file; nothing is loaded."""
import os

from loader import elf
from conformance.registry import Failed, Warning_, case

ENTRY_POINTS = ("GetBackendId", "GetVersion", "BackendFactory")
MANGLED = {"GetBackendId": "_Z12GetBackendIdv", "GetVersion": "_Z10GetVersionPjS_",
           "BackendFactory": "_Z14BackendFactoryv"}
HYGIENE_LIMIT = 16  # exported symbols beyond the entry points before it is worth a warning


def _elf(path):
    try:
        return elf.read(path)
    except (OSError, elf.ElfError) as error:
        raise Failed(f"cannot read it as ELF: {error}")


@case("file.name", "FILE-1")
def _file_name(subject):
    import loader
    name = os.path.basename(subject.path)
    if not loader.is_valid_backend_filename(name):
        raise Failed(f"{name!r} does not match <vendor>_<name>_backend.so[.version]; "
                     f"the loader will not pick it up")


@case("file.elf", "FILE-2", blocking=True)
def _file_elf(subject):
    import loader
    reason, detail = loader._core.check_elf_file(subject.file)
    if reason is not None:
        raise Failed(f"{reason}: {detail}")


@case("file.entry-points", "FILE-3", blocking=True)
def _file_entry_points(subject):
    info = _elf(subject.file)
    missing = [name for name in ENTRY_POINTS if info.find(name) is None]
    if missing:
        mangled = [name for name in missing if info.find(MANGLED[name])]
        hint = f" ({', '.join(mangled)} exported with C++ mangling: declare them extern \"C\")" \
            if mangled else ""
        raise Failed(f"does not export {', '.join(missing)}{hint}")
    not_functions = [n for n in ENTRY_POINTS if info.find(n).kind != elf.STT_FUNC]
    if not_functions:
        raise Failed(f"{', '.join(not_functions)} exported, but not as functions")


@case("file.symbol-hygiene", "FILE-4")
def _file_symbol_hygiene(subject):
    info = _elf(subject.file)
    extra = sorted(s.name for s in info.exported() if s.name not in ENTRY_POINTS)
    if len(extra) > HYGIENE_LIMIT:
        raise Warning_(f"exports {len(extra)} symbols beyond the entry points (e.g. "
                       f"{', '.join(extra[:5])}); build with -fvisibility=hidden and mark only "
                       f"the entry points BACKEND_EXPORT")


@case("file.dependencies", "FILE-5", blocking=True)
def _file_dependencies(subject):
    from loader.dependencies import missing_dependencies
    missing = missing_dependencies(subject.file)
    if missing:
        raise Failed(f"needs {', '.join(missing)}, which the dynamic linker cannot find")
