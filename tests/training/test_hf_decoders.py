"""Decoder LLMs from `transformers` (tiny random configs) train through from_torch -> train_step -> build.

Their forwards build position ids and the causal mask with integer ops that have no gradient (arange,
bitwise_and, index_tensor, ...); train_step differentiates only what depends on a trainable parameter
(tvm_swap.training.grad_scope). Each model runs 3 chained Adam steps at 50% of the no-swap peak and must be bitwise
equal to the unlimited build, step by step, and match torch.optim.Adam's losses and parameters
(to 1% of one step: Adam amplifies float noise in gradients near eps).
"""
from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import tvm  # noqa: E402

import tvm_swap  # noqa: E402
from swap_models import Unlimited, bitwise_equal, flat  # noqa: E402
from tvm_swap.frontends import from_torch  # noqa: E402
from tvm_swap.training import train_step  # noqa: E402

FAST = dict(planner="swapadvisor", generations=2, workers=1, profile=False)
STEPS, LR, VOCAB, BATCH, SEQ = 3, 1e-3, 64, 2, 16
nn, F = torch.nn, torch.nn.functional


def _llama():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=64, tie_word_embeddings=False, attn_implementation="eager"))


def _qwen2_gqa():
    """Qwen2/Mistral-style: grouped-query attention (4 query heads share 2 KV heads), qkv biases, tied embeddings."""
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True, attn_implementation="eager"))


def _gpt2():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, attn_implementation="eager"))


MODELS = {"llama": _llama, "qwen2-gqa": _qwen2_gqa, "gpt2": _gpt2}


class Logits(nn.Module):
    """ids, mask -> logits; use_cache=False (an empty KV cache is concatenated otherwise)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, ids, mask):
        return self.lm(input_ids=ids, attention_mask=mask, use_cache=False).logits


def _batch():
    rng = np.random.default_rng(0)
    ids = rng.integers(1, VOCAB, (BATCH, SEQ)).astype("int64")
    labels = np.concatenate([ids[:, 1:], np.full((BATCH, 1), -100)], axis=1).astype("int64")   # next token
    return ids, np.ones_like(ids), labels


def _torch_steps(net, ids, mask, labels):
    """Losses and the final {torch param name: array} of STEPS torch.optim.Adam steps."""
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        logits = net(torch.tensor(ids), torch.tensor(mask))
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), torch.tensor(labels).reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().numpy() for k, v in net.named_parameters()}


def _op_names(func) -> set:
    from tvm import relax

    names = set()
    relax.analysis.post_order_visit(func.body, lambda e: names.add(e.op.name) if isinstance(e, relax.Call)
                                    and isinstance(e.op, tvm.ir.Op) else None)
    return names


@pytest.mark.slow          # torch.export of a HF model: ~17 CPU s
def test_llama_gradient_skips_mask_and_position_ids():
    """The integer ops of the mask and position ids end up in the prelude, never in the differentiated core."""
    from tvm_swap.training.grad_scope import split_by_dependence
    from tvm_swap.training.step import _loss_module

    torch.manual_seed(0)
    net = Logits(_llama())
    ids, mask, _ = _batch()
    mod, params = from_torch(net, (torch.tensor(ids), torch.tensor(mask)))
    loss = _loss_module("main", mod["main"], 2, "cross_entropy", 0, None, None)["loss"]
    weights = [p for p in loss.params[3:] if p.name.startswith("p_")]
    split = split_by_dependence(loss, weights)
    integer_ops = {"relax.arange", "relax.bitwise_and", "relax.index_tensor"}
    assert integer_ops <= _op_names(split.prelude)
    assert not integer_ops & _op_names(split.core)
    assert "relax.matmul" in _op_names(split.core) and "relax.matmul" not in _op_names(split.prelude)
    # the whole step: every param gets an update, and the step is one flat function again
    step, state = train_step(mod, params, optimizer="adam", lr=LR)
    assert list(step.functions.keys())[0].name_hint == "main" and len(step.functions) == 1
    assert len(step["main"].attrs["tvm_swap.updates"]) == 3 * len(params) + 2     # params, m, v, beta powers


@pytest.mark.slow          # two relax.builds of a training step: ~45 s each on a loaded 2-core machine
@pytest.mark.parametrize("name", list(MODELS))
def test_decoder_trains_bitwise_under_limit_and_matches_torch(name):
    torch.manual_seed(0)
    net = Logits(MODELS[name]())
    ids, mask, labels = _batch()
    mod, params = from_torch(copy.deepcopy(net), (torch.tensor(ids), torch.tensor(mask)))
    step, state = train_step(mod, params, optimizer="adam", lr=LR)
    func = step["main"]
    n_in = int(func.attrs["num_input"])
    updates = {int(o): int(p) - n_in for o, p in func.attrs["tvm_swap.updates"]}   # output -> param slot

    ref = Unlimited(step)
    m = tvm_swap.build(step, mem_limit="50%", params=state, **FAST)
    inputs, values = [ids, mask, labels], list(state.values())
    losses = []
    for k in range(STEPS):
        want = ref(inputs, values)
        got = flat(m(*inputs))
        assert bitwise_equal(got, want), f"{name}: step {k} differs from the unlimited build"
        losses.append(float(got[0]))
        for o, slot in updates.items():
            values[slot] = want[o]
    stats = m.stats()
    assert stats["device_peak_bytes"] <= stats["mem_limit_bytes"]
    assert stats["swap_out_count"] > 0, "nothing was swapped at 50%"
    m.close()

    want_losses, torch_params = _torch_steps(net, ids, mask, labels)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    assert losses[-1] < losses[0]
    by_name = {"p_" + k.replace(".", "_"): v for k, v in torch_params.items()}
    compared = 0
    for pname, value in zip(state, values):
        if pname in by_name:
            np.testing.assert_allclose(value, by_name[pname], rtol=1e-4, atol=1e-2 * LR, err_msg=pname)
            compared += 1
    assert compared == len(torch_params), f"compared {compared} of {len(torch_params)} params: {sorted(by_name)}"
