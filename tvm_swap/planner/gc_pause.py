"""Pausing Python's cyclic garbage collector around planner passes.

A planner pass allocates millions of small objects (lists, tuples, Actions) and creates no reference cycles,
so every collection those allocations trigger only rescans what is alive: at 10^5 ops (millions of live
objects: the graph, the decisions, the actions) the collections cost more than some passes themselves.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_paused():
    """Pause the cyclic garbage collector for the block (restored after, as it was)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
