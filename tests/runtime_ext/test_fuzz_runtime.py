"""scripts/fuzz_runtime.py: random small models built under random limits run bitwise equal to the unlimited
build, and the fuzz notices when they do not."""
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import fuzz_runtime  # noqa: E402


@pytest.mark.parametrize("seed", [3, 6])
def test_a_handful_of_random_models_match_the_unlimited_build(seed):
    r = fuzz_runtime.run_case(seed)
    assert r["ok"], r
    assert r["swaps"] > 0


@pytest.mark.slow
def test_more_random_models_match_the_unlimited_build():
    bad = [r for r in map(fuzz_runtime.run_case, range(10, 20)) if not r["ok"]]
    assert not bad, bad


def test_the_runtime_fuzz_notices_a_wrong_output(monkeypatch):
    real = fuzz_runtime._unlimited

    def off_by_one_bit(mod):
        ref = real(mod)

        def call(args):
            out = ref(args)
            out[0] = out[0].copy()
            out[0].reshape(-1).view(np.uint32)[0] ^= 1
            return out
        return call

    monkeypatch.setattr(fuzz_runtime, "_unlimited", off_by_one_bit)
    r = fuzz_runtime.run_case(6)
    assert not r["ok"] and "differ" in r["why"]
