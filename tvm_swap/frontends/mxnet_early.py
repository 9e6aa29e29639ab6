"""What an MXNet symbol alone says about its parameters and input shapes, before TVM is imported (issue 16:
errors within a second of the process start; importing TVM takes seconds).

    names = surely_missing_params(graph, shapes)   # None: not provable from the symbol, the importer decides
    err = input_rank_error(graph, shapes)          # a --shape of the wrong rank for the convolution it feeds
    need, what = largest_tensor(graph, shapes)     # model_checks.largest_tensor of the imported function

`tvm-swap compile model-symbol.json` with no params file and no `--init` is refused by
model_checks.check_params once the importer has made the Relax function (after importing TVM): the function
reads parameters that have no value. This module proves the same refusal from the symbol, and says exactly what
that check would say, or says nothing:

- A variable is surely read by the imported function when it sits at a weight slot that the operator's converter
  always reads (mxnet_ops: a Convolution's weight, its bias unless no_bias, a BatchNorm's beta and running stats
  and its gamma unless fix_gamma, ...) of a node whose output surely reaches a graph output: the walk from the
  heads passes only through operators whose converters compute their output from that input (not, e.g., a
  zeros_like, which reads only a shape, or a loss layer's label, which is ignored).
- The count must equal the importer's: so the early refusal is given only when every variable the heads need,
  other than the `--shape` inputs, is surely read (then the function's parameters after its inputs are exactly
  those, in node order, and all lack a value). Any other symbol, or anything unexpected, returns None and the
  importer's check runs as before.
"""
from __future__ import annotations

import math

from ..errors import UnsupportedModelError
from .mxnet_graph import Graph

# op -> input slots whose data the converter's output surely depends on (the walk towards the inputs)
_DATA_SLOTS = {
    **{op: (0,) for op in ("Convolution", "Deconvolution", "FullyConnected", "BatchNorm", "LayerNorm",
                           "InstanceNorm", "GroupNorm", "Activation", "relu", "LeakyReLU", "Pooling", "Flatten",
                           "flatten", "Dropout", "SoftmaxOutput", "Softmax", "SoftmaxActivation", "softmax",
                           "log_softmax", "Reshape", "reshape", "_copy", "identity", "BlockGrad",
                           "stop_gradient", "Embedding")},
    **{op: None for op in ("elemwise_add", "broadcast_add", "broadcast_plus", "_plus", "_Plus", "_add",
                           "add_n", "ElementWiseSum", "Concat", "concat")},     # None: every input
}


def _weight_slots(node) -> tuple:
    """Input slots the converter always reads as a parameter (tvm_swap.frontends.mxnet_ops)."""
    a, op = node.attrs, node.op
    if op in ("Convolution", "FullyConnected"):
        return (1,) if a.bool("no_bias", False) else (1, 2)
    if op == "Deconvolution":
        return (1,) if a.bool("no_bias", True) else (1, 2)     # MXNet's default there is no_bias=True
    if op == "BatchNorm":
        return (2, 3, 4) if a.bool("fix_gamma", True) else (1, 2, 3, 4)
    if op in ("LayerNorm", "InstanceNorm", "GroupNorm"):
        return (1, 2)
    if op == "Embedding":
        return (1,)
    return ()


def surely_missing_params(graph: Graph, shapes: dict) -> list[str] | None:
    """Names of the parameters (in the importer's order) that the imported function would read without a
    value, when no params are given: None unless the symbol proves it exactly (the module docstring)."""
    try:
        return _surely_missing(graph, shapes)
    except Exception:  # noqa: BLE001 - an early check only: any surprise leaves it to the importer
        return None


def _surely_missing(graph: Graph, shapes: dict) -> list[str] | None:
    from .mxnet import needed_nodes

    nodes = graph.nodes
    needed = needed_nodes(graph)
    live, stack = set(), [src for src, _ in graph.heads]     # nodes whose output surely reaches an output
    while stack:
        i = stack.pop()
        if i in live:
            continue
        live.add(i)
        node = nodes[i]
        if node.op == "null" or node.op not in _DATA_SLOTS:
            continue
        slots = _DATA_SLOTS[node.op]
        for s, (src, _) in enumerate(node.inputs):
            if slots is None or s in slots:
                stack.append(src)
    read: set[str] = set()
    for i in live:
        node = nodes[i]
        for s in _weight_slots(node) if node.op != "null" else ():
            if s < len(node.inputs) and nodes[node.inputs[s][0]].op == "null":
                read.add(nodes[node.inputs[s][0]].name)
    first: dict[str, int] = {}
    for i in sorted(needed):
        if nodes[i].op == "null":
            first.setdefault(nodes[i].name, i)
    others = [n for n in first if n not in shapes]
    if not others or any(n not in read for n in others):
        return None
    return sorted(others, key=first.__getitem__)


