"""The model matrix's architectures (scripts/model_matrix.py, tests/training/test_model_matrix.py): tiny random
configs of real models, called the way their users call them. Needs torch (and transformers for the HF rows).

    case = CASES["llama"]()      # Case: the torch module, its example inputs, how it trains

- Hugging Face `transformers` models from configs (random weights, no downloads), with and without an
  attention_mask, and with `labels=` so the model computes its own loss (train_step(loss="output")).
- CNNs as torchvision defines them (ResNet's BasicBlock, MobileNetV3's inverted residual with
  squeeze-excitation and hardswish, EfficientNet's MBConv with SiLU, ConvNeXt's 7x7 depthwise block with
  LayerNorm and layer scale), written in torch.nn: PyPI's torchvision does not install beside the project's
  CPU torch.
- An LSTM language model from torch.nn.
The ONNX rows export some of these with torch.onnx.export (scripts/model_matrix.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

VOCAB, BATCH, SEQ, IMAGE, CLASSES = 64, 2, 8, 32, 10


@dataclass
class Case:
    family: str                 # "hf", "cnn", "rnn"
    call: str                   # how the model is called, as its users write it
    module: object              # torch.nn.Module: forward(*inputs) -> prediction or the model's own loss
    inputs: list                # numpy arrays, in forward's order
    loss: str                   # train_step loss: "cross_entropy" on the prediction, or "output" (own loss)
    labels: np.ndarray | None = None     # for "cross_entropy": class ids shaped like the prediction minus its last dim
    notes: list = field(default_factory=list)


def _torch():
    import torch

    return torch


def _ids(seed=0, shape=(BATCH, SEQ)):
    return np.random.default_rng(seed).integers(1, VOCAB, shape).astype("int64")


# ---------------------------------------------------------------- Hugging Face
def _hf_call(lm, with_mask: bool, own_loss: bool, cache: bool = True):
    """A module that calls `lm` as its documentation does: input_ids [, attention_mask] [, labels]."""
    torch = _torch()

    class Call(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = lm

        def forward(self, *args):
            kw = {"input_ids": args[0]}
            rest = list(args[1:])
            if with_mask:
                kw["attention_mask"] = rest.pop(0)
            if own_loss:
                kw["labels"] = rest.pop(0)
            if cache:
                kw["use_cache"] = False
            out = self.m(**kw)
            return out.loss if own_loss else out.logits

    return Call()


def _hf_case(lm, with_mask: bool, own_loss: bool, cache: bool = True, labels=None, pad: bool = False) -> Case:
    ids = _ids()
    inputs = [ids]
    call = "model(input_ids=ids"
    if with_mask:
        mask = np.ones_like(ids)
        if pad:
            mask[1, -2:] = 0                # padding at the end of the second sequence
        inputs.append(mask)
        call += ", attention_mask=mask"
    if own_loss:
        lab = ids.copy() if labels is None else labels
        inputs.append(lab)
        call += ", labels=labels).loss"
    else:
        call += ").logits"
    return Case("hf", call, _hf_call(lm, with_mask, own_loss, cache), inputs,
                "output" if own_loss else "cross_entropy", None if own_loss else _ids(1))


def _tiny(cfg_cls, **kw):
    return cfg_cls(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                   num_attention_heads=4, max_position_embeddings=64, **kw)


def llama():
    import transformers as t

    cfg = _tiny(t.LlamaConfig, num_key_value_heads=4)
    cfg.num_hidden_layers = 2
    return _hf_case(t.LlamaForCausalLM(cfg), with_mask=False, own_loss=False)


def qwen2():
    import transformers as t

    return _hf_case(t.Qwen2ForCausalLM(_tiny(t.Qwen2Config, num_key_value_heads=2)), with_mask=True, own_loss=False)


def mistral():
    import transformers as t

    return _hf_case(t.MistralForCausalLM(_tiny(t.MistralConfig, num_key_value_heads=2)), with_mask=False,
                    own_loss=True)


def phi3():
    import transformers as t

    cfg = _tiny(t.Phi3Config, num_key_value_heads=4, pad_token_id=0)
    return _hf_case(t.Phi3ForCausalLM(cfg), with_mask=True, own_loss=True)


def gemma():
    import transformers as t

    cfg = _tiny(t.GemmaConfig, num_key_value_heads=1, head_dim=8)
    return _hf_case(t.GemmaForCausalLM(cfg), with_mask=False, own_loss=False)


def gpt2():
    import transformers as t

    cfg = t.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=2, n_positions=64)
    return _hf_case(t.GPT2LMHeadModel(cfg), with_mask=False, own_loss=True)


def bert_mlm(own_loss: bool = True):
    """BertForMaskedLM with a padded attention_mask; own_loss=False returns the logits (the ONNX row: an
    exported loss would be SoftmaxCrossEntropyLoss, which TVM's ONNX frontend does not convert)."""
    import transformers as t

    cfg = t.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=64, max_position_embeddings=64)
    labels = _ids()
    labels[:, ::2] = -100                   # only the masked positions are predicted
    return _hf_case(t.BertForMaskedLM(cfg), with_mask=True, own_loss=own_loss, cache=False,
                    labels=labels if own_loss else None, pad=True)


