"""tvm_swap.caches.graph: lowered graphs and their floors kept on disk, keyed by module, target, fusion cap and code."""
import gzip

import pytest

from tvm_swap.caches.graph import FloorMemo, cached_graph, store_graph
from tvm_swap.planner.api import feasible_floor
from tvm_swap.testing import random_training_graph


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TVM_SWAP_CACHE_DIR", str(tmp_path / "cache"))


def test_a_graph_comes_back_as_stored_and_a_broken_entry_counts_as_missing(tmp_path):
    g = random_training_graph(seed=1)
    assert cached_graph("k1") is None
    store_graph("k1", g)
    back = cached_graph("k1")
    assert back.to_dict() == g.to_dict() and back.fingerprint() == g.fingerprint()
    path = tmp_path / "cache" / "graphs" / "k1.json.gz"
    with gzip.open(path, "wt") as f:
        f.write('{"ops": [')                                  # truncated by a crash
    assert cached_graph("k1") is None


def test_the_floor_memo_is_found_once_and_only_for_its_pool_and_alignment(monkeypatch):
    g = random_training_graph(seed=2)
    memo = FloorMemo("k2")
    exact = feasible_floor(g, "arena")
    assert feasible_floor(g, "arena", memo=memo) == exact
    assert memo.get("arena", 256) == exact and memo.get("arena", 512) is None and memo.get("size-classes", 256) is None
    import tvm_swap.planner.api as api

    monkeypatch.setattr(api, "arena_min_limit", lambda gi: pytest.fail("searched again"))
    assert feasible_floor(g, "arena", memo=FloorMemo("k2")) == exact            # from disk, no search
    memo.path.write_text("not json")
    assert FloorMemo("k2").get("arena", 256) is None


def test_the_key_changes_with_the_module_target_and_fusion_cap():
    import tvm  # noqa: F401
    from tvm_swap.examples import mlp, small_cnn
    from tvm_swap.caches.graph import graph_key

    a, b = mlp().mod, small_cnn().mod
    k = graph_key(a, "llvm")
    assert k == graph_key(mlp().mod, "llvm")                   # the same module built again: the same key
    assert len({k, graph_key(b, "llvm"), graph_key(a, "llvm", fuse_max_depth=2),
                graph_key(a, {"kind": "cuda", "arch": "sm_90"})}) == 4


def test_a_cached_graph_refuses_with_the_exact_min_not_the_early_bound():
    """A limit below even the largest tensor, for a module lowered before: the kept graph names the planner's
    own min (exact), not the pre-lowering bound (the largest tensor alone, exact=False), which the refusal
    used to give because the tensor check ran before the cache lookup."""
    import tvm  # noqa: F401
    from relay_passes.cuda_build import resolve_target
    from relay_passes.lower import lower
    from tvm_swap.errors import InfeasibleLimitError
    from tvm_swap.examples import mlp
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.caches.graph import graph_key
    from tvm_swap.pipeline import compile_model
    from tvm_swap.testing import planner_min_limit

    mod = mlp().mod
    with pytest.raises(InfeasibleLimitError) as first:           # first compile: refused before lowering
        compile_model(mod, mem_limit=1000, profile=False)
    assert not first.value.exact
    target = resolve_target("llvm")
    graph = graph_from_relax(lower(mod, target), "main", target=str(target))
    store_graph(graph_key(mod, target), graph)                    # as a feasible compile of it would
    with pytest.raises(InfeasibleLimitError) as again:
        compile_model(mod, mem_limit=1000, profile=False)
    assert again.value.exact and again.value.min_feasible == planner_min_limit(graph, "swapadvisor")[0]
    assert again.value.min_feasible > first.value.min_feasible
