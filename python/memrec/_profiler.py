"""memrec and the program's own profiler share CUPTI (docs/reliability.md).

CUPTI takes one callback subscriber per process, and its activity records go to the buffers of whoever registered
last. torch.profiler's Kineto subscribes when the program first prepares a profiler (any activities) and keeps the
subscription; while it profiles it registers its own buffers and enables its own kinds. So memrec lends CUPTI:
just before each prepare (or enable) of the program's profiler, memrec flushes its buffers, disables its kinds and
gives up its subscription; just after the profiler is disabled (it has flushed its own), memrec takes the activity
API back (kernels, memory activity) and its subscription where that is free again. The file names each window
memrec did not trace; the allocator's events are recorded throughout.

The hooks wrap torch._C._autograd's _prepare_profiler, _enable_profiler and _disable_profiler where
torch.autograd and torch.autograd.profiler hold them (torch.profiler.profile calls them through the latter).
"""
import functools
import importlib
import os

import torch

from . import _C

WHY = "the program's profiler held CUPTI"
_NAMES = ("_prepare_profiler", "_enable_profiler", "_disable_profiler")


class State:
    installed = False
    kineto = False   # the program prepared a profiler in this process: Kineto holds CUPTI's callback subscription
    active = False   # between the program's prepare (or enable) and its disable


def busy():
    """Why memrec must start with CUPTI lent ("" when it is free to take it)."""
    return WHY if State.active or torch._C._autograd._profiler_enabled() else ""


def kineto():
    return State.kineto


def _lend():
    State.kineto = True
    if State.active:
        return
    State.active = True
    try:
        _C.cupti_lend(WHY)
    except Exception:  # noqa: BLE001  nothing of memrec's reaches the program's profiler
        pass


def _take_back():
    State.active = False
    if os.environ.get("TEARDOWN_CUPTI") == "1":  # Kineto finalizes CUPTI after it stops, later, on its own thread
        return
    try:
        _C.cupti_take_back()
    except Exception:  # noqa: BLE001
        pass


def _starting(original):
    @functools.wraps(original)
    def starting(*args, **kwargs):
        _lend()
        return original(*args, **kwargs)
    return starting


def _stopping(original):
    @functools.wraps(original)
    def stopping(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        finally:
            _take_back()
    return stopping


def install():
    """Wraps the profiler's entry points once per process (torch without them: nothing to share)."""
    if State.installed:
        return
    State.installed = True
    source = torch._C._autograd
    holders = [source]
    for name in ("torch.autograd", "torch.autograd.profiler"):
        try:
            holders.append(importlib.import_module(name))
        except ImportError:
            pass
    for name in _NAMES:
        original = getattr(source, name, None)
        if original is None:
            continue
        wrapped = (_stopping if name == "_disable_profiler" else _starting)(original)
        for holder in holders:
            if vars(holder).get(name) is original:
                setattr(holder, name, wrapped)
