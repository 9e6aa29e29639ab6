"""A TVM module imported on first use, so that a module naming it at the top (the MXNet converters, whose
tables name Relax ops) can be imported, and checks that need no TVM can run, without TVM's seconds of import
(issue 16: early errors in well under a second as a user runs the command)."""
from __future__ import annotations

import importlib
import sys


class LazyModule:
    """Stands for the module `name`. Once it is imported, an attribute is the module's own; before, it is a
    reference resolved when called (or read further), so tables of ops can be built at import time."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self._name in sys.modules:
            return getattr(sys.modules[self._name], attr)
        return _Ref(self._name, (attr,))

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


class _Ref:
    """module.a.b... resolved on call."""

    def __init__(self, module: str, path: tuple):
        self._module, self._path = module, path

    def resolve(self):
        obj = importlib.import_module(self._module)
        for a in self._path:
            obj = getattr(obj, a)
        return obj

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self._module in sys.modules:
            return getattr(self.resolve(), attr)
        return _Ref(self._module, (*self._path, attr))

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<lazy {self._module}.{'.'.join(self._path)}>"


__all__ = ["LazyModule"]
