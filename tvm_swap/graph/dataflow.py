"""DataflowGraph: one iteration of a model as kernels and the tensors they read and write.

This is the contract between the TVM half (extraction from Relax) and the planner half.
It holds no TVM types, so graphs can be saved as JSON and planned without TVM.

Conventions
- `ops` are listed in a valid (topological) order; op.id == its index.
- `tensors[i].id == i`. Views and reshapes are not tensors: they alias their base tensor and are
  listed by name in `TensorInfo.views`, so every op input/output id names a real storage.
- Tensors with no producer op are *persistent* (param, optimizer_state: they live across iterations)
  or *inputs* (fed from the host every iteration).
- `updates[new_id] = old_id`: a tensor produced this iteration replaces a persistent tensor next
  iteration (a training step's new weights and optimizer state).
- `outputs`: the function's results (including updates), in return order.
- `meta["inplace"]`: `[[op, out, in], ...]`, pairs an op may write in place (`inplace_pairs`): the kernel is
  elementwise over `in` (each output element reads `in` only at its own index) and `out` has `in`'s bytes and
  dtype, so `out` may take `in`'s memory when `in` dies at that op. A planner may take a pair or not
  (Plan.inplace lists the ones a plan takes; the verifier checks them against this list).
"""
from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import GraphError
from ..jsonio import check_versioned, read_json

KINDS = ("param", "input", "activation", "gradient", "optimizer_state", "output")
PERSISTENT_KINDS = ("param", "optimizer_state")
GRAPH_FORMAT = "tvm_swap.graph"
GRAPH_VERSION = 1


@dataclass(frozen=True)
class TensorInfo:
    id: int
    name: str
    nbytes: int
    shape: tuple[int, ...]
    dtype: str
    kind: str
    views: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpInfo:
    id: int
    name: str
    kernel: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    flops: float = 0.0
    workspace: int = 0


