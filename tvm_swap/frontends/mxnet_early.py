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
# ops whose converters cannot fail on the shapes of their inputs (the CNN operators): a symbol with only these
# is proven from its structure; with any other op, every shape must be inferred too (_shape_walk), or an
# importer's shape error would come before the missing params
_SHAPE_FREE = frozenset(_DATA_SLOTS)


def _more_data_slots() -> dict:
    """The transformer and sequence operators (mxnet_ops' converters read these inputs as data)."""
    from .mxnet_ops import _BINARY_NAMES, _SCALAR

    return {**{op: (0,) for op in ("transpose", "SwapAxis", "swapaxes", "clip", *_SCALAR)},
            **{op: None for op in ("batch_dot", "_rnn_param_concat", *_BINARY_NAMES)},
            "RNN": (0, 1, 2, 3)}       # (every output of a fused RNN reads every weight: mxnet_rnn.rnn)


_DATA_SLOTS.update({op: s for op, s in _more_data_slots().items() if op not in _DATA_SLOTS})
# inputs a converter never reads: a loss layer's label (mxnet_ops.softmax_output reads only its data)
_IGNORED_FROM = {"SoftmaxOutput": 1, "Softmax": 1}


def _ignored_slots(node) -> frozenset:
    """Input slots the converter never reads: a loss layer's label, a BatchNorm's gamma under fix_gamma (the
    symbol API's default: mxnet_ops.batch_norm uses ones). A variable read only there is no parameter of the
    imported function."""
    start = _IGNORED_FROM.get(node.op)
    slots = set(range(start, len(node.inputs))) if start is not None else set()
    if node.op == "BatchNorm" and node.attrs.bool("fix_gamma", True):
        slots.add(1)
    return frozenset(slots)


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
    ignored = _never_read(graph, needed) - set(shapes)
    others = [n for n in first if n not in shapes and n not in ignored]
    if not others:
        return None
    if not ignored and all(n in read for n in others) and all(
            nodes[i].op in _SHAPE_FREE for i in needed if nodes[i].op != "null") and not any(
            "__shape__" in nodes[first[n]].attrs.raw for n in others):
        return sorted(others, key=first.__getitem__)
    # beyond the CNN operators, or with shapes declared (which the --shape may contradict): a variable the outputs
    # depend on is read (as data or a weight), and only once every shape is inferred and agrees with the declared
    # ones is the import sure to get as far as the params check
    read |= {nodes[i].name for i in live if nodes[i].op == "null"}
    if any(n not in read for n in others) or _shape_walk(graph, shapes) is None:
        return None
    return sorted(others, key=first.__getitem__)


def _never_read(graph: Graph, needed: set) -> set[str]:
    """Variables that only sit at inputs their converters ignore (not parameters of the imported function)."""
    seen, ignored_only = set(), set()
    for node in graph.nodes:
        if node.index not in needed or node.op == "null":
            continue
        ignored = _ignored_slots(node)
        for slot, (src, _) in enumerate(node.inputs):
            v = graph.nodes[src]
            if v.op != "null":
                continue
            if slot in ignored:
                ignored_only.add(v.name)
            else:
                seen.add(v.name)
    heads = {graph.nodes[src].name for src, _ in graph.heads if graph.nodes[src].op == "null"}
    return ignored_only - seen - heads


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


def _pool_out(size: int, k: int, s: int, p: int, d: int) -> int:
    """A pooling's output size with pooling_convention="full": the importer's ceil_mode=True, which Relax infers
    as PyTorch does (rounded up, less a last window that would start in the right padding)."""
    out = (size + 2 * p - d * (k - 1) - 1 + s - 1) // s + 1
    return out - 1 if (out - 1) * s >= size + p else out


def _axis(axis: int, ndim: int) -> int:
    a = axis + ndim if axis < 0 else axis
    if not 0 <= a < ndim:
        raise ValueError(f"axis {axis}")
    return a


def _broadcast(x: tuple, y: tuple) -> tuple:
    """numpy's broadcast of two shapes (Relax's binary ops follow it)."""
    n = max(len(x), len(y))
    x, y = (1,) * (n - len(x)) + x, (1,) * (n - len(y)) + y
    if any(a != b and 1 not in (a, b) for a, b in zip(x, y)):
        raise ValueError("shapes do not broadcast")
    return tuple(max(a, b) if 1 in (a, b) else a for a, b in zip(x, y))


