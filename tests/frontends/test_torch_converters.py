"""tvm_swap.frontends.torch_converters: aten ops TVM 0.27 imports with other semantics than torch's."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tvm  # noqa: E402  (a hard dependency: a broken install fails)
from tvm import relax  # noqa: E402

from relay_passes.lower import lower_unlimited_build  # noqa: E402
from tvm_swap.frontends import from_torch  # noqa: E402


def _run(mod, params, inputs):
    vm = relax.VirtualMachine(lower_unlimited_build(mod, "llvm"), tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(a) for a in [*inputs, *params.values()]])
    return out.numpy()


def test_negative_select_reads_the_last_step_not_before_the_tensor():
    """x[:, -1] became take(x, -1): garbage that changed from run to run (a GRU classifier's last step)."""
    class Last(torch.nn.Module):
        def forward(self, x):
            return x[:, -1] * 2.0 + x[:, -3]

    x = np.arange(2 * 5 * 3, dtype="float32").reshape(2, 5, 3)
    mod, params = from_torch(Last(), (torch.tensor(x),))
    for _ in range(2):
        np.testing.assert_array_equal(_run(mod, params, [x]), x[:, -1] * 2.0 + x[:, -3])


def test_attention_is_imported_whole_with_masks_causal_and_grouped_heads():
    """scaled_dot_product_attention from plain ops (torch's decomposition fails for GPT-2's sdpa path)."""
    F = torch.nn.functional

    class Attn(torch.nn.Module):
        def forward(self, q, k, v, m):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            b = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
            c = F.scaled_dot_product_attention(q, k[:, :1], v[:, :1], enable_gqa=True, scale=0.3)
            return a + b + c

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 4, generator=g) for _ in range(3))
    m = torch.rand(2, 1, 5, 5, generator=g) > 0.3
    m[..., 0] = True                                        # every row attends somewhere
    mod, params = from_torch(Attn(), (q, k, v, m))
    names = mod["main"].script()
    assert "R.nn.attention" not in names and "R.nn.softmax" in names
    want = Attn()(q, k, v, m).numpy()
    np.testing.assert_allclose(_run(mod, params, [t.numpy() for t in (q, k, v, m)]), want, rtol=1e-5, atol=1e-6)
