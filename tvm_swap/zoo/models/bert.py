"""BERT-large pre-training (masked-LM head) at a fixed sequence length.

24 layers, hidden 1024, 16 heads of 64, FFN 4096, vocab 30522, 512 positions, 2 token types
(Devlin et al. 2019). Post-LN encoder; separate Q, K, V projections; exact GELU (its gradient is
registered by `register_gelu_gradient`, TVM 0.27 has none); no dropout and no attention mask (all
positions are real tokens). The MLM head (dense + GELU + LN, decoder tied to the word embeddings)
scores every position, like HuggingFace's BertForMaskedLM with labels everywhere.
"""
from __future__ import annotations

from tvm.relax import op as R

from .net import Net, register_gelu_gradient


def bert(layers: int = 24, hidden: int = 1024, heads: int = 16, ffn: int = 4096, seq_len: int = 512,
         vocab: int = 30522, type_vocab: int = 2):
    head_dim = hidden // heads
    register_gelu_gradient()

    def build(batch: int):
        tokens = batch * seq_len

        def heads_first(x):
            """(B*S, H) -> (B, heads, S, head_dim)"""
            y = net_.emit(R.reshape(x, (batch, seq_len, heads, head_dim)))
            return net_.emit(R.permute_dims(y, [0, 2, 1, 3]))

        def build_loss(net: Net):
            nonlocal net_
            net_ = net
            ids = net.input("input_ids", (tokens,), "int64")
            types = net.input("token_type_ids", (tokens,), "int64")
            labels = net.input("labels", (tokens,), "int64")
            word = net.param("embeddings.word", (vocab, hidden))
            pos = net.param("embeddings.position", (seq_len, hidden))
            typ = net.param("embeddings.token_type", (type_vocab, hidden))
            x = net.emit(R.add(R.take(word, ids, axis=0), R.take(typ, types, axis=0)))
            x = net.emit(R.reshape(R.add(R.reshape(x, (batch, seq_len, hidden)), pos), (tokens, hidden)))
            x = net.layer_norm(x, "embeddings.ln")
            for i in range(layers):
                n = f"layer{i}"
                q = heads_first(net.dense(x, hidden, f"{n}.query"))
                k = heads_first(net.dense(x, hidden, f"{n}.key"))
                v = heads_first(net.dense(x, hidden, f"{n}.value"))
                s = net.emit(R.matmul(q, R.permute_dims(k, [0, 1, 3, 2])))
                p = net.emit(R.nn.softmax(R.multiply(s, net.const(head_dim ** -0.5)), axis=-1))
                ctx = net.emit(R.permute_dims(R.matmul(p, v), [0, 2, 1, 3]))
                ctx = net.emit(R.reshape(ctx, (tokens, hidden)))
                x = net.layer_norm(net.emit(R.add(net.dense(ctx, hidden, f"{n}.attn_out"), x)), f"{n}.ln1")
                h = net.emit(R.nn.gelu(net.dense(x, ffn, f"{n}.ffn_in")))
                x = net.layer_norm(net.emit(R.add(net.dense(h, hidden, f"{n}.ffn_out"), x)), f"{n}.ln2")
            h = net.emit(R.nn.gelu(net.dense(x, hidden, "mlm.transform")))
            h = net.layer_norm(h, "mlm.ln")
            logits = net.emit(R.add(R.matmul(h, R.permute_dims(word, [1, 0])), net.param("mlm.bias", (vocab,))))
            return net.softmax_cross_entropy(logits, labels)

        net_ = None
        return build_loss

    return build
