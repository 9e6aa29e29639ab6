"""Host copies: swapped-out tensors and host-resident params, one preallocated buffer per tensor.

Buffers come from the backend (`alloc_host`: pinned memory on CUDA, so async copies stay async) and are typed
views of one uint8 allocation each. A training step's update does not copy: the new tensor's host buffer simply
becomes the old param's (`rename`), and the old buffer is reused for the next step's new value.
"""
from __future__ import annotations

import numpy as np


class HostStore:
    def __init__(self, alloc_host):
        self._alloc = alloc_host
        self._buf: dict[int, object] = {}
        self._spec: dict[int, tuple] = {}       # tensor -> (shape, dtype, nbytes) of its buffer
        self.allocated_bytes = 0

    def ensure(self, t: int, shape, dtype: str, nbytes: int):
        """The host buffer of tensor `t`, allocated on first use."""
        b = self._buf.get(t)
        if b is None:
            self._spec[t] = (tuple(shape), dtype, int(nbytes))
            raw = self._alloc(max(1, int(nbytes)))
            self.allocated_bytes += max(1, int(nbytes))
            b = raw._create_view(tuple(shape), dtype, 0)
            self._buf[t] = b
        return b

    def has(self, t: int) -> bool:
        return t in self._buf

    def get(self, t: int):
        return self._buf[t]

    def put(self, t: int, value: np.ndarray, shape, dtype: str, nbytes: int) -> None:
        self.ensure(t, shape, dtype, nbytes).copyfrom(np.asarray(value, dtype=dtype, order="C").reshape(shape))

    def rename(self, new: int, old: int) -> None:
        """`new`'s buffer now holds `old`'s value (an update); `old`'s former buffer becomes `new`'s (a fresh
        one if `old` had none, so the next call can swap `new` out again)."""
        a, b = self._buf.pop(new), self._buf.get(old)
        self._buf[old] = a
        self._spec[old] = self._spec[new]
        if b is not None:
            self._buf[new] = b
        else:
            self.ensure(new, *self._spec[new])