@dataclass
class DataflowGraph:
    name: str
    tensors: list[TensorInfo]
    ops: list[OpInfo]
    outputs: list[int] = field(default_factory=list)
    updates: dict[int, int] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self._cache: dict = {}

    # ---- derived structure (cached; graphs are not mutated after construction) ----
    @property
    def num_ops(self) -> int:
        return len(self.ops)

    @property
    def num_tensors(self) -> int:
        return len(self.tensors)

    def producer(self) -> np.ndarray:
        """producer()[t] = op id that writes tensor t, or -1."""
        if "producer" not in self._cache:
            p = np.full(self.num_tensors, -1, dtype=np.int64)
            for op in self.ops:
                for t in op.outputs:
                    p[t] = op.id
            self._cache["producer"] = p
        return self._cache["producer"]

    def consumers(self) -> list[list[int]]:
        """consumers()[t] = op ids that read tensor t, in op order."""
        if "consumers" not in self._cache:
            c: list[list[int]] = [[] for _ in range(self.num_tensors)]
            for op in self.ops:
                for t in dict.fromkeys(op.inputs):
                    c[t].append(op.id)
            self._cache["consumers"] = c
        return self._cache["consumers"]

    def op_preds(self) -> list[list[int]]:
        """op_preds()[o] = distinct op ids whose outputs op o reads."""
        if "preds" not in self._cache:
            prod = self.producer()
            self._cache["preds"] = [
                sorted({int(prod[t]) for t in op.inputs if prod[t] >= 0}) for op in self.ops
            ]
        return self._cache["preds"]

    def op_succs(self) -> list[list[int]]:
        if "succs" not in self._cache:
            s: list[list[int]] = [[] for _ in self.ops]
            for o, ps in enumerate(self.op_preds()):
                for p in ps:
                    s[p].append(o)
            self._cache["succs"] = s
        return self._cache["succs"]

    def op_outputs(self) -> list[tuple[int, ...]]:
        """op_outputs()[o] = the tensors op o writes (what Plan.next_object_map needs of a graph)."""
        return [tuple(op.outputs) for op in self.ops]

    def inplace_pairs(self) -> dict[int, tuple[tuple[int, int], ...]]:
        """op -> ((out, in), ...): the outputs the op may write into a dying input's memory (meta["inplace"]).
        Only pairs that pass `_check_inplace` are listed, so a planner can rely on them."""
        if "inplace" not in self._cache:
            pairs: dict[int, list] = {}
            for o, out, inp in (self.meta.get("inplace") or ()) if isinstance(self.meta, dict) else ():
                pairs.setdefault(int(o), []).append((int(out), int(inp)))
            self._cache["inplace"] = {o: tuple(v) for o, v in pairs.items()}
        return self._cache["inplace"]

    def inplace_savings(self, sizes) -> np.ndarray:
        """Per op, the most bytes its working set can shrink by running in place: for each output with a
        candidate input (one input per output, each input once), the smaller of the two `sizes`. What the op
        holds at once is its inputs + outputs less this, when its candidate inputs die there."""
        out = np.zeros(self.num_ops, dtype=np.int64)
        for o, pairs in self.inplace_pairs().items():
            used_in, done_out = set(), set()
            for y, x in pairs:
                if y not in done_out and x not in used_in:
                    done_out.add(y)
                    used_in.add(x)
                    out[o] += min(int(sizes[y]), int(sizes[x]))
        return out

    def tensor_bytes(self) -> np.ndarray:
        if "bytes" not in self._cache:
            self._cache["bytes"] = np.array([t.nbytes for t in self.tensors], dtype=np.int64)
        return self._cache["bytes"]

    def is_persistent(self, t: int) -> bool:
        return self.tensors[t].kind in PERSISTENT_KINDS and self.producer()[t] < 0

    def used_tensors(self) -> list[int]:
        """Tensors some op reads or writes (the ones that need device memory)."""
        used = set()
        for op in self.ops:
            used.update(op.inputs)
            used.update(op.outputs)
        return sorted(used)

    def total_flops(self) -> float:
        return float(sum(op.flops for op in self.ops))

    def param_bytes(self) -> int:
        return int(sum(t.nbytes for t in self.tensors if t.kind in PERSISTENT_KINDS and self.producer()[t.id] < 0))

    def fingerprint(self) -> str:
        """Stable hash of the structure and sizes (not names), so a plan can name its graph."""
        if "fp" not in self._cache:
            h = hashlib.sha256()
            for t in self.tensors:
                h.update(f"{t.nbytes},{t.kind};".encode())
            for op in self.ops:
                h.update(f"{op.inputs}>{op.outputs};".encode())
            h.update(json.dumps(sorted(self.updates.items())).encode())
            self._cache["fp"] = h.hexdigest()[:16]
        return self._cache["fp"]

    # ---- checks ----
    def validate(self) -> None:
        """Raise GraphError naming the first structural problem."""
        n = self.num_tensors
        for i, t in enumerate(self.tensors):
            if t.id != i:
                raise GraphError(f"tensor at index {i} has id {t.id}; ids must equal their index")
            if t.kind not in KINDS:
                raise GraphError(f"tensor {t.name!r} has unknown kind {t.kind!r}; expected one of {KINDS}")
            if t.nbytes < 0:
                raise GraphError(f"tensor {t.name!r} has negative size {t.nbytes}")
        written = {}
        for i, op in enumerate(self.ops):
            if op.id != i:
                raise GraphError(f"op at index {i} has id {op.id}; ids must equal their index")
            for t in (*op.inputs, *op.outputs):
                if not 0 <= t < n:
                    raise GraphError(f"op {op.name!r} names tensor {t}, but there are {n} tensors")
            for t in op.inputs:
                if self.tensors[t].kind not in ("param", "input", "optimizer_state") and t not in written:
                    if not any(t in o.outputs for o in self.ops):
                        raise GraphError(f"op {op.name!r} reads tensor {self.tensors[t].name!r} that nothing produces")
                    raise GraphError(f"op {op.name!r} reads tensor {self.tensors[t].name!r} before it is produced")
            for t in op.outputs:
                if t in written:
                    raise GraphError(f"tensor {self.tensors[t].name!r} is written by two ops")
                written[t] = i
        for new, old in self.updates.items():
            if new not in written:
                raise GraphError(f"update {self.tensors[new].name!r} is not produced by any op")
            if self.tensors[old].kind not in PERSISTENT_KINDS:
                raise GraphError(f"update target {self.tensors[old].name!r} is not a param or optimizer state")
        for t in self.outputs:
            if not 0 <= t < n:
                raise GraphError(f"graph output {t} is not a tensor id")
        self._check_inplace()

    def _check_inplace(self) -> None:
        """meta["inplace"]: each (op, out, in) names an output and an input of the op with equal bytes and dtype,
        and `in` is an intermediate (produced here, not a result or an update): its memory may be reused."""
        raw = self.meta.get("inplace") if isinstance(self.meta, dict) else None
        if not raw:
            return
        produced = self.producer()
        results = set(self.outputs) | set(self.updates)
        for item in raw:
            if len(item) != 3:
                raise GraphError(f"meta['inplace'] entry {item!r} is not [op, out, in]")
            o, out, inp = (int(x) for x in item)
            if not 0 <= o < self.num_ops:
                raise GraphError(f"meta['inplace'] names op {o}, but there are {self.num_ops} ops")
            op = self.ops[o]
            if out not in op.outputs or inp not in op.inputs:
                raise GraphError(f"meta['inplace'] pair ({out}, {inp}) of op {op.name!r} is not one of its "
                                 f"(output, input) tensors")
            a, b = self.tensors[out], self.tensors[inp]
            if a.nbytes != b.nbytes or a.dtype != b.dtype:
                raise GraphError(f"op {op.name!r} cannot write {a.name!r} in place of {b.name!r}: "
                                 f"{a.nbytes} B {a.dtype} vs {b.nbytes} B {b.dtype}")
            if produced[inp] < 0 or inp in results:
                raise GraphError(f"op {op.name!r} cannot write in place of {b.name!r}: only an intermediate "
                                 f"(not an input, param, result or update) may be overwritten")

    # ---- JSON ----
    def to_dict(self) -> dict:
        return {
            "format": GRAPH_FORMAT,
            "version": GRAPH_VERSION,
            "name": self.name,
            "meta": self.meta,
            "tensors": [
                [t.name, t.nbytes, list(t.shape), t.dtype, t.kind, list(t.views)] for t in self.tensors
            ],
            "ops": [
                [o.name, o.kernel, list(o.inputs), list(o.outputs), o.flops, o.workspace] for o in self.ops
            ],
            "outputs": list(self.outputs),
            "updates": [[int(k), int(v)] for k, v in self.updates.items()],
        }

    @classmethod
    def from_dict(cls, d: dict) -> "DataflowGraph":
        check_versioned(d, GRAPH_FORMAT, GRAPH_VERSION, "graph", GraphError)
        try:
            tensors = [
                TensorInfo(i, str(n), int(b), tuple(int(s) for s in sh), str(dt), str(k), tuple(v))
                for i, (n, b, sh, dt, k, v) in enumerate(d["tensors"])
            ]
            ops = [
                OpInfo(i, str(n), str(kern), tuple(int(x) for x in ins), tuple(int(x) for x in outs), float(fl), int(ws))
                for i, (n, kern, ins, outs, fl, ws) in enumerate(d["ops"])
            ]
            g = cls(
                name=str(d.get("name", "graph")),
                tensors=tensors,
                ops=ops,
                outputs=[int(x) for x in d.get("outputs", [])],
                updates={int(k): int(v) for k, v in d.get("updates", [])},
                meta=dict(d.get("meta", {})),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise GraphError(f"malformed graph JSON: {type(e).__name__}: {e}") from None
        g.validate()
        return g

    def save(self, path: str | Path) -> None:
        path = Path(path)
        text = json.dumps(self.to_dict(), separators=(",", ":"))
        if path.suffix == ".gz":
            with gzip.open(path, "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            path.write_text(text)

    @classmethod
    def load(cls, path: str | Path) -> "DataflowGraph":
        return cls.from_dict(read_json(path, "graph file", GraphError))

    def summary(self) -> str:
        from ..units import format_bytes

        kinds = {}
        for t in self.tensors:
            kinds[t.kind] = kinds.get(t.kind, 0) + t.nbytes
        ks = ", ".join(f"{k} {format_bytes(v)}" for k, v in sorted(kinds.items()))
        return f"{self.name}: {self.num_ops} ops, {self.num_tensors} tensors ({ks})"
