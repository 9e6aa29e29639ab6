"""The table of MXNet operator converters, filled by mxnet_ops and mxnet_rnn through `register`, and the
placeholder for a fill whose shape its consumer decides. Kept apart so the importer (mxnet.py) and the
converter modules both depend on it and not on each other."""
from __future__ import annotations

CONVERTERS: dict = {}      # MXNet operator name -> fn(importer, node) -> expr | list[expr]


def register(*names):
    def deco(fn):
        for n in names:
            CONVERTERS[n] = fn
        return fn
    return deco


class Fill:
    """A `_zeros`/`_ones`/`_full` whose shape has 0 dims ("infer from data"): its consumer fixes the shape."""

    def __init__(self, node, shape: tuple, value: float, dtype: str):
        self.node, self.shape, self.value, self.dtype = node, shape, value, dtype

