"""Params inside the exported library, so one file deploys: `tvm_swap.load("model.so")` needs nothing beside it.

The params (an .npz archive: `__names__`, `p0`, `p1`, ... and an optional note) are appended to the shared
library after TVM writes it, followed by an 8-byte little-endian length and the 16-byte MAGIC. The dynamic
loader maps only the segments the ELF headers name, so trailing bytes are invisible to it; the check file
(runtime_ext.library_check) is written after the append, so its size and SHA-256 cover the params too.
A library without the trailer (older exports) falls back to the `.params.npz` beside it.
"""
from __future__ import annotations

import io
import os
import struct

import numpy as np

MAGIC = b"TVM_SWAP_PARAMS1"
_TAIL = struct.calcsize("<Q") + len(MAGIC)


def params_archive(names: list[str], values: dict, info: dict | None = None) -> bytes:
    """The npz bytes: params in `names` order, and `info` (str -> str: e.g. how the weights were made, the
    recipe that rebuilds the unlimited reference) as `__key__` entries."""
    buf = io.BytesIO()
    extra = {f"__{k}__": np.array(str(v)) for k, v in (info or {}).items() if v is not None}
    np.savez(buf, __names__=np.array(names, dtype=object).astype(str), **extra,
             **{f"p{i}": np.asarray(values[n]) for i, n in enumerate(names)})
    return buf.getvalue()


def read_archive(z) -> tuple[dict, dict]:
    """(params by name, info entries as strings, keys without the underscores) from an opened params .npz."""
    names = [str(n) for n in z["__names__"]]
    params = {n: z[f"p{i}"] for i, n in enumerate(names)}
    other = {k.strip("_"): str(z[k]) for k in z.files if k.startswith("__") and k != "__names__"}
    return params, other


def append_params(path: str, archive: bytes) -> None:
    with open(path, "ab") as f:
        f.write(archive)
        f.write(struct.pack("<Q", len(archive)))
        f.write(MAGIC)


def trailer_problem(path: str, size: int, elf_end: int) -> str:
    """'' when the bytes after the ELF (from `elf_end`) are exactly one params trailer, else what is wrong."""
    if size - elf_end < _TAIL:
        return f"its last {size - elf_end} bytes after the ELF are not a params trailer"
    with open(path, "rb") as f:
        f.seek(size - _TAIL)
        tail = f.read(_TAIL)
    if tail[-len(MAGIC):] != MAGIC:
        return "its params trailer has no end marker"
    (n,) = struct.unpack("<Q", tail[:8])
    if elf_end + n + _TAIL != size:
        return f"its params trailer says {n} bytes of params, but {size - elf_end - _TAIL} follow the ELF"
    return ""


def embedded_params(path: str) -> tuple[dict, dict] | None:
    """(params, other entries) appended to the library at `path`, or None when it carries none."""
    size = os.path.getsize(path)
    if size < _TAIL:
        return None
    with open(path, "rb") as f:
        f.seek(size - _TAIL)
        tail = f.read(_TAIL)
        if tail[-len(MAGIC):] != MAGIC:
            return None
        (n,) = struct.unpack("<Q", tail[:8])
        if n > size - _TAIL:
            return None
        f.seek(size - _TAIL - n)
        data = f.read(n)
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return read_archive(z)
