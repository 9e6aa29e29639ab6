"""Placement of one walk's stays, with the kept pairs' zones laid out at the bottom of the arena.

Placement proper (placement.py, numba) is offline dynamic storage allocation of the stays: sweeping the slots
in order (release what ended, then allocate what starts, largest first, best fit among free blocks, lowest
address on ties; the region grows only when no free block fits), or greedy by size where the sweep fragments.
Stays whose slot intervals intersect get disjoint address ranges.

Kept pairs (pairs.py): an updated param p that stays on the device is resident from the start to its last read
and its update p' from its production to the end. By rotation (tuning.ROTATE_KEPT, the default) zones of one
size are equal slots, one per old value, and each update is written into a slot that another old value of its
size has left (or a spare), so k kept params whose updates chain hold k + 1 slots instead of 2k zones
(rotation_layout). Otherwise each pair has two zones of p's size, Z (p) and Z' (p'), the old values' zones side
by side in one block and the updates' in a second block above it in the same order. Other stays may use a zone
while its tenant is away (Z after p's last read, Z' before p' is made: placement.place_stays_zoned). Between
iterations the zones are renamed so that every iteration has the same layout (renaming.py)."""
from __future__ import annotations

import heapq

from ...graphindex import NEVER as _NEVER
from ..placement import place_by_size, place_stays, place_stays_clean, place_stays_zoned
from ..placement_orders import place_by_size_orders
from . import tuning
from .decisions import Decisions


def place_with_pairs(d: Decisions, first, last, sizes, arena_bytes: int, tight, cool=None, orders=True):
    """The stays placed with the kept pairs' zones laid out by rotation (tuning.ROTATE_KEPT, rotation_layout) or, when
    that does not fit, as two blocks of ping-pong zones (_place_layout), if those fit better: the blocks let an
    activation span the zones of several pairs whose tenants are away (train67@0.8 keeps its four pairs so),
    which equal slots that rotate on their own cannot. Returns (offsets, bytes needed); renaming.renaming_cycles tells
    the two layouts apart by their offsets. `orders`: on small instances, greedy by size in more visit orders
    when largest-first overflows (see _place_layout)."""
    if not tuning.ROTATE_KEPT or not d.pair_stays:
        return _place_layout(d, first, last, sizes, arena_bytes, tight, cool, False, orders)
    offsets, need = _place_layout(d, first, last, sizes, arena_bytes, tight, cool, True, orders)
    if need > arena_bytes and 2 * sum(sizes[sp] for sp, _ in d.pair_stays) <= arena_bytes:
        off2, need2 = _place_layout(d, first, last, sizes, arena_bytes, tight, cool, False, orders)
        if need2 < need:
            return off2, need2
    return offsets, need


def _place_layout(d: Decisions, first, last, sizes, arena_bytes: int, tight, cool, rotate: bool,
                  orders: bool = True):
    """Kept pairs at the bottom, each in two zones of its size (old value, update); the other stays above, or
    inside a pair's zone while its tenant is away (place_stays_zoned): in the old value's zone after its last
    read, in the update's zone before it is made. The old values' zones lie side by side in one block and the
    updates' zones in a second block above it, in the same order, so trading every pair's two zones between
    iterations is one translation of the first block onto the second and back (the objects of both blocks
    and the mirror objects of every stay inside them, see renaming.mirror_swaps): what sits in a block sits in the
    same block of the same layout every iteration, and greedy by size may place a stay across neighbouring
    zones of one block while all of their tenants are away (a pair's zone alone is often smaller than the
    activations that could use it: train67@0.8 kept 2 of its 4 pairs with a zone per pair). Returns
    (offsets, bytes needed).
    With `rotate` the zones are equal slots per size instead (rotation_layout), which no stay straddles.
    `tight(overflow)`: whether greedy by size (no zones) is worth trying after the sweep overflowed by that
    much (near the floor, where the sweep fragments). `cool`: stay ends by which their bytes are clean: the
    stays are placed clean-first (place_stays_clean) above the pairs, without zones or greedy by size.
    `orders`: on small instances, greedy by size in more visit orders when largest-first overflows."""
    n_st = len(sizes)
    offsets = [0] * n_st
    if rotate:
        zones, bounds, base = rotation_layout(d, first, last, sizes, offsets)
    else:
        half = sum(sizes[sp] for sp, _ in d.pair_stays)
        base = 0
        zones = []
        for sp, sq in d.pair_stays:
            offsets[sp] = base
            offsets[sq] = half + base
            base += sizes[sp]
        base = 2 * half
        for sp, sq in d.pair_stays:
            zones.append((offsets[sp], offsets[sp] + sizes[sp], last[sp], _NEVER))   # old value's, after it
            zones.append((offsets[sq], offsets[sq] + sizes[sq], -2, first[sq]))      # update's, before it
        # no stay straddles the two blocks or a block and the region above them
        bounds = [half, base]
    if d.pair_stays:
        in_pair = {k for pr in d.pair_stays for k in pr}
        rest = [k for k in range(n_st) if k not in in_pair]
        sub_first = [first[k] for k in rest]
        sub_last = [last[k] for k in rest]
        sub_size = [sizes[k] for k in rest]
    else:                       # every stay, at base 0 (no copies of 10^5-long lists)
        rest, sub_first, sub_last, sub_size = None, first, last, sizes
    if cool is not None:        # (zones are extra room only: leaving them unused is valid)
        sub_cool = cool if rest is None else [cool[k] for k in rest]
        return _shifted(rest, offsets, base, *place_stays_clean(sub_first, sub_last, sub_cool, sub_size,
                                                                arena_bytes - base))
    if d.pairs:
        offs, need = place_stays_zoned(sub_first, sub_last, sub_size, zones, base)
        if need > arena_bytes and len(sub_size) <= tuning.BY_SIZE_ZONED_MAX_STAYS:
            # the sweep fragments small instances: greedy by size around the pairs' own stays
            fixed = [(first[k], last[k], offsets[k], sizes[k]) for pr in d.pair_stays for k in pr]
            # a zone is open to stays only while its tenant is away (the fixed stays), and no stay straddles
            # the bounds of the zones' blocks (pairs) or slots (rotation)
            offs2, need2 = place_by_size(sub_first, sub_last, sub_size, fixed, bounds)
            need2 = max(need2, base)           # the zones themselves (their own stays are not counted)
            if need2 < need:
                offs, need = offs2, need2
            if need > arena_bytes and orders:  # small instances: the same greedy in other orders
                more = place_by_size_orders(sub_first, sub_last, sub_size, fixed, bounds, arena_bytes)
                if more is not None and max(more[1], base) < need:
                    offs, need = more[0], max(more[1], base)
        if need <= arena_bytes:
            for k, o in zip(rest, offs):
                offsets[k] = o
            return offsets, need
        offs, need = place_stays(sub_first, sub_last, sub_size)
    else:
        offs, need = place_stays(sub_first, sub_last, sub_size)
    if need > arena_bytes - base:
        worth = len(sub_size) <= tuning.BY_SIZE_MAX_STAYS and tight(need - (arena_bytes - base))
        offs2, need2 = place_by_size(sub_first, sub_last, sub_size) if worth else (offs, need)
        if need2 < need:
            offs, need = offs2, need2
        if worth and orders and need > arena_bytes - base:   # small instances: the same greedy in other orders
            more = place_by_size_orders(sub_first, sub_last, sub_size, fits=arena_bytes - base)
            if more is not None and more[1] < need:
                offs, need = more
    return _shifted(rest, offsets, base, offs, need)


