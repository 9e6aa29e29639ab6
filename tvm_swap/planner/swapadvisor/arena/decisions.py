"""What travels between the parts: one walk's decisions (Decisions), the arguments of a walk (WalkInputs),
a placed set of decisions (Placed) and the result of the decide/place rounds (Rounds).

A *stay* is one arrival of a tensor on the device: a closed interval of schedule slots [first, last] (a
compute output at slot i starts at i, a swap-in issued after slot q starts at q + 1, a drop after slot d
ends at d) and its aligned bytes. Placement gives every stay a byte offset."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


@dataclass
class Decisions:
    """One walk's swaps, drops, recomputes and stays (walk.ArenaWalk.run)."""
    out_stays: list                 # per slot: stay ids of the op's outputs
    swap_outs: list                 # (slot, tensor)
    drops: list                     # (slot, tensor, stay)
    swap_ins: list                  # (earliest slot, tensor, stay), in need order
    stay_t: list
    stay_first: list
    stay_last: list
    pinned: list                    # (tensor, stay) initial residents (kept pairs' old values included)
    evicted: int = 0
    pairs: list = field(default_factory=list)   # (param, update) kept on the device, ping-pong
    dirty: list = field(default_factory=list)   # (slot of the swap-out, stay): its bytes free once the copy is done
    recomputes: list = field(default_factory=list)  # (slot, op, stays of its outputs): rebuilt before the op at slot
    pair_stays: list = field(default_factory=list)  # per pair: (the old value's first stay, the update's last)
    inplace: list = field(default_factory=list)     # (op, out, in): out continues in's stay (run in place)


def floored_firsts(d: Decisions) -> list[int]:
    """Stay starts as issued: a swap-in is never issued before the one needed earlier (see actions.emit)."""
    first = list(d.stay_first)
    floor = -1
    for q, _, sid in d.swap_ins:
        if q > floor:
            floor = q
        first[sid] = floor + 1
    return first


class WalkInputs(NamedTuple):
    """What a walk takes besides its capacity: another walk at a lower capacity (cooling.py) repeats them."""
    bias: list          # per tensor: slots added to its next use when choosing a victim
    pinned: Any         # tensors resident the whole iteration
    pairs: list         # kept (param, update) pairs
    genes: Any          # the ArenaGenes (split, recompute, depth; partly, read by cooling.cooled)

    def run(self, walk, capacity: int, **kw):
        g = self.genes
        return walk.run(capacity, self.bias, self.pinned, self.pairs, split=g.split, recompute=g.recompute,
                        depth=g.depth, **kw)


class Placed(NamedTuple):
    """Decisions with a byte offset for every stay, at the capacity they were decided at."""
    decisions: Decisions
    offsets: list
    sizes: list
    capacity: int
    rounds: int         # decide/place rounds it took


class Rounds(NamedTuple):
    """rounds.rounds: the first placement that fits, and what another walk needs (WalkInputs)."""
    decisions: Decisions
    first: list         # stay starts as issued (floored_firsts)
    sizes: list
    offsets: list
    capacity: int
    rounds: int
    inputs: WalkInputs
