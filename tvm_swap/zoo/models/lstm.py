"""Unrolled LSTM language models: RNN-8-8K (8 stacked layers) and BRNN-4-8K (4 bidirectional layers).

Written like MXNet's unrolled LSTMCell, the paper's workload: per time step and layer
    gates = x_t @ W_x + h_{t-1} @ W_h + b        (B, 4H)
    i, f, g, o = split(gates, 4);  c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g);  h_t = sigmoid(o) * tanh(c_t)
with h_0 = c_0 = 0 (the first step skips the recurrent terms). Tokens are time-major: row t*B + b is
sample b at step t. The words are embedded (vocab x H), the top layer's states of all steps are
concatenated and projected to the vocabulary, and the loss is the mean softmax cross entropy.
"""
from __future__ import annotations

from tvm.relax import op as R

from .net import Net, shape_of


def _cell(net: Net, x, h, c, wx, wh, b):
    gates = net.emit(R.matmul(x, wx))
    if h is not None:
        gates = net.emit(R.add(gates, net.emit(R.matmul(h, wh))))
    gates = net.emit(R.add(gates, b))
    parts = net.emit(R.split(gates, 4, axis=1))
    i, f, g, o = (net.emit(parts[k]) for k in range(4))
    i, f, o = (net.emit(R.sigmoid(v)) for v in (i, f, o))
    g = net.emit(R.tanh(g))
    ig = net.emit(R.multiply(i, g))
    c = ig if c is None else net.emit(R.add(net.emit(R.multiply(f, c)), ig))
    h = net.emit(R.multiply(o, net.emit(R.tanh(c))))
    return h, c


def _layer(net: Net, xs: list, hidden: int, name: str, reverse: bool = False) -> list:
    """One LSTM direction over the step inputs xs; returns the states h_t in time order."""
    in_dim = shape_of(xs[0])[1]
    wx = net.param(f"{name}.wx", (in_dim, 4 * hidden))
    wh = net.param(f"{name}.wh", (hidden, 4 * hidden))
    b = net.param(f"{name}.bias", (4 * hidden,))
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    hs: list = [None] * len(xs)
    h = c = None
    for t in order:
        h, c = _cell(net, xs[t], h, c, wx, wh, b)
        hs[t] = h
    return hs


def lstm_lm(layers: int, hidden: int, seq_len: int, vocab: int, embed: int, bidirectional: bool):
    """build_loss(net) for an unrolled (bi)LSTM language model at batch B (closure over B)."""

    def build(batch: int):
        def build_loss(net: Net):
            tokens = net.input("tokens", (seq_len * batch,), "int64")
            labels = net.input("labels", (seq_len * batch,), "int64")
            emb = net.param("embed.weight", (vocab, embed))
            x = net.emit(R.take(emb, tokens, axis=0))                    # (T*B, E)
            parts = net.emit(R.split(x, seq_len, axis=0))
            xs = [net.emit(parts[t]) for t in range(seq_len)]
            for layer in range(layers):
                if bidirectional:
                    fw = _layer(net, xs, hidden, f"l{layer}.fw")
                    bw = _layer(net, xs, hidden, f"l{layer}.bw", reverse=True)
                    xs = [net.emit(R.concat([a, b], axis=1)) for a, b in zip(fw, bw)]
                else:
                    xs = _layer(net, xs, hidden, f"l{layer}")
            top = net.emit(R.concat(xs, axis=0))                         # (T*B, H or 2H)
            logits = net.dense(top, vocab, "decoder")
            return net.softmax_cross_entropy(logits, labels)

        return build_loss

    return build
