"""CUDA builds on a machine without a GPU (CI): the exported library carries SASS for the archs asked and the
plan, never loading a kernel on a device. Needs nvcc (skipped with the reason when it is missing)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

import tvm

import tvm_swap  # noqa: E402
from relay_passes import cuda_build, cuda_offline  # noqa: E402
from relay_passes.fatbin import fatbins, library_code, machine_archs  # noqa: E402
from swap_models import MODELS  # noqa: E402
from tvm_swap.errors import TvmSwapError  # noqa: E402

try:
    NVCC = cuda_build.find_nvcc()
except TvmSwapError:
    NVCC = None
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found: CUDA builds need it for machine code")


# ---------------------------------------------------------------- targets (no compiler needed)
def test_cuda_target_strings_dicts_and_archs(monkeypatch):
    t = cuda_build.resolve_target("cuda -arch=sm_90")
    assert t.kind.name == "cuda" and str(t.attrs["arch"]) == "sm_90"
    assert cuda_build.fatbin_archs(t) == [90]
    t = cuda_build.resolve_target({"kind": "cuda", "arch": "sm_86", "max_num_threads": 512})
    assert cuda_build.fatbin_archs(t) == [86, 90] and int(t.attrs["max_num_threads"]) == 512
    assert cuda_build.resolve_target("llvm").kind.name == "llvm"
    monkeypatch.setenv(cuda_build.ARCHS_ENV, "80,90,100")
    assert cuda_build.fatbin_archs(cuda_build.resolve_target("cuda -arch=sm_80")) == [80, 90, 100]
    flags = cuda_build.nvcc_arch_flags([80, 90], 80)
    assert flags[-1] == "arch=compute_80,code=compute_80" and "arch=compute_90,code=sm_90" in flags


def test_plain_cuda_without_a_gpu_means_sm_80_and_sm_90():
    from runtime_ext.cuda import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present: plain 'cuda' means its own arch there")
    t = cuda_build.resolve_target("cuda")
    assert str(t.attrs["arch"]) == cuda_build.DEFAULT_ARCH == "sm_80"
    assert cuda_build.fatbin_archs(t) == [80, 90]


def test_bad_cuda_targets_are_clear_errors():
    with pytest.raises(TvmSwapError, match="-key=value"):
        cuda_build.resolve_target("cuda sm_90")
    with pytest.raises(TvmSwapError, match="sm_XX"):
        cuda_build.resolve_target("cuda -arch=ampere")


# ---------------------------------------------------------------- the fatbin reader
@needs_nvcc
def test_fatbin_reader_matches_what_nvcc_was_asked_for(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n')
    out = tmp_path / "k.fatbin"
    subprocess.run([NVCC, "--fatbin", "-o", str(out), str(src), *cuda_build.nvcc_arch_flags([80, 90], 80)],
                   check=True, capture_output=True)
    data = out.read_bytes()
    (entries,) = fatbins(b"padding" + data + b"more padding")       # found inside other bytes, once
    assert sorted(e.name for e in entries) == ["compute_80", "sm_80", "sm_90"]
    assert all(e.size > 0 for e in entries)
    assert fatbins(data[:40]) == [] and fatbins(b"\x50\xed\x55\xba" + bytes(60)) == []
    cuobjdump = shutil.which("cuobjdump")
    if cuobjdump:   # NVIDIA's own reader agrees where it is installed
        listed = subprocess.run([cuobjdump, "--list-elf", str(out)], capture_output=True, text=True).stdout
        assert "sm_80" in listed and "sm_90" in listed


# ---------------------------------------------------------------- builds of the test models
@pytest.fixture(scope="module")
def cuda_libs(tmp_path_factory):
    """name -> (CompiledModel, exported path) for every test model, built for plain 'cuda' at 50%."""
    if NVCC is None:
        pytest.skip("nvcc not found")
    from tvm_swap.pipeline import compile_model

    out = {}
    d = tmp_path_factory.mktemp("cuda_libs")
    for name, make in MODELS.items():
        cm = compile_model(make().mod, target="cuda", mem_limit="50%", planner="swapadvisor", generations=1)
        path = d / f"{name}.so"
        cm.executable.export_library(str(path))
        out[name] = (cm, path)
    return out


@needs_nvcc
@pytest.mark.parametrize("name", list(MODELS))
def test_cuda_library_carries_sass_for_sm_80_and_sm_90(cuda_libs, name):
    cm, path = cuda_libs[name]
    code = library_code(path)
    assert machine_archs(path) == [80, 90], f"{name}: {code}"
    assert [e.arch for e in code if e.kind == "ptx"] == [80]        # PTX so newer GPUs can JIT it
    assert cm.plan.verified and cm.info["target"] == "cuda"


@needs_nvcc
@pytest.mark.parametrize("name", ["mlp", "cnn-train"])
def test_cuda_library_carries_its_plan_and_manifest(cuda_libs, name):
    from tvm.runtime.vm import VirtualMachine

    from runtime_ext.swap_module import _read_manifest, _read_plan

    cm, path = cuda_libs[name]
    assert cm.plan.to_json().encode() in path.read_bytes()           # embedded as it was planned
    cuda_offline.ensure_codegen_runtime()                             # loading needs TVM's CUDA runtime
    vm = VirtualMachine(tvm.runtime.load_module(str(path)), tvm.cpu())
    assert _read_plan(vm).to_json() == cm.plan.to_json()
    man = _read_manifest(vm)
    assert man.target_kind == "cuda" and man.func_name == "main"


@needs_nvcc
def test_arch_sm_90_gives_sm_90_only(tmp_path):
    from tvm_swap.pipeline import compile_model

    cm = compile_model(MODELS["mlp"]().mod, target="cuda -arch=sm_90", mem_limit="60%", generations=1)
    cm.executable.export_library(str(tmp_path / "mlp90.so"))
    assert machine_archs(tmp_path / "mlp90.so") == [90]
    assert [e.name for e in library_code(tmp_path / "mlp90.so") if e.kind == "ptx"] == ["compute_90"]


@needs_nvcc
def test_unlimited_cuda_build_has_the_same_kernels(cuda_libs, tmp_path):
    """The bitwise reference on a GPU: TVM's own memory plan, the same fused kernels (same source), except that
    a kernel the plan runs in place is compiled without `__restrict__` (relay_passes/inplace.py), which may also
    move it in the source: the same lines, compared sorted."""
    cm, _ = cuda_libs["mlp-train"]
    in_place = {cm.graph.ops[o].kernel for o, _, _ in cm.plan.inplace}

    def plain(src):
        return "\n".join(line.replace(" __restrict__", "") if any(f" {k}_kernel(" in line for k in in_place) else line
                         for line in src.splitlines())

    ex = cuda_build.build_unlimited(MODELS["mlp-train"]().mod, "cuda")
    ex.export_library(str(tmp_path / "ref.so"))
    assert machine_archs(tmp_path / "ref.so") == [80, 90]
    ours = cm.executable.mod.imports[0].imports[0].inspect_source("cuda")
    theirs = ex.mod.imports[0].imports[0].inspect_source("cuda")
    assert ours and sorted(plain(ours).splitlines()) == sorted(plain(theirs).splitlines())
    assert all(f" {k}_kernel(" in ours for k in in_place)


@needs_nvcc
def test_codegen_outside_the_fatbin_build_is_left_as_it_was(tmp_path):
    """The stand-in driver changes nothing for other builds: TVM keeps CUDA source there, as before."""
    from relay_passes.lower import build_lowered, lower

    cuda_offline.ensure_codegen_runtime()
    target = cuda_build.resolve_target("cuda")
    ex = build_lowered(lower(MODELS["mlp"]().mod, target), target)      # TVM's path, not cuda_build's
    ex.export_library(str(tmp_path / "src.so"))
    assert library_code(tmp_path / "src.so") == []


def test_a_stand_in_driver_never_looks_like_a_gpu():
    import tvm_swap.cuda_env as rc

    mode = cuda_offline.ensure_codegen_runtime()
    if mode != "stand-in":
        pytest.skip(f"this machine has a real driver ({mode})")
    saved = list(rc._status)
    rc._status.clear()
    try:
        assert not rc.gpu_available() and rc.why_no_gpu()
        assert not tvm.cuda(0).exist
    finally:
        rc._status[:] = saved


# ---------------------------------------------------------------- running without a GPU: refused clearly
def test_build_for_cuda_without_gpu_is_refused_before_compiling(monkeypatch):
    from runtime_ext.cuda import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present")
    import tvm_swap.pipeline as b

    def no_compile(*a, **k):
        raise AssertionError("compile_model ran although the module could never run here")

    monkeypatch.setattr(b, "compile_model", no_compile)
    ex = MODELS["mlp"]()
    with pytest.raises(TvmSwapError, match="no CUDA GPU to run on"):
        tvm_swap.build(ex.mod, target="cuda", mem_limit="50%", params=ex.params)


@needs_nvcc
def test_loading_a_cuda_library_without_gpu_says_why(cuda_libs):
    from runtime_ext.cuda import gpu_available
    from runtime_ext.swap_module import load

    if gpu_available():
        pytest.skip("a GPU is present")
    _, path = cuda_libs["mlp"]
    ex = MODELS["mlp"]()
    with pytest.raises(TvmSwapError, match="no CUDA GPU to run on"):
        load(path, params=ex.params)


@needs_nvcc
def test_loading_a_cuda_library_in_a_process_without_cuda_runtime_is_a_clear_error(cuda_libs):
    """A fresh process (no stand-in driver): TVM cannot even read the library; the error says why."""
    import os
    import sys

    from runtime_ext.cuda import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present")
    _, path = cuda_libs["mlp"]
    code = ("from runtime_ext.swap_module import load\n"
            "try:\n    load(%r)\nexcept Exception as e:\n    print(type(e).__name__, e)\n" % str(path))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": root}).stdout
    assert "TvmSwapError" in out and "contains CUDA code" in out, out


def test_cuda_backend_refuses_to_start_without_gpu():
    from runtime_ext.cuda import CudaBackend, gpu_available

    if gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(TvmSwapError, match="no CUDA GPU to run on"):
        CudaBackend()
