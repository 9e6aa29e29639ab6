"""relay_passes.cpu_inline: fused llvm kernels keep no full-size intermediates, and compute the same values."""
import json
from pathlib import Path

import numpy as np

import tvm
from tvm import relax  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "graphs"


def _conv_bn_relu():
    """conv2d + bias + inference batch norm + relu: the stages FuseTIR keeps as full-size buffers on llvm."""
    x = relax.Var("x", relax.TensorType([8, 4, 16, 16], "float32"))
    w = relax.Var("w", relax.TensorType([8, 4, 3, 3], "float32"))
    b = relax.Var("b", relax.TensorType([1, 8, 1, 1], "float32"))
    g, be, m, v = (relax.Var(n, relax.TensorType([8], "float32")) for n in ("g", "be", "m", "v"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w, b, g, be, m, v]):
        with bb.dataflow():
            c = bb.emit(relax.op.add(relax.op.nn.conv2d(x, w, padding=1), b))
            n = bb.emit(relax.op.nn.batch_norm(c, g, be, m, v, axis=1, training=False)[0])
            out = bb.emit_output(relax.op.nn.relu(n))
        bb.emit_func_output(out)
    mod = bb.get()
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") for s in ([8, 4, 16, 16], [8, 4, 3, 3], [1, 8, 1, 1], [8], [8], [8])]
    args.append(rng.uniform(0.5, 2.0, 8).astype("float32"))
    return mod, args


def _run(ex, args):
    vm = relax.VirtualMachine(ex, tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy()


def test_no_full_size_intermediates_and_the_same_values():
    from relay_passes.lower import build_lowered, lower
    from tvm_swap.graph.extract import graph_from_relax, kernel_workspace

    mod, args = _conv_bn_relu()
    low = lower(mod, "llvm")
    g = graph_from_relax(low, "main", target="llvm")
    act = 8 * 8 * 16 * 16 * 4                              # one activation: 64 KiB
    assert g.ops and max(op.workspace for op in g.ops) < 1024
    # without the pass the fused kernels hold full-size stages (what the pool used to reserve)
    with tvm.target.Target("llvm"):
        plain = relax.get_default_pipeline(tvm.target.Target("llvm"))
        raw = tvm.transform.Sequential([relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
                                        relax.transform.FoldConstant(), relax.transform.FuseOps(),
                                        relax.transform.FuseTIR()])(mod)
    raw_ws = max(kernel_workspace(f) for f in raw.functions.values() if isinstance(f, tvm.tirx.PrimFunc))
    assert raw_ws >= act
    want = _run(relax.build(mod, "llvm", relax_pipeline=plain), args)
    np.testing.assert_array_equal(_run(build_lowered(low), args), want)     # same values, bitwise


def test_the_arena_floor_of_small_cnn_b128_is_its_largest_op():
    """The lowered MXNet small_cnn at batch 128 (inference): the arena's floor is the largest op's working set
    plus the workspace, with no fragmentation (an early prefetch of dense0's weight used to cost 0.52 MiB)."""
    from tvm_swap.graph.dataflow import DataflowGraph
    from tvm_swap.planner.api import feasible_floor
    from tvm_swap.planner.graphindex import GraphIndex
    from tvm_swap.planner.swapadvisor.arena import working_set_floor

    g = DataflowGraph.from_dict(json.loads((DATA / "small_cnn_b128_infer.json").read_text()))
    gi = GraphIndex.build(g, 256, keep_updated=False)
    assert max(op.workspace for op in g.ops) < 1024
    assert feasible_floor(g, "arena")[0] == working_set_floor(gi) + gi.workspace == 16 * 2**20 + 4 * 256 + 256