def _op_names():
    from .mxnet_ops import _BINARY_NAMES, _SCALAR

    return frozenset(_SCALAR), frozenset(_BINARY_NAMES)


_SCALAR_OPS, _BINARY_OPS = _op_names()


def _infer_conv(a, x, op: str, weight) -> tuple:
    """_infer of a Convolution (N-d, NC* layout, groups): its output shape; its weight (and bias) shapes
    through `weight`."""
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


def _infer_pool(a, x, op: str) -> tuple:
    """_infer of a Pooling (max, avg or sum; valid or full convention; global): its output shape."""
    pool_type = a.str("pool_type", "max")
    if pool_type not in ("max", "avg", "sum") or a.str("layout") not in (
            None, {1: "NCW", 2: "NCHW", 3: "NCDHW"}.get(len(x) - 2)):
        raise ValueError(op)           # (mxnet_ops.pooling refuses these)
    if a.bool("global_pool", False):
        return tuple(x[:2]) + (1,) * (len(x) - 2)
    k = a.tuple("kernel")
    nd = len(k)
    convention = a.str("pooling_convention", "valid")
    if len(x) != nd + 2 or convention not in ("valid", "full") or (convention == "full" and pool_type == "sum"):
        raise ValueError(op)
    st, pa = a.tuple("stride", ()) or (1,) * nd, a.tuple("pad", ()) or (0,) * nd
    if len(st) != nd or len(pa) != nd:
        raise ValueError(op)
    size = _pool_out if convention == "full" else _conv_out
    out = tuple(x[:2]) + tuple(size(x[2 + i], k[i], st[i], pa[i], 1) for i in range(nd))
    if min(out) < 1:
        raise ValueError(op)
    return out


def _infer(node, ins: list, params: dict) -> tuple:
    """The output shape of `node` from its inputs' shapes (float32 data), recording the shapes of the weights
    it reads in `params`; raises for anything not covered (the caller then says nothing)."""
    a, op = node.attrs, node.op
    x = ins[0]

    def weight(slot, shape):
        params[slot] = tuple(int(d) for d in shape)

    if op == "Convolution":
        return _infer_conv(a, x, op, weight)
    if op == "Pooling":
        return _infer_pool(a, x, op)
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
    if op == "Dropout" and a.str("mode", "training") == "always" and a.float("p", 0.5) > 0:
        raise ValueError(op)
    if op in ("Activation", "relu", "Dropout", "_copy", "identity", "BlockGrad", "stop_gradient", "SoftmaxOutput",
              "Softmax", "SoftmaxActivation") or op in _SCALAR_OPS:
        return tuple(x)
    if op in ("softmax", "log_softmax"):
        if a.bool("use_length", False) or a.str("dtype") is not None:
            raise ValueError(op)
        _axis(a.int("axis", -1), len(x))
        return tuple(x)
    if op == "clip":
        a.float("a_min"), a.float("a_max")      # (the converter needs both)
        return tuple(x)
    if op == "LeakyReLU":
        if a.str("act_type", "leaky") not in ("leaky", "rrelu", "elu", "selu", "gelu"):
            raise ValueError(op)       # (prelu reads a weight of a shape of its own)
        return tuple(x)
    if op == "LayerNorm":
        if a.bool("output_mean_var", False):
            raise ValueError(op)
        c = x[_axis(a.int("axis", -1), len(x))]
        weight(1, (c,))
        weight(2, (c,))
        return tuple(x)
    if op == "Embedding":
        weight(1, (a.int("input_dim"), a.int("output_dim")))
        return tuple(x) + (a.int("output_dim"),)
    if op in ("Reshape", "reshape"):
        from .mxnet_ops import infer_reshape

        if a.tuple("target_shape", ()):
            raise ValueError(op)
        return tuple(infer_reshape(a.tuple("shape"), tuple(x), a.bool("reverse", False)))
    if op == "transpose":
        axes = tuple(a.tuple("axes", ()))
        if not axes:
            return tuple(reversed(x))
        if sorted(axes) != list(range(len(x))):
            raise ValueError(op)
        return tuple(x[i] for i in axes)
    if op in ("SwapAxis", "swapaxes"):
        d1, d2 = _axis(a.int("dim1", 0), len(x)), _axis(a.int("dim2", 0), len(x))
        out = list(x)
        out[d1], out[d2] = out[d2], out[d1]
        return tuple(out)
    if op == "batch_dot":
        lhs, rhs = (tuple(i) for i in ins)
        if len(lhs) != 3 or len(rhs) != 3 or lhs[0] != rhs[0]:
            raise ValueError(op)
        if a.bool("transpose_a", False):
            lhs = (lhs[0], lhs[2], lhs[1])
        if a.bool("transpose_b", False):
            rhs = (rhs[0], rhs[2], rhs[1])
        if lhs[2] != rhs[1]:
            raise ValueError(op)
        return (lhs[0], lhs[1], rhs[2])
    if op in ("elemwise_add", "_plus", "_Plus", "_add", "add_n", "ElementWiseSum"):
        if any(tuple(i) != tuple(x) for i in ins):
            raise ValueError(op)
        return tuple(x)
    if op in ("Concat", "concat", "_rnn_param_concat"):
        dim = _axis(a.int("dim", 1), len(x))
        if any(len(i) != len(x) or tuple(i[:dim]) + tuple(i[dim + 1:]) != tuple(x[:dim]) + tuple(x[dim + 1:])
               for i in ins):
            raise ValueError(op)
        return tuple(x[:dim]) + (sum(i[dim] for i in ins),) + tuple(x[dim + 1:])
    if op in _BINARY_OPS:
        if len(ins) != 2:
            raise ValueError(op)
        return _broadcast(tuple(ins[0]), tuple(ins[1]))
    raise ValueError(op)


