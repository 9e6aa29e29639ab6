"""Ops a plan places on the host (Plan.host_ops) really run: relay_passes/host_ops.py writes each as its kernel on
host memory, runtime_ext runs it between tvm_swap.host_begin / host_end. Training steps with the optimizer's
updates on the host (host_ops="optimizer", ZeRO-Offload's placement) compiled on llvm: 3 chained steps bitwise
equal to the unlimited build, device peak within the limit; a CUDA build holds the host kernels compiled for llvm
beside the device kernels; a library whose host op reads what it has no host copy of is refused at load."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import tvm_swap
from swap_models import assert_steps_match_unlimited, mlp
from tvm_swap.errors import PlanError

FAST = dict(planner="swapadvisor", generations=2, workers=1, profile=False)


def _inputs(mod, seed=0):
    f = mod["main"]
    rng = np.random.default_rng(seed)
    out = []
    for p in f.params[:int(f.attrs["num_input"])]:
        shape, dt = [int(d) for d in p.ty.shape.values], str(p.ty.dtype.dtype)
        out.append(rng.integers(0, 10, shape).astype(dt) if "int" in dt else rng.standard_normal(shape).astype(dt))
    return out


def _host_computes(plan):
    host = set(plan.host_ops)
    return [i for i, a in enumerate(plan.actions) if a.kind == "compute" and a.op in host]


def _check_runs_on_host(m):
    """After a call: the plan places every update on the host, the device holds none of their outputs, the
    device peak stayed within the limit, and copies crossed both ways."""
    from tvm_swap.planner.host_split import optimizer_host_ops

    g, plan = m.compiled.graph, m.plan
    assert plan.host_ops and sorted(plan.host_ops) == optimizer_host_ops(g)
    assert all(not plan.actions[i].out_objs for i in _host_computes(plan))
    s = m.stats()
    assert s["device_peak_bytes"] <= s["mem_limit_bytes"]
    # the updated weights come back in from the host copies the host ops wrote (next step's swap-ins)
    assert s["swap_in_count"] > 0 and s["swap_out_count"] > 0


@pytest.mark.parametrize("limit", ["70%", "40%"])      # (at 100% plan_graph keeps every op on the device)
def test_bundled_mlp_train_with_the_optimizer_on_the_host_chains_three_steps(limit):
    ex = mlp(train=True)
    m = tvm_swap.build(ex.mod, mem_limit=limit, params=ex.params, host_ops="optimizer", **FAST)
    assert_steps_match_unlimited(m, ex.mod, list(ex.inputs.values()), list(ex.params.values()),
                                 what=f"mlp-train at {limit}, updates on the host: ", params_each_step=True)
    _check_runs_on_host(m)


def test_adam_state_lives_and_updates_on_the_host():
    """Adam: the moments and step powers are read and written only by host ops, so they never cross the link."""
    from tvm_swap.examples import models
    from tvm_swap.training.step import train_step

    ex = models.mlp(batch=32, in_features=64, hidden=(128,) * 4, classes=10)
    mod, params = train_step(ex.mod, ex.params, optimizer="adam", lr=0.01)
    m = tvm_swap.build(mod, mem_limit="50%", params=params, host_ops="optimizer", **FAST)
    g = m.compiled.graph
    moved = {a.tensor for a in m.plan.actions if a.kind in ("swap_in", "swap_out")}
    assert not {t for t in moved if g.tensors[t].kind == "optimizer_state"}, "optimizer state crossed the link"
    assert_steps_match_unlimited(m, mod, _inputs(mod), list(params.values()), what="adam on the host: ")
    _check_runs_on_host(m)


def test_an_exported_library_runs_its_host_ops(tmp_path):
    ex = mlp(train=True)
    m = tvm_swap.build(ex.mod, mem_limit="40%", params=ex.params, host_ops="optimizer", **FAST)
    path = str(tmp_path / "mlp_train_host.so")
    m.export_library(path)
    loaded = tvm_swap.load(path)
    assert loaded.plan.host_ops == m.plan.host_ops
    assert_steps_match_unlimited(loaded, ex.mod, list(ex.inputs.values()), list(ex.params.values()), steps=2,
                                 what="loaded library: ")


def test_the_program_calls_each_host_op_kernel_between_host_begin_and_end():
    from relay_passes.apply import apply_plan, count_calls

    ex = mlp(train=True)
    m = tvm_swap.build(ex.mod, mem_limit="40%", params=ex.params, host_ops="optimizer", **FAST)
    cm = m.compiled
    calls = count_calls(apply_plan(cm.lowered, cm.graph, cm.plan))
    n = len(cm.plan.host_ops)
    assert calls["tvm_swap.host_begin"] == calls["tvm_swap.host_end"] == n
    assert calls["tvm_swap.host_tensor"] >= n


def test_a_host_op_moved_before_the_copy_it_reads_is_refused_at_load():
    """A library is untrusted input: a host op that reads a gradient before any copy of it exists is refused with
    the tensor's name, before anything runs (the verifier refuses the plan too: tests/test_verify_host.py)."""
    ex = mlp(train=True)

    def hoist_first_host_op(plan):
        i = _host_computes(plan)[0]
        acts = list(plan.actions)
        a = replace(acts.pop(i), deps=())
        # the actions after position 0 shift by one; deps past i shift back
        moved = [a] + [replace(x, deps=tuple(d + 1 if d < i else d for d in x.deps if d != i)) for x in acts]
        return replace(plan, actions=moved)

    with pytest.raises(PlanError, match="no host copy yet"):
        tvm_swap.build(ex.mod, mem_limit="40%", params=ex.params, host_ops="optimizer",
                       _plan_hook=hoist_first_host_op, **FAST)


