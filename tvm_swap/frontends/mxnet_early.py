"""What an MXNet symbol alone says about its parameters and input shapes, before TVM is imported (issue 16:
errors within a second of the process start; importing TVM takes seconds).

    names = surely_missing_params(graph, shapes)   # None: not provable from the symbol, the importer decides
    err = input_rank_error(graph, shapes)          # a --shape of the wrong rank for the convolution it feeds

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


__all__ = ["surely_missing_params", "input_rank_error"]