def largest_tensor(graph: Graph, shapes: dict) -> tuple[int, str] | None:
    """(bytes, what) as model_checks.largest_tensor gives it for the importer's function with no params given
    (float32 data: the command line's), from the symbol: None unless every parameter is surely read
    (surely_missing_params) and every node the outputs need has a shape rule here."""
    try:
        return _largest(graph, shapes)
    except Exception:  # noqa: BLE001 - an early check only: the importer and model_checks decide the rest
        return None


class _ImportFails(Exception):
    """The walk reached a node whose converter refuses its input shapes, every node before it converting."""

    def __init__(self, error: UnsupportedModelError):
        super().__init__(str(error))
        self.error = error


def first_import_error(graph: Graph, shapes: dict) -> UnsupportedModelError | None:
    """The importer's error (with no params given) where the shape walk proves it is the first: the first node
    in the importer's order whose converter refuses the shapes it gets (today: a fused RNN fed data that is not
    3-d), every needed node before it having a shape rule here that holds. None otherwise."""
    try:
        _walk(graph, shapes)
    except _ImportFails as e:
        return e.error
    except Exception:  # noqa: BLE001 - not covered: the importer decides
        return None
    return None


def _shape_walk(graph: Graph, shapes: dict):
    """(output shape per node, shape per parameter) as the importer makes them with no params given, for a
    symbol whose every needed node has a shape rule here; None otherwise."""
    try:
        return _walk(graph, shapes)
    except Exception:  # noqa: BLE001 - not covered: the importer decides
        return None


def _declared(var) -> tuple:
    """A variable's full __shape__ (the importer's shape for it where its reader needs none); raises if none."""
    declared = tuple(var.attrs.tuple("__shape__", ())) if "__shape__" in var.attrs.raw else ()
    if not declared or any(d <= 0 for d in declared):
        raise ValueError(f"no full shape for {var.name!r}")
    return declared


_FILLS = ("_zeros", "_ones", "_full", "zeros", "ones", "_zeros_without_dtype")


def _check_declared(var, need: tuple) -> None:
    """The importer's check of a parameter whose shape its reader gives: a declared __shape__ must agree (0:
    any), and its dtype flag must be one it knows."""
    from .mxnet_params import DTYPE_FLAGS

    if var.attrs.int("__dtype__", 0) not in DTYPE_FLAGS:
        raise ValueError("dtype")
    declared = tuple(var.attrs.tuple("__shape__", ())) if "__shape__" in var.attrs.raw else ()
    if declared and (len(declared) != len(need) or any(d not in (0, n) for d, n in zip(declared, need))):
        raise ValueError(f"declared shape of {var.name!r}")


