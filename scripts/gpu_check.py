"""The GPU check: two training steps (a CNN and a transformer encoder, several GiB each) at 100%, 50% and 25%
of their no-swap peak on one GPU, against the plain TVM build of the same kernels.

    python scripts/gpu_check.py --prepare           # build every library (CUDA fatbin; works without a GPU)
    python scripts/gpu_check.py --dry-run           # prepare if needed, check every library, stop before running
    python scripts/gpu_check.py --run --json out/gpu_check.json     # on the GPU machine (scripts/gpu_check.sh)

Per model and limit it reports: outputs bitwise equal to the unlimited build, the device peak measured with
cudaMemGetInfo against the limit (and the pool's own books), step time against the unlimited build, the
plan's predicted time and the same plan re-simulated with this machine's link and compute speed
("calibrated": roofline op times scaled so that they add up to the unlimited step), and the H2D/D2H/duplex
bandwidth measured here. The table is printed last; --json writes everything.

The build (tvm_swap compile path, nvcc) happens ahead of time, so the GPU machine needs no compiler and only
TVM's runtime (scripts/fetch_gpu_wheels.sh: the wheels fit the device tool's 64 MiB). `--target llvm` runs
the same pipeline on the CPU (emulated backend), which is how the tests exercise the run phase.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FORMAT = "tvm_swap.gpu_check"
VERSION = 1
DEFAULT_DIR = ROOT / "gpu_build"
DEFAULT_MODELS = ("cnn-train", "transformer-train")
DEFAULT_FRACTIONS = (100, 50, 25)
CARRY_LIMIT = 64 << 20          # what the device tool carries of ignored paths (wheels/ + gpu_build/)


def log(msg: str) -> None:
    print(msg, flush=True)


# ---------------------------------------------------------------- values: small recipes, not big files
def describe(a: np.ndarray) -> dict:
    """How to regenerate an array of this kind on the GPU machine (params are too big to carry)."""
    flat = a.reshape(-1)
    if a.dtype.kind == "f":
        if flat.size == 0 or np.all(flat == flat[0]):
            return {"fill": float(flat[0]) if flat.size else 0.0}
        return {"normal": [float(flat.mean()), float(flat.std())]}
    return {"randint": [int(flat.min()), int(flat.max()) + 1]}


def materialize(recipe: dict, shape, dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if "fill" in recipe:
        return np.full(shape, recipe["fill"], dtype)
    if "normal" in recipe:
        mean, std = recipe["normal"]
        return (mean + std * rng.standard_normal(shape, dtype="float32")).astype(dtype)
    lo, hi = recipe["randint"]
    return rng.integers(lo, hi, shape).astype(dtype)


def bitwise_equal(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x.reshape(-1).view(np.uint8),
                                                                     y.reshape(-1).view(np.uint8))
        for x, y in zip(a, b))


def flat_outputs(out) -> list:
    if isinstance(out, np.ndarray):
        return [out]
    return [x for o in out for x in flat_outputs(o)]


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


# ---------------------------------------------------------------- prepare (any machine with nvcc)
def prepare(build_dir: Path, models, fractions, target: str, scale: float, budget_s: float,
            tiny: bool = False) -> dict:
    from relay_passes.cuda_build import build_unlimited, fatbin_archs, resolve_target
    from tvm_swap.pipeline import compile_model
    from tvm_swap.errors import InfeasibleLimitError
    from tvm_swap.examples.large import MODELS, TINY
    from tvm_swap.planner.bounds import noswap_peak
    from tvm_swap.planner.feasibility import min_feasible_limit

    tgt = resolve_target(target)
    kind = tgt.kind.name
    build_dir.mkdir(parents=True, exist_ok=True)
    man = {"format": FORMAT, "version": VERSION, "target": str(tgt), "target_kind": kind, "scale": scale,
           "tiny": tiny,
           "archs": fatbin_archs(tgt) if kind == "cuda" else [], "created": time.strftime("%Y-%m-%d %H:%M:%S"),
           "models": {}}
    for name in models:
        t0 = time.perf_counter()
        ex = MODELS[name](scale=scale, **(TINY[name] if tiny else {}))
        mdir = build_dir / name
        mdir.mkdir(exist_ok=True)
        arg_names = [p.name for p in ex.mod["main"].params]
        np.savez(mdir / "inputs.npz", **ex.inputs)
        entry = {"arg_names": arg_names, "inputs": list(ex.inputs),
                 "params": {k: {"shape": list(v.shape), "dtype": str(v.dtype), "init": describe(v)}
                            for k, v in ex.params.items()},
                 "builds": {}}
        lib = build_unlimited(ex.mod, tgt)
        lib.export_library(str(mdir / "unlimited.so"))
        entry["builds"]["unlimited"] = {"lib": f"{name}/unlimited.so"}
        for frac in fractions:
            label = f"{frac}%"
            try:
                cm = compile_model(ex.mod, target=tgt, mem_limit=label, planner="swapadvisor", budget_s=budget_s,
                                   profile=False)
            except InfeasibleLimitError as e:
                entry["builds"][label] = {"infeasible": True, "min_feasible_bytes": e.min_feasible}
                log(f"  {name} {label}: infeasible (smallest feasible limit {e.min_feasible} bytes)")
                continue
            if "graph" not in entry:
                cm.graph.save(mdir / "graph.json")
                entry["graph"] = f"{name}/graph.json"
                entry["op_time"] = [float(t) for t in cm.op_time]
                entry["device"] = cm.device.name
                entry["noswap_peak_bytes"] = int(noswap_peak(cm.graph))
                entry["min_feasible_bytes"] = int(min_feasible_limit(cm.graph))
            rel = f"{name}/f{frac}.so"
            cm.executable.export_library(str(build_dir / rel))
            p = cm.plan.predicted
            entry["builds"][label] = {"lib": rel, "mem_limit_bytes": int(cm.plan.mem_limit),
                                      "pool_bytes": int(cm.plan.pool.total_bytes()),
                                      "workspace_bytes": int(cm.plan.pool.workspace_bytes),
                                      "predicted_time_s": p.get("time_s"), "swap_in_bytes": p.get("swap_in_bytes"),
                                      "swap_out_bytes": p.get("swap_out_bytes"), "planner": cm.plan.planner,
                                      "build_info": cm.info}
            log(f"  {name} {label}: limit {cm.plan.mem_limit / 2**30:.2f} GiB, predicted "
                f"{p.get('time_s', float('nan')) * 1e3:.1f} ms ({cm.info['codegen_s']:.0f} s codegen)")
        man["models"][name] = entry
        log(f"{name}: built in {time.perf_counter() - t0:.0f} s")
    (build_dir / "manifest.json").write_text(json.dumps(man, indent=1))
    log(f"prepared {build_dir} ({dir_bytes(build_dir) / 2**20:.1f} MiB)")
    return man


def read_manifest(build_dir: Path) -> dict:
    f = build_dir / "manifest.json"
    if not f.exists():
        raise SystemExit(f"no prepared builds in {build_dir}: run `python scripts/gpu_check.py --prepare` on a "
                         f"machine with nvcc and TVM's compiler, and carry {build_dir.name}/ with the tree")
    man = json.loads(f.read_text())
    if man.get("format") != FORMAT or man.get("version") != VERSION:
        raise SystemExit(f"{f} is not a gpu_check build manifest of version {VERSION}: prepare again")
    return man


# ---------------------------------------------------------------- dry run (no GPU needed)
def check_builds(build_dir: Path, man: dict) -> list[str]:
    """Every library loads (stand-in driver where there is none), carries its plan, and the SASS promised."""
    import tvm
    from tvm.runtime.vm import VirtualMachine

    from relay_passes.fatbin import library_code
    from runtime_ext.swap_module import _read_manifest, _read_plan

    problems = []
    if man["target_kind"] == "cuda":
        from relay_passes import cuda_offline

        cuda_offline.ensure_codegen_runtime()
    for name, entry in man["models"].items():
        for label, b in entry["builds"].items():
            if "lib" not in b:
                continue
            path = build_dir / b["lib"]
            if man["target_kind"] == "cuda":
                sass = sorted({e.arch for e in library_code(path) if e.kind == "elf"})
                if sass != man["archs"]:
                    problems.append(f"{b['lib']}: SASS for {sass}, expected {man['archs']}")
            lib = tvm.runtime.load_module(str(path))
            if label != "unlimited":
                vm = VirtualMachine(lib, tvm.cpu())
                plan, mf = _read_plan(vm), _read_manifest(vm)
                if int(plan.mem_limit) != b["mem_limit_bytes"] or mf.target_kind != man["target_kind"]:
                    problems.append(f"{b['lib']}: embedded plan/manifest do not match the build record")
    return problems


def wheel_report(wheels: Path) -> dict:
    need = ("apache_tvm-", "apache_tvm_ffi-", "numpy-", "ml_dtypes-", "typing_extensions-", "tqdm-",
            "cuda_bindings-", "cuda_pathfinder-", "nvidia_cuda_runtime")
    have = sorted(p.name for p in wheels.glob("*.whl")) if wheels.exists() else []
    missing = [n.rstrip("-") for n in need if not any(h.startswith(n) for h in have)]
    return {"dir": str(wheels), "wheels": have, "missing": missing, "bytes": dir_bytes(wheels)}


# ---------------------------------------------------------------- run (the GPU machine)
def environment() -> dict:
    import tvm

    from tvm_swap.cuda_env import gpu_status

    env = {"python": platform.python_version(), "tvm": getattr(tvm, "__version__", "?"),
           "tvm_runtime_only": bool(getattr(tvm.base, "_RUNTIME_ONLY", False)), "host": platform.node()}
    try:
        import cuda.bindings

        env["cuda_bindings"] = cuda.bindings.__version__
    except ImportError:
        env["cuda_bindings"] = None
    ok, why = gpu_status()
    env["gpu"] = why if not ok else None
    env["gpu_available"] = ok
    if ok:
        env["device"] = why
    return env


def _param_values(entry: dict) -> dict:
    return {k: materialize(p["init"], tuple(p["shape"]), p["dtype"], seed=1000 + i)
            for i, (k, p) in enumerate(entry["params"].items())}


def _calibrated(entry, build_dir, plan, unlimited_s, link, base_device):
    """The plan re-simulated with op times scaled to the measured unlimited step and the measured link."""
    from runtime_ext.cuda_link import measured_device
    from tvm_swap.cost.devices import get_device
    from tvm_swap.graph import DataflowGraph
    from tvm_swap.planner.simulator import simulate

    graph = DataflowGraph.load(build_dir / entry["graph"])
    op_time = np.asarray(entry["op_time"], dtype=np.float64)
    op_time = op_time * (unlimited_s / max(float(op_time.sum()), 1e-12))
    dev = get_device(base_device)
    if link is not None:
        dev = measured_device(dev, link)
    return float(simulate(graph, plan, op_time, dev).time_s)


def run(build_dir: Path, man: dict, steps: int, budget_s: float, models=None, save=None) -> dict:
    """Run every prepared build; `save(report)` is called after each one (partial results survive a
    time limit)."""
    from runtime_ext.reference import PlainRunner

    save = save or (lambda rep: None)

    t_start = time.perf_counter()
    kind = man["target_kind"]
    report = {"format": FORMAT, "version": VERSION, "environment": environment(), "target": man["target"],
              "archs": man["archs"], "scale": man["scale"], "link": None, "models": {}, "notes": []}
    env = report["environment"]
    if kind == "cuda" and not env["gpu_available"]:
        report["error"] = f"no GPU: {env['gpu']}"
        return report
    if kind == "cuda":
        from runtime_ext.cuda_link import measure_link

        report["link"] = measure_link()
        lk = report["link"]
        log(f"link: h2d {lk['h2d_bytes_per_s'] / 1e9:.1f} GB/s, d2h {lk['d2h_bytes_per_s'] / 1e9:.1f} GB/s, "
            f"both ways {lk['duplex_bytes_per_s'] / 1e9:.1f} GB/s")
    for name, entry in man["models"].items():
        if models and name not in models:
            continue
        res = report["models"][name] = {"noswap_peak_bytes": entry.get("noswap_peak_bytes"), "builds": {}}
        params = _param_values(entry)
        with np.load(build_dir / name / "inputs.npz") as z:
            inputs = {k: z[k] for k in entry["inputs"]}
        args = [inputs[n] if n in inputs else params[n] for n in entry["arg_names"]]
        ref = PlainRunner(str(build_dir / entry["builds"]["unlimited"]["lib"]), kind)
        want = ref(args)
        for _ in range(steps):
            ref(args)
        rs = ref.stats()
        ref.close()
        del ref
        gc.collect()
        unlimited_s = rs["min_time_s"]
        res["builds"]["unlimited"] = {"time_s": unlimited_s, "mean_time_s": rs["mean_time_s"],
                                      "measured_peak_bytes": rs["measured_peak_bytes"]}
        log(f"{name} unlimited: {unlimited_s * 1e3:.1f} ms")
        save(report)
        for label, b in entry["builds"].items():
            if label == "unlimited":
                continue
            if "lib" not in b:
                res["builds"][label] = {"infeasible": True, "min_feasible_bytes": b["min_feasible_bytes"]}
                continue
            left = budget_s - (time.perf_counter() - t_start)
            if left < 3 * (steps + 2) * unlimited_s + 10:
                res["builds"][label] = {"skipped": f"out of time ({left:.0f} s left)"}
                report["notes"].append(f"{name} {label} skipped: time budget")
                continue
            res["builds"][label] = _run_swapped(build_dir, b, params, inputs, entry, want, steps, unlimited_s,
                                                report["link"], kind)
            save(report)
            r = res["builds"][label]
            peak = r["measured_peak_bytes"] if r["measured_peak_bytes"] is not None else r["books_peak_bytes"]
            log(f"{name} {label}: {r['time_s'] * 1e3:.1f} ms, bitwise {r['bitwise_equal']}, "
                f"peak {_gib(peak)} of {_gib(r['mem_limit_bytes'])}")
    report["wall_s"] = time.perf_counter() - t_start
    return report


def _run_swapped(build_dir, b, params, inputs, entry, want, steps, unlimited_s, link, kind) -> dict:
    from runtime_ext.swap_module import load

    m = load(build_dir / b["lib"], params=params)
    s0 = m.stats()["backend"]
    got = flat_outputs(m(*inputs.values()))
    s1 = m.stats()["backend"]
    for _ in range(steps):
        m(*inputs.values())
    st = m.stats()
    be = st["backend"]
    times = m.call_times[1:] or m.call_times
    r = {"mem_limit_bytes": b["mem_limit_bytes"], "pool_bytes": st["pool_bytes"],
         "pool_region_bytes": st.get("pool_region_bytes", st["pool_bytes"]),      # what the pool allocates at load
         "books_peak_bytes": st["device_peak_bytes"], "bitwise_equal": bitwise_equal(got, want),
         "time_s": float(min(times)), "mean_time_s": float(np.mean(times)), "first_call_s": m.call_times[0],
         "vs_unlimited": float(min(times)) / unlimited_s, "predicted_time_s": b["predicted_time_s"],
         "swap_in_bytes": st["swap_in_bytes"], "swap_out_bytes": st["swap_out_bytes"], "backend": be}
    if kind == "cuda":
        r["measured_pool_bytes"] = s0["measured_after_alloc_bytes"]
        r["first_call_growth_bytes"] = s1["measured_used_bytes"] - s0["measured_after_alloc_bytes"]
        r["steady_growth_bytes"] = be["measured_peak_bytes"] - s1["measured_used_bytes"]
        r["measured_peak_bytes"] = be["measured_peak_bytes"]
        r["peak_within_limit"] = r["measured_peak_bytes"] <= b["mem_limit_bytes"]
    else:   # the emulated device is host memory: the pool's books are the measurement there
        r["measured_peak_bytes"] = None
        r["peak_within_limit"] = st["device_peak_bytes"] <= b["mem_limit_bytes"]
    r["calibrated_time_s"] = _calibrated(entry, build_dir, m.plan, unlimited_s, link, entry.get("device", "h100"))
    m.close()
    del m
    gc.collect()
    return r


# ---------------------------------------------------------------- the table
def _gib(n) -> str:
    from tvm_swap.units import format_bytes

    return "-" if n is None else format_bytes(int(n))


def _ms(t) -> str:
    return "-" if t is None else (f"{t * 1e3:.0f}" if t >= 0.1 else f"{t * 1e3:.1f}")


def table(report: dict) -> str:
    head = ["model", "limit", "bytes", "pool", "alloc. extra", "peak (meas.)", "peak<=limit", "bitwise", "step ms",
            "x unlim.", "pred. ms", "calib. ms", "swapped in/out"]
    rows = [head]
    for name, res in report["models"].items():
        for label, r in res["builds"].items():
            if label == "unlimited":
                rows.append([name, "unlimited", "-", "-", "-", _gib(r.get("measured_peak_bytes")), "-", "ref",
                             _ms(r.get("time_s")), "1.00", "-", "-", "-"])
                continue
            if "lib" not in r and "time_s" not in r:
                why = "infeasible" if r.get("infeasible") else r.get("skipped", r.get("dry_run", "?"))
                rows.append([name, label, _gib(r.get("mem_limit_bytes")), _gib(r.get("pool_bytes")), "-", "-", "-",
                             "-", why, "-", _ms(r.get("predicted_time_s")), "-", "-"])
                continue
            region = r.get("pool_region_bytes", r["pool_bytes"])      # (older reports: pool_bytes was the region)
            extra = (r["measured_pool_bytes"] - region) if r.get("measured_pool_bytes") is not None else None
            rows.append([name, label, _gib(r["mem_limit_bytes"]), _gib(r["pool_bytes"]),
                         "-" if extra is None else ("-" if extra < 0 else "+") + _gib(abs(extra)),
                         _gib(r.get("measured_peak_bytes") if r.get("measured_peak_bytes") is not None
                              else r.get("books_peak_bytes")),
                         "yes" if r["peak_within_limit"] else "NO", "yes" if r["bitwise_equal"] else "NO",
                         _ms(r["time_s"]), f"{r['vs_unlimited']:.2f}", _ms(r["predicted_time_s"]),
                         _ms(r["calibrated_time_s"]),
                         f"{_gib(r['swap_in_bytes'])} / {_gib(r['swap_out_bytes'])}"])
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.append("alloc. extra: device memory taken once the pool was allocated, beyond the pool region's bytes "
                 "(cudaMalloc's 2 MiB pages, the program's constants); peak (meas.): cudaMemGetInfo over the module's "
                 "life (adds the kernels the first call loads)")
    lk = report.get("link")
    if lk:
        lines.append(f"link (pinned, {lk['bytes'] >> 20} MiB): h2d {lk['h2d_bytes_per_s'] / 1e9:.1f} GB/s, d2h "
                     f"{lk['d2h_bytes_per_s'] / 1e9:.1f} GB/s, both ways {lk['duplex_bytes_per_s'] / 1e9:.1f} GB/s")
    env = report.get("environment", {})
    lines.append(f"device: {env.get('device') or env.get('gpu') or '-'}; target {report.get('target')}; "
                 f"SASS {report.get('archs')}")
    for n in report.get("notes", []):
        lines.append(f"note: {n}")
    return "\n".join(lines)


def dry_run_report(man: dict) -> dict:
    """The table's shape from the build records alone (nothing ran)."""
    rep = {"target": man["target"], "archs": man["archs"], "models": {}, "notes": ["dry run: nothing was run"],
           "environment": {"gpu": "dry run"}}
    for name, entry in man["models"].items():
        builds = {}
        for label, b in entry["builds"].items():
            if label != "unlimited":
                builds[label] = {**b, "dry_run": "not run"}
                builds[label].pop("lib", None)
        rep["models"][name] = {"builds": builds}
    return rep


