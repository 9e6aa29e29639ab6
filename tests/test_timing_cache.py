"""The disk caches that make a second compile fast: kernel timings (tvm_swap.cost.timing_cache) read and written by
the pipeline's profiling, and the unlimited reference build (tvm_swap.caches.build)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tvm_swap.cost import profile, timing_cache
from tvm_swap.cost.timing_cache import CACHE_ENV, cache_dir, open_kernel_timings


def test_cache_dir_is_the_env_override_else_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "tvm_swap"


def test_timings_survive_a_reopen_per_target_and_merge_concurrent_writers(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    a = open_kernel_timings("llvm", "cpu(0)")
    b = open_kernel_timings("llvm", "cpu(0)")       # a second compile running at the same time
    a.put("k1", 1e-3)
    b.put("k2", 2e-3)
    a.flush()
    b.flush()
    again = open_kernel_timings("llvm", "cpu(0)")
    assert (again.get("k1"), again.get("k2")) == (1e-3, 2e-3) and (again.hits, again.misses) == (2, 0)
    assert open_kernel_timings("llvm -mcpu=znver3", "cpu(0)").get("k1") is None   # another target: another file
    doc = json.loads(next((tmp_path / "kernel-timings").glob("*.json")).read_text())
    assert "cpu(0)" in doc["identity"]


def test_refresh_ignores_and_replaces_what_is_stored(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    t = open_kernel_timings("llvm", "cpu(0)")
    t.put("k1", 1.0)
    t.put("k2", 2.0)
    t.flush()
    r = open_kernel_timings("llvm", "cpu(0)", refresh=True)
    assert r.get("k1") is None
    r.put("k1", 3.0)
    r.flush()
    t2 = open_kernel_timings("llvm", "cpu(0)")
    assert (t2.get("k1"), t2.get("k2")) == (3.0, 2.0)


def test_a_damaged_cache_file_is_profiled_again_not_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    t = open_kernel_timings("llvm", "cpu(0)")
    t.put("k", 1.0)
    t.flush()
    t.path.write_text('{"format": "tvm_swap.cost.table", "vers')      # cut short by a crash
    assert open_kernel_timings("llvm", "cpu(0)").get("k") is None


@pytest.fixture(scope="module")
def lowered_mlp():
    import tvm  # noqa: F401
    from relay_passes import lower
    from tvm_swap.examples import mlp_train_step
    from tvm_swap.graph import from_relax

    ex = mlp_train_step(batch=8, in_features=16, hidden=(32, 32), classes=4)
    lowered = lower(ex.mod)
    return ex.mod, lowered, from_relax(lowered)


def _lower_module():
    """relay_passes.lower the module (the package re-exports a function of that name over it)."""
    import importlib

    return importlib.import_module("relay_passes.lower")


def _forbid(monkeypatch, module, name):
    def fail(*a, **k):
        raise AssertionError(f"{name} ran although everything was cached")
    monkeypatch.setattr(module, name, fail)


def test_second_profiling_of_a_model_times_and_builds_nothing(lowered_mlp, monkeypatch, tmp_path):
    from relay_passes.lower import as_target

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    _, lowered, g = lowered_mlp
    target = as_target("llvm")
    first, how = profile.per_op_times(lowered, g, target, None, True, None)
    assert how == "profiled"
    _forbid(monkeypatch, profile, "_time_kernel")
    _forbid(monkeypatch, _lower_module(), "build_lowered")
    again, _ = profile.per_op_times(lowered, g, target, None, True, None)
    np.testing.assert_array_equal(first, again)
    with pytest.raises(AssertionError, match="build_lowered ran"):      # a refresh builds and measures again
        profile.per_op_times(lowered, g, target, None, True, timing_cache.kernel_timings_for(target, refresh=True))


def test_the_unlimited_build_is_reused_until_the_module_changes(lowered_mlp, monkeypatch, tmp_path):
    from tvm_swap.caches.build import export_unlimited_build
    from tvm_swap.examples import mlp_train_step

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    mod = lowered_mlp[0]
    assert export_unlimited_build(mod, "llvm", tmp_path / "a.so") is False
    _forbid(monkeypatch, _lower_module(), "lower_unlimited_build")
    assert export_unlimited_build(mod, "llvm", tmp_path / "b.so") is True
    assert (tmp_path / "a.so").read_bytes() == (tmp_path / "b.so").read_bytes()
    other = mlp_train_step(batch=8, in_features=16, hidden=(32, 32), classes=4, lr=0.5).mod
    with pytest.raises(AssertionError, match="lower_unlimited_build ran"):
        export_unlimited_build(other, "llvm", tmp_path / "c.so")
    with pytest.raises(AssertionError, match="lower_unlimited_build ran"):
        export_unlimited_build(mod, "llvm", tmp_path / "d.so", fuse_max_depth=1)


def test_the_unlimited_build_is_not_reused_after_our_lowering_changes(lowered_mlp, monkeypatch, tmp_path):
    """A cached reference built by older passes (e.g. before weight transposes were folded) is not handed back
    once relay_passes changes: the code version keys the cache (it did not: the module, target, fusion cap and
    TVM's version alone)."""
    import tvm_swap.caches.build as build

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    mod = lowered_mlp[0]
    assert build.export_unlimited_build(mod, "llvm", tmp_path / "a.so") is False
    monkeypatch.setattr(build, "code_version", lambda: "another-version-of-relay_passes")
    _forbid(monkeypatch, _lower_module(), "lower_unlimited_build")
    with pytest.raises(AssertionError, match="lower_unlimited_build ran"):
        build.export_unlimited_build(mod, "llvm", tmp_path / "b.so")