def rotation_layout(d: Decisions, first, last, sizes, offsets):
    """Kept pairs by rotation (tuning.ROTATE_KEPT): per size, equal disjoint slots side by side at the bottom, the old
    values one per slot; the updates, in order of production, each take a slot whose tenant has left: its own
    param's if that is gone (the slot then backs itself), else the one left last, else a new spare slot. So k
    pairs of a size whose updates chain (an update made after another old value of its size is dead) hold k + 1
    slots instead of 2k zones. Between iterations slot a is played by the slot where the update of a's param
    ends (the free slots at the end play the spare ones), with every object inside them (renaming.rotation_cycles).
    Other stays may use a slot while it is free (zones: after its old value's last read, before its update
    arrives) and never straddle a slot's edge. Sets the pairs' stays' offsets; returns (zones, bounds, base)."""
    groups: dict = {}
    for k, (sp, _) in enumerate(d.pair_stays):
        groups.setdefault(sizes[sp], []).append(k)
    zones, bounds, base = [], [], 0
    for sz in sorted(groups, reverse=True):
        ks = groups[sz]
        after = [last[d.pair_stays[k][0]] for k in ks]     # per slot: its old value's last slot (-2: spare)
        before = [_NEVER] * len(ks)                         # per slot: its update's first slot (NEVER: none)
        own = {k: j for j, k in enumerate(ks)}
        by_free = sorted(range(len(ks)), key=after.__getitem__)
        free: list = []                                     # (-after, slot): left by its old value
        nxt = 0
        for k in sorted(ks, key=lambda k: (first[d.pair_stays[k][1]], k)):
            f = first[d.pair_stays[k][1]]
            while nxt < len(by_free) and after[by_free[nxt]] < f:
                heapq.heappush(free, (-after[by_free[nxt]], by_free[nxt]))
                nxt += 1
            j = own[k]
            if not (after[j] < f and before[j] == _NEVER):
                j = -1
                while free:
                    c = heapq.heappop(free)[1]
                    if before[c] == _NEVER:
                        j = c
                        break
                if j < 0:
                    j = len(after)
                    after.append(-2)
                    before.append(_NEVER)
            before[j] = f
            offsets[d.pair_stays[k][1]] = base + j * sz
        for k in ks:
            offsets[d.pair_stays[k][0]] = base + own[k] * sz
        for j in range(len(after)):
            zones.append((base + j * sz, base + (j + 1) * sz, after[j], before[j]))
            bounds.append(base + j * sz)
        base += len(after) * sz
    bounds.append(base)
    return zones, bounds, base


def _shifted(rest, offsets, base, offs, need):
    if rest is None:            # every stay, base 0: the placement's own (fresh) list
        return offs, need
    for k, o in zip(rest, offs):
        offsets[k] = base + o
    return offsets, base + need
