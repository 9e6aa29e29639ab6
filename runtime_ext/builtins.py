"""The `tvm_swap.*` packed functions the applied program calls (see relay_passes.apply for the call sites).

They are process-global (TVM's registry), while several SwapModules can live in one process, so each call goes
to the executor of the module currently running on this thread: SwapModule enters `active(executor)` around
its VM call. Calling an applied function directly through a VirtualMachine, without a SwapModule, is an error
that says so. A failure inside a builtin is kept on the executor, so SwapModule can re-raise the original
tvm_swap error rather than TVM's wrapped traceback.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

import tvm

from tvm_swap.errors import TvmSwapError

_state = threading.local()


class NoActiveModuleError(TvmSwapError):
    """A tvm_swap builtin ran outside SwapModule."""


@contextmanager
def active(executor):
    prev = getattr(_state, "executor", None)
    _state.executor = executor
    executor.error = None
    try:
        yield executor
    finally:
        _state.executor = prev


def _ex():
    ex = getattr(_state, "executor", None)
    if ex is None:
        raise NoActiveModuleError("a tvm_swap program was called directly; run it through a SwapModule "
                                  "(tvm_swap.build(...) or tvm_swap.load(path)), which owns its pool and streams")
    return ex


def _guard(fn):
    """Keep the original error on the executor (SwapModule re-raises it), then let TVM unwind."""
    def wrapper(*args):
        try:
            return fn(*args)
        except BaseException as e:
            ex = getattr(_state, "executor", None)
            if ex is not None and getattr(ex, "error", None) is None:
                ex.error = e
            raise
    wrapper.__name__ = fn.__name__
    return wrapper


def _register(name):
    def deco(fn):
        tvm.register_global_func(name, _guard(fn), override=True)
        return fn
    return deco


@_register("tvm_swap.begin")
def _begin(*inputs):
    _ex().begin(inputs)


@_register("tvm_swap.object")
def _object(i, t, obj):
    return _ex().object(int(i), int(t), int(obj))


@_register("tvm_swap.wait")
def _wait(i):
    _ex().wait(int(i))


@_register("tvm_swap.record")
def _record(i):
    _ex().record(int(i))


@_register("tvm_swap.swap_out")
def _swap_out(i, _tensor):
    _ex().swap_out(int(i))


@_register("tvm_swap.swap_in")
def _swap_in(i, source=None):
    return _ex().swap_in(int(i), source)


@_register("tvm_swap.drop")
def _drop(i):
    _ex().drop(int(i))


@_register("tvm_swap.host_begin")
def _host_begin(i):
    _ex().host_begin(int(i))


@_register("tvm_swap.host_tensor")
def _host_tensor(i, t):
    return _ex().host_tensor(int(i), int(t))


@_register("tvm_swap.host_end")
def _host_end(i):
    _ex().host_end(int(i))


@_register("tvm_swap.end")
def _end():
    return _ex().end()


NAMES = ("tvm_swap.begin", "tvm_swap.object", "tvm_swap.wait", "tvm_swap.record", "tvm_swap.swap_out",
         "tvm_swap.swap_in", "tvm_swap.drop", "tvm_swap.end", "tvm_swap.host_begin", "tvm_swap.host_tensor",
         "tvm_swap.host_end")
