"""tvm_swap.graph.extract: DataflowGraph from a lowered Relax module."""
import math

import pytest

import tvm
from tvm import relax  # noqa: E402

from relay_passes import lower  # noqa: E402
from tvm_swap.errors import GraphError, UnsupportedModelError  # noqa: E402
from tvm_swap.examples import mlp, mlp_train_step, small_cnn  # noqa: E402
from tvm_swap.graph import DataflowGraph, from_relax  # noqa: E402
from tvm_swap.graph.extract import graph_from_relax  # noqa: E402


def _tiny(views=True):
    """main(x, w, s) = reshape(relu(x @ w), [12]) + s, returning (sum, relu output)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([4, 8], "float32"))
    w = relax.Var("w", relax.TensorType([8, 3], "float32"))
    s = relax.Var("s", relax.TensorType([12], "float32"))
    with bb.function("main", [x, w, s], attrs={"num_input": 1}):
        with bb.dataflow():
            h = bb.emit(relax.op.nn.relu(relax.op.matmul(x, w)))
            r = bb.emit(relax.op.reshape(h, [12]))
            out = bb.emit(relax.op.add(r, s))
            gv = bb.emit_output(relax.Tuple([out, h]))
        bb.emit_func_output(gv)
    return bb.get()


def _kernel_calls(func):
    return sum(1 for blk in func.body.blocks for b in blk.bindings
               if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.GlobalVar))


def test_unfused_tiny_graph_structure_and_view_aliasing():
    lowered = lower(_tiny(), fuse=False)
    g = from_relax(lowered)
    g.validate()
    assert g.num_ops == _kernel_calls(lowered["main"]) == 3          # matmul, relu, add
    assert [o.kernel for o in g.ops] == ["matmul", "relu", "add"]
    # 3 params + one tensor per kernel output; the reshape is NOT a tensor
    assert g.num_tensors == 3 + 3
    kinds = [t.kind for t in g.tensors]
    assert kinds[:3] == ["input", "param", "param"]
    relu_out = g.ops[1].outputs[0]
    add_in = g.ops[2].inputs
    assert relu_out in add_in                                          # the reshape view reads the base tensor
    assert len(g.tensors[relu_out].views) >= 2                         # lv = alloc, and the reshape var
    assert g.tensors[relu_out].nbytes == 4 * 3 * 4 and g.tensors[relu_out].shape == (4, 3)
    assert g.outputs == [g.ops[2].outputs[0], relu_out]                # tuple fields map to base tensors
    assert g.tensors[g.ops[0].outputs[0]].kind == "activation"
    assert all(g.tensors[t].kind == "output" for t in g.outputs)
    assert g.ops[0].flops == 2 * 4 * 8 * 3                              # TVM's estimate for a matmul
    assert g.meta["flops_estimated"] == []


def test_meta_maps_tensors_and_ops_back_to_bindings():
    lowered = lower(_tiny(), fuse=False)
    g = from_relax(lowered)
    func = lowered["main"]
    assert g.meta["target"] is not None and "llvm" in g.meta["target"]
    assert g.meta["func_name"] == "main"
    for t, src in zip(g.tensors, g.meta["tensor_source"]):
        if src[0] == "param":
            assert func.params[src[1]].name == t.name
        else:
            kind, blk, j = src
            b = func.body.blocks[blk].bindings[j]
            assert kind == "alloc" and b.value.op.name == "relax.builtin.alloc_tensor"
            assert b.var.name == t.name.split("#")[0]
    for op, (blk, j) in zip(g.ops, g.meta["op_binding"]):
        call = func.body.blocks[blk].bindings[j].value
        assert call.op.name_hint == op.kernel
    assert len({t.name for t in g.tensors}) == g.num_tensors           # names are unique


def test_fused_tiny_graph_and_json_round_trip(tmp_path):
    g = from_relax(lower(_tiny()), name="tiny")
    assert g.name == "tiny" and g.num_ops == 2
    path = tmp_path / "g.json"
    g.save(path)
    g2 = DataflowGraph.load(path)
    assert g2.fingerprint() == g.fingerprint() and g2.meta["op_binding"] == g.meta["op_binding"]


@pytest.mark.parametrize("builder,fuse", [(mlp, True), (mlp, False), (small_cnn, True)])
def test_example_graphs_sizes_and_order(builder, fuse):
    ex = builder(batch=4)
    lowered = lower(ex.mod, fuse=fuse)
    g = from_relax(lowered)
    assert g.num_ops == _kernel_calls(lowered["main"])
    names = [t.name for t in g.tensors]
    for k, arr in {**ex.inputs, **ex.params}.items():
        t = g.tensors[names.index(k)]
        assert t.nbytes == arr.nbytes and t.shape == arr.shape and t.dtype == "float32"
    assert [g.tensors[i].kind for i in range(len(ex.inputs))] == ["input"] * len(ex.inputs)
    assert sum(t.nbytes for t in g.tensors if t.kind == "param") == sum(a.nbytes for a in ex.params.values())
    for t in g.tensors:
        assert t.nbytes == math.prod(t.shape) * 4
    prod = g.producer()
    for op in g.ops:                                                    # topological: inputs exist before use
        assert all(prod[t] < op.id for t in op.inputs)
    assert g.total_flops() > 0


def test_train_step_updates_kinds_and_gradients():
    ex = mlp_train_step(batch=8, in_features=16, hidden=(32,), classes=4)
    g = from_relax(lower(ex.mod))
    n_in, n_par = len(ex.inputs), len(ex.params)
    assert [g.tensors[i].kind for i in range(n_in + n_par)] == ["input"] * n_in + ["param"] * n_par
    assert len(g.outputs) == 1 + n_par
    assert g.tensors[g.outputs[0]].kind == "output" and g.tensors[g.outputs[0]].shape == ()
    # every new weight updates the old one of the same name and shape, and takes its kind
    assert len(g.updates) == n_par
    for i, new in enumerate(g.outputs[1:]):
        old = g.updates[new]
        assert old == n_in + i
        assert g.tensors[new].shape == g.tensors[old].shape and g.tensors[new].kind == "param"
    kinds = {t.kind for t in g.tensors}
    assert "gradient" in kinds and "activation" in kinds
    # gradients only come after the loss: no forward activation reads one
    loss_op = g.producer()[g.outputs[0]]
    for t in g.tensors:
        if t.kind == "gradient":
            assert g.producer()[t.id] > loss_op


def test_explicit_updates_and_param_kinds_win_over_attrs():
    ex = mlp_train_step(batch=4, in_features=8, hidden=(8,), classes=2)
    lowered = lower(ex.mod)
    g = graph_from_relax(lowered, updates={1: 2}, param_kinds={"b1": "optimizer_state"})
    assert list(g.updates.values()) == [2]
    assert g.tensors[[t.name for t in g.tensors].index("b1")].kind == "optimizer_state"
    g_all_inputs = graph_from_relax(lowered, num_inputs=0, updates={})
    assert g_all_inputs.tensors[0].kind == "param" and g_all_inputs.updates == {}


def test_bad_arguments_give_graph_errors():
    lowered = lower(_tiny())
    with pytest.raises(GraphError, match="no function 'nope'"):
        from_relax(lowered, func_name="nope")
    with pytest.raises(GraphError, match="num_inputs=9"):
        from_relax(lowered, num_inputs=9)
    with pytest.raises(GraphError, match="which is an input"):
        from_relax(lowered, updates={0: 0})
    with pytest.raises(GraphError, match="out of range"):
        from_relax(lowered, updates={5: 1})
    with pytest.raises(GraphError, match="kind is one of"):
        from_relax(lowered, param_kinds={"w": "activation"})


def test_unlowered_or_finalized_module_is_refused():
    from relay_passes import finalize

    with pytest.raises(GraphError, match="not lowered"):
        from_relax(_tiny())
    with pytest.raises(GraphError, match="already memory-planned"):
        from_relax(finalize(lower(_tiny()), "llvm"))


def test_dynamic_shape_in_a_lowered_module_is_refused():
    n = tvm.tirx.Var("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([n], "float32"))
    with bb.function("main", [x]):
        bb.emit_func_output(x)
    with pytest.raises(UnsupportedModelError, match="dynamic shape"):
        from_relax(bb.get())


def test_tuple_params_are_refused_as_apply_refuses_them():
    """Extraction and plan application read the IR with one walker (graph/ir.py): a tuple parameter is refused
    by both, with the same message, before any planning."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([16], "float32"))
    st = relax.Var("state", relax.TupleType([relax.TensorType([16], "float32"), relax.TensorType([], "int64")]))
    with bb.function("main", [x, st], attrs={"num_input": 1}):
        with bb.dataflow():
            m = bb.emit(relax.TupleGetItem(st, 0))
            gv = bb.emit_output(relax.Tuple([bb.emit(relax.op.add(x, m))]))
        bb.emit_func_output(gv)
    with pytest.raises(UnsupportedModelError, match="tuple parameters are not supported"):
        graph_from_relax(lower(bb.get()))


