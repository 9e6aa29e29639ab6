"""A short start for `tvm-swap`: TVM without PyTorch where the command needs no PyTorch.

Importing TVM 0.27 imports PyTorch whenever it is installed: `tvm_ffi/__init__.py` does `import torch` first
(a workaround for a symbol clash on Windows), and its `_convert`, `stream` and `_optional_torch_c_dlpack`
modules import it for DLPack interop with torch tensors. That is about 3.5 of the 5-9 s `import tvm` takes
(benchmarks/error_messages.md). A command that imports no PyTorch model never hands TVM a torch tensor, so
`tvm-swap` (run as a program) lets TVM initialise as if torch were not installed: while the tvm_ffi and tvm packages
run their imports (tvm.relax.base_py_module imports torch too), `torch` reads as missing; right after, it is
importable again as usual (nothing in this process has it loaded). tvm_ffi then converts no torch tensor and offers no torch stream context, which only a
PyTorch model would use: commands naming one (`module:factory`, a `.py` model file that may import torch) get
TVM with its torch interop, as before. Nothing else changes, and the program imports TVM only if its command
needs it (the planner, `--help`, `zoo`, `devices`, `report` and the library checks of `run` never do).

main() installs this only when called as the program (argv None); main([...]) from Python leaves the
process as it is, so a caller's later torch interop is unaffected.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys

_MISSING = object()


def command_needs_torch(args) -> bool:
    """Whether the command may import a PyTorch model (module:factory, or a .py model file)."""
    from ..frontends import model_kind

    for attr in ("model", "graph"):
        spec = getattr(args, attr, None)
        if isinstance(spec, str) and (spec.lower().endswith(".py") or model_kind(spec) == "torch"):
            return True
    return False


class _TvmWithoutTorch(importlib.abc.MetaPathFinder):
    """Finds tvm_ffi and tvm as the other finders do, and runs each package's module with `torch` reading as
    missing (tvm's own imports, tvm.relax.base_py_module among them, import torch too)."""

    def __init__(self):
        self.pending = set(PACKAGES)

    def find_spec(self, name, path=None, target=None):
        if name not in self.pending:
            return None
        self.pending.discard(name)             # (so the search below passes over this finder)
        if not self.pending:
            remove()
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            before = sys.modules.get("torch", _MISSING)
            if before is _MISSING:
                sys.modules["torch"] = None        # `import torch` raises ImportError, as when not installed
            try:
                run(module)
            finally:
                if before is _MISSING and "torch" in sys.modules and sys.modules["torch"] is None:
                    del sys.modules["torch"]

        spec.loader.exec_module = exec_module
        return spec


PACKAGES = ("tvm", "tvm_ffi")
_FINDER = _TvmWithoutTorch()


def tvm_without_torch() -> None:
    """Import TVM (when some command first does) without torch; a no-op once TVM or torch is loaded."""
    if any(p in sys.modules for p in PACKAGES) or "torch" in sys.modules or _FINDER in sys.meta_path:
        return
    sys.meta_path.insert(0, _FINDER)


def remove() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


__all__ = ["command_needs_torch", "tvm_without_torch", "remove"]