def t5():
    import transformers as t

    torch = _torch()
    cfg = t.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1,
                     num_heads=4, decoder_start_token_id=0, pad_token_id=0)
    lm = t.T5ForConditionalGeneration(cfg)

    class Call(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = lm

        def forward(self, ids, mask, labels):
            return self.m(input_ids=ids, attention_mask=mask, labels=labels, use_cache=False).loss

    ids = _ids()
    mask = np.ones_like(ids)
    return Case("hf", "model(input_ids=ids, attention_mask=mask, labels=labels).loss", Call(),
                [ids, mask, _ids(2, (BATCH, SEQ // 2))], "output")


def vit(own_loss: bool = True):
    """ViTForImageClassification; own_loss=False returns the logits (the ONNX row)."""
    import transformers as t

    torch = _torch()
    cfg = t.ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=64, num_labels=CLASSES)
    lm = t.ViTForImageClassification(cfg)

    class Call(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = lm

        def forward(self, pixels, *labels):
            out = self.m(pixel_values=pixels, labels=labels[0] if labels else None)
            return out.loss if labels else out.logits

    rng = np.random.default_rng(0)
    pixels = rng.standard_normal((BATCH, 3, 16, 16)).astype("float32")
    labels = rng.integers(0, CLASSES, BATCH).astype("int64")
    if not own_loss:
        return Case("hf", "model(pixel_values=x).logits", Call(), [pixels], "cross_entropy", labels)
    return Case("hf", "model(pixel_values=x, labels=labels).loss", Call(), [pixels, labels], "output")


# ---------------------------------------------------------------- CNNs (torchvision's blocks, in torch.nn)
def _cnn_case(net, call):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 3, IMAGE, IMAGE)).astype("float32")
    return Case("cnn", call, net, [x], "cross_entropy", rng.integers(0, CLASSES, BATCH).astype("int64"))


def _conv_bn(cin, cout, k, stride=1, groups=1, act=None):
    nn = _torch().nn
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, *([act()] if act is not None else []))


def resnet():
    """torchvision's resnet18 layout (7x7/2 stem, max-pool, BasicBlocks with 1x1 downsample), narrow."""
    nn = _torch().nn

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(_conv_bn(cin, cout, 3, stride, act=nn.ReLU), _conv_bn(cout, cout, 3))
            self.down = _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.body(x) + self.down(x))

    net = nn.Sequential(_conv_bn(3, 8, 7, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1), BasicBlock(8, 8, 1),
                        BasicBlock(8, 16, 2), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(64, CLASSES))
    return _cnn_case(net, "model(x) (torchvision resnet18 blocks)")


class _SqueezeExcite:
    @staticmethod
    def make(c, squeeze, act, gate):
        nn = _torch().nn

        class SE(nn.Module):
            def __init__(self):
                super().__init__()
                self.pool = nn.AdaptiveAvgPool2d(1)
                self.fc1, self.fc2 = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)
                self.act, self.gate = act(), gate()

            def forward(self, x):
                return x * self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))
        return SE()


