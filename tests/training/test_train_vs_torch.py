"""Three training steps through tvm_swap.build at 50% of the no-swap peak equal the same steps in PyTorch (CPU)
within 1e-4 relative: the MXNet small CNN (Adam), an MLP (SGD with momentum) and a 2-layer BERT (Adam).

BatchNorm runs in training mode on both sides (batch statistics: torch's net.train(), DecomposeOpsForTraining
in tvm_swap.training). Dropout is absent (MXNet/torch models here have none, or p=0).
"""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tvm  # noqa: E402

import tvm_swap  # noqa: E402
from tvm_swap.frontends import from_mxnet, from_torch  # noqa: E402
from tvm_swap.training.step import train_step  # noqa: E402
from shared_fixtures import fixture_dir, needs_fixtures  # noqa: E402

FIXTURES = fixture_dir("mxnet")
FAST = dict(planner="swapadvisor", generations=2, workers=1, profile=False)
STEPS = 3
RTOL = 1e-4
nn, F = torch.nn, torch.nn.functional


def _tvm_losses(mod, params, inputs, labels, optimizer, lr, fuse_max_depth=None, **options):
    step, state = train_step(mod, params, optimizer=optimizer, lr=lr, **options)
    m = tvm_swap.build(step, target="llvm", mem_limit="50%", params=state, fuse_max_depth=fuse_max_depth, **FAST)
    losses = [float(m(*inputs, labels)[0]) for _ in range(STEPS)]
    stats = m.stats()
    print(f"limit {stats['mem_limit_bytes']} B, device peak {stats['device_peak_bytes']} B, per step "
          f"{stats['swap_out_count']} swap-outs / {stats['swap_in_count']} swap-ins")     # shown with pytest -s
    assert stats["device_peak_bytes"] <= stats["mem_limit_bytes"]
    assert stats["swap_out_count"] > 0 and stats["swap_in_count"] > 0, "nothing was swapped at 50%"
    m.close()
    return losses


def _torch_losses(net, inputs, labels, make_optimizer):
    net.train()
    opt = make_optimizer(net.parameters())
    y = torch.tensor(labels)
    out = []
    for _ in range(STEPS):
        opt.zero_grad()
        logits = net(*[torch.tensor(x) for x in inputs])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def _assert_close(got, want):
    rel = [abs(a - b) / abs(b) for a, b in zip(got, want)]
    print(f"losses tvm {got} torch {want} max rel {max(rel):.1e}")     # shown with pytest -s
    assert max(rel) < RTOL, f"tvm {got} vs torch {want} (relative error {max(rel):.2e})"
    assert got[-1] < got[0], "the loss did not go down"


# ---------------------------------------------------------------- MXNet small CNN
def _torch_small_cnn(params):
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16, eps=1e-5), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32, eps=1e-5), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(2048, 64), nn.ReLU(), nn.Linear(64, 10))
    p = {k: torch.tensor(v) for k, v in params.items()}
    with torch.no_grad():
        for i, name in [(0, "conv0"), (4, "conv1"), (9, "dense0"), (11, "dense1")]:
            net[i].weight.copy_(p[f"smallcnn_{name}_weight"])
            net[i].bias.copy_(p[f"smallcnn_{name}_bias"])
        for i, name in [(1, "batchnorm0"), (5, "batchnorm1")]:
            net[i].weight.copy_(p[f"smallcnn_{name}_gamma"])
            net[i].bias.copy_(p[f"smallcnn_{name}_beta"])
    return net


@needs_fixtures("mxnet")
def test_mxnet_small_cnn_adam():
    batch = 8     # batch 8 and fusion depth 2 make 50% of the no-swap peak feasible (no kernel needs more)
    mod, params = from_mxnet(f"{FIXTURES}/small_cnn-symbol.json", params=f"{FIXTURES}/small_cnn-0000.params",
                             shapes={"data": (batch, 3, 32, 32)})
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (batch, 3, 32, 32)).astype("float32")
    y = rng.integers(0, 10, batch).astype("int64")
    got = _tvm_losses(mod, params, [x], y, "adam", 1e-3, fuse_max_depth=2)
    want = _torch_losses(_torch_small_cnn(params), [x], y, lambda p: torch.optim.Adam(p, lr=1e-3))
    _assert_close(got, want)


# ---------------------------------------------------------------- MLP
class MLP(nn.Module):
    def __init__(self, width=128, depth=6, classes=10):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.out = nn.Linear(width, classes)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.out(x)


