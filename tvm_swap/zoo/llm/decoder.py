"""One mixed-precision training step of a decoder-only transformer as a DataflowGraph, from formulas.

Llama style: RMSNorm, rotary embeddings, grouped-query attention, SwiGLU MLP, no biases, tied or untied
embeddings. GPT style: LayerNorm, learned positions, fused QKV with biases, GELU MLP, tied embeddings.

Precision as in mixed-precision training (Megatron-LM, DeepSpeed): every weight has a bf16 copy (what the
kernels read), an fp32 master copy and fp32 AdamW moments; activations and gradients are bf16, norm
statistics and the attention log-sum-exp fp32. Each weight's AdamW update is one fused kernel that runs
as soon as its gradient is complete (reads grad, master, m, v; writes master, m, v and the new bf16 copy).

Kernels are what a fused GPU training step runs: one kernel per matmul (dW and dX separate), norms and
their backward, rope, and FlashAttention-style attention (saves only O and the log-sum-exp; the S x S
scores are never stored; backward recomputes them). Flops count 2 per multiply-add; causal attention
counts half the S x S work.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from .builder import GraphBuilder

ACT, F32 = "bfloat16", "float32"


@dataclass(frozen=True)
class DecoderConfig:
    style: str                 # "llama" | "gpt"
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    tied: bool
    description: str = ""


class _Step:
    """Emits the graph; keeps the weight registry (bf16 copy, master, m, v) and the AdamW updates."""

    def __init__(self, cfg: DecoderConfig, batch: int, seq: int, name: str):
        self.cfg, self.B, self.S, self.T = cfg, batch, seq, batch * seq
        self.b = GraphBuilder(name)
        self.weights: dict[str, tuple] = {}
        self.updates: dict[int, int] = {}
        self.outputs: list[int] = []

    # ---- weights and their optimizer ----
    def weight(self, name, shape) -> int:
        b = self.b
        w = b.tensor(name, shape, ACT, "param")
        master = b.tensor(name + ".master", shape, F32, "param")
        m = b.tensor(name + ".adam_m", shape, F32, "optimizer_state")
        v = b.tensor(name + ".adam_v", shape, F32, "optimizer_state")
        self.weights[name] = (w, master, m, v)
        return w

    def adamw(self, name, grad):
        w, master, m, v = self.weights[name]
        b = self.b
        n = b.tensors[w].shape
        outs = b.op("adamw", [grad, master, m, v, self.adam_step],
                    [(name + ".master_new", n, F32, "param"), (name + ".adam_m_new", n, F32, "optimizer_state"),
                     (name + ".adam_v_new", n, F32, "optimizer_state"), (name + "_new", n, ACT, "param")],
                    flops=14 * _numel(n))
        for new, old in zip(outs, (master, m, v, w)):
            self.updates[new] = old
        self.outputs += outs

    # ---- kernels ----
    def matmul(self, kernel, x, w, out_name, n_out, extra_inputs=()):
        """x (T, k) @ w -> (T, n_out)."""
        k = self.b.tensors[x].shape[-1]
        (y,) = self.b.op(kernel, [x, w, *extra_inputs], [(out_name, (self.T, n_out), ACT)],
                         flops=2 * self.T * k * n_out)
        return y

    def weight_grad(self, name, x, dy, bias=None):
        """dW = x^T dy (then AdamW); db = sum(dy) if the layer has a bias."""
        b = self.b
        shape = b.tensors[self.weights[name][0]].shape
        (dw,) = b.op("matmul_dw", [x, dy], [(name + ".grad", shape, ACT, "gradient")],
                     flops=2 * self.T * _numel(shape))
        self.adamw(name, dw)
        if bias is not None:
            bshape = b.tensors[self.weights[bias][0]].shape
            (db,) = b.op("bias_grad", [dy], [(bias + ".grad", bshape, ACT, "gradient")], flops=self.T * bshape[0])
            self.adamw(bias, db)

    def ew(self, kernel, inputs, out_name, like, flops_per=1, n_out=None, dtype=ACT):
        shape = self.b.tensors[like].shape if n_out is None else (self.T, n_out)
        (y,) = self.b.op(kernel, inputs, [(out_name, shape, dtype)], flops=flops_per * _numel(shape))
        return y


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _dims(st: "_Step"):
    """(builder, tokens, hidden, key/value width, llama?, batch, seq) of the step being emitted."""
    cfg = st.cfg
    return st.b, st.T, cfg.hidden, cfg.kv_heads * (cfg.hidden // cfg.heads), cfg.style == "llama", st.B, st.S


def _forward_layer(st: "_Step", w: dict, x: int, p: str, rope) -> tuple[int, dict]:
    """One decoder layer's forward ops from input x; returns (its output, what backward reads)."""
    cfg = st.cfg
    b, T, d, kvd, llama, batch, seq = _dims(st)
    s = {"x": x}
    if llama:
        s["h1"], s["r1"] = b.op("rms_norm", [x, w["ln1"]], [(p + "h1", (T, d), ACT), (p + "rstd1", (T,), F32)],
                                flops=4 * T * d)
        q = st.matmul("matmul", s["h1"], w["wq"], p + "q", d)
        k = st.matmul("matmul", s["h1"], w["wk"], p + "k", kvd)
        s["v"] = st.matmul("matmul", s["h1"], w["wv"], p + "v", kvd)
        s["q"], s["k"] = b.op("rope", [q, k, rope], [(p + "q_rot", (T, d), ACT), (p + "k_rot", (T, kvd), ACT)],
                              flops=6 * T * (d + kvd))
        attn_in = [s["q"], s["k"], s["v"]]
    else:
        s["h1"], s["r1"] = b.op("layer_norm", [x, w["ln1"], w["ln1_b"]],
                                [(p + "h1", (T, d), ACT), (p + "ln1_stats", (T, 2), F32)], flops=8 * T * d)
        s["qkv"] = st.matmul("matmul_bias", s["h1"], w["wqkv"], p + "qkv", 3 * d, [w["bqkv"]])
        attn_in = [s["qkv"]]
    s["o"], s["lse"] = b.op("flash_attention", attn_in,
                            [(p + "attn_out", (T, d), ACT), (p + "lse", (batch, cfg.heads, seq), F32)],
                            flops=2 * batch * seq * seq * d)          # 4 B S^2 d, halved by the causal mask
    a = st.matmul("matmul" if llama else "matmul_bias", s["o"], w["wo"], p + "attn_proj", d,
                  [] if llama else [w["bo"]])
    s["x2"] = st.ew("add", [x, a], p + "x_mid", x)
    if llama:
        s["h2"], s["r2"] = b.op("rms_norm", [s["x2"], w["ln2"]],
                                [(p + "h2", (T, d), ACT), (p + "rstd2", (T,), F32)], flops=4 * T * d)
        s["g"] = st.matmul("matmul", s["h2"], w["wg"], p + "gate", cfg.ffn)
        s["u"] = st.matmul("matmul", s["h2"], w["wu"], p + "up", cfg.ffn)
        s["act"] = st.ew("swiglu", [s["g"], s["u"]], p + "swiglu", s["g"], flops_per=5)
        m = st.matmul("matmul", s["act"], w["wd"], p + "down", d)
    else:
        s["h2"], s["r2"] = b.op("layer_norm", [s["x2"], w["ln2"], w["ln2_b"]],
                                [(p + "h2", (T, d), ACT), (p + "ln2_stats", (T, 2), F32)], flops=8 * T * d)
        s["f1"] = st.matmul("matmul_bias", s["h2"], w["w1"], p + "fc1", cfg.ffn, [w["b1"]])
        s["act"] = st.ew("gelu", [s["f1"]], p + "gelu", s["f1"], flops_per=8)
        m = st.matmul("matmul_bias", s["act"], w["w2"], p + "fc2", d, [w["b2"]])
    x = st.ew("add", [s["x2"], m], p + "x_out", s["x2"])
    return x, s


