"""Read and write MXNet's binary NDArray-list files (`PREFIX-0000.params`) without MXNet.

Layout (little-endian), as `mx.nd.save` writes it:
    uint64 magic 0x112, uint64 reserved, uint64 count,
    count x array: uint32 array magic, [int32 storage type], uint32 ndim, ndim x int64 dims,
                   int32 device type, int32 device id, int32 dtype flag, raw data,
    uint64 name count, name count x (uint64 length, bytes).
Every field is checked: a truncated or corrupt file raises TvmSwapError, never a numpy error.
"""
from __future__ import annotations

import os
import struct

import numpy as np

from ..errors import TvmSwapError

LIST_MAGIC = 0x112
# Array magics: V1 has no storage-type field; V2 is MXNet 1.x; V3 is V2 with numpy shape semantics.
ARRAY_MAGIC_V1 = 0xF993FAC8
ARRAY_MAGIC_V2 = 0xF993FAC9
ARRAY_MAGIC_V3 = 0xF993FACA
DENSE_STORAGE = 0

# mshadow type flags -> numpy dtypes.
DTYPE_FLAGS = {
    0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32, 5: np.int8, 6: np.int64,
    7: np.bool_, 8: np.int16, 9: np.uint16, 10: np.uint32, 11: np.uint64,
}
FLAG_OF_DTYPE = {np.dtype(v): k for k, v in DTYPE_FLAGS.items()}

MAX_NDIM = 32  # MXNet's own limit; a larger value means the file is corrupt


class ParamsFileError(TvmSwapError):
    """A `.params` file is truncated, corrupt or uses a feature this reader does not support."""


class _Reader:
    """Bounds-checked little-endian reads; every error names the file and the byte offset."""

    def __init__(self, data: bytes, source: str):
        self.data = data
        self.pos = 0
        self.source = source

    def fail(self, what: str) -> ParamsFileError:
        return ParamsFileError(
            f"{self.source}: {what} at byte {self.pos} (file is {len(self.data)} bytes); "
            "the file is truncated or not an MXNet .params file: re-export it with "
            "HybridBlock.export / Module.save_checkpoint")

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"unexpected end of file reading {what} ({n} bytes needed)")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str, what: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))[0]


def _read_array(r: _Reader, index: int) -> np.ndarray:
    magic = r.unpack("I", f"magic of array {index}")
    if magic not in (ARRAY_MAGIC_V1, ARRAY_MAGIC_V2, ARRAY_MAGIC_V3):
        r.pos -= 4
        raise r.fail(f"bad magic 0x{magic:08X} of array {index}")
    if magic != ARRAY_MAGIC_V1:
        stype = r.unpack("i", f"storage type of array {index}")
        if stype != DENSE_STORAGE:
            raise ParamsFileError(
                f"{r.source}: array {index} uses sparse storage (type {stype}); only dense arrays are "
                "supported: convert it with .tostype('default') before saving")
    ndim = r.unpack("I", f"ndim of array {index}")
    if ndim > MAX_NDIM:
        r.pos -= 4
        raise r.fail(f"implausible ndim {ndim} of array {index}")
    shape = tuple(r.unpack("q", f"dim {d} of array {index}") for d in range(ndim))
    if any(d < 0 for d in shape):
        raise r.fail(f"negative dimension in shape {shape} of array {index}")
    if ndim == 0 and magic != ARRAY_MAGIC_V3:
        # Under legacy shape semantics ndim 0 is a "none" array: MXNet writes nothing more for it.
        raise ParamsFileError(f"{r.source}: array {index} is an empty (none) NDArray; it cannot be a parameter")
    r.unpack("i", f"device type of array {index}")
    r.unpack("i", f"device id of array {index}")
    flag = r.unpack("i", f"dtype of array {index}")
    if flag not in DTYPE_FLAGS:
        r.pos -= 4
        raise r.fail(f"unknown dtype flag {flag} of array {index}")
    dtype = np.dtype(DTYPE_FLAGS[flag]).newbyteorder("<")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    raw = r.take(count * dtype.itemsize, f"data of array {index} (shape {shape}, {dtype.name})")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def parse_params(data: bytes, source: str = "<bytes>") -> dict[str, np.ndarray]:
    """Parse the bytes of a `.params` file into {name: array}; names keep their `arg:`/`aux:` prefix."""
    r = _Reader(bytes(data), source)
    magic = r.unpack("Q", "file magic")
    if magic != LIST_MAGIC:
        r.pos = 0
        raise r.fail(f"bad file magic 0x{magic:X} (expected 0x{LIST_MAGIC:X})")
    r.unpack("Q", "reserved word")
    count = r.unpack("Q", "array count")
    if count > len(r.data):  # each array takes far more than one byte
        raise r.fail(f"implausible array count {count}")
    arrays = [_read_array(r, i) for i in range(count)]
    n_names = r.unpack("Q", "name count")
    if n_names != count:
        raise ParamsFileError(
            f"{source}: {count} arrays but {n_names} names; tvm_swap needs a named parameter file "
            "(save a dict, e.g. with HybridBlock.export)")
    names = []
    for i in range(n_names):
        length = r.unpack("Q", f"length of name {i}")
        raw = r.take(length, f"name {i}")
        try:
            names.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise r.fail(f"name {i} is not UTF-8") from None
    if r.pos != len(r.data):
        raise ParamsFileError(
            f"{source}: {len(r.data) - r.pos} trailing bytes after the name list; the file is corrupt")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ParamsFileError(f"{source}: duplicate parameter names {dup}")
    return dict(zip(names, arrays))


def load_params(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read a `.params` file; names keep their `arg:`/`aux:` prefix (see strip_prefixes)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ParamsFileError(f"cannot read params file {os.fspath(path)!r}: {e.strerror}") from None
    return parse_params(data, os.fspath(path))


def strip_prefixes(params: dict) -> dict[str, np.ndarray]:
    """Drop MXNet's `arg:`/`aux:` prefixes: the rest is the symbol's variable name."""
    out = {}
    for name, value in params.items():
        bare = name.split(":", 1)[1] if name.startswith(("arg:", "aux:")) else name
        if bare in out:
            raise ParamsFileError(f"parameter {bare!r} appears both as arg: and aux:")
        out[bare] = value
    return out


def dump_params(params: dict[str, np.ndarray]) -> bytes:
    """Serialize {name: array} in the V2 format MXNet 1.x writes (names are written as given)."""
    parts = [struct.pack("<QQQ", LIST_MAGIC, 0, len(params))]
    for name, value in params.items():
        a = np.ascontiguousarray(value)
        if a.dtype not in FLAG_OF_DTYPE:
            raise ParamsFileError(f"parameter {name!r}: dtype {a.dtype} has no MXNet type flag")
        if a.ndim == 0:
            raise ParamsFileError(f"parameter {name!r}: 0-d arrays cannot be written in the V2 format; reshape to (1,)")
        parts.append(struct.pack("<IiI", ARRAY_MAGIC_V2, DENSE_STORAGE, a.ndim))
        parts.append(struct.pack(f"<{a.ndim}q", *a.shape))
        parts.append(struct.pack("<iii", 1, 0, FLAG_OF_DTYPE[a.dtype]))  # device: cpu(0)
        parts.append(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
    parts.append(struct.pack("<Q", len(params)))
    for name in params:
        raw = name.encode("utf-8")
        parts.append(struct.pack("<Q", len(raw)) + raw)
    return b"".join(parts)