# ---------------------------------------------------------------- CLI
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--prepare", action="store_true", help="build every library (no GPU needed)")
    mode.add_argument("--dry-run", action="store_true", help="prepare if needed, check the libraries, stop")
    mode.add_argument("--run", action="store_true", help="run the check (needs the GPU)")
    ap.add_argument("--build-dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--target", default="cuda", help="'cuda' (sm_80 code, SASS for sm_80 and sm_90), "
                    "'cuda -arch=sm_90', or 'llvm' (the CPU pipeline, for tests)")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--fractions", default=",".join(map(str, DEFAULT_FRACTIONS)), help="percent of no-swap peak")
    ap.add_argument("--scale", type=float, default=1.0, help="batch scale (memory); 1.0 = several GiB")
    ap.add_argument("--tiny", action="store_true", help="tiny model dimensions (tests of this script)")
    ap.add_argument("--plan-budget-s", type=float, default=20.0, help="planner budget per build")
    ap.add_argument("--steps", type=int, default=3, help="timed calls after the first (bitwise) one")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting runs after this long")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--wheels", type=Path, default=ROOT / "wheels")
    a = ap.parse_args(argv)
    models = [m for m in a.models.split(",") if m]
    fractions = [int(f) for f in a.fractions.split(",") if f]

    if a.prepare:
        prepare(a.build_dir, models, fractions, a.target, a.scale, a.plan_budget_s, a.tiny)
        return 0
    if a.dry_run:
        man = None
        if (a.build_dir / "manifest.json").exists():
            man = read_manifest(a.build_dir)
            if (set(man["models"]) != set(models) or man["scale"] != a.scale or man.get("tiny") != a.tiny or
                    man["target_kind"] != a.target.split()[0]):
                man = None
        if man is None:
            man = prepare(a.build_dir, models, fractions, a.target, a.scale, a.plan_budget_s, a.tiny)
        problems = check_builds(a.build_dir, man)
        wr = wheel_report(a.wheels)
        carry = wr["bytes"] + dir_bytes(a.build_dir)
        rep = dry_run_report(man)
        rep["wheels"], rep["carry_bytes"], rep["problems"] = wr, carry, problems
        if a.json:
            a.json.parent.mkdir(parents=True, exist_ok=True)
            a.json.write_text(json.dumps(rep, indent=1, default=str))
        log(f"libraries checked: {'OK' if not problems else '; '.join(problems)}")
        log(f"wheels: {len(wr['wheels'])} in {wr['dir']}" + (f", missing {', '.join(wr['missing'])}"
                                                             if wr["missing"] else ""))
        log(f"carried with the tree: {carry / 2**20:.1f} MiB of the device tool's {CARRY_LIMIT >> 20} MiB"
            + ("" if carry <= CARRY_LIMIT else "  <-- TOO BIG"))
        log(table(rep))
        return 1 if problems else 0
    man = read_manifest(a.build_dir)

    def save(rep):
        if a.json:
            a.json.parent.mkdir(parents=True, exist_ok=True)
            a.json.write_text(json.dumps(rep, indent=1, default=str))

    rep = run(a.build_dir, man, a.steps, a.budget_s, models, save)
    save(rep)
    if "error" in rep:
        log(f"gpu_check: {rep['error']}")
        return 2
    log(table(rep))
    bad = [f"{n} {lb}" for n, res in rep["models"].items() for lb, r in res["builds"].items()
           if "bitwise_equal" in r and not (r["bitwise_equal"] and r["peak_within_limit"])]
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("TVM_BACKTRACE", "0")
    sys.exit(main())