def _norm_backward(st: "_Step", norm_bwd: str, dy: int, x: int, stats: int, weight: int, name: str,
                   x_grad: str) -> int:
    """A norm's backward: the gradient of its input x (returned, named x_grad) and the AdamW update of its
    weight `name` (and, for a GPT layer norm, of its bias)."""
    b, T, d = st.b, st.T, st.cfg.hidden
    dxn, dw = b.op(norm_bwd, [dy, x, stats, weight],
                   [(x_grad, (T, d), ACT, "gradient"), (name + ".grad", (d,), ACT, "gradient")], flops=8 * T * d)
    st.adamw(name, dw)
    if st.cfg.style != "llama":
        (db,) = b.op("bias_grad", [dy], [(name + "_b.grad", (d,), ACT, "gradient")], flops=T * d)
        st.adamw(name + "_b", db)
    return dxn


def _backward_layer(st: "_Step", w: dict, s: dict, p: str, dx: int, rope, norm_bwd: str) -> int:
    """One decoder layer's backward ops (weight gradients and their AdamW updates); returns the gradient of
    the layer's input."""
    cfg = st.cfg
    b, T, d, kvd, llama, batch, seq = _dims(st)
    if llama:
        st.weight_grad(p + "wd", s["act"], dx)
        dact = st.matmul("matmul_dx", dx, w["wd"], p + "swiglu.grad", cfg.ffn)
        dg, du = b.op("swiglu_bwd", [dact, s["g"], s["u"]],
                      [(p + "gate.grad", (T, cfg.ffn), ACT, "gradient"),
                       (p + "up.grad", (T, cfg.ffn), ACT, "gradient")], flops=10 * T * cfg.ffn)
        st.weight_grad(p + "wg", s["h2"], dg)
        st.weight_grad(p + "wu", s["h2"], du)
        (dh2,) = b.op("matmul_dx", [dg, du, w["wg"], w["wu"]], [(p + "h2.grad", (T, d), ACT, "gradient")],
                      flops=4 * T * cfg.ffn * d)
    else:
        st.weight_grad(p + "w2", s["act"], dx, bias=p + "b2")
        dact = st.matmul("matmul_dx", dx, w["w2"], p + "gelu.grad", cfg.ffn)
        (df1,) = b.op("gelu_bwd", [dact, s["f1"]], [(p + "fc1.grad", (T, cfg.ffn), ACT, "gradient")],
                      flops=12 * T * cfg.ffn)
        st.weight_grad(p + "w1", s["h2"], df1, bias=p + "b1")
        dh2 = st.matmul("matmul_dx", df1, w["w1"], p + "h2.grad", d)
    dx2n = _norm_backward(st, norm_bwd, dh2, s["x2"], s["r2"], w["ln2"], p + "ln2", p + "x_mid.grad_norm")
    dx2 = st.ew("add", [dx, dx2n], p + "x_mid.grad", dx)
    st.weight_grad(p + "wo", s["o"], dx2, bias=None if llama else p + "bo")
    do = st.matmul("matmul_dx", dx2, w["wo"], p + "attn_out.grad", d)
    if llama:
        dq, dk, dv = b.op("flash_attention_bwd", [s["q"], s["k"], s["v"], s["o"], s["lse"], do],
                          [(p + "q_rot.grad", (T, d), ACT, "gradient"),
                           (p + "k_rot.grad", (T, kvd), ACT, "gradient"),
                           (p + "v.grad", (T, kvd), ACT, "gradient")], flops=5 * batch * seq * seq * d)
        dq, dk = b.op("rope_bwd", [dq, dk, rope], [(p + "q.grad", (T, d), ACT, "gradient"),
                                                   (p + "k.grad", (T, kvd), ACT, "gradient")],
                      flops=6 * T * (d + kvd))
        st.weight_grad(p + "wq", s["h1"], dq)
        st.weight_grad(p + "wk", s["h1"], dk)
        st.weight_grad(p + "wv", s["h1"], dv)
        (dh1,) = b.op("matmul_dx", [dq, dk, dv, w["wq"], w["wk"], w["wv"]],
                      [(p + "h1.grad", (T, d), ACT, "gradient")], flops=2 * T * d * (d + 2 * kvd))
    else:
        (dqkv,) = b.op("flash_attention_bwd", [s["qkv"], s["o"], s["lse"], do],
                       [(p + "qkv.grad", (T, 3 * d), ACT, "gradient")], flops=5 * batch * seq * seq * d)
        st.weight_grad(p + "wqkv", s["h1"], dqkv, bias=p + "bqkv")
        dh1 = st.matmul("matmul_dx", dqkv, w["wqkv"], p + "h1.grad", d)
    dxn = _norm_backward(st, norm_bwd, dh1, s["x"], s["r1"], w["ln1"], p + "ln1", p + "x.grad_norm")
    dx = st.ew("add", [dx2, dxn], p + "x.grad", dx2)
    return dx


