"""The device pool: the plan's size-class objects, allocated once per module and reused by every call.

Each object is its own storage (a uint8 tensor), so every tensor sits at offset 0 of its object and keeps the
alignment kernels need. The pool also keeps the books the plan promises: which tensor holds each object now,
bytes in use and their peak. Anything a correct plan never does is a hard PoolError with the offending object
and tensors: a tensor bigger than its object, an object taken while another tensor still holds it, a release by
a tensor that does not hold it.

Objects of one size class are interchangeable, so between calls the pool can rename them (`rename`): object k of
the next call is backed by the buffer of object backing[k] of this one (tvm_swap.plan.Plan.next_object_map),
which lets an updated weight stay on the device in whatever object its update was written to.

An arena plan (tvm_swap.plan.Arena) has one region and objects at byte offsets in it, which may overlap: the
pool then also refuses to give a tenant an object that overlaps one still held (two live tensors sharing
bytes), and renames only the objects of the plan's renaming cycles (Arena.swaps: ping-pong pairs and
rotations of equal slots, which map the layout onto itself), so held ranges are checked in the plan's layout.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from tvm_swap.errors import PlanError
from tvm_swap.plan import Pool
from tvm_swap.units import format_bytes

FREE = -1


class PoolError(PlanError):
    """The plan (or a bypassed check) asked the pool for something that would corrupt memory."""


class DevicePool:
    def __init__(self, pool: Pool, alloc, mem_limit: int | None = None, names=None, alloc_all=None):
        """`alloc(nbytes)` makes one object, or `alloc_all(sizes)` makes them all at once (an arena);
        `names(t)` gives a tensor's name for messages."""
        self.plan_pool = pool
        self.object_bytes = [int(b) for b in pool.object_bytes()]
        self.object_class = [int(c) for c in pool.object_class()]
        self.arena = getattr(pool, "kind", "size-classes") == "arena"
        self.object_offset = [int(o) for o in pool.object_offset()]
        self.allocated_bytes = int(pool.region_bytes)
        self.workspace_bytes = int(pool.workspace_bytes)
        if mem_limit is not None and self.allocated_bytes + self.workspace_bytes > int(mem_limit):
            raise PoolError(f"the plan's pool needs {format_bytes(self.allocated_bytes + self.workspace_bytes)} "
                            f"but its memory limit is {format_bytes(mem_limit)}: the plan is corrupt; re-plan")
        if self.arena:
            if any(o < 0 or o + b > self.allocated_bytes for o, b in zip(self.object_offset, self.object_bytes)):
                raise PoolError("an arena object lies outside the arena: the plan is corrupt; re-plan")
            if alloc_all is None:
                raise PoolError("this backend cannot allocate an arena (it has no alloc_pool)")
            self.objects = alloc_all(self.object_bytes, self.object_offset, self.allocated_bytes)
        else:
            self.objects = alloc_all(self.object_bytes) if alloc_all else [alloc(b) for b in self.object_bytes]
        self._live_starts: list[int] = []      # arena: start offsets of the held objects' ranges (disjoint)
        self._live_at: dict[int, tuple] = {}   # start -> (end, object)
        self.storage_of = list(range(len(self.objects)))           # object id -> storage index (renamed)
        self._names = names or (lambda t: f"tensor {t}")
        self._views: dict = {}
        self.tenant = [FREE] * len(self.objects)
        self.in_use_bytes = 0
        self.peak_in_use_bytes = 0

    @property
    def num_objects(self) -> int:
        return len(self.objects)

    @property
    def device_bytes(self) -> int:
        """What this module holds on the device: every object plus the planned kernel workspace."""
        return self.allocated_bytes + self.workspace_bytes

    def _check_obj(self, obj: int) -> None:
        if not 0 <= obj < len(self.objects):
            raise PoolError(f"object {obj} does not exist; the pool has {len(self.objects)} objects")

    def storage(self, obj: int):
        """The buffer that plays object `obj` in this call."""
        self._check_obj(obj)
        return self.objects[self.storage_of[obj]]

    def rename(self, backing) -> None:
        """Between calls: object k is backed next by the buffer object backing[k] has now (same class)."""
        if self.arena:
            renaming = self.plan_pool.renaming()
            if any(renaming.get(k, k) != b for k, b in enumerate(backing)):
                raise PoolError("an arena plan renames only the objects of its renaming cycles (Arena.swaps) "
                                "between calls; the plan is corrupt")
        if sorted(backing) != list(range(len(self.objects))) or \
                any(self.object_class[b] != self.object_class[k] for k, b in enumerate(backing)):
            raise PoolError("object renaming must be a permutation within each size class; the plan is corrupt")
        self.storage_of = [self.storage_of[b] for b in backing]

    def view(self, obj: int, t: int, shape, dtype: str):
        """Tensor `t` as a (shape, dtype) view at offset 0 of object `obj`; cached, so calls reuse it."""
        self._check_obj(obj)
        key = (self.storage_of[obj], t)
        v = self._views.get(key)
        if v is None:
            try:
                v = self.objects[key[0]]._create_view(tuple(shape), dtype, 0)
            except ValueError as e:
                raise PoolError(f"{self._names(t)} {tuple(shape)} {dtype} does not fit object {obj} "
                                f"({format_bytes(self.object_bytes[obj])}): {str(e).splitlines()[0]}") from None
            self._views[key] = v
        return v

    def occupy(self, obj: int, t: int) -> None:
        self._check_obj(obj)
        held = self.tenant[obj]
        if held != FREE:
            raise PoolError(f"object {obj} is given to {self._names(t)} while {self._names(held)} still holds it "
                            f"(two live tensors in one object); the plan is corrupt: verify and re-plan")
        if self.arena:
            self._hold_range(obj, t)
        self.tenant[obj] = t
        self.in_use_bytes += self.object_bytes[obj]
        if self.in_use_bytes > self.peak_in_use_bytes:
            self.peak_in_use_bytes = self.in_use_bytes

    def release(self, obj: int, t: int) -> None:
        self._check_obj(obj)
        if self.tenant[obj] != t:
            held = self.tenant[obj]
            raise PoolError(f"{self._names(t)} releases object {obj}, which "
                            f"{'is free' if held == FREE else 'holds ' + self._names(held)}; the plan is corrupt")
        self.tenant[obj] = FREE
        self.in_use_bytes -= self.object_bytes[obj]
        if self.arena:
            lo = self.object_offset[obj]
            del self._live_starts[bisect_left(self._live_starts, lo)]
            del self._live_at[lo]

    def _hold_range(self, obj: int, t: int) -> None:
        """Arena: object `obj`'s bytes must not overlap any held object's."""
        lo = self.object_offset[obj]
        hi = lo + self.object_bytes[obj]
        k = bisect_left(self._live_starts, hi)      # held ranges starting before hi
        if k > 0:
            s = self._live_starts[k - 1]
            end, other = self._live_at[s]
            if end > lo:
                raise PoolError(f"arena object {obj} [{lo}, {hi}) is given to {self._names(t)} while "
                                f"{self._names(self.tenant[other])} still holds overlapping object {other} "
                                f"[{s}, {end}); the plan is corrupt: verify and re-plan")
        insort(self._live_starts, lo)
        self._live_at[lo] = (hi, obj)

    def holds(self, obj: int, t: int) -> bool:
        return 0 <= obj < len(self.tenant) and self.tenant[obj] == t

    def reset(self, residents) -> None:
        """Start of a call: only the (tensor, object) residents are held."""
        self.tenant = [FREE] * len(self.objects)
        self.in_use_bytes = 0
        self._live_starts, self._live_at = [], {}
        for t, obj in residents:
            self.occupy(obj, t)

    def stats(self) -> dict:
        return {"pool_bytes": self.allocated_bytes, "workspace_bytes": self.workspace_bytes,
                "device_peak_bytes": self.device_bytes, "pool_in_use_peak_bytes": self.peak_in_use_bytes,
                "pool_objects": len(self.objects)}
