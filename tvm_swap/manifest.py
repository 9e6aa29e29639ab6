"""Manifest: what the runtime must know about the program besides the plan, shared by apply and the runtime.

The plan names tensors by id only; the runtime also needs each tensor's shape and dtype (to shape pool views
and host buffers), which function parameters are per-call inputs and which are persistent params (by name,
so `SwapModule` can take and give back a params dict), and how the function's results are laid out.
`relay_passes.apply` writes it; it travels inside the executable next to the plan (function
`tvm_swap_manifest`, a JSON string) so an exported module is self-describing. No TVM types here.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from .errors import PlanError
from .jsonio import check_versioned, parse_json

MANIFEST_FORMAT = "tvm_swap.manifest"
MANIFEST_VERSION = 1
ROLES = ("input", "param", "unused")


@dataclass(frozen=True)
class TensorSpec:
    id: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    kind: str


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of the original function, in its original position."""
    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str           # input: passed every call; param: persistent, held by the runtime; unused
    tensor: int = -1    # graph tensor id (-1 when no op reads it)


@dataclass(frozen=True)
class OutputSpec:
    """One flat result, in return order; `shape` can differ from the tensor's when the result is a view."""
    tensor: int
    shape: tuple[int, ...]
    dtype: str


@dataclass
class Manifest:
    func_name: str
    target_kind: str
    tensors: dict[int, TensorSpec]
    params: list[ParamSpec]
    outputs: list[OutputSpec]
    updates: list[tuple[int, int]]        # (new tensor, old persistent tensor)
    return_tuple: bool = True             # False: the function returned one tensor, not a tuple
    meta: dict = field(default_factory=dict)

    @property
    def inputs(self) -> list[ParamSpec]:
        return [p for p in self.params if p.role == "input"]

    @property
    def persistent(self) -> list[ParamSpec]:
        return [p for p in self.params if p.role == "param"]

    def tensor(self, t: int) -> TensorSpec:
        try:
            return self.tensors[t]
        except KeyError:
            raise PlanError(f"the plan names tensor {t}, which the compiled program does not know; "
                            f"the plan does not belong to this module: re-plan and rebuild") from None

    # ---- JSON ----
    def to_json(self) -> str:
        return json.dumps({
            "format": MANIFEST_FORMAT, "version": MANIFEST_VERSION,
            "func_name": self.func_name, "target_kind": self.target_kind,
            "tensors": [[t.id, t.name, list(t.shape), t.dtype, t.nbytes, t.kind] for t in self.tensors.values()],
            "params": [asdict(p) | {"shape": list(p.shape)} for p in self.params],
            "outputs": [[o.tensor, list(o.shape), o.dtype] for o in self.outputs],
            "updates": [[int(a), int(b)] for a, b in self.updates],
            "return_tuple": self.return_tuple, "meta": self.meta,
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "Manifest":
        try:
            d = check_versioned(parse_json(text, "manifest", PlanError), MANIFEST_FORMAT, MANIFEST_VERSION,
                                "manifest", PlanError, "; rebuild the module")
            tensors = {int(i): TensorSpec(int(i), str(n), tuple(int(s) for s in sh), str(dt), int(b), str(k))
                       for i, n, sh, dt, b, k in d["tensors"]}
            params = [ParamSpec(str(p["name"]), tuple(int(s) for s in p["shape"]), str(p["dtype"]), str(p["role"]),
                                int(p["tensor"])) for p in d["params"]]
            outputs = [OutputSpec(int(t), tuple(int(s) for s in sh), str(dt)) for t, sh, dt in d["outputs"]]
            return cls(str(d["func_name"]), str(d["target_kind"]), tensors, params, outputs,
                       [(int(a), int(b)) for a, b in d["updates"]], bool(d.get("return_tuple", True)),
                       dict(d.get("meta", {})))
        except PlanError:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise PlanError(f"malformed tvm_swap manifest ({type(e).__name__}: {e}); rebuild the module") from None
