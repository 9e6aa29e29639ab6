"""Batch-affine graphs: one file holds a model's training graph for every batch size.

A model's graph has the same structure at every batch size B; only sizes change, and each is affine
in B: a tensor's bytes and each shape dimension are a*B + b, an op's flops and workspace c*B + d.
The generator extracts the graph at two batch sizes, fits the coefficients (`fit`), checks them
exactly against a third extraction, and saves the result; `instantiate` gives the DataflowGraph at
any B without TVM.

File format ("format": "tvm_swap.zoo", version 1; JSON, gzip-compressed as NAME.json.gz): the graph
JSON of tvm_swap.graph.dataflow (same keys and row layouts) except that every size field holds an
*affine value*: a plain number c (the same at every batch) or a pair [a, b] meaning a*B + b.
    tensors: [name, bytes, shape (list of affine dims), dtype, kind, views]
    ops:     [name, kernel, inputs, outputs, flops, workspace]
    outputs, updates: as in the graph JSON
plus "model" (the zoo name), "fit_batches" and "check_batches" (the extractions it was fitted and
checked on) and "meta" (copied into every instantiated graph's meta, with "batch" added).
"""
from __future__ import annotations

from fractions import Fraction

from ..errors import GraphError
from ..jsonio import check_versioned
from ..graph import DataflowGraph
from ..graph.dataflow import GRAPH_FORMAT, GRAPH_VERSION

ZOO_FORMAT = "tvm_swap.zoo"
ZOO_VERSION = 1
# meta keys of an extracted graph that point back into one IR instance; meaningless in the zoo.
DROPPED_META = ("tensor_source", "op_binding")


class AffineFitError(GraphError):
    """Graphs at different batch sizes do not share a structure, or a size is not affine in B."""


def _affine(values: dict[int, float], what: str, integral: bool):
    """Fit a*B + b through the first two (batch, value) points; verify the rest exactly."""
    (b1, v1), (b2, v2), *rest = values.items()
    a = Fraction(v2) - Fraction(v1)
    a /= b2 - b1
    b = Fraction(v1) - a * b1
    for bb, v in rest:
        if a * bb + b != Fraction(v):
            raise AffineFitError(f"{what} is not affine in the batch size: {dict(sorted(values.items()))}")
    if integral and (a.denominator != 1 or b.denominator != 1):
        raise AffineFitError(f"{what} has non-integer batch coefficients a={a}, b={b}: {values}")
    if a.denominator == 1 and b.denominator == 1:
        a, b = int(a), int(b)
    else:
        a, b = float(a), float(b)
        for bb, v in values.items():          # float coefficients must still reproduce every point
            if abs(a * bb + b - v) > 1e-9 * max(1.0, abs(v)):
                raise AffineFitError(f"{what}: float coefficients do not reproduce {values}")
    return b if a == 0 else [a, b]


def evaluate(value, batch: int):
    """An affine value at batch B (see the module docstring)."""
    if isinstance(value, list):
        a, b = value
        return a * batch + b
    return value


def _same(graphs: dict[int, DataflowGraph], what, get):
    ref_b, ref = next(iter(graphs.items()))
    want = get(ref)
    for b, g in graphs.items():
        got = get(g)
        if got != want:
            raise AffineFitError(f"{what} differs between batch {ref_b} ({want!r}) and batch {b} ({got!r}); "
                                 f"the model's structure must not depend on the batch size")
    return want


def fit(graphs: dict[int, DataflowGraph], model: str, fit_batches=None) -> dict:
    """The zoo document of `model` from its graphs at >= 3 batch sizes (two fit, the rest check)."""
    if len(graphs) < 3:
        raise ValueError("fit needs graphs at three or more batch sizes: two to fit, one or more to check")
    graphs = dict(sorted(graphs.items()))
    fit_batches = list(fit_batches or list(graphs)[:2])
    order = fit_batches + [b for b in graphs if b not in fit_batches]
    graphs = {b: graphs[b] for b in order}     # _affine fits through the first two points
    _same(graphs, "the number of tensors", lambda g: g.num_tensors)
    _same(graphs, "the number of ops", lambda g: g.num_ops)
    _same(graphs, "the outputs", lambda g: list(g.outputs))
    _same(graphs, "the updates", lambda g: sorted(g.updates.items()))

    def fit_points(points, what, integral):
        return _affine(dict(zip(graphs, points)), what, integral)

    gs = list(graphs.values())
    tensors = []
    for i in range(gs[0].num_tensors):
        t = _same(graphs, f"tensor {i}", lambda g: (g.tensors[i].name, g.tensors[i].dtype, g.tensors[i].kind,
                                                     len(g.tensors[i].shape), g.tensors[i].views))
        name, dtype, kind, rank, views = t
        nbytes = fit_points([g.tensors[i].nbytes for g in gs], f"bytes of tensor {name!r}", True)
        shape = [fit_points([g.tensors[i].shape[d] for g in gs], f"dim {d} of tensor {name!r}", True)
                 for d in range(rank)]
        tensors.append([name, nbytes, shape, dtype, kind, list(views)])
    ops = []
    for i in range(gs[0].num_ops):
        name, kernel, ins, outs = _same(graphs, f"op {i}", lambda g: (g.ops[i].name, g.ops[i].kernel,
                                                                      g.ops[i].inputs, g.ops[i].outputs))
        flops = fit_points([g.ops[i].flops for g in gs], f"flops of op {name!r}", False)
        work = fit_points([g.ops[i].workspace for g in gs], f"workspace of op {name!r}", True)
        ops.append([name, kernel, list(ins), list(outs), flops, work])
    meta = {k: v for k, v in gs[0].meta.items() if k not in DROPPED_META}
    return {
        "format": ZOO_FORMAT,
        "version": ZOO_VERSION,
        "model": model,
        "fit_batches": fit_batches,
        "check_batches": [b for b in graphs if b not in fit_batches],
        "meta": meta,
        "tensors": tensors,
        "ops": ops,
        "outputs": list(gs[0].outputs),
        "updates": [[int(k), int(v)] for k, v in sorted(gs[0].updates.items())],
    }


def instantiate(doc: dict, batch: int, name: str | None = None) -> DataflowGraph:
    """The DataflowGraph of a zoo document at batch size `batch` (validated)."""
    check_versioned(doc, ZOO_FORMAT, ZOO_VERSION, "zoo file", GraphError)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise GraphError(f"batch size must be a positive integer, got {batch!r}")
    ev = lambda v: evaluate(v, batch)  # noqa: E731
    try:
        graph = {
            "format": GRAPH_FORMAT,
            "version": GRAPH_VERSION,
            "name": name or f"{doc['model']}@batch={batch}",
            "meta": {**doc.get("meta", {}), "zoo_model": doc["model"], "batch": batch},
            "tensors": [[n, ev(b), [ev(d) for d in sh], dt, k, v] for n, b, sh, dt, k, v in doc["tensors"]],
            "ops": [[n, kern, ins, outs, ev(fl), ev(ws)] for n, kern, ins, outs, fl, ws in doc["ops"]],
            "outputs": doc["outputs"],
            "updates": doc["updates"],
        }
    except (KeyError, TypeError, ValueError) as e:
        raise GraphError(f"malformed zoo file: {type(e).__name__}: {e}") from None
    return DataflowGraph.from_dict(graph)
