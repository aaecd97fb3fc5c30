"""Pure-Python readers for what the exporter checks in its own output.

Nothing here imports torch or executorch, so the exporter's ``--self-test`` can run on any
machine with a plain Python 3.  Two readers:

* ``PteFile``: a minimal FlatBuffers walk over an ExecuTorch ``.pte`` -- the extended header,
  ``Program.named_data`` / ``segments`` (to pull out the embedded AOTInductor ``.so`` files) and
  each method's instruction kinds (to tell a fully delegated method from one that still has
  ``KernelCall`` instructions).  Field offsets follow schema/program.fbs as described in
  shared/docs/pte-format.md.
* ``elf_undefined_dynamic_symbols``: the undefined entries of an ELF64 little-endian ``.dynsym``,
  i.e. what ``nm -D --undefined-only`` prints, without needing binutils.

Every read is bounds-checked by ``struct.unpack_from``; a malformed file raises ``ValueError``
naming what was being read.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

# InstructionArguments union tags (schema/program.fbs).
INSTRUCTION_KINDS = {
    0: "NONE",
    1: "KernelCall",
    2: "DelegateCall",
    3: "MoveCall",
    4: "JumpFalseCall",
    5: "FreeCall",
}

# Symbols that matter to aoti_cuda: the AOTI shim ABI plus CUDA runtime/driver entry points.
IMPORT_FILTER = re.compile(r"^(aoti_torch_\w+|cu[A-Z]\w*|cuda[A-Z]\w*)$")


class _FlatBuffer:
    """Just enough FlatBuffers decoding for read-only walks (little-endian, no verifier)."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.what = what

    def _unpack(self, fmt: str, pos: int, name: str):
        try:
            return struct.unpack_from(fmt, self.data, pos)[0]
        except struct.error as exc:
            raise ValueError(
                f"{self.what}: reading {name} at offset {pos} runs past the end "
                f"({len(self.data)} bytes)"
            ) from exc

    def u8(self, pos: int, name: str = "u8") -> int:
        return self._unpack("<B", pos, name)

    def u16(self, pos: int, name: str = "u16") -> int:
        return self._unpack("<H", pos, name)

    def u32(self, pos: int, name: str = "u32") -> int:
        return self._unpack("<I", pos, name)

    def i32(self, pos: int, name: str = "i32") -> int:
        return self._unpack("<i", pos, name)

    def u64(self, pos: int, name: str = "u64") -> int:
        return self._unpack("<Q", pos, name)

    def field(self, table: int, voffset: int) -> Optional[int]:
        """Absolute position of a table field, or None when the field is absent."""
        vtable = table - self.i32(table, "vtable soffset")
        vt_size = self.u16(vtable, "vtable size")
        if voffset >= vt_size:
            return None
        rel = self.u16(vtable + voffset, "vtable entry")
        return table + rel if rel else None

    def deref(self, pos: int) -> int:
        return pos + self.u32(pos, "uoffset")

    def table_at(self, table: int, voffset: int) -> Optional[int]:
        pos = self.field(table, voffset)
        return None if pos is None else self.deref(pos)

    def vector(self, table: int, voffset: int) -> Tuple[int, int]:
        """(first element position, element count); (0, 0) for an absent vector."""
        pos = self.field(table, voffset)
        if pos is None:
            return 0, 0
        vec = self.deref(pos)
        return vec + 4, self.u32(vec, "vector length")

    def tables(self, table: int, voffset: int) -> List[int]:
        start, count = self.vector(table, voffset)
        return [self.deref(start + 4 * i) for i in range(count)]

    def string(self, table: int, voffset: int) -> Optional[bytes]:
        pos = self.field(table, voffset)
        if pos is None:
            return None
        s = self.deref(pos)
        n = self.u32(s, "string length")
        if s + 4 + n > len(self.data):
            raise ValueError(f"{self.what}: string at {s} of length {n} runs past the end")
        return self.data[s + 4 : s + 4 + n]

    def scalar(self, table: int, voffset: int, fmt: str, default: int = 0) -> int:
        pos = self.field(table, voffset)
        return default if pos is None else self._unpack(fmt, pos, f"scalar vt{voffset}")


@dataclass
class MethodInfo:
    name: str
    instruction_kinds: List[str] = field(default_factory=list)
    kernel_ops: List[str] = field(default_factory=list)  # "aten::sigmoid.out" etc.
    delegate_ids: List[str] = field(default_factory=list)
    delegate_method_names: List[str] = field(default_factory=list)  # "method_name" compile specs

    @property
    def fully_delegated(self) -> bool:
        return "KernelCall" not in self.instruction_kinds and bool(self.delegate_ids)


