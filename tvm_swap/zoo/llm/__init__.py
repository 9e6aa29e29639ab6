"""LLM training steps for the zoo, generated from formulas at any size (no TVM, no data file).

    g = load_llm("zoo:llama-7b@batch=1,seq=4096")
    g = load_llm("zoo:gpt-deep@layers=2560")            # > 10^5 ops, for planner scaling

Options: batch, seq, layers (default: the model's own layer count). See decoder.py for what the graph holds.
This is not generated from Relax like the paper zoo (tvm_swap/zoo/models): a 7B/13B step at seq 4096 has
to be available at any (batch, seq) instantly, and its sizes are not affine in one variable (attention is
quadratic in seq), so the kernels are written out here as a fused GPU step would run them.
"""
from __future__ import annotations

import re

from ...errors import TvmSwapError
from .decoder import DecoderConfig, decoder_training_graph

# Llama-1B is Llama 3.2 1B's shape (GQA 32/8, vocab 128256, tied); 7B and 13B are Llama 2's.
LLM_MODELS: dict[str, DecoderConfig] = {
    "llama-1b": DecoderConfig("llama", 16, 2048, 32, 8, 8192, 128256, tied=True,
                              description="Llama 3.2 1B shape: 16 layers, 2048 hidden, GQA 32/8 heads, "
                                          "SwiGLU 8192, vocab 128256, tied embeddings"),
    "llama-7b": DecoderConfig("llama", 32, 4096, 32, 32, 11008, 32000, tied=False,
                              description="Llama 2 7B: 32 layers, 4096 hidden, 32 heads, SwiGLU 11008, vocab 32000"),
    "llama-13b": DecoderConfig("llama", 40, 5120, 40, 40, 13824, 32000, tied=False,
                               description="Llama 2 13B: 40 layers, 5120 hidden, 40 heads, SwiGLU 13824, vocab 32000"),
    "gpt-deep": DecoderConfig("gpt", 2560, 512, 8, 8, 2048, 32000, tied=True,
                              description="GPT-2-style (LayerNorm, GELU, learned positions, tied), 512 wide and "
                                          "2560 layers deep: 10^5+ kernels for planner scaling"),
}
DEFAULTS = {"llama-1b": (4, 4096), "llama-7b": (1, 4096), "llama-13b": (1, 4096), "gpt-deep": (8, 1024)}

_SPEC = re.compile(r"^(?:zoo:)?(?P<name>[A-Za-z0-9_.\-]+?)(?:@(?P<opts>.*))?$")


def llm_name(spec: str) -> str | None:
    """The LLM model a spec names, or None when it names something else."""
    m = _SPEC.match(spec.strip()) if isinstance(spec, str) else None
    name = m.group("name").lower().replace("_", "-") if m else None
    return name if name in LLM_MODELS else None


def parse_llm_spec(spec: str) -> tuple[str, dict]:
    """'zoo:llama-7b@batch=2,seq=4096' -> ('llama-7b', {'batch': 2, 'seq': 4096, 'layers': 32})."""
    name = llm_name(spec)
    if name is None:
        raise TvmSwapError(f"unknown LLM zoo model in {spec!r}; the LLM models are: {', '.join(LLM_MODELS)}")
    batch, seq = DEFAULTS[name]
    opts = {"batch": batch, "seq": seq, "layers": LLM_MODELS[name].layers}
    text = _SPEC.match(spec.strip()).group("opts")
    for part in (text.split(",") if text else []):
        key, _, value = part.partition("=")
        key = key.strip().lower()
        if key not in opts or not value.strip().isdigit() or int(value) < 1:
            raise TvmSwapError(f"bad option {part!r} in {spec!r}: write zoo:{name}@batch=B,seq=S,layers=L "
                               "with positive integers (any subset, any order)")
        opts[key] = int(value)
    return name, opts


def load_llm(spec: str):
    """The DataflowGraph of the LLM training step named by spec (validated)."""
    name, o = parse_llm_spec(spec)
    label = f"{name}@batch={o['batch']},seq={o['seq']}"
    if o["layers"] != LLM_MODELS[name].layers:
        label += f",layers={o['layers']}"
    return decoder_training_graph(LLM_MODELS[name], o["batch"], o["seq"], label, layers=o["layers"])


__all__ = ["LLM_MODELS", "DecoderConfig", "llm_name", "load_llm", "parse_llm_spec"]
