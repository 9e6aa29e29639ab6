#!/usr/bin/env bash
# The GPU check on one H100/H200, within 8 minutes, on a machine with no network.
#
#   scripts/gpu_check.sh            # results: $OUT/gpu_check.json (OUT defaults to out/gpu_check), table on stdout
#   USE_WHEELS=1 scripts/gpu_check.sh   # ignore .venv, install from wheels/ (GPU_VENV: where; default /tmp)
#
# 1. Python: the repository's .venv if it already has TVM and cuda-bindings, else a fresh venv installed
#    offline from wheels/ (scripts/fetch_gpu_wheels.sh fills it: runtime-only TVM, numpy, cuda-bindings,
#    libcudart 13, pytest); otherwise it says exactly what is missing and stops.
# 2. The libraries: gpu_build/ from `python scripts/gpu_check.py --prepare` (made on any machine with nvcc;
#    the GPU machine needs no compiler). If absent and this Python has TVM's compiler and nvcc, they are
#    built here first (slow); else it says what to carry.
# 3. scripts/gpu_check.py --run: bandwidth, 2 models x {unlimited, 100%, 50%, 25%}, table last.
# Exit status: 0 all checks passed, 1 a check failed, 2 something is missing (nothing ran).
set -u
cd "$(dirname "$0")/.."
START=$(date +%s)
OUT=${OUT:-out/gpu_check}
BUILD=${GPU_BUILD:-gpu_build}
WHEELS=${WHEELS:-wheels}
BUDGET_S=${BUDGET_S:-480}            # the whole script, install included
mkdir -p "$OUT"
say() { echo "[gpu_check] $*"; }
missing() { say "MISSING: $*"; exit 2; }

say "machine: $(uname -srm), $(nproc) cores"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | sed 's/^/[gpu_check] gpu: /'
else
    say "nvidia-smi not found (the check below asks the driver directly)"
fi

# ---- 1. Python
PY=""
if [ "${USE_WHEELS:-0}" != 1 ] && [ -x .venv/bin/python ] && \
        .venv/bin/python -c "import tvm, cuda.bindings, numpy" >/dev/null 2>&1; then
    PY=.venv/bin/python
    say "python: .venv ($($PY --version 2>&1))"
else
    BASE=""
    for cand in python3.11 python3; do
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
            BASE=$(command -v "$cand"); break
        fi
    done
    [ -n "$BASE" ] || missing "CPython 3.11 (the wheels in $WHEELS/ are cp311); found: $(python3 --version 2>&1 || echo none)"
    ls "$WHEELS"/apache_tvm-*.whl >/dev/null 2>&1 || missing "$WHEELS/ with the wheels (run scripts/fetch_gpu_wheels.sh on a machine with PyPI and carry $WHEELS/), or a .venv with apache-tvm 0.27 and cuda-bindings"
    VENV=${GPU_VENV:-/tmp/tvm_swap_gpu_venv}
    if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import tvm, cuda.bindings" >/dev/null 2>&1; then
        say "installing from $WHEELS/ into $VENV"
        "$BASE" -m venv "$VENV" || missing "python3.11 -m venv (the venv module)"
        "$VENV/bin/python" -m pip install --quiet --no-index --find-links "$WHEELS" apache-tvm numpy tqdm \
            cuda-bindings nvidia-cuda-runtime pytest || missing "a complete $WHEELS/ (pip could not install from it; see above)"
    fi
    PY=$VENV/bin/python
    say "python: $VENV ($($PY --version 2>&1))"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TVM_BACKTRACE=0

# Can this Python run CUDA? (runtime_ext.cuda.gpu_status is the one switch; it names what is missing)
"$PY" - <<'PYEOF' || exit 2
import sys
from runtime_ext.cuda import gpu_status
ok, why = gpu_status()
print(f"[gpu_check] cuda: {why}")
if not ok:
    try:
        from cuda.bindings import driver
        err, v = driver.cuDriverGetVersion()
        print(f"[gpu_check] driver API version: {v} (TVM 0.27's CUDA runtime is CUDA 13: driver >= 13000 needed)")
    except Exception as e:  # noqa: BLE001
        print(f"[gpu_check] driver query failed: {e}")
    sys.exit(1)
PYEOF

# ---- 2. The libraries
if [ ! -f "$BUILD/manifest.json" ]; then
    if "$PY" -c "import tvm, sys; sys.exit(tvm.base._RUNTIME_ONLY)" 2>/dev/null && command -v nvcc >/dev/null 2>&1; then
        say "no $BUILD/: building here (TVM compiler and nvcc present)"
        "$PY" scripts/gpu_check.py --prepare --build-dir "$BUILD" --target cuda || exit 2
    else
        missing "$BUILD/ (run 'python scripts/gpu_check.py --prepare' on a machine with nvcc and TVM's compiler, e.g. the CI machine, and carry $BUILD/; this Python is runtime-only or has no nvcc)"
    fi
fi

# ---- 3. Run
LEFT=$(( BUDGET_S - ($(date +%s) - START) ))
say "running (${LEFT} s left of ${BUDGET_S} s)"
timeout --signal=INT "$LEFT" "$PY" scripts/gpu_check.py --run --build-dir "$BUILD" --json "$OUT/gpu_check.json" \
    --budget-s $(( LEFT > 60 ? LEFT - 45 : LEFT ))
rc=$?
[ $rc -eq 124 ] && say "stopped at the time limit; the JSON has the builds finished by then"
say "done in $(( $(date +%s) - START )) s, exit $rc; JSON: $OUT/gpu_check.json"
exit $rc
