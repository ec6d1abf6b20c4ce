"""Scopes that come by themselves: module scopes (qualified names, forward and backward), the forward/backward/
optimizer phases and optimizer steps, from global hooks that work on torch 1.13 and 2.x.

- forward: global module forward pre/post hooks, memrec._C's own (module_pre_hook, module_post_hook), which keep
  the thread's open module calls and open and close their scopes; Python's part is the rare one: the outermost
  module call opens the "forward" phase, or inside backward the "recompute" phase (activation checkpointing runs the
  forward again there), and a module called the first time is named.
- backward: `torch.autograd.backward` (which Tensor.backward calls) and `torch.autograd.grad` open the "backward"
  phase. Module scopes in backward come from the recorder (start(modules=True)): each module scope the forward
  hooks open keeps the range of autograd nodes its call makes, and each backward node runs inside the module scopes
  of the call that made it, on whichever thread runs it (autograd's device threads for CUDA). No hook is put on
  the program's tensors.
- owners (_owners): the first outermost forward of each root module names its parameters and buffers, the end of
  each outermost backward its parameters' gradients, each optimizer step its state.
- optimizer: Optimizer.step (torch 2.x global step hooks; on 1.13 each Optimizer class's step is wrapped);
  every step ends a "step N" scope and starts the next, and drives the record window.

Every entry point the program calls goes through _guarded: nothing memrec raises reaches the program.
"""
import functools
import importlib
import os
import threading
import traceback

import torch

from . import _C, _compiled, _modules, _owners, _scopes
from ._say import say

_tls = threading.local()
# Inside torch.compile's tracing the hooks do nothing (Dynamo folds this to True): they would break the graph.
_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
_names = _modules.Names()  # module -> qualified name
_installed = False
_on = False  # the running recording asked for scopes (start(scopes=True)): the hooks do nothing otherwise
_task = getattr(torch._C, "_current_graph_task_id", None)  # torch 2.x: -1 outside backward


class _Steps:
    taken = 0           # optimizer steps the program has taken
    level = None        # depth of the open step scope on its thread, or None
    thread = None
    on_step = None      # called with `taken` after each step (the record window)


steps = _Steps()


class _Repairs:
    """Internal errors the hooks met, each repaired on its thread; the file's note says how many and the first."""
    count = 0
    first = ""


class _Thread:
    """A thread's optimizer and backward bookkeeping (its module calls are memrec._C's)."""
    __slots__ = ("in_step", "optimizer_level", "backwards")

    def __init__(self):
        self.optimizer_level = None
        self.in_step = False
        self.backwards = 0


def _thread():
    try:
        return _tls.state
    except AttributeError:
        return _reset_thread()


def _reset_thread():
    t = _tls.state = _Thread()
    return t


def enable(scopes):
    """A recording starts: the hooks open scopes in it, or do nothing (scopes=False)."""
    global _on
    _on = bool(scopes)
    _C.set_module_hooks(_on, _module_begins, _repair)


def _repair(error):
    """An error of memrec's own: close this thread's scopes, start its state afresh and note it in the file."""
    try:
        _scopes.close_to(0)
        _C.forget_module_calls()
        _reset_thread()
        if steps.thread == threading.get_ident():
            forget_step()
            open_step()
        _Repairs.count += 1
        if not _Repairs.first:
            where = traceback.extract_tb(error.__traceback__)[-1]
            _Repairs.first = (f"{type(error).__name__}: {error} "
                              f"({os.path.basename(where.filename)}:{where.lineno} {where.name})")
        if _C.running():
            _C.set_metadata("notes.hooks", f"memrec's scope hooks met {_Repairs.count} internal error(s) and closed "
                            f"the open scopes of the thread each time; the recording went on (first: "
                            f"{_Repairs.first})")
    except Exception:  # noqa: BLE001  the repair failing too must still not reach the program
        pass


def _guarded(hook):
    """`hook` as the program calls it: what it raises is repaired and noted, never passed on (returns None)."""
    @functools.wraps(hook)
    def guarded(*args):
        try:
            return hook(*args)
        except Exception as e:  # noqa: BLE001  any error of memrec's own
            _repair(e)
            return None
    return guarded


