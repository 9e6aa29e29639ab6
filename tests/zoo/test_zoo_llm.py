"""The generated LLM training steps (tvm_swap.zoo.llm): sizes against independent parameter/FLOP counts,
mixed-precision layout, spec parsing, and the > 10^5-op GPT-style graph."""
import pytest

from tvm_swap.errors import TvmSwapError
from tvm_swap.zoo import load_zoo
from tvm_swap.zoo.llm import LLM_MODELS, parse_llm_spec
from tvm_swap.zoo.stats import peak_bytes, persistent_bytes


def _llama_params(L, d, kv, f, V, tied):
    """Llama parameter count from the architecture: attention q/o (d x d), k/v (d x kv), SwiGLU 3 d f, 2 norms."""
    per_layer = 2 * d * d + 2 * d * kv + 3 * d * f + 2 * d
    return L * per_layer + V * d * (1 if tied else 2) + d


def _bf16_params(g) -> int:
    prod = g.producer()
    return sum(t.nbytes // 2 for t in g.tensors if t.kind == "param" and t.dtype == "bfloat16" and prod[t.id] < 0)


@pytest.mark.parametrize("name,published", [("llama-1b", 1.24e9), ("llama-7b", 6.74e9), ("llama-13b", 13.0e9)])
def test_llama_sizes_match_the_architecture(name, published):
    c = LLM_MODELS[name]
    g = load_zoo(f"zoo:{name}@batch=1,seq=512")
    n = _bf16_params(g)
    assert n == _llama_params(c.layers, c.hidden, c.kv_heads * c.hidden // c.heads, c.ffn, c.vocab, c.tied)
    assert abs(n - published) / published < 0.01
    # bf16 copy + fp32 master, fp32 Adam m and v (+ the 4-byte step counter)
    assert persistent_bytes(g, "param") == 6 * n
    assert persistent_bytes(g, "optimizer_state") == 8 * n + 4
    # every weight: master, m, v and the bf16 copy replaced each step; plus the step counter
    weights = sum(1 for t in g.tensors if t.kind == "param" and t.dtype == "bfloat16" and g.producer()[t.id] < 0)
    assert len(g.updates) == 4 * weights + 1
    # training flops ~ 6 N T (+ attention and elementwise), within 10%; an untied input embedding is a lookup
    T = 512
    n_matmul = n - (0 if c.tied else c.vocab * c.hidden)
    assert 1.0 <= g.total_flops() / (6 * n_matmul * T) < 1.1


def test_attention_is_quadratic_in_seq_and_nothing_else_is():
    small, big = (load_zoo(f"zoo:llama-7b@batch=1,seq={s},layers=2") for s in (1024, 2048))
    assert small.num_ops == big.num_ops
    lse = [t for t in big.tensors if t.name.endswith(".lse")]
    assert lse and all(t.shape == (1, 32, 2048) for t in lse)      # O(S) saved per head: no S x S scores
    fa = [op.flops for op in big.ops if op.kernel == "flash_attention"]
    fa_small = [op.flops for op in small.ops if op.kernel == "flash_attention"]
    assert fa[0] == 4 * fa_small[0]


def test_llama_7b_at_seq_4096_does_not_fit_an_80gb_gpu_without_swapping():
    g = load_zoo("zoo:llama-7b@batch=1,seq=4096")
    assert 90e9 < peak_bytes(g) < 141e9, peak_bytes(g)


def test_tied_embedding_gets_both_gradients():
    g = load_zoo("zoo:llama-1b@batch=1,seq=128,layers=1")
    add = [op for op in g.ops if any(g.tensors[t].name == "embed.grad" for t in op.outputs)]
    assert len(add) == 1
    assert {g.tensors[t].name for t in add[0].inputs} == {"embed.grad_lookup", "embed.grad_head"}
    assert not any(t.name.startswith("lm_head") for t in g.tensors)


def test_gpt_deep_ops_grow_linearly_past_1e5():
    a, b = (load_zoo(f"zoo:gpt-deep@layers={n}").num_ops for n in (24, 48))
    assert a < 1100
    per_layer = (b - a) // 24
    assert a + (2560 - 24) * per_layer > 100_000


@pytest.mark.slow            # generates and validates 107k ops (~5 CPU s)
def test_gpt_deep_passes_1e5_ops():
    g = load_zoo("zoo:gpt-deep")
    assert g.num_ops > 100_000


def test_spec_options_and_errors():
    assert parse_llm_spec("zoo:llama-7b@seq=2048,batch=3") == ("llama-7b", {"batch": 3, "seq": 2048, "layers": 32})
    assert parse_llm_spec("LLAMA_13B")[1]["layers"] == 40
    g = load_zoo("llama-7b@batch=2,seq=256,layers=3")
    assert g.name == "llama-7b@batch=2,seq=256,layers=3" and g.meta["layers"] == 3
    for bad in ["zoo:llama-7b@batch=0", "zoo:llama-7b@heads=4", "zoo:llama-7b@seq=x"]:
        with pytest.raises(TvmSwapError, match="batch=B,seq=S"):
            load_zoo(bad)
