"""scripts/gpu_check.{py,sh} on a CPU: the whole pipeline at toy sizes. `--target llvm` runs the run phase
for real on a runtime-only TVM (how the GPU machine runs it); `--dry-run` builds for CUDA and checks every
library without a GPU; the shell script names what is missing instead of failing somewhere deep."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tvm  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.py"
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_check  # noqa: E402

TINY = ["--tiny", "--plan-budget-s", "1", "--models", "transformer-train"]


def _run(args, env=None, timeout=900):
    e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=e,
                          timeout=timeout, cwd=ROOT)


def test_value_recipes_rebuild_arrays_of_the_same_kind():
    rng = np.random.default_rng(0)
    for a in (np.ones((3, 4), "float32"), (rng.standard_normal((64, 64)) * 0.02).astype("float32"),
              rng.integers(0, 17, (8, 9)).astype("int64")):
        r = gpu_check.describe(a)
        b = gpu_check.materialize(json.loads(json.dumps(r)), a.shape, str(a.dtype), seed=3)
        assert b.shape == a.shape and b.dtype == a.dtype
        if a.dtype.kind == "f":
            assert abs(float(b.std()) - float(a.std())) <= 0.2 * float(a.std()) + 1e-12
        else:
            assert b.min() >= a.min() and b.max() <= a.max()
    assert np.array_equal(gpu_check.materialize({"fill": 1.0}, (2,), "float32", 0), np.ones(2, "float32"))


def test_run_phase_on_the_cpu_with_a_runtime_only_tvm(tmp_path):
    d = tmp_path / "build"
    p = _run(["--prepare", "--target", "llvm", "--build-dir", str(d), "--fractions", "100,50", *TINY])
    assert p.returncode == 0, p.stderr[-2000:]
    out = tmp_path / "report.json"
    p = _run(["--run", "--build-dir", str(d), "--steps", "1", "--json", str(out)], env={"TVM_USE_RUNTIME_LIB": "1"})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    rep = json.loads(out.read_text())
    assert rep["environment"]["tvm_runtime_only"] is True          # what the wheels give the GPU machine
    builds = rep["models"]["transformer-train"]["builds"]
    assert set(builds) == {"unlimited", "100%", "50%"}
    for label in ("100%", "50%"):
        r = builds[label]
        assert r["bitwise_equal"] and r["peak_within_limit"] and r["time_s"] > 0
        assert r["calibrated_time_s"] > 0 and r["predicted_time_s"] > 0
    assert builds["50%"]["swap_in_bytes"] > builds["100%"]["swap_in_bytes"]
    lines = p.stdout.strip().splitlines()
    assert any(ln.startswith("model ") for ln in lines[-8:])        # the table comes last


@pytest.fixture(scope="module")
def cuda_dry_run(tmp_path_factory):
    from relay_passes.cuda_build import find_nvcc
    from tvm_swap.errors import TvmSwapError

    try:
        find_nvcc()
    except TvmSwapError as e:
        pytest.skip(str(e))
    d = tmp_path_factory.mktemp("gpu_build")
    out = d / "dry.json"
    p = _run(["--dry-run", "--build-dir", str(d), "--fractions", "50", "--json", str(out), *TINY])
    return d, p, json.loads(out.read_text()) if out.exists() else None


def test_dry_run_builds_for_cuda_and_checks_every_library(cuda_dry_run):
    d, p, rep = cuda_dry_run
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert rep["problems"] == [] and rep["archs"] == [80, 90]
    assert "libraries checked: OK" in p.stdout and "carried with the tree" in p.stdout
    man = json.loads((d / "manifest.json").read_text())
    assert {"unlimited", "50%"} <= set(man["models"]["transformer-train"]["builds"])


def test_run_phase_without_a_gpu_says_so(cuda_dry_run):
    from runtime_ext.cuda import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present")
    d, _, _ = cuda_dry_run
    p = _run(["--run", "--build-dir", str(d)])
    assert p.returncode == 2 and "no GPU" in p.stdout


def test_shell_script_names_what_is_missing(tmp_path):
    env = {**os.environ, "USE_WHEELS": "1", "WHEELS": str(tmp_path / "no-wheels"), "OUT": str(tmp_path / "out"),
           "GPU_BUILD": str(tmp_path / "no-build")}
    p = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=120)
    assert p.returncode == 2
    assert "MISSING:" in p.stdout and "no-wheels" in p.stdout


def test_shell_scripts_parse():
    for s in ("gpu_check.sh", "fetch_gpu_wheels.sh"):
        assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / s)]).returncode == 0