def _walk(graph: Graph, shapes: dict):
    from .mxnet import needed_nodes

    nodes = graph.nodes
    needed = needed_nodes(graph)
    out: dict[int, list] = {}          # node -> the shape of each of its outputs
    fills: dict[int, tuple] = {}       # a _zeros-like node -> its shape (0: taken from its reader)
    pshape: dict[str, tuple] = {}

    def param(name, shape):
        if pshape.setdefault(name, shape) != shape:
            raise ValueError("a parameter read with two shapes")

    def data(src, idx):
        if src not in out and nodes[src].op == "null":   # a variable read as data: its declared shape
            out[src] = [_declared(nodes[src])]
            param(nodes[src].name, out[src][0])
        return out[src][idx]                          # (KeyError, IndexError: not covered)

    def weight(src, need):
        if nodes[src].op != "null":
            raise ValueError("a weight that is not a variable")
        _check_declared(nodes[src], need)
        param(nodes[src].name, need)

    for node in nodes:
        if node.index not in needed:
            continue
        if node.op == "null":
            if node.name in shapes:
                out[node.index] = [tuple(int(d) for d in shapes[node.name])]
            continue
        if node.op in _FILLS and not node.inputs:
            fills[node.index] = tuple(node.attrs.tuple("shape", ()))
            continue
        if node.op == "RNN":
            out[node.index] = _rnn(node, data, weight, fills,
                                   lambda i: nodes[i].op == "null" and nodes[i].name not in shapes)
            continue
        if node.op not in _DATA_SLOTS:
            raise ValueError(node.op)
        data_slots = _DATA_SLOTS[node.op]
        ignored = _ignored_slots(node)
        ins = [data(src, idx) for slot, (src, idx) in enumerate(node.inputs)
               if slot not in ignored and (data_slots is None or slot in data_slots)]
        if not ins:
            raise ValueError("no data input")
        slots: dict = {}
        out[node.index] = [_infer(node, ins, slots)]
        for slot, (src, _) in enumerate(node.inputs):
            if slot in ignored or data_slots is None or slot in data_slots:
                continue
            if slot not in slots:
                raise ValueError("an input that is neither data nor a weight")
            weight(src, slots[slot])
    return out, pshape


def _rnn(node, data, weight, fills, is_var) -> list:
    """The output shapes of a fused RNN (mxnet_rnn.rnn), checking its inputs as the converter does."""
    from .mxnet_rnn import GATES, _numel, _piece_shapes

    a = node.attrs
    mode = a.str("mode")
    if mode not in GATES or any(a.has(k) for k in ("projection_size", "lstm_state_clip_min", "lstm_state_clip_max")):
        raise ValueError("RNN")
    if a.bool("use_sequence_length", False) or a.str("layout", "TNC") != "TNC":
        raise ValueError("RNN")
    hidden, layers = a.int("state_size"), a.int("num_layers", 1)
    dirs = 2 if a.bool("bidirectional", False) else 1
    n_in = 4 if mode == "lstm" else 3
    if len(node.inputs) != n_in:
        raise ValueError("RNN inputs")
    x = data(*node.inputs[0])
    if len(x) != 3:                          # the converter's own refusal, once every node before it converted
        raise _ImportFails(UnsupportedModelError(
            f"operator {node.op!r} (node {node.name!r}): data must be (seq_len, batch, features) in TNC layout, "
            f"got shape {tuple(x)}"))
    t, n, c = x
    state = (layers * dirs, n, hidden)
    for src, idx in node.inputs[2:]:
        if src in fills:
            if len(fills[src]) != 3 or any(d not in (0, s) for d, s in zip(fills[src], state)):
                raise ValueError("RNN state")
        elif data(src, idx) != state:
            raise ValueError("RNN state")
    total = sum(_numel(p) for p in _piece_shapes(mode, layers, dirs, hidden, c))
    src, idx = node.inputs[1]
    if is_var(src):                          # the packed vector itself: a parameter of that shape
        weight(src, (total,))
    elif data(src, idx) != (total,):         # (_rnn_param_concat's parts, or any vector of that shape)
        raise ValueError("RNN params")
    outs = [(t, n, hidden * dirs)]
    if a.bool("state_outputs", False):
        outs += [state] * (2 if mode == "lstm" else 1)
    return outs


def _largest(graph: Graph, shapes: dict) -> tuple[int, str] | None:
    from .mxnet import needed_nodes

    weights = _surely_missing(graph, shapes)
    if not weights:
        return None
    walked = _shape_walk(graph, shapes)
    if walked is None:
        return None
    out, pshape = walked
    nodes = graph.nodes
    needed = needed_nodes(graph)
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
        if nodes[src].op == "null":
            return None
        b = math.prod(out[src][idx]) * 4
        if b > best[0]:
            best = (b, f"result #{i}")
    return best


__all__ = ["surely_missing_params", "input_rank_error", "first_import_error", "largest_tensor"]