def test_cuda_build_holds_the_host_kernels_for_llvm_beside_the_device_kernels(tmp_path):
    """Cross-compiled for CUDA (no GPU needed): each host op's kernel is in the llvm host module, built from the
    kernel before its GPU schedule; the device kernels are in the CUDA module under it."""
    from relay_passes.host_ops import HOST_SUFFIX
    from tvm_swap.pipeline import compile_model

    ex = mlp(train=True)
    cm = compile_model(ex.mod, target="cuda", mem_limit="40%", planner="swapadvisor", generations=1, workers=1,
                       host_ops="optimizer")
    assert cm.plan.host_ops and cm.plan.verified
    host_mod = cm.executable.mod.imports[0]
    assert host_mod.kind == "llvm" and [x.kind for x in host_mod.imports] == ["cuda"]
    kernels = {cm.graph.ops[o].kernel for o in cm.plan.host_ops}
    for k in kernels:
        assert host_mod.get_function(k + HOST_SUFFIX, False) is not None, f"no host build of {k}"
    cuda_src = host_mod.imports[0].inspect_source("cuda") if hasattr(host_mod.imports[0], "inspect_source") else ""
    assert all(k + HOST_SUFFIX not in cuda_src for k in kernels)
    cm.executable.export_library(str(tmp_path / "mlp_train_host_cuda.so"))
    assert (tmp_path / "mlp_train_host_cuda.so").stat().st_size > 0


@pytest.mark.slow          # from_torch + two relax.builds of a decoder's training step: ~1-2 min loaded
def test_tiny_llama_adam_on_the_host_chains_three_steps():
    """The model matrix's tiny Llama (tests/training/test_hf_decoders.py's config) trained with Adam on the host."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tvm_swap.frontends import from_torch
    from tvm_swap.training import train_step

    vocab, batch, seq = 64, 2, 16
    torch.manual_seed(0)
    lm = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=64, tie_word_embeddings=False, attn_implementation="eager"))

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = lm

        def forward(self, ids, mask):
            return self.lm(input_ids=ids, attention_mask=mask, use_cache=False).logits

    rng = np.random.default_rng(0)
    ids = rng.integers(1, vocab, (batch, seq)).astype("int64")
    labels = np.concatenate([ids[:, 1:], np.full((batch, 1), -100)], axis=1).astype("int64")
    mask = np.ones_like(ids)
    mod, params = from_torch(Logits(), (torch.tensor(ids), torch.tensor(mask)))
    step, state = train_step(mod, params, optimizer="adam", lr=1e-3)
    m = tvm_swap.build(step, mem_limit="50%", params=state, host_ops="optimizer", **FAST)
    assert_steps_match_unlimited(m, step, [ids, mask, labels], list(state.values()),
                                 what="tiny llama, Adam on the host: ")
    _check_runs_on_host(m)