def mobilenet_v3():
    """torchvision's MobileNetV3 InvertedResidual: 1x1 expand, depthwise, squeeze-excite (hardsigmoid),
    1x1 project; hardswish; the classifier's dropout left out (training compares against torch)."""
    nn = _torch().nn

    class InvertedResidual(nn.Module):
        def __init__(self, cin, exp, cout, k, stride, se, act):
            super().__init__()
            layers = [_conv_bn(cin, exp, 1, act=act), _conv_bn(exp, exp, k, stride, groups=exp, act=act)]
            if se:
                layers.append(_SqueezeExcite.make(exp, max(8, exp // 4), nn.ReLU, nn.Hardsigmoid))
            layers.append(_conv_bn(exp, cout, 1))
            self.block = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.block(x)
            return x + y if self.residual else y

    net = nn.Sequential(_conv_bn(3, 8, 3, 2, act=nn.Hardswish), InvertedResidual(8, 8, 8, 3, 2, True, nn.ReLU),
                        InvertedResidual(8, 24, 16, 3, 2, False, nn.ReLU),
                        InvertedResidual(16, 48, 16, 5, 1, True, nn.Hardswish),
                        _conv_bn(16, 48, 1, act=nn.Hardswish), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(48, 32), nn.Hardswish(), nn.Linear(32, CLASSES))
    return _cnn_case(net, "model(x) (torchvision mobilenet_v3 blocks)")


def efficientnet():
    """torchvision's EfficientNet MBConv: 1x1 expand, depthwise, squeeze-excite (SiLU, sigmoid), 1x1 project;
    stochastic depth is the identity in this comparison (it is random in training)."""
    nn = _torch().nn

    class MBConv(nn.Module):
        def __init__(self, cin, ratio, cout, k, stride):
            super().__init__()
            exp = cin * ratio
            layers = [_conv_bn(cin, exp, 1, act=nn.SiLU)] if ratio != 1 else []
            layers += [_conv_bn(exp, exp, k, stride, groups=exp, act=nn.SiLU),
                       _SqueezeExcite.make(exp, max(1, cin // 4), nn.SiLU, nn.Sigmoid), _conv_bn(exp, cout, 1)]
            self.block = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.block(x)
            return x + y if self.residual else y

    net = nn.Sequential(_conv_bn(3, 8, 3, 2, act=nn.SiLU), MBConv(8, 1, 8, 3, 1), MBConv(8, 6, 16, 3, 2),
                        MBConv(16, 6, 16, 3, 1), MBConv(16, 6, 24, 5, 2), MBConv(24, 6, 24, 5, 1),
                        _conv_bn(24, 128, 1, act=nn.SiLU), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(128, CLASSES))
    return _cnn_case(net, "model(x) (torchvision efficientnet_b0 blocks)")


def convnext():
    """torchvision's ConvNeXt: 4x4/4 patchify stem + LayerNorm2d, blocks of 7x7 depthwise, LayerNorm over
    channels (channels last), 4x MLP with GELU, layer scale; a 2x2/2 downsampling layer between stages."""
    torch = _torch()
    nn = torch.nn

    class LayerNorm2d(nn.LayerNorm):
        def forward(self, x):
            return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    class CNBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
            self.norm = nn.LayerNorm(c, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(c, 4 * c), nn.GELU(), nn.Linear(4 * c, c))
            self.layer_scale = nn.Parameter(torch.full((c,), 0.5))

        def forward(self, x):
            y = self.mlp(self.norm(self.dw(x).permute(0, 2, 3, 1))) * self.layer_scale
            return x + y.permute(0, 3, 1, 2)

    net = nn.Sequential(nn.Conv2d(3, 16, 4, 4), LayerNorm2d(16, eps=1e-6), CNBlock(16),
                        LayerNorm2d(16, eps=1e-6), nn.Conv2d(16, 32, 2, 2), CNBlock(32),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(32, eps=1e-6), nn.Linear(32, CLASSES))
    return _cnn_case(net, "model(x) (torchvision convnext_tiny blocks)")


# ---------------------------------------------------------------- RNN
def lstm_lm():
    """Embedding -> 2-layer nn.LSTM -> Linear: a word language model."""
    nn = _torch().nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, 16)
            self.rnn = nn.LSTM(16, 32, num_layers=2, batch_first=True)
            self.out = nn.Linear(32, VOCAB)

        def forward(self, ids):
            return self.out(self.rnn(self.emb(ids))[0])

    return Case("rnn", "model(ids) (nn.LSTM, 2 layers)", LM(), [_ids()], "cross_entropy", _ids(1))


def gru_classifier():
    """Embedding -> nn.GRU -> last step -> Linear: a sequence classifier."""
    nn = _torch().nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, 16)
            self.rnn = nn.GRU(16, 32, batch_first=True)
            self.out = nn.Linear(32, CLASSES)

        def forward(self, ids):
            return self.out(self.rnn(self.emb(ids))[0][:, -1])

    rng = np.random.default_rng(1)
    return Case("rnn", "model(ids) (nn.GRU)", Classifier(), [_ids()], "cross_entropy",
                rng.integers(0, CLASSES, BATCH).astype("int64"))


CASES = {"llama": llama, "qwen2": qwen2, "mistral": mistral, "phi3": phi3, "gemma": gemma, "gpt2": gpt2,
         "bert-mlm": bert_mlm, "t5": t5, "vit": vit, "resnet": resnet, "mobilenet-v3": mobilenet_v3,
         "efficientnet": efficientnet, "convnext": convnext, "lstm-lm": lstm_lm, "gru": gru_classifier}
