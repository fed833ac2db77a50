"""Reading a shared object's dynamic symbols and needed libraries without loading it, so that the
kit's file checks never run the vendor's code."""
import struct
from dataclasses import dataclass, field
from typing import List, Optional

SHT_DYNSYM = 11
SHT_DYNAMIC = 6
DT_NEEDED = 1
STB_GLOBAL, STB_WEAK = 1, 2
STT_FUNC, STT_OBJECT = 2, 1
SHN_UNDEF = 0


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
    needed: List[str] = field(default_factory=list)

    def exported(self) -> List[Symbol]:
        return [s for s in self.symbols if s.exported]

    def find(self, name: str) -> Optional[Symbol]:
        return next((s for s in self.symbols if s.name == name and s.exported), None)


def _string(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode("utf-8", "replace")


def read(path: str) -> ElfFile:
    """Parse the header, the dynamic symbol table and DT_NEEDED entries of ``path``."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 16 or data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    elf_class, byte_order = data[4], data[5]
    if elf_class not in (1, 2) or byte_order not in (1, 2):
        raise ElfError("unknown ELF class or byte order")
    e = "<" if byte_order == 1 else ">"
    wide = elf_class == 2
    try:
        if wide:
            (file_type, machine, _, _, _, shoff, _, _, _, _, shentsize, shnum, _) = struct.unpack_from(
                e + "HHIQQQIHHHHHH", data, 16)
        else:
            (file_type, machine, _, _, _, shoff, _, _, _, _, shentsize, shnum, _) = struct.unpack_from(
                e + "HHIIIIIHHHHHH", data, 16)
        result = ElfFile(elf_class, byte_order, file_type, machine)
        section_format = e + ("IIQQQQIIQQ" if wide else "IIIIIIIIII")
        sections = [struct.unpack_from(section_format, data, shoff + i * shentsize)
                    for i in range(shnum)] if shoff else []
    except struct.error:
        raise ElfError("truncated ELF file") from None

    def body(section):
        offset, size = section[4], section[5]
        if offset + size > len(data):
            raise ElfError("truncated ELF section")
        return data[offset:offset + size]

    for section in sections:
        kind, link, entsize = section[1], section[6], section[9]
        if kind == SHT_DYNSYM and link < len(sections) and entsize:
            strings, table = body(sections[link]), body(section)
            for i in range(len(table) // entsize):
                if wide:
                    name, info, _, shndx, _, _ = struct.unpack_from(e + "IBBHQQ", table, i * entsize)
                else:
                    name, _, _, info, _, shndx = struct.unpack_from(e + "IIIBBH", table, i * entsize)
                if name:
                    result.symbols.append(Symbol(_string(strings, name), info >> 4, info & 0xF,
                                                 shndx != SHN_UNDEF))
        elif kind == SHT_DYNAMIC and link < len(sections) and entsize:
            strings, table = body(sections[link]), body(section)
            for i in range(len(table) // entsize):
                tag, value = struct.unpack_from(e + ("qQ" if wide else "iI"), table, i * entsize)
                if tag == DT_NEEDED:
                    result.needed.append(_string(strings, value))
                elif tag == 0:
                    break
    return result
