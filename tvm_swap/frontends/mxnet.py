"""MXNet symbol JSON + .params -> Relax IRModule, without importing mxnet.

    mod, params = from_mxnet("resnet-symbol.json", "resnet-0000.params", shapes={"data": (1, 3, 224, 224)})
    vm["main"](data, *[params[v.name] for v in mod["main"].params[num_input:]])

`main(data..., *params)` carries `num_input`; the parameters are function parameters (not constants),
data inputs first, then parameters, each in symbol node order. Nodes are keyed by index (MXNet allows
duplicate node names); variables are keyed by name (MXNet binds arguments by name).
"""
from __future__ import annotations

import os
import re

import numpy as np

from ..errors import TvmSwapError, UnsupportedModelError
from .mxnet_graph import Graph, Node, parse_symbol
from .mxnet_params import DTYPE_FLAGS, load_params, strip_prefixes
from .mxnet_registry import CONVERTERS, Fill

__all__ = ["from_mxnet", "MXNetImporter", "random_params", "supported_operators"]


def converters() -> dict:
    """MXNet operator name -> converter, with every converter module loaded."""
    from . import mxnet_ops, mxnet_rnn  # noqa: F401  (each registers its converters on import)

    return CONVERTERS


def _ident(name: str) -> str:
    """A readable Relax var name from an MXNet node name."""
    s = re.sub(r"\W", "_", name)
    return s if s and not s[0].isdigit() else "v_" + s


