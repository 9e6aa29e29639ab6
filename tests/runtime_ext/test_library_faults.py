"""Faults a user meets with libraries (issue 11): each is refused before anything runs, with a message
that says what to do. One small exported library is built once and damaged in each way."""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tvm

import tvm_swap  # noqa: E402
from runtime_ext.library_check import CHECK_SUFFIX, LibraryError  # noqa: E402
from runtime_ext.swap_module import PARAMS_SUFFIX  # noqa: E402
from swap_models import mlp  # noqa: E402
from tvm_swap.errors import VerificationError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FAST = dict(planner="swapadvisor", generations=2, workers=1, profile=False)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("lib")
    ex = mlp()
    m = tvm_swap.build(ex.mod, mem_limit="40%", params=ex.params, **FAST)
    assert any(a.kind == "swap_out" for a in m.plan.actions)
    path = d / "mlp.so"
    m.export_library(path)
    return path


def _copy(lib: Path, dst: Path, data: bytes | None = None, check: bool = False) -> Path:
    """A copy of the library (optionally with other bytes), with its params, and its check file if asked."""
    dst.write_bytes(lib.read_bytes() if data is None else data)
    if Path(str(lib) + PARAMS_SUFFIX).exists():        # libraries now carry their params inside
        shutil.copy(str(lib) + PARAMS_SUFFIX, str(dst) + PARAMS_SUFFIX)
    if check:
        shutil.copy(str(lib) + CHECK_SUFFIX, str(dst) + CHECK_SUFFIX)
    return dst


def _edit(lib: Path, old: bytes, new: bytes) -> bytes:
    data = lib.read_bytes()
    assert len(old) == len(new) and data.count(old) == 1, old
    return data.replace(old, new)


def test_the_intact_library_loads_and_runs(lib):
    m = tvm_swap.load(lib)
    assert m.plan.verified
    m(*[__import__("numpy").zeros(s.shape, s.dtype) for s in m.manifest.inputs])


# ---------------------------------------------------------------- not ours
def test_a_python_extension_is_not_a_tvm_swap_module(capsys):
    import numpy

    ext = sorted(glob.glob(os.path.join(os.path.dirname(numpy.__file__), "**", "*.so"), recursive=True),
                 key=os.path.getsize)[0]
    with pytest.raises(LibraryError, match="is a shared library but not a tvm_swap module"):
        tvm_swap.load(ext)
    from tvm_swap import cli

    assert cli.main(["run", ext]) == 1
    err = capsys.readouterr().err
    assert "not a tvm_swap module" in err and "Traceback" not in err and len(err.splitlines()) == 1


# ---------------------------------------------------------------- truncated or damaged
_LOAD_EACH = """
import sys, tvm_swap
for p in sys.argv[1:]:
    try:
        tvm_swap.load(p)
        print("LOADED", p)
    except tvm_swap.TvmSwapError as e:
        print("REFUSED", p, "|", e)
    sys.stdout.flush()
"""


def test_truncated_copies_are_refused_not_a_sigbus(lib, tmp_path):
    data = lib.read_bytes()
    cuts = [4096, len(data) // 3, len(data) // 2, len(data) - 100]
    paths = []
    for c in cuts:     # without the check file: the ELF extents catch it; with it: the recorded size does
        paths.append(str(_copy(lib, tmp_path / f"cut{c}.so", data[:c])))
        paths.append(str(_copy(lib, tmp_path / f"cut{c}_checked.so", data[:c], check=True)))
    r = subprocess.run([sys.executable, "-c", _LOAD_EACH, *paths], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT)] + sys.path)})
    assert r.returncode == 0, f"the loader died (signal {-r.returncode}):\n{r.stdout}\n{r.stderr[-2000:]}"
    lines = r.stdout.strip().splitlines()
    assert len(lines) == len(paths) and all(ln.startswith("REFUSED") for ln in lines), r.stdout
    for ln in lines:
        if "_checked" in ln.split("|")[0]:
            assert "was exported as" in ln and "truncated" in ln, ln
        else:
            assert "is damaged" in ln and "truncated copy" in ln, ln


def test_headers_with_entries_shorter_than_their_format_are_named_damaged(lib, tmp_path):
    """A section or program header entry size that lies (too short to hold the entry) is a damaged file, not a
    struct.error from the parser; the dynamic-symbol scan then gives the decision to the loader."""
    import struct

    from runtime_ext.library_check import check_elf, holds_tvm_blob

    data = bytearray(lib.read_bytes())
    assert data[4] == 2 and data[5] == 1          # 64-bit little-endian, as every library built here
    for field in (54, 58):                        # e_phentsize, e_shentsize
        bad = bytearray(data)
        struct.pack_into("<H", bad, field, 2)
        path = tmp_path / f"short_entries_{field}.so"
        path.write_bytes(bytes(bad))
        with pytest.raises(LibraryError, match="is damaged: .* ELF headers are malformed"):
            check_elf(str(path))
        assert holds_tvm_blob(str(path)) is True
    assert check_elf(str(lib)) is not None and holds_tvm_blob(str(lib)) is True