def input_rank_error(graph: Graph, shapes: dict) -> UnsupportedModelError | None:
    """The importer's error for the first Convolution (in node order, one the outputs need) that reads a
    `--shape` input of the wrong rank directly: its converter (mxnet_ops.convolution) refuses it, so the
    import fails there or earlier. None where no such node is found (the importer checks everything else)."""
    from .mxnet import needed_nodes

    needed = needed_nodes(graph)
    for node in graph.nodes:
        if node.op != "Convolution" or node.index not in needed or not node.inputs:
            continue
        src = graph.nodes[node.inputs[0][0]]
        if src.op != "null" or src.name not in shapes:
            continue
        try:
            nd = len(node.attrs.tuple("kernel"))
        except Exception:  # noqa: BLE001 - a bad attribute: the importer words that
            continue
        shape = tuple(shapes[src.name])
        if nd in (1, 2, 3) and len(shape) != nd + 2:
            return UnsupportedModelError(f"operator {node.op!r} (node {node.name!r}): a {nd}-d kernel needs a "
                                         f"{nd + 2}-d input, got shape {shape}")
    return None


# ---------------------------------------------------------------- shapes, for a byte limit below a tensor
def first_index(graph: Graph, name: str) -> int:
    return next(n.index for n in graph.nodes if n.op == "null" and n.name == name)