def _owners_scan(scan, *args):
    """An _owners scan: what it raises is counted in the file, and the thread's scopes stay as they are."""
    if not _owners.enabled:
        return
    try:
        scan(*args)
    except Exception as e:  # noqa: BLE001  any error of memrec's own
        _owners._failed(e)


def _name_of(module, root):
    """The module's qualified name under root (torch.compile's OptimizedModule named as the module it wraps), read
    without running the program's code (_modules)."""
    name = _names.get(module)
    if name is None:
        for path, sub in _modules.walk(root):  # the model's own paths: wrappers' parts left out
            if _names.get(sub) is None:
                _names.set(sub, path or _modules.class_name(root))
        name = _names.get(module)
        if name is None:
            name = _compiled.piece_name(module) or _modules.class_name(module)
            _names.set(module, name)
    return name


def _in_backward():
    """Whether this thread runs inside backward: a forward here is run again (checkpointing) or from a hook."""
    if _task is not None:
        return _task() != -1
    return _scopes.innermost("phase") in ("backward", "recompute")  # torch 1.13: CPU backward runs on this thread


def _compiled_pre(module, inputs):
    if _compiling():  # Dynamo inlines global hooks: this check, folded to True, is all it traces
        return None
    return _pre(module, inputs)


def _compiled_post(module, inputs, output):
    if _compiling():
        return None
    return _post(module, inputs, output)


# The global forward hooks are memrec._C's, with no Python frame of their own, where no compiler traces them (a
# torch without torch.compiler); else Python hooks that check for Dynamo first call them.
_pre, _post = _C.module_pre_hook, _C.module_post_hook
_traced = hasattr(getattr(torch, "compiler", None), "is_compiling")
_forward_pre, _forward_post = (_compiled_pre, _compiled_post) if _traced else (_pre, _post)


def _module_begins(module):
    """A module call's rare part, before memrec._C opens its scope: the thread's outermost call (its phase, the
    owners), or a module named the first time."""
    root = _C.outermost_module(module)
    if root is None:  # `is`, not truthiness: a module's __len__ or __bool__ may raise (OptimizedModule's does)
        _outermost_begins(module)
        root = module
    _C.module_open(module, _name_of(module, root))


def _outermost_begins(module):
    """The thread's outermost module call begins: the forward phase, or in backward the recompute phase."""
    if _in_backward():
        _C.open_forward("recompute")
    elif _scopes.innermost("phase") is None:
        _C.open_forward("forward")
    _owners_scan(_owners.on_forward, module, _name_of)


@_guarded
def _backward_begin():
    t = _thread()
    _C.close_forward(True)  # a recompute the recorder stopped early
    t.backwards += 1
    level = _scopes.depth()
    _scopes.open("backward", "phase")
    return level


@_guarded
def _backward_end(level, sets_grads):
    t = _thread()
    _scopes.close_to(level)
    t.backwards = max(0, t.backwards - 1)  # a repair in between started the thread afresh
    if sets_grads and t.backwards == 0 and _C.running():
        _owners_scan(_owners.on_backward_end)


def _backward(original, sets_grads):
    """torch.autograd.backward or grad, in the "backward" phase (also when called inside another backward).
    sets_grads: the call leaves gradients in .grad (backward does, grad does not)."""
    @functools.wraps(original)
    def backward(*args, **kwargs):
        if _compiling() or not _on or not _C.running():
            return original(*args, **kwargs)
        level = _backward_begin()
        try:
            return original(*args, **kwargs)
        finally:
            if level is not None:
                _backward_end(level, sets_grads)
    return backward


def _optimizer_begin(*_):
    t = _thread()
    _C.close_forward(False)  # a forward that raised, or a step inside forward
    if _on:
        t.optimizer_level = _scopes.depth()
        _scopes.open("optimizer", "phase")


