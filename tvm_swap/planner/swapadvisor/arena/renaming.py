"""How the arena's objects are renamed between iterations when kept pairs stay on the device (Arena.swaps).

An update written this iteration plays its param next iteration, so the objects holding the kept pairs are
renamed as a whole: two blocks of ping-pong zones trade places (mirror_swaps), or the equal slots of a
rotation are permuted (rotation_cycles), each object inside a block or slot with its mirror at the same place
in the block or slot that plays it. The renaming so maps the layout onto itself and every iteration has the
same layout (the verifier checks that property, not the plan's word)."""
from __future__ import annotations

from bisect import bisect_right

from ....errors import PlanError
from .decisions import Decisions


def permutation_cycles(backing: list[int]) -> list[tuple[int, ...]]:
    """Arena.swaps of a permutation (backing[k]: the object whose buffer plays k next iteration): its cycles
    longer than 1, each from its smallest object, a(i+1) = backing[a(i)]."""
    cycles, seen = [], set()
    for k in range(len(backing)):
        if k in seen or backing[k] == k:
            continue
        cyc, x = [], k
        while x not in seen:
            seen.add(x)
            cyc.append(x)
            x = backing[x]
        cycles.append(tuple(cyc))
    return cycles


def renaming_cycles(d: Decisions, offsets, sizes, obj_of: dict, objs: list) -> list[tuple[int, ...]]:
    """Arena.swaps for the layout layout.place_with_pairs chose: two blocks of ping-pong zones (every update's zone a
    block above its old value's, the old values' block at the bottom: mirror_swaps) or a rotation
    (rotation_cycles). A rotation laid out like two blocks renames its slots exactly as the blocks would."""
    if not d.pair_stays:
        return []
    half = sum(sizes[sp] for sp, _ in d.pair_stays)
    blocks = min(offsets[sp] for sp, _ in d.pair_stays) == 0 and \
        sorted(offsets[sp] for sp, _ in d.pair_stays)[-1] < half and \
        all(offsets[sq] - offsets[sp] == half for sp, sq in d.pair_stays)
    return (mirror_swaps if blocks else rotation_cycles)(d, offsets, sizes, obj_of, objs)


def mirror_swaps(d: Decisions, offsets, sizes, obj_of: dict, objs: list) -> list[tuple[int, int]]:
    """The objects that trade buffers between iterations: the kept pairs' two blocks of zones (the old values'
    and the updates', in the same order, see layout.place_with_pairs) trade places as a whole, so every object
    inside one block is paired with the object at the same place in the other block (added, unused, when no
    stay sits there). The renaming then maps the arena's layout onto itself (objects that overlap still
    overlap, the others still do not: the verifier checks it)."""
    if not d.pairs:
        return []
    lo = min(offsets[sp] for sp, _ in d.pair_stays)
    half = sum(sizes[sp] for sp, _ in d.pair_stays)
    if any(offsets[sq] - offsets[sp] != half or sizes[sq] != sizes[sp] for sp, sq in d.pair_stays):
        raise PlanError("planner bug: a kept pair's zones are not a block apart")
    zones = [(lo, half, lo + half), (lo + half, half, lo)]   # (start, size, the other block's start)
    zstart = [z[0] for z in zones]
    swaps = []
    for off, sz in list(objs):
        j = bisect_right(zstart, off) - 1
        if j < 0 or off >= zstart[j] + zones[j][1]:
            continue
        if off + sz > zstart[j] + zones[j][1]:
            raise PlanError("planner bug: an arena object straddles a block of kept pairs' zones")
        mirror = (zones[j][2] + off - zstart[j], sz)
        if mirror not in obj_of:
            obj_of[mirror] = len(obj_of)
            objs.append(mirror)
        a, b = obj_of[(off, sz)], obj_of[mirror]
        if a < b:
            swaps.append((a, b))
    return swaps


def rotation_cycles(d: Decisions, offsets, sizes, obj_of: dict, objs: list) -> list[tuple[int, ...]]:
    """The renaming of a rotation layout (layout.rotation_layout) as cycles of objects (Arena.swaps): per size, slot a
    is played next iteration by the slot where the update of a's param ends, the slots free at the end play
    the spare ones (in address order), and every object inside a slot by the object at the same place in the
    slot that plays it (added, unused, when no stay sits there: each object's whole cycle exists). So the
    renaming translates equal disjoint slots onto each other and maps the layout onto itself (the verifier
    checks it)."""
    if not d.pair_stays:
        return []
    plays: dict = {}                           # slot start -> the slot start that plays it next iteration
    slot_size: dict = {}
    by_size: dict = {}
    for sp, sq in d.pair_stays:
        if sizes[sq] != sizes[sp]:
            raise PlanError("planner bug: a kept pair's slots differ in size")
        plays[offsets[sp]] = offsets[sq]
        by_size.setdefault(sizes[sp], (set(), set()))
        by_size[sizes[sp]][0].add(offsets[sp])
        by_size[sizes[sp]][1].add(offsets[sq])
    for sz, (olds, news) in by_size.items():
        for a in olds | news:
            slot_size[a] = sz
        for a, b in zip(sorted((olds | news) - olds), sorted((olds | news) - news)):
            plays[a] = b
    starts = sorted(slot_size)
    inside: list = []                          # (object, slot start, offset in the slot)
    for off, sz in list(objs):
        j = bisect_right(starts, off) - 1
        if j < 0 or off >= starts[j] + slot_size[starts[j]]:
            continue
        if off + sz > starts[j] + slot_size[starts[j]]:
            raise PlanError("planner bug: an arena object straddles a kept pair's slot")
        inside.append((obj_of[(off, sz)], starts[j], off - starts[j], sz))
    backing: dict = {}
    for o, a, delta, sz in inside:             # each object's whole cycle, mirrors added where missing
        if o in backing:
            continue
        c = a
        while True:
            key = (c + delta, sz)
            if key not in obj_of:
                obj_of[key] = len(obj_of)
                objs.append(key)
            nxt_key = (plays[c] + delta, sz)
            if nxt_key not in obj_of:
                obj_of[nxt_key] = len(obj_of)
                objs.append(nxt_key)
            backing[obj_of[key]] = obj_of[nxt_key]
            c = plays[c]
            if c == a:
                break
    cycles, seen = [], set()
    for o in sorted(backing):
        if o in seen or backing[o] == o:
            continue
        cyc = [o]
        seen.add(o)
        x = backing[o]
        while x != o:
            cyc.append(x)
            seen.add(x)
            x = backing[x]
        cycles.append(tuple(cyc))
    return cycles