def decoder_training_graph(cfg: DecoderConfig, batch: int, seq: int, name: str, layers: int | None = None):
    """The DataflowGraph of one training step of `cfg` (layers overrides cfg.layers)."""
    L = cfg.layers if layers is None else layers
    st = _Step(cfg, batch, seq, name)
    b, T, d, hd = st.b, st.T, cfg.hidden, cfg.hidden // cfg.heads
    kvd = cfg.kv_heads * hd
    llama = cfg.style == "llama"
    ids = b.tensor("input_ids", (batch, seq), "int64", "input")
    labels = b.tensor("labels", (batch, seq), "int64", "input")
    rope = b.tensor("rope_cos_sin", (seq, hd), F32, "input") if llama else None
    st.adam_step = b.tensor("adam_step", (1,), F32, "optimizer_state")

    # weights, in the order a state dict lists them
    emb = st.weight("embed", (cfg.vocab, d))
    pos = None if llama else st.weight("pos_embed", (seq, d))
    per_layer = []
    for i in range(L):
        p = f"l{i}."
        if llama:
            names = dict(ln1=(d,), wq=(d, d), wk=(d, kvd), wv=(d, kvd), wo=(d, d), ln2=(d,),
                         wg=(d, cfg.ffn), wu=(d, cfg.ffn), wd=(cfg.ffn, d))
        else:
            names = dict(ln1=(d,), ln1_b=(d,), wqkv=(d, 3 * d), bqkv=(3 * d,), wo=(d, d), bo=(d,), ln2=(d,),
                         ln2_b=(d,), w1=(d, cfg.ffn), b1=(cfg.ffn,), w2=(cfg.ffn, d), b2=(d,))
        per_layer.append({k: st.weight(p + k, s) for k, s in names.items()})
    lnf = st.weight("norm_f", (d,))
    lnf_b = None if llama else st.weight("norm_f_b", (d,))
    head = emb if cfg.tied else st.weight("lm_head", (cfg.vocab, d))

    (new_step,) = b.op("adam_step_inc", [st.adam_step], [("adam_step_new", (1,), F32, "optimizer_state")], flops=1)
    st.updates[new_step] = st.adam_step
    st.outputs.append(new_step)

    # ---- forward ----
    embed_in = [ids, emb] if llama else [ids, emb, pos]
    (x,) = b.op("embedding", embed_in, [("x0", (T, d), ACT)], flops=0 if llama else T * d)
    saved = []
    for i, w in enumerate(per_layer):
        x, s = _forward_layer(st, w, x, f"l{i}.", rope)
        saved.append(s)

    norm_in = [x, lnf] if llama else [x, lnf, lnf_b]
    hf, rf = b.op("rms_norm" if llama else "layer_norm", norm_in,
                  [("h_final", (T, d), ACT), ("final_stats", (T,) if llama else (T, 2), F32)], flops=6 * T * d)
    logits = st.matmul("matmul_lm_head", hf, head, "logits", cfg.vocab)
    loss, lse = b.op("cross_entropy", [logits, labels], [("loss", (), F32, "output"), ("loss_lse", (T,), F32)],
                     flops=4 * T * cfg.vocab)
    st.outputs.insert(0, loss)

    # ---- backward ----
    (dlogits,) = b.op("cross_entropy_bwd", [logits, lse, labels], [("logits.grad", (T, cfg.vocab), ACT, "gradient")],
                      flops=3 * T * cfg.vocab)
    (dhead,) = b.op("matmul_dw", [hf, dlogits], [("lm_head.grad" if not cfg.tied else "embed.grad_head",
                                                   (cfg.vocab, d), ACT, "gradient")], flops=2 * T * cfg.vocab * d)
    if not cfg.tied:
        st.adamw("lm_head", dhead)
    dhf = st.matmul("matmul_dx", dlogits, head, "h_final.grad", d)
    norm_bwd = "rms_norm_bwd" if llama else "layer_norm_bwd"
    dx = _norm_backward(st, norm_bwd, dhf, x, rf, lnf, "norm_f", "x_final.grad")

    for i in reversed(range(L)):
        dx = _backward_layer(st, per_layer[i], saved[i], f"l{i}.", dx, rope, norm_bwd)

    (demb,) = b.op("embedding_bwd", [dx, ids], [("embed.grad_lookup", (cfg.vocab, d), ACT, "gradient")], flops=T * d)
    if cfg.tied:
        demb = st.ew("add", [demb, dhead], "embed.grad", demb)
    st.adamw("embed", demb)
    if not llama:
        (dpos,) = b.op("pos_embed_bwd", [dx], [("pos_embed.grad", (seq, d), ACT, "gradient")], flops=T * d)
        st.adamw("pos_embed", dpos)
    meta = {"source": "tvm_swap.zoo.llm (formulas, no TVM)", "config": asdict(cfg), "batch": batch, "seq": seq,
            "layers": L, "precision": "bf16 weights/activations/grads, fp32 master weights and AdamW state"}
    return b.graph(st.outputs, st.updates, meta)
