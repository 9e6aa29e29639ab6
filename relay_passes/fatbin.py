"""What CUDA machine code a library carries: the fatbins inside an exported .so, read without a GPU.

A fatbin (nvcc --fatbin) is a 16-byte header (magic 0xBA55ED50, version 1, header size, payload size)
followed by entries, each a 64-byte-or-longer header and its payload: kind 1 = PTX, 2 = ELF (a cubin for
one sm_XX), the arch as an integer (80 = sm_80), a compressed size (non-zero when nvcc compressed the
payload, which nvcc 13 does for PTX) and flags. An uncompressed ELF payload starts with the ELF magic.
The layout is NVIDIA's and undocumented; it matches `cuobjdump --list-elf/--list-ptx` (which the tests use
when it is installed) and the parsers in open tools. TVM stores the fatbin bytes unchanged inside the
library's import blob, so scanning the file for the magic finds it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

MAGIC = 0xBA55ED50
_HEADER = struct.Struct("<IHHQ")                    # magic, version, header_size, payload_size
# kind, version, header_size, padded_payload_size, compressed_size, _, code_version, arch, name_offset,
# name_size, flags, _, uncompressed_size: 64 bytes (longer headers carry options after them)
_ENTRY = struct.Struct("<HHIQIIIIIIQQQ")
KINDS = {1: "ptx", 2: "elf"}
_COMPRESSED_FLAGS = 0x2000 | 0x8000                 # lz4 (CUDA 11+), zstd (CUDA 12.8+)


@dataclass(frozen=True)
class Entry:
    kind: str            # "elf" (SASS for exactly `arch`) or "ptx" (JIT-compiled for `arch` and newer)
    arch: int            # 80 for sm_80 / compute_80
    size: int            # payload bytes as stored (compressed size when compressed)
    compressed: bool

    @property
    def name(self) -> str:
        return f"{'sm' if self.kind == 'elf' else 'compute'}_{self.arch}"


def _entries(data: bytes, start: int, end: int) -> list[Entry]:
    out = []
    pos = start
    while pos + _ENTRY.size <= end:
        (kind, _ver, hsize, padded, packed, _u0, _code_ver, arch, _noff, _nsize, flags, _u1,
         _raw) = _ENTRY.unpack_from(data, pos)
        if kind not in KINDS or hsize < _ENTRY.size or pos + hsize + padded > end:
            break
        compressed = bool(packed) or bool(flags & _COMPRESSED_FLAGS)
        payload = data[pos + hsize:pos + hsize + 4]
        if kind == 2 and not compressed and payload != b"\x7fELF":
            break                            # not an entry after all: stop rather than invent code
        out.append(Entry(KINDS[kind], int(arch), int(packed or padded), compressed))
        pos += hsize + padded
    return out


def fatbins(data: bytes) -> list[list[Entry]]:
    """Every well-formed fatbin in `data` (e.g. the bytes of an exported .so), as its entries."""
    found = []
    magic = struct.pack("<I", MAGIC)
    pos = data.find(magic)
    while pos >= 0:
        if pos + _HEADER.size <= len(data):
            _, version, hsize, payload = _HEADER.unpack_from(data, pos)
            end = pos + hsize + payload
            if version == 1 and hsize == _HEADER.size and end <= len(data):
                entries = _entries(data, pos + hsize, end)
                if entries:
                    found.append(entries)
                    pos = data.find(magic, end)
                    continue
        pos = data.find(magic, pos + 1)
    return found


def library_code(path) -> list[Entry]:
    """All CUDA code entries of the fatbins in the library at `path` (empty: no machine code inside)."""
    return [e for fb in fatbins(Path(path).read_bytes()) for e in fb]


def machine_archs(path) -> list[int]:
    """The sm_XX archs the library has SASS for (sorted, unique)."""
    return sorted({e.arch for e in library_code(path) if e.kind == "elf"})
