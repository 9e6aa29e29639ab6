"""Frozen parameters shipped in their compute layout, and the way back to the user's layout. No TVM here.

relay_passes.param_layout folds a frozen parameter's layout change (transpose, reshape, ...) into the
parameter itself at compile time: the compiled function takes `W.T` where the model took `W`. The user still
gives and gets `W`: `ParamLayouts` says how each compiled parameter is made from a user parameter (a chain of
transposes and reshapes, pure data movement, so numpy makes it bit for bit) and back (the inverse chain).
It travels in the manifest (`meta["param_layouts"]`), so an exported library converts the same way.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

META_KEY = "param_layouts"


@dataclass(frozen=True)
class Fold:
    """Compiled parameter `name` = `source` (a user parameter) after `steps`: ("transpose", axes),
    ("reshape", shape) or, last only, ("slice", (axis, begin, end)): one of the chunks a split op reads
    (relay_passes.split_dense); `source_shape` is the user parameter's shape."""
    name: str
    source: str
    source_shape: tuple[int, ...]
    steps: tuple[tuple[str, tuple[int, ...]], ...]

    @property
    def chunk(self) -> tuple[int, int, int] | None:
        """(axis, begin, end) when this parameter is a chunk of its layout-changed source, else None."""
        kind, arg = self.steps[-1] if self.steps else ("", ())
        return tuple(arg) if kind == "slice" else None

    @property
    def layout_steps(self) -> tuple:
        return self.steps[:-1] if self.chunk is not None else self.steps

    def apply(self, value: np.ndarray) -> np.ndarray:
        for kind, arg in self.steps:
            if kind == "slice":
                axis, begin, end = arg
                value = np.take(value, np.arange(begin, end), axis=axis)
            else:
                value = np.transpose(value, arg) if kind == "transpose" else np.reshape(value, arg)
        return np.ascontiguousarray(value)

    def invert(self, value: np.ndarray) -> np.ndarray:
        """The source from this parameter's value (for a chunk: from the chunks joined first, see to_user)."""
        shapes = [self.source_shape]
        steps = self.layout_steps
        for kind, arg in steps:     # the shape before each step
            shapes.append(tuple(shapes[-1][a] for a in arg) if kind == "transpose" else tuple(arg))
        for (kind, arg), before in zip(reversed(steps), reversed(shapes[:-1])):
            value = np.transpose(value, np.argsort(arg)) if kind == "transpose" else np.reshape(value, before)
        return np.ascontiguousarray(value)

    def to_dict(self) -> dict:
        return {"name": self.name, "source": self.source, "source_shape": list(self.source_shape),
                "steps": [[k, list(a)] for k, a in self.steps]}

    @classmethod
    def from_dict(cls, d: dict) -> "Fold":
        return cls(str(d["name"]), str(d["source"]), tuple(int(s) for s in d["source_shape"]),
                   tuple((str(k), tuple(int(x) for x in a)) for k, a in d["steps"]))


@dataclass(frozen=True)
class ParamLayouts:
    """user: the user's parameters (name, shape, dtype) in order; kept: those the compiled function takes as
    they are; folds: the compiled parameters made from a user parameter."""
    user: tuple[tuple[str, tuple[int, ...], str], ...]
    kept: tuple[str, ...]
    folds: tuple[Fold, ...]

    def to_compute(self, params: dict) -> dict:
        """The compiled function's params from the user's (by name; a user param not given is left out)."""
        out = {n: params[n] for n in self.kept if n in params}
        out.update({f.name: f.apply(np.asarray(params[f.source])) for f in self.folds if f.source in params})
        return out

    def to_user(self, params: dict) -> dict:
        """The user's params from the compiled function's (the inverse of to_compute)."""
        out = {n: params[n] for n in self.kept if n in params}
        chunks: dict = {}
        for f in self.folds:
            if f.name not in params or f.source in out:
                continue
            if f.chunk is None:
                out[f.source] = f.invert(np.asarray(params[f.name]))
            else:
                chunks.setdefault(f.source, []).append(f)
        for source, fs in chunks.items():     # a split op's chunks joined, then the layout change undone
            fs.sort(key=lambda f: f.chunk[1])
            joined = np.concatenate([np.asarray(params[f.name]) for f in fs], axis=fs[0].chunk[0])
            out[source] = fs[0].invert(joined)
        return {n: out[n] for n, _, _ in self.user if n in out}      # in the user's parameter order

    def to_dict(self) -> dict:
        return {"user": [[n, list(s), d] for n, s, d in self.user], "kept": list(self.kept),
                "folds": [f.to_dict() for f in self.folds]}

    @classmethod
    def from_dict(cls, d: dict) -> "ParamLayouts":
        return cls(tuple((str(n), tuple(int(x) for x in s), str(dt)) for n, s, dt in d["user"]),
                   tuple(str(n) for n in d["kept"]), tuple(Fold.from_dict(f) for f in d["folds"]))


def layouts_of(meta: dict) -> ParamLayouts | None:
    """The folds a manifest's meta records, or None for a program whose params are the user's."""
    d = (meta or {}).get(META_KEY)
    return ParamLayouts.from_dict(d) if d else None
