"""The `tvm-swap` commands, each run in a fresh process where torch cannot be imported (the command line must
not need it): plan (JSON contract, plan file, report), report, zoo, devices, compile and run."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
# Block torch (and onnx) the way a missing install does, then run the CLI's main.
PRELUDE = "import sys; sys.modules['torch'] = None; sys.modules['onnx'] = None; from tvm_swap.cli import main; "


def tvm_swap(*args, cwd=None):
    code = PRELUDE + f"sys.exit(main({list(args)!r}))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=cwd, env=env)


def test_plan_json_contract_plan_file_and_report(tmp_path):
    r = tvm_swap("plan", "zoo:inception-4@batch=16", "--mem-limit", "16GB", "--generations", "1",
                 "--workers", "1", "--json", "-q", "-o", str(tmp_path / "p.json"))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["verified"] is True and out["planner"] == "swapadvisor"
    assert out["peak_bytes"] <= out["mem_limit_bytes"] == 16 * 10**9
    assert set(out) >= {"time_s", "lower_bound_s", "throughput_vs_ideal", "swap_in_bytes", "generations"}
    pytest.importorskip("matplotlib")
    r = tvm_swap("report", str(tmp_path / "p.json"), "-o", str(tmp_path / "p.html"), "-q")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "p.html").stat().st_size > 1000


def test_recompute_is_on_by_default_for_swapadvisor_and_off_when_asked(tmp_path):
    """`plan` without --recompute searches swap or recompute (arena pool) and recomputes on this training graph;
    --recompute off and the size-class pool plan swap-only; the JSON says which."""
    from tvm_swap.testing import random_training_graph

    path = tmp_path / "g.json"
    random_training_graph(8, n_layers=8).save(path)      # recomputing wins by ~1.2x here (scan of seeds 2-9)
    common = ("--mem-limit", "50%", "--generations", "1", "--workers", "1", "--json", "-q")
    runs = {"default": (), "off": ("--recompute", "off"), "classes": ("--pool", "size-classes")}
    out = {}
    for name, extra in runs.items():
        r = tvm_swap("plan", str(path), *common, *extra)
        assert r.returncode == 0, (name, r.stderr)
        out[name] = json.loads(r.stdout)
    assert out["default"]["recompute"] is True and out["default"]["recompute_count"] > 0
    assert out["off"]["recompute"] is False and out["off"]["recompute_count"] == 0
    assert out["classes"]["recompute"] is False and out["classes"]["recompute_count"] == 0


def test_plan_refuses_an_infeasible_limit_with_exit_code_1():
    r = tvm_swap("plan", "zoo:bert-large@batch=8", "--mem-limit", "1MB", "--planner", "odswap", "--json", "-q")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out["error"] == "infeasible_limit" and out["min_feasible_bytes"] > out["mem_limit_bytes"]


def test_unknown_planner_is_a_usage_error():
    r = tvm_swap("plan", "zoo:bert-large", "--mem-limit", "16GB", "--planner", "nope")
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_zoo_and_devices_list_their_entries():
    r = tvm_swap("zoo")
    assert r.returncode == 0 and "wresnet-152-10" in r.stdout and "bert-large" in r.stdout
    r = tvm_swap("devices")
    assert r.returncode == 0 and "v100-16gb" in r.stdout
    from tvm_swap.cost.devices import HOSTS

    assert all(f"host {h}" in r.stdout for h in HOSTS)      # where plan --host-ops runs ops


def test_compile_and_run_a_bundled_example(tmp_path):
    import tvm  # noqa: F401
    lib = str(tmp_path / "mlp.so")
    r = tvm_swap("compile", "mlp", "--mem-limit", "60%", "--generations", "1", "-o", lib, "--json", "-q")
    assert r.returncode == 0, r.stderr
    built = json.loads(r.stdout)
    assert built["planner"] == "swapadvisor"
    r = tvm_swap("run", lib, "--compare-unlimited", "--repeat", "1", "--json", "-q")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["outputs_bitwise_equal"] is True and info["within_limit"] is True
    # one vocabulary (README, "The numbers"): the same names for the same numbers in compile, run and stats()
    import tvm_swap as api

    m = api.load(lib)
    m(*[np.load(lib + ".inputs.npz")[n] for n in m.input_names])
    stats = m.stats()
    shared = ("mem_limit_bytes", "pool_bytes", "no_swap_bytes", "liveness_peak_bytes", "limit_vs_no_swap",
              "limit_vs_liveness_peak", "predicted_time_s")
    assert {k: built[k] for k in shared} == {k: info[k] for k in shared} == {k: stats[k] for k in shared}
    assert info["device_peak_bytes"] == stats["device_peak_bytes"] <= stats["pool_bytes"] <= stats["mem_limit_bytes"]
    assert info["device_peak_vs_no_swap"] == stats["device_peak_vs_no_swap"]
    assert stats["pool_bytes"] == stats["pool_region_bytes"] + stats["workspace_bytes"]
    assert abs(built["limit_vs_no_swap"] - 0.6) < 1e-3


def test_the_readme_defines_every_number_the_commands_print():
    from tvm_swap.vocabulary import LABELS

    readme = (ROOT / "README.md").read_text()
    section = readme.split("### The numbers", 1)[1].split("\n## ", 1)[0]
    missing = [k for k in (*LABELS, "pool_in_use_peak_bytes", "min_feasible_bytes", "min_feasible_percent")
               if f"`{k}`" not in section]
    assert not missing, f"README's 'The numbers' does not define {missing}"
    assert all(label in section for label in LABELS.values())


def test_plan_report_writes_and_prints_the_byte_breakdown(tmp_path):
    """`plan --report DIR` says where the link bytes go, by tensor role, beside the bound's must-move bytes."""
    pytest.importorskip("matplotlib")
    r = tvm_swap("plan", "zoo:llama-7b@batch=1,seq=512,layers=1", "--mem-limit", "50%", "--device", "h200",
                 "--planner", "swapadvisor-nosearch", "--workers", "1", "-q", "--report", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "optimizer state" in r.stdout and "bound must move" in r.stdout
    (js,) = tmp_path.glob("*-breakdown.json")
    bd = json.loads(js.read_text())
    assert bd["in_bytes"] == sum(row["in_bytes"] for row in bd["roles"].values()) > 0
    assert (tmp_path / js.name.replace(".json", ".txt")).read_text().startswith("llama-7b")


def test_plan_host_ops_runs_the_optimizer_on_the_host():
    r = tvm_swap("plan", "zoo:llama-7b@batch=1,seq=512,layers=1", "--mem-limit", "50%", "--device", "h200",
                 "--planner", "swapadvisor-nosearch", "--host-ops", "optimizer", "--json", "-q")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    from tvm_swap.planner.host_split import optimizer_host_ops
    from tvm_swap.zoo import load_zoo

    g = load_zoo("zoo:llama-7b@batch=1,seq=512,layers=1")
    assert out["verified"] and out["host_ops"] == len(optimizer_host_ops(g))


@pytest.mark.slow          # a compile and a run with the unlimited build beside it, each in its own process
def test_compile_host_ops_runs_the_optimizer_on_the_host_bitwise(tmp_path):
    lib = str(tmp_path / "mlp-train-host.so")
    r = tvm_swap("compile", "mlp-train", "--mem-limit", "50%", "--host-ops", "optimizer", "--budget-s", "3",
                 "--workers", "1", "-o", lib, "--json", "-q")
    assert r.returncode == 0, r.stderr
    built = json.loads(r.stdout)
    assert built["host_ops"] > 0
    r = tvm_swap("run", lib, "--compare-unlimited", "--json")
    assert r.returncode == 0, r.stderr
    ran = json.loads(r.stdout)
    assert ran["bitwise_equal_per_step"] == [True] * ran["steps"] and ran["within_limit"]