def _conv_out(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _infer(node, ins: list, params: dict) -> tuple:
    """The output shape of `node` from its inputs' shapes (float32 data), recording the shapes of the weights
    it reads in `params`; raises for anything not covered (the caller then says nothing)."""
    a, op = node.attrs, node.op
    x = ins[0]

    def weight(slot, shape):
        params[slot] = tuple(int(d) for d in shape)

    if op == "Convolution":
        k = a.tuple("kernel")
        nd = len(k)
        if len(x) != nd + 2 or a.str("layout") not in (None, {1: "NCW", 2: "NCHW", 3: "NCDHW"}.get(nd)):
            raise ValueError(op)
        st, di, pa = (tuple(a.tuple(key, (dflt,) * nd)) for key, dflt in (("stride", 1), ("dilate", 1), ("pad", 0)))
        if not all(len(t) == nd for t in (st, di, pa)):
            raise ValueError(op)
        f, g = a.int("num_filter"), a.int("num_group", 1)
        if x[1] % g or f % g:
            raise ValueError(op)
        weight(1, (f, x[1] // g) + tuple(k))
        if not a.bool("no_bias", False):
            weight(2, (f,))
        return (x[0], f) + tuple(_conv_out(x[2 + i], k[i], st[i], pa[i], di[i]) for i in range(nd))
    if op == "Pooling":
        if a.bool("global_pool", False):
            return tuple(x[:2]) + (1,) * (len(x) - 2)
        k = a.tuple("kernel")
        nd = len(k)
        if len(x) != nd + 2 or a.str("pooling_convention", "valid") != "valid":
            raise ValueError(op)
        st, pa = a.tuple("stride", (1,) * nd), a.tuple("pad", (0,) * nd)
        if len(st) != nd or len(pa) != nd:
            raise ValueError(op)
        return tuple(x[:2]) + tuple(_conv_out(x[2 + i], k[i], st[i], pa[i], 1) for i in range(nd))
    if op == "FullyConnected":
        h = a.int("num_hidden")
        flat = a.bool("flatten", True)
        k = math.prod(x[1:]) if flat else x[-1]
        weight(1, (h, k))
        if not a.bool("no_bias", False):
            weight(2, (h,))
        return (x[0], h) if flat else tuple(x[:-1]) + (h,)
    if op == "BatchNorm":
        axis = a.int("axis", 1)
        c = x[axis]
        for slot in ((2, 3, 4) if a.bool("fix_gamma", True) else (1, 2, 3, 4)):
            weight(slot, (c,))
        return tuple(x)
    if op in ("Flatten", "flatten"):
        return (x[0], math.prod(x[1:]))
    if op in ("Activation", "relu", "Dropout", "_copy", "identity", "BlockGrad", "stop_gradient") or (
            op == "softmax" and a.str("dtype") is None):
        return tuple(x)
    if op in ("elemwise_add", "_plus", "_Plus", "_add", "add_n", "ElementWiseSum"):
        if any(tuple(i) != tuple(x) for i in ins):
            raise ValueError(op)
        return tuple(x)
    if op in ("Concat", "concat"):
        dim = a.int("dim", 1) % len(x)
        if any(len(i) != len(x) or tuple(i[:dim]) + tuple(i[dim + 1:]) != tuple(x[:dim]) + tuple(x[dim + 1:])
               for i in ins):
            raise ValueError(op)
        return tuple(x[:dim]) + (sum(i[dim] for i in ins),) + tuple(x[dim + 1:])
    raise ValueError(op)


def largest_tensor(graph: Graph, shapes: dict) -> tuple[int, str] | None:
    """(bytes, what) as model_checks.largest_tensor gives it for the importer's function with no params given
    (float32 data: the command line's), from the symbol: None unless every parameter is surely read
    (surely_missing_params) and every node the outputs need has a shape rule here."""
    try:
        return _largest(graph, shapes)
    except Exception:  # noqa: BLE001 - an early check only: the importer and model_checks decide the rest
        return None


def _largest(graph: Graph, shapes: dict) -> tuple[int, str] | None:
    from .mxnet import needed_nodes

    weights = _surely_missing(graph, shapes)
    if not weights:
        return None
    nodes = graph.nodes
    needed = needed_nodes(graph)
    out: dict[int, tuple] = {}
    pshape: dict[str, tuple] = {}
    for node in nodes:
        if node.index not in needed:
            continue
        if node.op == "null":
            if node.name in shapes:
                out[node.index] = tuple(int(d) for d in shapes[node.name])
            continue
        if node.op not in _DATA_SLOTS or any(idx != 0 for _, idx in node.inputs):
            raise ValueError(node.op)
        data_slots = _DATA_SLOTS[node.op]
        ins = []
        for slot, (src, _) in enumerate(node.inputs):
            if data_slots is None or slot in data_slots:
                ins.append(out[src])          # (KeyError for a variable with no --shape: not covered)
        if not ins:
            raise ValueError("no data input")
        slots: dict = {}
        out[node.index] = _infer(node, ins, slots)
        for slot, (src, _) in enumerate(node.inputs):
            if data_slots is None or slot in data_slots:
                continue
            if slot not in slots or nodes[src].op != "null":
                raise ValueError("an input that is neither data nor a weight")
            if pshape.setdefault(nodes[src].name, slots[slot]) != slots[slot]:
                raise ValueError("a weight read with two shapes")
    if set(pshape) != set(weights):
        return None
    for name in weights:        # a declared shape the need contradicts, or a dtype: the importer's to word
        var = nodes[first_index(graph, name)]
        if var.attrs.int("__dtype__", 0) != 0:
            return None
        if "__shape__" in var.attrs.raw:
            declared = tuple(var.attrs.tuple("__shape__", ()))
            if declared and (len(declared) != len(pshape[name])
                             or any(d not in (0, n) for d, n in zip(declared, pshape[name]))):
                return None
    # model_checks.largest_tensor's order: the function's parameters (data inputs, then weights, each in node
    # order), then its results; the first of the largest wins
    first: dict[str, int] = {}
    for i in sorted(needed):
        if nodes[i].op == "null":
            first.setdefault(nodes[i].name, i)
    data = sorted((n for n in first if n in shapes), key=first.__getitem__)
    best = (0, "")
    for name in data + weights:
        shp = shapes[name] if name in shapes else pshape[name]
        b = math.prod(int(d) for d in shp) * 4
        if b > best[0]:
            best = (b, f"parameter {name!r}")
    for i, (src, idx) in enumerate(graph.heads):
        if nodes[src].op == "null" or idx != 0:
            return None
        b = math.prod(out[src]) * 4
        if b > best[0]:
            best = (b, f"result #{i}")
    return best


__all__ = ["surely_missing_params", "input_rank_error", "largest_tensor"]
