"""What the commands say beside their results (tvm_swap.cli.notes): files a compile wrote, a limit above the
device, the demo's emulation and its measured-vs-predicted gap."""
from __future__ import annotations

from tvm_swap.cli.notes import LABELS, compiled_files, demo_emulation, limit_above_device, time_gap
from tvm_swap.cost.devices import get_device


def test_compiled_files_lists_what_exists_with_its_purpose(tmp_path):
    lib = str(tmp_path / "m.so")
    for suffix in ("", ".params.npz", ".unlimited.so"):
        open(lib + suffix, "w").close()
    files = compiled_files(lib)
    assert [f for f, _ in files] == [lib, lib + ".params.npz", lib + ".unlimited.so"]
    assert "--compare-unlimited" in files[-1][1]


def test_a_limit_above_the_device_is_named():
    v100 = get_device("v100-16gb")
    assert limit_above_device(v100.memory_bytes, v100) is None
    warn = limit_above_device(200 * 10**9, v100)
    assert "v100-16gb" in warn and "--mem-limit" in warn


def test_demo_says_what_it_emulates_and_explains_a_gap_beyond_10_percent():
    cpu = get_device("cpu")
    assert "cpu" in demo_emulation(cpu, None) and "--bandwidth" in demo_emulation(cpu, None)
    assert "2GB/s" in demo_emulation(cpu, "2GB/s")
    assert time_gap(1.05, 1.0, None) is None and time_gap(0.95, 1.0, None) is None
    assert time_gap(1.56, 1.0, None).startswith("measured 1.56x the predicted time: ")
    assert "faster" in time_gap(0.5, 1.0, None)
    assert len(time_gap(1.56, 1.0, None).splitlines()) == 1


def test_one_word_per_number():
    assert LABELS["pool_bytes"] != LABELS["device_peak_bytes"] and len(set(LABELS.values())) == len(LABELS)