def test_mlp_momentum():
    torch.manual_seed(0)
    net = MLP()
    x = torch.randn(16, 128)
    y = np.random.default_rng(1).integers(0, 10, 16).astype("int64")
    mod, params = from_torch(copy.deepcopy(net), (x,))
    got = _tvm_losses(mod, params, [x.numpy()], y, "momentum", 0.05, momentum=0.9)
    want = _torch_losses(net, [x.numpy()], y, lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9))
    _assert_close(got, want)


@pytest.mark.slow
def test_mlp_adamw():
    """AdamW's decoupled weight decay (param *= 1 - lr * wd before the Adam step), as torch.optim.AdamW."""
    torch.manual_seed(0)
    net = MLP()
    x = torch.randn(16, 128)
    y = np.random.default_rng(2).integers(0, 10, 16).astype("int64")
    mod, params = from_torch(copy.deepcopy(net), (x,))
    got = _tvm_losses(mod, params, [x.numpy()], y, "adamw", 1e-2, weight_decay=0.1)
    want = _torch_losses(net, [x.numpy()], y, lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1))
    _assert_close(got, want)


# ---------------------------------------------------------------- BERT, 2 layers
class _EncoderLayer(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x, mask_bias):
        b, s, d = x.shape
        hd = d // self.heads

        def split(t):
            return t.reshape(b, s, self.heads, hd).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + mask_bias, dim=-1)
        x = self.ln1(x + self.o((att @ v).transpose(1, 2).reshape(b, s, d)))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class TinyBert(nn.Module):
    """BERT masked LM: token + position + segment embeddings, post-LN encoder layers with an attention mask,
    GELU, and a decoder tied to the token embedding (tied weights, gelu and layer_norm gradients)."""

    def __init__(self, vocab=64, d=32, layers=2, heads=2, ff=64, max_len=32):
        super().__init__()
        self.tok, self.pos, self.seg = nn.Embedding(vocab, d), nn.Embedding(max_len, d), nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList([_EncoderLayer(d, heads, ff) for _ in range(layers)])
        self.head, self.head_ln = nn.Linear(d, d), nn.LayerNorm(d, eps=1e-12)
        self.decoder = nn.Linear(d, vocab)
        self.decoder.weight = self.tok.weight

    def forward(self, ids, mask):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.ln(self.tok(ids) + self.pos(pos) + self.seg(torch.zeros_like(ids)))
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return self.decoder(self.head_ln(F.gelu(self.head(x))))


def _mlm_batch(vocab, batch=2, seq=16, pad_from=12):
    rng = np.random.default_rng(2)
    ids = rng.integers(1, vocab, (batch, seq)).astype("int64")
    mask = np.ones((batch, seq), dtype="int64")
    mask[1, pad_from:] = 0
    labels = rng.integers(0, vocab, (batch, seq)).astype("int64")
    labels[1, pad_from:] = -100           # ignored positions (TVM's own nll_loss gradient mis-scales these)
    return ids, mask, labels


def test_tiny_bert_adam():
    torch.manual_seed(0)
    net = TinyBert()
    ids, mask, labels = _mlm_batch(64)
    mod, params = from_torch(copy.deepcopy(net), (torch.tensor(ids), torch.tensor(mask)))
    assert "p_decoder_weight" not in params          # tied to p_tok_weight: one tensor, one gradient
    got = _tvm_losses(mod, params, [ids, mask], labels, "adam", 1e-3)
    want = _torch_losses(net, [ids, mask], labels, lambda p: torch.optim.Adam(p, lr=1e-3))
    _assert_close(got, want)


@pytest.mark.slow
def test_huggingface_bert_tiny_adam():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, attn_implementation="eager")

    class Logits(nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = transformers.BertForMaskedLM(cfg)

        def forward(self, ids, mask):
            return self.bert(input_ids=ids, attention_mask=mask).logits

    torch.manual_seed(0)
    net = Logits()
    ids, mask, labels = _mlm_batch(64)   # ids avoid the padding token 0 (torch masks its embedding gradient)
    mod, params = from_torch(copy.deepcopy(net), (torch.tensor(ids), torch.tensor(mask)))
    got = _tvm_losses(mod, params, [ids, mask], labels, "adam", 1e-3)
    want = _torch_losses(net, [ids, mask], labels, lambda p: torch.optim.Adam(p, lr=1e-3))
    _assert_close(got, want)
