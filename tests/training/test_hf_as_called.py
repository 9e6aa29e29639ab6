"""transformers models called as their documentation calls them: `model(input_ids)` with no attention_mask
(the causal mask and transformers' packed-sequence check are then built from shapes with bool/integer ops:
relay_passes.bool_kernels, tvm_swap.frontends.torch_converters), and `model(input_ids=..., labels=...)`,
trained on the model's own loss (train_step(loss="output")). Every step at 50% of the no-swap peak is
bitwise equal to the unlimited build; losses match torch's optimizer on the same model."""
from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import tvm  # noqa: E402  (a hard dependency: a broken install fails)

import tvm_swap  # noqa: E402
from swap_models import Unlimited, bitwise_equal, flat  # noqa: E402
from tvm_swap.frontends import from_torch  # noqa: E402
from tvm_swap.training import train_step  # noqa: E402

FAST = dict(planner="swapadvisor", generations=2, workers=1, profile=False)
VOCAB, BATCH, SEQ = 64, 2, 16
nn, F = torch.nn, torch.nn.functional


class Logits(nn.Module):
    """The issue's call: no attention_mask."""

    def __init__(self, lm):
        super().__init__()
        self.m = lm

    def forward(self, ids):
        return self.m(input_ids=ids, use_cache=False).logits


class OwnLoss(nn.Module):
    """model(input_ids=..., labels=...).loss: the model shifts the labels and computes its loss itself."""

    def __init__(self, lm, cache=True):
        super().__init__()
        self.m, self.cache = lm, cache

    def forward(self, ids, labels):
        kw = dict(use_cache=False) if self.cache else {}
        return self.m(input_ids=ids, labels=labels, **kw).loss


def _llama(layers=2):
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=64))


def _gpt2():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64))


def _bert():
    return transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=64))


def _ids(seed=0):
    return np.random.default_rng(seed).integers(1, VOCAB, (BATCH, SEQ)).astype("int64")


def _run_steps(step, state, inputs, steps):
    """(losses, bitwise-equal flags, stats) of `steps` chained steps at 50% against the unlimited build."""
    func = step["main"]
    n_in = int(func.attrs["num_input"])
    updates = {int(o): int(p) - n_in for o, p in func.attrs["tvm_swap.updates"]}
    ref = Unlimited(step)
    m = tvm_swap.build(step, target="llvm", mem_limit="50%", params=state, **FAST)
    values, losses = list(state.values()), []
    for k in range(steps):
        want = ref(inputs, values)
        got = flat(m(*inputs))
        assert bitwise_equal(got, want), f"step {k} differs from the unlimited build"
        losses.append(float(got[0]))
        for o, slot in updates.items():
            values[slot] = want[o]
    stats = m.stats()
    m.close()
    return losses, stats


@pytest.mark.parametrize("layers", [1, 2])      # ~15 s each on an idle 2-core machine (60 s when loaded)
def test_llama_without_attention_mask_trains_at_half_the_memory(layers):
    """The issue's case: `self.m(input_ids=ids, use_cache=False).logits` -> cross_entropy + adam at 50%.
    On main this failed with KernelCodegenError on 'cumsum' and a bool mask kernel."""
    torch.manual_seed(0)
    net = Logits(_llama(layers))
    ids = _ids()
    labels = _ids(1)
    mod, params = from_torch(copy.deepcopy(net), (torch.tensor(ids),))
    step, state = train_step(mod, params, loss="cross_entropy", optimizer="adam", lr=1e-2)
    losses, stats = _run_steps(step, state, [ids, labels], 2)
    assert stats["device_peak_bytes"] <= stats["mem_limit_bytes"] and stats["swap_out_count"] > 0
    net.eval()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    want = []
    for _ in range(2):
        opt.zero_grad()
        loss = F.cross_entropy(net(torch.tensor(ids)).reshape(-1, VOCAB), torch.tensor(labels).reshape(-1))
        loss.backward()
        opt.step()
        want.append(loss.item())
    np.testing.assert_allclose(losses, want, rtol=1e-5)


OWN = {"llama": lambda: OwnLoss(_llama()), "gpt2": lambda: OwnLoss(_gpt2()),
       "bert-mlm": lambda: OwnLoss(_bert(), cache=False)}


@pytest.mark.parametrize("name", list(OWN))     # ~15 s each on an idle 2-core machine
def test_model_trains_on_its_own_loss_like_adamw(name):
    torch.manual_seed(0)
    net = OWN[name]()
    ids = _ids()
    labels = ids.copy()
    if name == "bert-mlm":
        labels[:, ::3] = -100                 # only some positions are predicted
    mod, params = from_torch(copy.deepcopy(net), (torch.tensor(ids), torch.tensor(labels)))
    step, state = train_step(mod, params, loss="output", optimizer="adamw", lr=1e-3)
    assert int(step["main"].attrs["num_input"]) == 2          # ids, labels: the step adds no labels input
    losses, stats = _run_steps(step, state, [ids, labels], 3)
    assert stats["device_peak_bytes"] <= stats["mem_limit_bytes"]
    net.eval()                                # dropout off, as the export
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    want = []
    for _ in range(3):
        opt.zero_grad()
        loss = net(torch.tensor(ids), torch.tensor(labels))
        loss.backward()
        opt.step()
        want.append(loss.item())
    np.testing.assert_allclose(losses, want, rtol=1e-4)
    assert losses[-1] < losses[0]


def test_own_loss_must_be_a_scalar():
    from tvm_swap.errors import TvmSwapError

    torch.manual_seed(0)
    mod, params = from_torch(nn.Linear(4, 3), (torch.randn(2, 4),))
    with pytest.raises(TvmSwapError, match=r'loss="output" needs the model to return its loss as a float scalar'):
        train_step(mod, params, loss="output")
