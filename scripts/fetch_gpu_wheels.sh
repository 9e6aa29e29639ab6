#!/usr/bin/env bash
# Fill wheels/ (gitignored) with what scripts/gpu_check.sh installs on the GPU machine, which has no network:
# Linux x86_64, CPython 3.11, downloaded with pip from PyPI.
#
# apache-tvm's wheel is ~100 MB (libtvm_compiler.so alone is 92 MB compressed), more than the device tool
# carries (64 MiB of ignored paths: wheels/ and gpu_build/ together). The GPU machine only runs libraries
# compiled ahead of time (scripts/gpu_check.py --prepare), so the wheel is repacked without
# libtvm_compiler.so: a runtime-only TVM, a mode TVM 0.27 supports (tvm.base falls back to it when the
# compiler library is absent; runtime_ext loads the CUDA runtime sidecar itself there). The full wheel is
# not kept. Usage: scripts/fetch_gpu_wheels.sh [DEST]   (PYTHON=python3.11 to pick the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-wheels}
PY=${PYTHON:-python3}
LIMIT_MIB=64
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$DEST"

PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
# What the GPU run imports: TVM (+ apache-tvm-ffi, numpy, ml_dtypes, typing_extensions), tqdm (tvm_swap),
# cuda-bindings (+ cuda-pathfinder), libcudart 13 (TVM's CUDA sidecar links libcudart.so.13; the toolkit
# may be absent there), pytest (tests/runtime_ext/test_cuda_runtime.py). scipy is only used by the planner: left out.
REQS=("apache-tvm==0.27.0.post1" "numpy>=1.26" "tqdm>=4.66" "cuda-bindings==13.5.0" "nvidia-cuda-runtime==13.0.*"
      "pytest>=8")
"$PY" -m pip download --quiet --dest "$TMP" --only-binary=:all: --python-version 3.11 --implementation cp \
    "${PLATFORMS[@]}" "${REQS[@]}"

for whl in "$TMP"/*.whl; do
    name=$(basename "$whl")
    case "$name" in
        apache_tvm-*)
            # Runtime-only repack: every file but the compiler library, and RECORD without its line.
            "$PY" - "$whl" "$DEST/$name" <<'PYEOF'
import sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
DROP = "tvm/lib/libtvm_compiler.so"
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
    for info in zin.infolist():
        if info.filename == DROP:
            continue
        data = zin.read(info)
        if info.filename.endswith(".dist-info/RECORD"):
            data = b"".join(l for l in data.splitlines(keepends=True) if not l.startswith(DROP.encode() + b","))
        zout.writestr(info, data)
print(f"repacked {src.rsplit('/', 1)[-1]} without {DROP}")
PYEOF
            ;;
        *) cp "$whl" "$DEST/" ;;
    esac
done

total=$(du -sb "$DEST" | cut -f1)
echo "wheels in $DEST: $(ls "$DEST" | wc -l) files, $((total / 1048576)) MiB"
ls -1 "$DEST"
build=0
[ -d gpu_build ] && build=$(du -sb gpu_build | cut -f1)
both=$(( (total + build) / 1048576 ))
echo "with gpu_build/ ($((build / 1048576)) MiB): ${both} MiB of the device tool's ${LIMIT_MIB} MiB"
if [ "$both" -gt "$LIMIT_MIB" ]; then
    echo "TOO BIG for the device tool: prepare fewer builds, or carry a venv by other means" >&2
    exit 1
fi
