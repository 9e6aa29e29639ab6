"""The pool can live in one arena (what the CUDA backend does): views at aligned offsets, same answers."""
import numpy as np
import pytest

import tvm_swap
from relay_passes.lower import lower_unlimited_build
from runtime_ext.backend import arena_objects
from runtime_ext.emulated import EmulatedBackend
from tvm_swap.examples import EXAMPLES


def test_arena_views_are_disjoint_and_aligned():
    import tvm

    arena = tvm.runtime.tensor(np.zeros(3 * 512, "uint8"))
    objs = arena_objects(arena, [512, 1024])
    objs[1].copyfrom(np.full(1024, 7, "uint8"))
    assert arena.numpy()[:512].max() == 0 and (arena.numpy()[512:] == 7).all()
    assert objs[1].data_ptr() - objs[0].data_ptr() == 512


@pytest.mark.parametrize("limit", ["35%"])
def test_training_step_in_an_arena_pool_is_bitwise_equal(monkeypatch, limit):
    import tvm
    from tvm import relax

    def alloc_pool(self, sizes, offsets=None, region_bytes=None):
        total = int(sum(sizes)) if offsets is None else int(region_bytes)
        self._arena = tvm.runtime.empty((total,), "uint8", self.device)
        return arena_objects(self._arena, sizes, offsets)

    monkeypatch.setattr(EmulatedBackend, "alloc_pool", alloc_pool)
    ex = EXAMPLES["mlp-train"]()
    m = tvm_swap.build(ex.mod, target="llvm", mem_limit=limit, params=ex.params, budget_s=1.0)
    assert hasattr(m.backend, "_arena")          # the arena path really ran
    got = m(*ex.inputs.values())
    vm = relax.VirtualMachine(lower_unlimited_build(ex.mod, "llvm"), tvm.cpu())
    ref = vm["main"](*[tvm.runtime.tensor(a) for a in ex.args()])
    ref = [r.numpy() for r in ref]
    assert m.stats()["swap_in_count"] > 0
    assert len(got) == len(ref) and all(a.tobytes() == b.tobytes() for a, b in zip(got, ref))