def test_a_library_edited_after_export_is_named_as_changed(lib, tmp_path):
    data = _edit(lib, b'"schedule":[0,1,', b'"schedule":[1,0,')
    with pytest.raises(LibraryError, match="has changed since it was exported"):
        tvm_swap.load(_copy(lib, tmp_path / "edited.so", data, check=True))


# ---------------------------------------------------------------- the embedded plan is verified at load
def test_a_same_length_schedule_edit_is_caught_by_verification(lib, tmp_path):
    data = _edit(lib, b'"schedule":[0,1,', b'"schedule":[1,0,')
    with pytest.raises(VerificationError, match="will not run a plan that fails verification") as e:
        tvm_swap.load(_copy(lib, tmp_path / "edited.so", data))
    assert "schedule" in str(e.value)


def test_actions_naming_tensors_or_objects_outside_the_module_are_refused(lib, tmp_path):
    m = tvm_swap.load(lib)
    plan, n_t, n_obj = m.plan, len(m.manifest.tensors), m.plan.pool.num_objects

    def far(n):          # an id with as many digits as the largest real one, beyond them all
        return "9" * len(str(n - 1))

    def edited(field, n):
        """The first copy/drop action whose `field` has the digits of the largest id, pointed past the last."""
        for a in plan.actions:
            v = getattr(a, "tensor" if field == "t" else "obj")
            if a.kind != "compute" and len(str(v)) == len(far(n)):
                head = f'"k":"{a.kind}","t":{a.tensor},"obj":{a.obj}'.encode()
                new = head.replace(f'"{field}":{v}'.encode(), f'"{field}":{far(n)}'.encode())
                data = lib.read_bytes()
                k = data.index(head)
                return data[:k] + new + data[k + len(head):]
        raise AssertionError(f"no action with a {len(far(n))}-digit {field}")

    assert int(far(n_obj)) >= n_obj and int(far(n_t)) >= n_t
    with pytest.raises(VerificationError, match=f"names object {far(n_obj)}, but the pool has {n_obj} objects"):
        tvm_swap.load(_copy(lib, tmp_path / "obj.so", edited("obj", n_obj)))
    with pytest.raises(VerificationError, match=f"names tensor {far(n_t)}, which is not in the graph"):
        tvm_swap.load(_copy(lib, tmp_path / "tensor.so", edited("t", n_t)))


def test_an_embedded_graph_that_does_not_match_the_program_is_refused(lib, tmp_path):
    data = lib.read_bytes()
    i = data.index(b'"graph_json":')
    j = data.index(b'"tensors":[[', i) + len(b'"tensors":[[')
    # the first tensor's byte size, one digit changed: the graph no longer matches the program
    k = data.index(b",", j) + 1
    digit = data[k:k + 1]
    other = b"1" if digit != b"1" else b"2"
    edited = data[:k] + other + data[k + 1:]
    with pytest.raises(LibraryError, match="does not hold together"):
        tvm_swap.load(_copy(lib, tmp_path / "graph.so", edited))


# ---------------------------------------------------------------- another TVM
def test_a_library_built_with_another_tvm_is_refused(lib, tmp_path):
    here = tvm.__version__.encode()
    other = here[:-1] + (b"9" if here[-1:] != b"9" else b"8")
    data = _edit(lib, b'"tvm_version":"' + here + b'"', b'"tvm_version":"' + other + b'"')
    with pytest.raises(LibraryError, match=f"was built with TVM {other.decode()}, but this is TVM"):
        tvm_swap.load(_copy(lib, tmp_path / "manifest.so", data))
    p = _copy(lib, tmp_path / "sidecar.so", check=True)          # the check file says so before dlopen
    rec = json.loads(Path(str(p) + CHECK_SUFFIX).read_text())
    rec["tvm_version"] = other.decode()
    Path(str(p) + CHECK_SUFFIX).write_text(json.dumps(rec))
    with pytest.raises(LibraryError, match="rebuild it with this TVM"):
        tvm_swap.load(p)


# ---------------------------------------------------------------- host memory
def test_host_memory_that_cannot_hold_the_swapped_out_tensors_is_refused_with_the_number(lib, monkeypatch):
    import runtime_ext.host_memory as hm

    m = tvm_swap.load(lib)
    need = m.executor.host.allocated_bytes
    assert need > 0
    monkeypatch.setattr(hm, "available_host_bytes", lambda: need - 1)
    with pytest.raises(hm.HostMemoryError, match=f"keeps .* \\({need} bytes\\) of swapped-out tensors .* "
                                                 f"only .* \\({need - 1} bytes\\)"):
        tvm_swap.load(lib)
    monkeypatch.setattr(hm, "available_host_bytes", lambda: need)
    tvm_swap.load(lib)