def _optimizer_end(optimizer=None, *_):
    t = _thread()
    if t.optimizer_level is not None:
        _scopes.close_to(t.optimizer_level)
        t.optimizer_level = None
    steps.taken += 1
    if steps.thread == threading.get_ident() and steps.level is not None:
        _scopes.close_to(steps.level)
        steps.level = None
    if steps.on_step:
        try:  # the --record window starts or stops here: memrec's failure must not become the program's
            steps.on_step(steps.taken)
        except Exception as e:
            say(f"recording window: {e}")
    if optimizer is not None and _C.running():  # after on_step: the --record window may have just started
        _owners_scan(_owners.on_step, optimizer)
    open_step()


def open_step():
    """Opens "step N" (N = optimizer steps taken so far) on this thread, when recording with scopes."""
    if not _on or steps.level is not None and steps.thread == threading.get_ident():
        return
    level = _scopes.depth()
    if _scopes.open(f"step {steps.taken}", "step"):
        steps.level, steps.thread = level, threading.get_ident()


def forget_step():
    steps.level = steps.thread = None


@_guarded
def _step_begin():
    """Whether this Optimizer.step call is the outermost (a subclass's step calls its parent's)."""
    t = _thread()
    if t.in_step:
        return False
    t.in_step = True
    _optimizer_begin()
    return True


@_guarded
def _step_end(optimizer):
    _thread().in_step = False
    _optimizer_end(optimizer)


def _wrap_step(cls):
    step = cls.__dict__.get("step")
    if step is None or getattr(step, "_memrec_wrapped", False):
        return

    @functools.wraps(step)
    def wrapped(self, *args, **kwargs):
        outermost = _step_begin()
        try:
            return step(self, *args, **kwargs)
        finally:
            if outermost:
                _step_end(self)

    wrapped._memrec_wrapped = True
    cls.step = wrapped


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def _hook_optimizers():
    opt = importlib.import_module("torch.optim.optimizer")  # torch.optim deletes the attribute on 1.13
    if hasattr(opt, "register_optimizer_step_pre_hook"):  # torch >= 2.0
        opt.register_optimizer_step_pre_hook(_guarded(_optimizer_begin))
        opt.register_optimizer_step_post_hook(_guarded(_optimizer_end))
        return
    for cls in _all_subclasses(torch.optim.Optimizer):
        _wrap_step(cls)
    init = torch.optim.Optimizer.__init__

    @functools.wraps(init)
    def init_and_wrap(self, *args, **kwargs):
        init(self, *args, **kwargs)
        _wrap_step(type(self))

    torch.optim.Optimizer.__init__ = init_and_wrap


def _hook_modules():
    """The global module hooks. A forward that raises skips its post hook: what it left open closes at the next
    optimizer step (and on an autograd thread at the next backward)."""
    modules = torch.nn.modules.module
    handles = [modules.register_module_forward_pre_hook(_forward_pre),
               modules.register_module_forward_hook(_forward_post)]
    _hide_from_compile_warning(modules, {h.id for h in handles})


def _hide_from_compile_warning(modules, ours):
    """torch.compile(module) warns when any global module hook exists (OptimizedModule.__call__ asks
    torch.nn.modules.module._has_any_global_hook()): memrec's hooks alone must not make the program print it, the
    program's own still do. torch < 2.0 has neither."""
    original = getattr(modules, "_has_any_global_hook", None)
    if original is None:
        return
    names = [n for n, v in vars(modules).items() if n.startswith(("_global_forward", "_global_backward"))
             and isinstance(v, dict)]

    @functools.wraps(original)
    def has_any_global_hook():
        return bool(original()) and any(key not in ours for n in names for key in getattr(modules, n))

    modules._has_any_global_hook = has_any_global_hook


def install():
    """Installs the global hooks once per process (they cost a check while nothing records)."""
    global _installed
    if _installed:
        return
    _installed = True
    _hook_modules()
    torch.autograd.backward = _backward(torch.autograd.backward, True)
    torch.autograd.grad = _backward(torch.autograd.grad, False)
    _hook_optimizers()
