"""Unrolled LSTM language models: RNN-8-8K (8 stacked layers) and BRNN-4-8K (4 bidirectional layers).

Written like MXNet's unrolled LSTMCell, the paper's workload: per time step and layer
    gates = x_t @ W_x + h_{t-1} @ W_h + b        (B, 4H)
    i, f, g, o = split(gates, 4);  c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g);  h_t = sigmoid(o) * tanh(c_t)
with h_0 = c_0 = 0 (the first step skips the recurrent terms). Tokens are time-major: row t*B + b is
sample b at step t. The words are embedded (vocab x E), the top layer's states of all steps are
concatenated and projected to the vocabulary, and the loss is the mean softmax cross entropy.

Bidirectional layers feed the forward and backward states to the next layer (and the decoder) as two
inputs with their own weight blocks, x_fw @ W_a + x_bw @ W_b, which equals concat(x_fw, x_bw) @ W but
keeps every weight H x 4H: a 2H x 4H block would make its optimizer update alone (weight, gradient,
state in; weight, state out) about 11 GB, close to the 16 GB GPU the planner is measured on.
"""
from __future__ import annotations

from tvm.relax import op as R

from .net import Net, shape_of


def _cell(net: Net, xs, h, c, wxs, wh, b):
    gates = None
    for x, wx in zip(xs, wxs):
        p = net.emit(R.matmul(x, wx))
        gates = p if gates is None else net.emit(R.add(gates, p))
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


def _layer(net: Net, streams: list, hidden: int, name: str, reverse: bool = False) -> list:
    """One LSTM direction over the step inputs (one list per input stream, e.g. [fw states, bw states]);
    returns the states h_t in time order."""
    wxs = [net.param(f"{name}.wx{k}", (shape_of(xs[0])[1], 4 * hidden)) for k, xs in enumerate(streams)]
    wh = net.param(f"{name}.wh", (hidden, 4 * hidden))
    b = net.param(f"{name}.bias", (4 * hidden,))
    steps = len(streams[0])
    hs: list = [None] * steps
    h = c = None
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        h, c = _cell(net, [xs[t] for xs in streams], h, c, wxs, wh, b)
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
            streams = [[net.emit(parts[t]) for t in range(seq_len)]]
            for layer in range(layers):
                if bidirectional:
                    streams = [_layer(net, streams, hidden, f"l{layer}.fw"),
                               _layer(net, streams, hidden, f"l{layer}.bw", reverse=True)]
                else:
                    streams = [_layer(net, streams, hidden, f"l{layer}")]
            logits = None
            for k, hs in enumerate(streams):
                top = net.emit(R.concat(hs, axis=0))                     # (T*B, H)
                part = net.emit(R.matmul(top, net.param(f"decoder.weight{k}", (hidden, vocab))))
                logits = part if logits is None else net.emit(R.add(logits, part))
            logits = net.emit(R.add(logits, net.param("decoder.bias", (vocab,))))
            return net.softmax_cross_entropy(logits, labels)

        return build_loss

    return build