class PteFile:
    """Named data and per-method instruction summary of an ExecuTorch program file."""

    def __init__(self, data: bytes, path: str = "<pte>") -> None:
        if len(data) < 64:
            raise ValueError(f"{path}: {len(data)} bytes is shorter than the 64-byte header")
        if data[4:8] != b"ET12":
            raise ValueError(f"{path}: file identifier {data[4:8]!r} is not b'ET12'")
        fb = _FlatBuffer(data, path)
        self.path = path
        self.segment_base = 0
        if data[8:12] == b"eh00":
            header_len = fb.u32(12, "extended header length")
            if header_len < 24:
                raise ValueError(f"{path}: extended header length {header_len} < 24")
            self.segment_base = fb.u64(24, "segment_base_offset")
        root = fb.u32(0, "root offset")

        segments = []
        for seg in fb.tables(root, 12):
            segments.append((fb.scalar(seg, 4, "<Q"), fb.scalar(seg, 6, "<Q")))

        # Keys in file order: the exporter adds them in method order.
        self.named_data: Dict[str, Tuple[int, int]] = {}
        for nd in fb.tables(root, 18):
            key = (fb.string(nd, 4) or b"").decode("utf-8", "replace")
            index = fb.scalar(nd, 6, "<I")
            if index >= len(segments):
                raise ValueError(
                    f"{path}: named data {key!r} points at segment {index} of {len(segments)}"
                )
            offset, size = segments[index]
            start = self.segment_base + offset
            if start + size > len(data):
                raise ValueError(
                    f"{path}: named data {key!r} [{start}, {start + size}) is past the end of the file"
                )
            self.named_data[key] = (start, size)
        self._data = data

        self.methods: List[MethodInfo] = []
        for plan in fb.tables(root, 6):
            info = MethodInfo((fb.string(plan, 4) or b"").decode("utf-8", "replace"))
            operators = []
            for op in fb.tables(plan, 16):
                name = (fb.string(op, 4) or b"").decode("utf-8", "replace")
                overload = (fb.string(op, 6) or b"").decode("utf-8", "replace")
                operators.append(f"{name}.{overload}" if overload else name)
            for delegate in fb.tables(plan, 18):
                info.delegate_ids.append((fb.string(delegate, 4) or b"").decode("utf-8", "replace"))
                for spec in fb.tables(delegate, 8):
                    if fb.string(spec, 4) == b"method_name":
                        start, count = fb.vector(spec, 6)
                        info.delegate_method_names.append(
                            data[start : start + count].decode("utf-8", "replace")
                        )
            for chain in fb.tables(plan, 14):
                for instr in fb.tables(chain, 8):
                    tag = fb.scalar(instr, 4, "<B")
                    kind = INSTRUCTION_KINDS.get(tag, f"unknown({tag})")
                    info.instruction_kinds.append(kind)
                    if kind == "KernelCall":
                        args = fb.table_at(instr, 6)
                        op_index = fb.scalar(args, 4, "<i") if args is not None else -1
                        info.kernel_ops.append(
                            operators[op_index] if 0 <= op_index < len(operators) else f"op#{op_index}"
                        )
            self.methods.append(info)

    @classmethod
    def load(cls, path: str) -> "PteFile":
        with open(path, "rb") as f:
            return cls(f.read(), path)

    def blob(self, key: str) -> bytes:
        start, size = self.named_data[key]
        return self._data[start : start + size]

    def so_keys(self) -> List[str]:
        return [k for k in self.named_data if k.endswith("_so_blob")]


def elf_undefined_dynamic_symbols(elf: bytes, what: str = "<elf>") -> List[str]:
    """Names of undefined symbols in .dynsym (what ``nm -D --undefined-only`` lists).

    Only ELF64 little-endian is handled -- that is all the x86-64/aarch64 exporter produces.
    Version suffixes are not part of .dynstr names, so names come back bare.
    """
    if elf[:4] != b"\x7fELF":
        raise ValueError(f"{what}: not an ELF file (magic {elf[:4]!r})")
    if elf[4] != 2 or elf[5] != 1:
        raise ValueError(f"{what}: only ELF64 little-endian is supported (class {elf[4]}, data {elf[5]})")
    fb = _FlatBuffer(elf, what)
    shoff = fb.u64(0x28, "e_shoff")
    shentsize = fb.u16(0x3A, "e_shentsize")
    shnum = fb.u16(0x3C, "e_shnum")
    if shentsize < 64:
        raise ValueError(f"{what}: section header entry size {shentsize} < 64")

    def section(i: int) -> Tuple[int, int, int, int, int]:
        base = shoff + i * shentsize
        return (
            fb.u32(base + 4, "sh_type"),
            fb.u64(base + 0x18, "sh_offset"),
            fb.u64(base + 0x20, "sh_size"),
            fb.u32(base + 0x28, "sh_link"),
            fb.u64(base + 0x38, "sh_entsize") or 24,
        )

    names: List[str] = []
    for i in range(shnum):
        sh_type, offset, size, link, entsize = section(i)
        if sh_type != 11:  # SHT_DYNSYM
            continue
        _, str_off, str_size, _, _ = section(link)
        for sym in range(offset + entsize, offset + size, entsize):  # entry 0 is the null symbol
            st_name = fb.u32(sym, "st_name")
            st_shndx = fb.u16(sym + 6, "st_shndx")
            if st_shndx != 0 or st_name == 0:  # SHN_UNDEF only
                continue
            if st_name >= str_size:
                raise ValueError(f"{what}: symbol name offset {st_name} outside .dynstr")
            end = elf.find(b"\0", str_off + st_name, str_off + str_size)
            if end < 0:
                raise ValueError(f"{what}: unterminated .dynstr entry at {st_name}")
            names.append(elf[str_off + st_name : end].decode("utf-8", "replace"))
    return names


def filtered_imports(so_blobs: List[bytes]) -> List[str]:
    """Sorted union of the shim and CUDA imports of several .so files (the imports.txt lines)."""
    wanted = set()
    for i, blob in enumerate(so_blobs):
        for name in elf_undefined_dynamic_symbols(blob, f"so #{i}"):
            if IMPORT_FILTER.match(name):
                wanted.add(name)
    return sorted(wanted)