class MXNetImporter:
    """Converts one parsed graph; operator converters (mxnet_ops, mxnet_rnn) call back into it."""

    def __init__(self, graph: Graph, params: dict | None, shapes: dict, dtype):
        from tvm import relax

        self.relax = relax
        self.graph = graph
        self.params = params
        self.has_params = params is not None
        self.shapes = shapes
        self.dtype = dtype
        self.bb = relax.BlockBuilder()
        self.values: dict[int, list] = {}           # node index -> its outputs (Relax exprs or Fill)
        self.vars: dict[str, relax.Var] = {}        # variable name -> Relax param
        self.var_node: dict[str, int] = {}          # variable name -> first node index (for ordering)
        self.data_names: set[str] = set()
        self.side: dict[tuple, object] = {}         # facts one converter leaves for another
        self.users: dict[int, int] = {}
        for n in graph.nodes:
            for src, _ in n.inputs:
                self.users[src] = self.users.get(src, 0) + 1

    # ---- helpers for converters -------------------------------------------------------------------
    def shape(self, x) -> tuple:
        ty = x.ty
        if not isinstance(ty, self.relax.TensorType) or ty.shape is None:
            raise TvmSwapError(f"internal: expected a tensor with a known shape, got {ty}")
        return tuple(int(d) for d in ty.shape.values)

    def dtype_of(self, x) -> str:
        return str(x.ty.dtype.dtype)

    def const(self, value, dtype: str):
        return self.relax.const(np.array(value, dtype=dtype))

    def emit(self, expr, name: str | None = None):
        return self.bb.emit(expr, _ident(name) if name else "")

    def n_inputs(self, node: Node) -> int:
        return len(node.inputs)

    def source(self, node: Node, slot: int) -> Node:
        return self.graph.nodes[node.inputs[slot][0]]

    def error(self, node: Node, msg: str) -> UnsupportedModelError:
        return UnsupportedModelError(f"operator {node.op!r} (node {node.name!r}): {msg}")

    def input(self, node: Node, slot: int, shape: tuple | None = None, strict: bool = True):
        """Input `slot` of `node` as a Relax expr.

        `shape` is what the operator needs there: it creates a parameter (or fixes a `_zeros`) whose shape
        the file does not give, and with `strict` a given shape that differs is an error.
        """
        if slot >= len(node.inputs):
            raise self.error(node, f"expects an input #{slot}, but the node has {len(node.inputs)} inputs")
        src, out = node.inputs[slot]
        src_node = self.graph.nodes[src]
        if src_node.op == "null":
            value = self._variable(src_node, node, slot, shape, strict)
        else:
            outs = self.values[src]
            if out >= len(outs):
                raise self.error(node, f"input #{slot} uses output {out} of {src_node.op!r} node "
                                       f"{src_node.name!r}, which has only {len(outs)} supported output(s)")
            value = outs[out]
            if isinstance(value, Fill):
                value = self._materialize_fill(value, node, shape)
        if shape is not None and strict and self.shape(value) != tuple(shape):
            raise self.error(node, f"input #{slot} ({src_node.name!r}) has shape {self.shape(value)}, "
                                   f"but this operator needs {tuple(shape)}")
        return value

    def raw_input(self, node: Node, slot: int):
        """The stored value for an input, without materializing a `Fill` (None for a variable)."""
        src, out = node.inputs[slot]
        if self.graph.nodes[src].op == "null":
            return None
        outs = self.values[src]
        return outs[out] if out < len(outs) else None

    # ---- variables ----------------------------------------------------------------------------------
    def _variable(self, var: Node, user: Node, slot: int, need: tuple | None, strict: bool):
        if var.name in self.vars:
            return self.vars[var.name]
        relax = self.relax
        if var.name in self.shapes:
            shape = self.shapes[var.name]
            dtype = self.dtype.get(var.name, "float32") if isinstance(self.dtype, dict) else self.dtype
            self.data_names.add(var.name)
        elif self.has_params and var.name in self.params:
            arr = self.params[var.name]
            shape, dtype = tuple(arr.shape), str(arr.dtype)
        else:
            shape = self._declared_shape(var, user, need, strict)
            if shape is None:
                raise UnsupportedModelError(
                    f"missing input shape for {var.name!r} (input #{slot} of {user.op!r} node {user.name!r}): "
                    f"pass shapes={{{var.name!r}: (...)}}")
            if self.has_params:
                raise UnsupportedModelError(
                    f"parameter {var.name!r} (input #{slot} of {user.op!r} node {user.name!r}) is not in the "
                    f"params file; if it is a data input pass shapes={{{var.name!r}: (...)}}")
            flag = var.attrs.int("__dtype__", 0)
            if flag not in DTYPE_FLAGS:
                raise UnsupportedModelError(f"variable {var.name!r}: unknown __dtype__ {flag}")
            dtype = np.dtype(DTYPE_FLAGS[flag]).name
        v = relax.Var(var.name, relax.TensorType([int(d) for d in shape], dtype))
        self.vars[var.name] = v
        self.var_node[var.name] = var.index
        return v

    def _declared_shape(self, var: Node, user: Node, need: tuple | None, strict: bool):
        """`__shape__` (0 = unknown, filled from what the operator needs), else what the operator needs."""
        declared = var.attrs.tuple("__shape__", None) if "__shape__" in var.attrs.raw else None
        if not declared:
            return tuple(need) if need is not None else None
        if all(d > 0 for d in declared):
            return declared
        if need is None or len(need) != len(declared):
            return None
        merged = tuple(n if d == 0 else d for d, n in zip(declared, need))
        if strict and merged != tuple(need):
            raise UnsupportedModelError(
                f"variable {var.name!r} declares __shape__ {declared}, "
                f"but {user.op!r} node {user.name!r} needs {tuple(need)}")
        return merged

    def _materialize_fill(self, fill: Fill, user: Node, need: tuple | None):
        if need is None or len(need) != len(fill.shape):
            raise UnsupportedModelError(
                f"{fill.node.op!r} node {fill.node.name!r} has shape {fill.shape} with 0 (infer) dims, and its user "
                f"{user.op!r} node {user.name!r} cannot infer them; give the full shape in the symbol")
        shape = tuple(n if d == 0 else d for d, n in zip(fill.shape, need))
        key = ("fill", fill.node.index, shape)
        if key not in self.side:
            self.side[key] = self.emit(
                self.relax.op.full(shape, self.const(fill.value, fill.dtype), fill.dtype), fill.node.name)
        return self.side[key]

    # ---- driver ---------------------------------------------------------------------------------------
    def convert(self):
        relax = self.relax
        needed = self._needed_nodes()
        check_supported(self.graph, needed)
        try:
            params = self._build_main(needed, converters())
        except Exception:
            self._close_open_block()
            raise
        mod = self.bb.get()
        num_input = sum(1 for p in params if p.name in self.data_names)
        mod["main"] = mod["main"].with_attr("num_input", num_input)
        # Converters may leave values nobody uses (e.g. a packed RNN parameter vector); drop them.
        mod = relax.transform.DeadCodeElimination(["main"])(mod)
        return mod

    def _build_main(self, needed, converters):
        relax = self.relax
        with self.bb.function("main"):
            with self.bb.dataflow():
                for node in self.graph.nodes:
                    if node.op == "null" or node.index not in needed:
                        continue
                    fn = converters.get(node.op)
                    if fn is None:
                        raise UnsupportedModelError(
                            f"operator {node.op!r} (node {node.name!r}) is not supported by the MXNet importer")
                    outs = fn(self, node)
                    if not isinstance(outs, list):
                        outs = [outs]
                    self.values[node.index] = [
                        o if isinstance(o, (Fill, relax.Var)) else self.emit(o, node.name) for o in outs]
                heads = [self._head(h) for h in self.graph.heads]
                result = heads[0] if len(heads) == 1 else relax.Tuple(heads)
                out = self.bb.emit_output(result)
            params = self._ordered_params()
            self.bb.emit_func_output(out, params=params)
        return params

    def _close_open_block(self):
        """After a failed conversion, close the block the BlockBuilder left open (avoids a C++ warning)."""
        try:
            self.bb._end_block()
        except Exception:  # noqa: BLE001  (nothing open: fine)
            pass

    def _head(self, head):
        src, out = head
        node = self.graph.nodes[src]
        if node.op == "null":
            fake = Node(-1, "output", "output", node.attrs, [head])
            return self.input(fake, 0)
        outs = self.values[src]
        if out >= len(outs):
            raise self.error(node, f"graph output uses output {out}, but only {len(outs)} are supported")
        v = outs[out]
        if isinstance(v, Fill):
            if any(d == 0 for d in v.shape):
                raise self.error(node, f"graph output has shape {v.shape} with 0 (infer) dims")
            v = self._materialize_fill(v, node, v.shape)
        return v

    def _needed_nodes(self) -> set[int]:
        return needed_nodes(self.graph)

    def _ordered_params(self):
        names = sorted(self.vars, key=lambda n: (n not in self.data_names, self.var_node[n]))
        return [self.vars[n] for n in names]


