"""The paper's workloads as real-size training graphs, for any batch size, without TVM.

    g = load_zoo("zoo:wresnet-152-10@batch=64")       # a validated DataflowGraph
    ZOO["rnn-8-8k"]["paper_batches"]                   # (128, 256)
    g = load_zoo("zoo:resnet-152-inference@batch=1")   # an inference graph (forward only, no updates)

Each graph (except the `inference` ones: one forward pass) is one training iteration (forward + loss + backward + optimizer update) of a model written
in Relax (tvm_swap/zoo/models), lowered by relay_passes.lower (cuda sm_70, fused and GPU-scheduled
kernels; nothing compiled) and extracted by
tvm_swap.graph.from_relax. scripts/gen_zoo.py regenerates data/NAME.json.gz; the file stores sizes
as affine functions of the batch (tvm_swap/zoo/affine.py), so any batch loads instantly.

Except `FORMULA` models (nasnet-25): their graph is written kernel by kernel at load time (zoo/cnn), like
the LLMs (zoo/llm), because lowering their Relax training step is too slow to regenerate.

This module must not import TVM (the planner and the CLI use it on machines without TVM).
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from ..errors import TvmSwapError
from ..graph import DataflowGraph
from ..jsonio import read_json

DATA_DIR = Path(__file__).parent / "data"

# paper: the figures of SwapAdvisor's evaluation (notes/swapadvisor.md) at paper["batch"]; None where
# the paper has no such model. `config` is the size the graph is built at (models/__init__.py).
ZOO: dict[str, dict] = {
    "wresnet-152-10": {
        "description": "Wide ResNet-152 (bottlenecks 3-8-36-3, inner width x10), ImageNet 224x224, "
                       "1000 classes, SGD with momentum",
        "paper_batches": (16, 32, 64),
        "default_batch": 64,
        "paper": {"batch": 64, "memory_need_bytes": 180e9, "ops": 882, "unique_sizes": 26},
        "config": {"blocks": [3, 8, 36, 3], "width": 10, "image": 224, "classes": 1000},
    },
    "inception-4": {
        "description": "Inception-v4 with every filter count x4, 299x299, 1000 classes, SGD with momentum",
        "paper_batches": (16, 32, 64),
        "default_batch": 64,
        "paper": {"batch": 64, "memory_need_bytes": 71e9, "ops": 830, "unique_sizes": 64},
        "config": {"width": 4, "image": 299, "classes": 1000},
    },
    "rnn-8-8k": {
        "description": "8 stacked LSTM layers of 8192 units unrolled over 50 steps, word LM with a "
                       "32k vocabulary, SGD with momentum",
        "paper_batches": (128, 256),
        "default_batch": 256,
        "paper": {"batch": 256, "memory_need_bytes": 118e9, "ops": 8594, "unique_sizes": 7},
        "config": {"layers": 8, "hidden": 8192, "seq_len": 50, "vocab": 32000, "embed": 8192},
    },
    "brnn-4-8k": {
        "description": "4 bidirectional LSTM layers of 8192 units per direction unrolled over 40 steps, "
                       "32k-word softmax, SGD with momentum",
        "paper_batches": (64, 128),
        "default_batch": 128,
        "paper": {"batch": 128, "memory_need_bytes": 99e9, "ops": 9034, "unique_sizes": 9},
        "config": {"layers": 4, "hidden": 8192, "seq_len": 40, "vocab": 32000, "embed": 8192},
    },
    "bert-large": {
        "description": "BERT-large (24 layers, 1024 hidden, 16 heads, FFN 4096) masked-LM pre-training "
                       "at sequence length 512, vocab 30522, Adam",
        "paper_batches": (16, 32),      # not in the paper; batches whose need is 2-4x a 16 GB GPU
        "default_batch": 32,
        "paper": None,
        "config": {"layers": 24, "hidden": 1024, "heads": 16, "ffn": 4096, "seq_len": 512, "vocab": 30522},
    },
    "nasnet-25": {
        "description": "NASNet-A large (331x331, F=168) with 25 normal cells per stage (80 cells), "
                       "1000 classes, SGD with momentum; written from formulas at MXNet's kernel granularity "
                       "(zoo/cnn/nasnet.py: lowering the Relax step takes most of an hour of CPU at R = 25)",
        "paper_batches": (16, 32, 64),
        "default_batch": 64,
        "paper": {"batch": 64, "memory_need_bytes": 193e9, "ops": 5533, "unique_sizes": 65},
        "config": {"repeats": 25, "filters": 168, "stem_filters": 96, "image": 331, "classes": 1000},
    },
    "wresnet-152-4": {
        "description": "Wide ResNet-152 (bottlenecks 3-8-36-3, inner width x4), ImageNet 224x224, "
                       "1000 classes, SGD with momentum (the paper's TFLMS comparison)",
        "paper_batches": (16, 32, 64),
        "default_batch": 64,
        "paper": None,
        "config": {"blocks": [3, 8, 36, 3], "width": 4, "image": 224, "classes": 1000},
    },
    "resnet-152-inference": {
        "description": "ResNet-152 (v1.5) inference: one forward pass to logits, 224x224, folded batch "
                       "norm, no backward (the paper's Table 2)",
        "paper_batches": (1, 16, 64),
        "default_batch": 1,
        "paper": None,
        "inference": True,
        "config": {"depth": 152, "width": 1, "image": 224, "classes": 1000},
    },
}

# Models written from formulas at load time (no data file): name -> graph builder (batch, name=..., **config).
FORMULA = {"nasnet-25": "tvm_swap.zoo.cnn:nasnet_training_graph"}

_SPLIT = re.compile(r",\s*split=(?P<k>\d+)\s*$")     # a trailing ",split=K" (zoo/batch_split.py)
_SPEC = re.compile(r"^(?:zoo:)?(?P<name>[A-Za-z0-9_.\-]+?)(?:@(?P<opts>.*))?$")


class ZooError(TvmSwapError):
    """A zoo spec names no model or has a bad option."""


def _models_line() -> str:
    return ", ".join(f"{n} (paper batches {'/'.join(map(str, i['paper_batches']))})" for n, i in ZOO.items())


def parse_zoo_spec(spec: str) -> tuple[str, int]:
    """'zoo:NAME', 'zoo:NAME@batch=B', 'NAME@batch=B' or 'NAME' (any case) -> (name, batch)."""
    if not isinstance(spec, str):
        raise ZooError(f"a zoo spec is a string like 'zoo:bert-large@batch=32', got {spec!r}")
    m = _SPEC.match(spec.strip())
    name = m.group("name").lower().replace("_", "-") if m else None
    if name not in ZOO:
        raise ZooError(f"unknown zoo model in {spec!r}; the models are: {_models_line()}")
    batch = ZOO[name]["default_batch"]
    opts = m.group("opts")
    if opts is not None:
        key, _, value = opts.partition("=")
        if key.strip().lower() != "batch" or not value.strip():
            raise ZooError(f"bad zoo option in {spec!r}: write zoo:{name}@batch=B with B a positive integer")
        try:
            batch = int(value.strip())
        except ValueError:
            raise ZooError(f"bad batch size {value.strip()!r} in {spec!r}: B must be a positive integer") from None
        if batch < 1:
            raise ZooError(f"bad batch size {batch} in {spec!r}: B must be a positive integer")
    return name, batch


def zoo_path(name: str) -> Path:
    return DATA_DIR / f"{name}.json.gz"


@lru_cache(maxsize=None)
def _document(name: str) -> dict:
    return read_json(zoo_path(name), "the zoo file", ZooError,
                     f"; regenerate it with `python scripts/gen_zoo.py --models {name}`")


def load_zoo(spec: str) -> DataflowGraph:
    """The training graph named by `spec` (see parse_zoo_spec; LLMs: tvm_swap.zoo.llm), validated. Each
    kernel's workspace is a tensor of its own, written by that kernel and read by no one (graph/workspace.py),
    as a compiled program has it (relay_passes.lift_workspace): the planner places it for that kernel only.
    `...@batch=B,split=K`: the ops that set the floor run as K slices of the batch (zoo/batch_split.py)."""
    from ..graph.workspace import lift_workspace

    m = _SPLIT.search(spec) if isinstance(spec, str) else None
    if m is None:
        return lift_workspace(_stored_graph(spec))
    from .batch_split import batch_tensors, floor_ops, split_batch

    k = int(m.group("k"))
    if k < 1:
        raise ZooError(f"bad split in {spec!r}: K in split=K is a positive integer (the slices of the batch)")
    base = spec[:m.start()]
    from .llm import llm_name

    if llm_name(base) is not None:
        raise ZooError(f"split=K is not available for the LLM graphs ({spec!r}); use it with one of: "
                       f"{', '.join(ZOO)}")
    name, batch = parse_zoo_spec(base)
    g = lift_workspace(_stored_graph(base))
    batch_set = batch_tensors(g, lift_workspace(_stored_graph(f"{name}@batch={2 * batch}")))
    out = split_batch(g, floor_ops(g, batch_set), batch_set, k)
    out.name = f"{g.name},split={k}"
    return out


def _stored_graph(spec: str) -> DataflowGraph:
    """The zoo graph as stored or written from formulas, workspace still a per-op number."""
    from .affine import instantiate
    from .llm import llm_name, load_llm

    if llm_name(spec) is not None:         # generated from formulas at any batch/seq (zoo/llm)
        return load_llm(spec)
    name, batch = parse_zoo_spec(spec)
    if name in FORMULA:
        from importlib import import_module

        module, func = FORMULA[name].split(":")
        g = getattr(import_module(module), func)(batch, name=f"{name}@batch={batch}", **ZOO[name]["config"])
        g.meta.update({"zoo_model": name, "batch": batch})
        return g
    return instantiate(_document(name), batch, name=f"{name}@batch={batch}")


__all__ = ["FORMULA", "ZOO", "ZooError", "load_zoo", "parse_zoo_spec", "zoo_path"]
