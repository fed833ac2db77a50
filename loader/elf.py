"""A shared object's dynamic symbols, needed libraries and search paths, read without loading it.

The loader's own ELF reader reads them (``_core.read_elf_file``), behind the same checks as
before dlopen: a file those refuse is not read further, and what is read lies inside tables
already checked. The symbols are those a lookup by name can reach."""
import os
from dataclasses import dataclass, field
from typing import List, Optional

from loader import _core

STB_GLOBAL, STB_WEAK = 1, 2
STT_FUNC, STT_OBJECT = 2, 1


class ElfError(ValueError):
    """The file is not a shared object this process could load; the message says why."""


@dataclass
class Symbol:
    name: str
    binding: int
    kind: int
    defined: bool

    @property
    def exported(self) -> bool:
        return self.defined and self.binding in (STB_GLOBAL, STB_WEAK)


@dataclass
class ElfFile:
    elf_class: int                      # 1: 32-bit, 2: 64-bit
    byte_order: int                     # 1: little, 2: big
    file_type: int
    machine: int
    symbols: List[Symbol] = field(default_factory=list)
    needed: List[str] = field(default_factory=list)     # DT_NEEDED, in order
    rpath: Optional[str] = None
    runpath: Optional[str] = None

    def exported(self) -> List[Symbol]:
        return [s for s in self.symbols if s.exported]

    def find(self, name: str) -> Optional[Symbol]:
        return next((s for s in self.symbols if s.name == name and s.exported), None)


def read(path) -> ElfFile:
    """The header, dynamic symbols, needed libraries and search paths of ``path``."""
    _, detail, contents = _core.read_elf_file(os.fspath(path))
    if contents is None:
        raise ElfError(detail)
    elf_class, byte_order, file_type, machine, symbols, needed, rpath, runpath = contents
    return ElfFile(elf_class, byte_order, file_type, machine, [Symbol(*s) for s in symbols],
                   needed, rpath, runpath)
