"""Bool tensors through comparisons, arithmetic and scans (relay_passes.bool_kernels): TVM 0.27's llvm code
generator cannot compile these kernels on bool values (fcmp on i1, `MatchesCode(kDLFloat)`), so they are
computed in int8; the results equal torch's. Without the pass the codegen error names the bool kernel and
does not offer fuse_max_depth=1, which would not make it build."""
import numpy as np
import pytest

import tvm  # noqa: E402  (a hard dependency: a broken install fails)
torch = pytest.importorskip("torch")
from tvm import relax  # noqa: E402

import relay_passes.bool_kernels as bool_kernels  # noqa: E402
from relay_passes.lower import lower_unlimited_build  # noqa: E402
from tvm_swap.errors import KernelCodegenError  # noqa: E402

op = relax.op
X = np.array([True, False, False, True] * 6).reshape(2, 12)
Y = np.array([True, True, False, False, True, False] * 4).reshape(2, 12)

# relax op on (b, c) -> what torch gives for (x, y); scans and reductions of bools as "non-zero so far"
CASES = {
    "equal": (lambda b, c: op.equal(b, c), lambda x, y: x == y),
    "not_equal": (lambda b, c: op.not_equal(b, c), lambda x, y: x != y),
    "less": (lambda b, c: op.less(b, c), lambda x, y: x < y),
    "greater_equal": (lambda b, c: op.greater_equal(b, c), lambda x, y: x >= y),
    "add": (lambda b, c: op.add(b, c), lambda x, y: x + y),
    "multiply": (lambda b, c: op.multiply(b, c), lambda x, y: x * y),
    "maximum": (lambda b, c: op.maximum(b, c), torch.maximum),
    "minimum": (lambda b, c: op.minimum(b, c), torch.minimum),
    "max": (lambda b, c: op.max(b, axis=1), lambda x, y: x.amax(1)),
    "cumsum": (lambda b, c: op.cumsum(b, axis=1), lambda x, y: x.cumsum(1) > 0),
    "cumprod": (lambda b, c: op.cumprod(c, axis=1), lambda x, y: y.cumprod(1) > 0),
    "mask": (lambda b, c: op.where(op.equal(op.expand_dims(b, 1), op.expand_dims(c, 2)),
                                   relax.const(0.0, "float32"), relax.const(float("-inf"), "float32")),
             lambda x, y: torch.where(x[:, None, :] == y[:, :, None], 0.0, float("-inf"))),
}


def _module(make):
    bb = relax.BlockBuilder()
    b, c = (relax.Var(n, relax.TensorType([2, 12], "bool")) for n in "bc")
    with bb.function("main", [b, c]):
        with bb.dataflow():
            out = bb.emit_output(make(b, c))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("name", list(CASES))
def test_bool_ops_build_and_equal_torch(name):
    make, ref = CASES[name]
    vm = relax.VirtualMachine(lower_unlimited_build(_module(make), "llvm"), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(X), tvm.runtime.tensor(Y)).numpy()
    want = ref(torch.tensor(X), torch.tensor(Y)).numpy()
    assert got.dtype == want.dtype and np.array_equal(got, want), (got, want)


def test_a_bool_kernel_the_pass_misses_is_named_without_the_fuse_depth_knob(monkeypatch):
    monkeypatch.setattr(bool_kernels, "LegalizeBoolOps", tvm.transform.Sequential([]))
    with pytest.raises(KernelCodegenError) as e:
        lower_unlimited_build(_module(CASES["mask"][0]), "llvm")
    msg = str(e.value)
    assert "bool tensors" in msg and "fuse_max_depth" not in msg and "not a fault of the model" not in msg, msg
    assert e.value.kernels and all(k in msg for k in e.value.kernels)
    with pytest.raises(KernelCodegenError, match="bool tensors"):       # unfused it fails too: the knob is no fix
        lower_unlimited_build(_module(CASES["mask"][0]), "llvm", fuse_max_depth=1)


def test_torch_cumsum_of_bools_counts_in_int64_as_torch_does():
    """transformers' packed-sequence check: (position_ids.diff() != 1).cumsum(-1), compared by value."""
    from tvm_swap.frontends import from_torch

    class Runs(torch.nn.Module):
        def forward(self, ids):
            c = (ids != 0).cumsum(-1)
            return c, (c[:, :, None] == c[:, None, :]).float()

    ids = torch.tensor([[1, 0, 2, 3, 0, 4], [0, 0, 5, 6, 7, 0]])
    mod, _ = from_torch(Runs(), (ids,))
    assert str(mod["main"].ret_ty.fields[0].dtype.dtype) == "int64"
    vm = relax.VirtualMachine(lower_unlimited_build(mod, "llvm"), tvm.cpu())
    got = [t.numpy() for t in vm["main"](tvm.runtime.tensor(ids.numpy()))]
    for g, w in zip(got, Runs()(ids)):
        assert g.dtype == w.numpy().dtype and np.array_equal(g, w.numpy())