def test_constants_are_not_tensors_but_are_counted():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([16], "float32"))
    m = relax.Var("m", relax.TensorType([16], "float32"))
    with bb.function("main", [x, m], attrs={"num_input": 1}):
        with bb.dataflow():
            c = relax.const(__import__("numpy").arange(16, dtype="float32"))
            y = bb.emit(relax.op.add(relax.op.multiply(x, c), m))
            gv = bb.emit_output(relax.Tuple([y]))
        bb.emit_func_output(gv)
    g = graph_from_relax(lower(bb.get()), param_kinds={"m": "optimizer_state"}, updates={0: 1})
    assert [t.name for t in g.tensors[:2]] == ["x", "m"]
    assert [t.kind for t in g.tensors[:2]] == ["input", "optimizer_state"]
    assert g.meta["tensor_source"][1] == ["param", 1]
    assert g.updates == {g.outputs[0]: 1} and g.tensors[g.outputs[0]].kind == "optimizer_state"
    assert g.meta["constant_bytes"] == 64
    assert all(1 in op.inputs for op in g.ops[-1:])


def test_in_place_kernel_is_refused():
    from inplace_module import InPlace

    with pytest.raises(UnsupportedModelError, match="in place"):
        from_relax(lower(InPlace, fuse=False))


def _kernel_with_buffer(name: str, n: int = 512):
    """A kernel that allocates one global buffer `name` of n floats (x + 1 then * 2 through it)."""
    from tvm import te

    x = te.placeholder((n,), "float32", name="x")
    tmp = te.compute((n,), lambda i: x[i] + 1.0, name=name)
    y = te.compute((n,), lambda i: tmp[i] * 2.0, name="y")
    return te.create_prim_func([x, y])


def test_allocated_buffers_of_equal_kernels_with_other_buffer_names_are_their_own():
    """allocated_global_buffers remembers its answer per kernel (structural hash and equality, which ignore
    buffer names): a kernel equal but for its buffer's name gets its own names, not the remembered ones."""
    from tvm_swap.graph.extract import _alloc_names, allocated_global_buffers

    a, b = _kernel_with_buffer("first"), _kernel_with_buffer("second")
    import tvm_ffi

    assert tvm_ffi.structural_equal(a, b) and _alloc_names(a) != _alloc_names(b)
    assert allocated_global_buffers(a) == [("first", 2048)]
    assert allocated_global_buffers(b) == [("second", 2048)]
    assert allocated_global_buffers(_kernel_with_buffer("first")) == [("first", 2048)]
    assert allocated_global_buffers(_kernel_with_buffer("first", 256)) == [("first", 1024)]
