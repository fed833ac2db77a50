"""Reading a shared object's dynamic symbols, needed libraries and search paths without loading
it. Only the ELF header, the section table and the sections asked for are read."""
import struct
from dataclasses import dataclass, field
from typing import BinaryIO, List, Optional

SHT_DYNSYM = 11
STB_GLOBAL, STB_WEAK = 1, 2
STT_FUNC, STT_OBJECT = 2, 1
SHN_UNDEF = 0
MAX_SECTION_BYTES = 64 << 20  # larger dynamic tables are not plausible: refuse, do not allocate


class ElfError(ValueError):
    """The file is not an ELF file this module can read."""


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

    def exported(self) -> List[Symbol]:
        return [s for s in self.symbols if s.exported]

    def find(self, name: str) -> Optional[Symbol]:
        return next((s for s in self.symbols if s.name == name and s.exported), None)


def _string(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode("utf-8", "replace")


def _read_at(f: BinaryIO, offset: int, size: int) -> bytes:
    if size > MAX_SECTION_BYTES:
        raise ElfError("implausibly large ELF section")
    f.seek(offset)
    data = f.read(size)
    if len(data) != size:
        raise ElfError("truncated ELF file")
    return data


def read(path: str) -> ElfFile:
    """Parse the header and the dynamic symbol table of ``path``."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 16 or head[:4] != b"\x7fELF":
            raise ElfError("not an ELF file")
        elf_class, byte_order = head[4], head[5]
        if elf_class not in (1, 2) or byte_order not in (1, 2):
            raise ElfError("unknown ELF class or byte order")
        e = "<" if byte_order == 1 else ">"
        wide = elf_class == 2
        try:
            if wide:
                (file_type, machine, _, _, _, shoff, _, _, _, _, shentsize, shnum, _) = \
                    struct.unpack_from(e + "HHIQQQIHHHHHH", head, 16)
            else:
                (file_type, machine, _, _, _, shoff, _, _, _, _, shentsize, shnum, _) = \
                    struct.unpack_from(e + "HHIIIIIHHHHHH", head, 16)
        except struct.error:
            raise ElfError("truncated ELF header") from None
        result = ElfFile(elf_class, byte_order, file_type, machine)
        if not shoff or not shnum:
            return result  # no section table (stripped to the bone): nothing more to learn
        section_format = e + ("IIQQQQIIQQ" if wide else "IIIIIIIIII")
        table = _read_at(f, shoff, shnum * shentsize)
        try:
            sections = [struct.unpack_from(section_format, table, i * shentsize) for i in range(shnum)]
        except struct.error:
            raise ElfError("malformed ELF section table") from None

        def body(section):
            return _read_at(f, section[4], section[5])

        for section in sections:
            kind, link, entsize = section[1], section[6], section[9]
            if not entsize or link >= len(sections):
                continue
            if kind == SHT_DYNSYM:
                strings, entries = body(sections[link]), body(section)
                for i in range(len(entries) // entsize):
                    if wide:
                        name, info, _, shndx, _, _ = struct.unpack_from(e + "IBBHQQ", entries, i * entsize)
                    else:
                        name, _, _, info, _, shndx = struct.unpack_from(e + "IIIBBH", entries, i * entsize)
                    if name:
                        result.symbols.append(Symbol(_string(strings, name), info >> 4, info & 0xF,
                                                     shndx != SHN_UNDEF))
    return result