def needed_nodes(graph: Graph) -> set[int]:
    """Nodes the heads depend on: dead branches are not converted (and cannot fail)."""
    needed, stack = set(), [h[0] for h in graph.heads]
    while stack:
        i = stack.pop()
        if i in needed:
            continue
        needed.add(i)
        stack.extend(src for src, _ in graph.nodes[i].inputs)
    return needed


def check_supported(graph: Graph, needed: set[int] | None = None) -> None:
    """Every operator the heads need has a converter, or one error naming all that have none (the converter
    table imports no TVM: this runs before TVM is imported)."""
    needed = needed_nodes(graph) if needed is None else needed
    table = converters()
    first: dict[str, str] = {}
    for n in graph.nodes:
        if n.index in needed and n.op != "null" and n.op not in table:
            first.setdefault(n.op, n.name)
    if first:      # all of them at once, before converting anything
        named = ", ".join(f"{op!r} (node {name!r})" for op, name in sorted(first.items()))
        verb = "is" if len(first) == 1 else "are"
        raise UnsupportedModelError(f"operator{'s' if len(first) > 1 else ''} {named} {verb} not supported by the "
                                    f"MXNet importer (tvm_swap.frontends.mxnet.supported_operators() lists those "
                                    f"that are)")


_PARAM_NAME = re.compile(r"_(weight|bias|gamma|beta|running_mean|running_var|moving_mean|moving_var)$")


def _check_shapes(shapes, graph: Graph) -> dict:
    if shapes is None:
        shapes = {}
    if not isinstance(shapes, dict):
        raise TvmSwapError(f"shapes must be a dict {{input_name: shape}}, got {type(shapes).__name__}")
    var_names = {n.name for n in graph.nodes if n.op == "null"}
    out = {}
    for name, shape in shapes.items():
        if name not in var_names:
            likely = sorted(n for n in var_names if not _PARAM_NAME.search(n))
            raise TvmSwapError(f"shapes names input {name!r}, which the symbol does not have; its data inputs are "
                               f"probably {likely[:10]} (of {len(var_names)} variables, params included)")
        try:
            dims = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else [shape]))
        except (TypeError, ValueError):
            raise TvmSwapError(f"shape of input {name!r} must be a tuple of positive ints, got {shape!r}") from None
        if not dims or any(d <= 0 for d in dims):
            raise TvmSwapError(f"shape of input {name!r} must be a tuple of positive ints, got {shape!r}")
        out[name] = dims
    return out


def _check_params(params) -> dict | None:
    if params is None:
        return None
    if isinstance(params, (str, os.PathLike)):
        params = load_params(params)
    if not isinstance(params, dict):
        raise TvmSwapError(f"params must be a path to a .params file or a dict, got {type(params).__name__}")
    out = {}
    for name, value in strip_prefixes(params).items():
        if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
            value = value.numpy()  # tvm.runtime.Tensor or similar
        out[name] = np.asarray(value)
    return out


def from_mxnet(symbol, params=None, shapes=None, dtype="float32"):
    """Import an MXNet model into Relax.

    symbol: path to `NAME-symbol.json`, its JSON text or the parsed dict.
    params: path to `NAME-0000.params` or a {name: array} dict (`arg:`/`aux:` prefixes allowed);
            None imports the graph only (parameter shapes from `__shape__` or operator inference).
    shapes: {input_name: shape} for every data input.
    dtype:  dtype of the data inputs (a str, or a {input_name: dtype} dict).
    Returns (IRModule, {param_name: np.ndarray}) holding exactly the parameters `main` takes.
    """
    graph = parse_symbol(symbol)
    shapes = _check_shapes(shapes, graph)
    params = _check_params(params)
    check_supported(graph)                 # before the importer imports TVM
    importer = MXNetImporter(graph, params, shapes, dtype)
    mod = importer.convert()
    used = {} if params is None else {
        p.name: params[p.name] for p in mod["main"].params if p.name in params
        and p.name not in importer.data_names}
    return mod, used


def supported_operators() -> list[str]:
    """MXNet operator names the importer converts (aliases included), sorted."""
    return sorted(converters())


def random_params(mod, seed: int = 0, func: str = "main") -> dict[str, np.ndarray]:
    """Random values for the parameters of `func` (after its `num_input` data inputs): for graph-only imports
    (tvm_swap.frontends.init_params, "random")."""
    from .init_params import init_params

    return init_params(mod, "random", seed=seed, func_name=func)
