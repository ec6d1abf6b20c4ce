"""Scopes that come by themselves: module scopes (qualified names, forward and backward), the forward/backward/
optimizer phases and optimizer steps, from global hooks that work on torch 1.13 and 2.x.

- forward: global module forward pre/post hooks; the outermost module call opens the "forward" phase.
- backward: `torch.autograd.backward` (which Tensor.backward calls) opens the "backward" phase; a module's
  backward scope opens when the gradient of its output arrives and closes when the gradient of its input is
  computed (tensor hooks: the graph is not changed). Backward runs on autograd's device threads for CUDA.
- optimizer: Optimizer.step (torch 2.x global step hooks; on 1.13 each Optimizer class's step is wrapped);
  every step ends a "step N" scope and starts the next, and drives the record window.
"""
import functools
import importlib
import sys
import threading
import weakref

import torch

from . import _C, _scopes

_tls = threading.local()
# Inside torch.compile's tracing the hooks do nothing (Dynamo folds this to True): they would break the graph.
_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
_names = weakref.WeakKeyDictionary()  # module -> qualified name
_installed = False
_generation = 0  # backward passes started; stale module scopes on autograd threads close at the next one


class _Steps:
    taken = 0           # optimizer steps the program has taken
    level = None        # depth of the open step scope on its thread, or None
    thread = None
    on_step = None      # called with `taken` after each step (the record window)


steps = _Steps()


def _thread():
    t = _tls.__dict__
    if "modules" not in t:
        t.update(modules=[], forward_level=None, in_step=False, optimizer_level=None, generation=0)
    return _tls


def _tensors(value, out):
    """Tensors in a module's inputs or outputs (tensors, tuples, lists, dicts such as ModelOutput)."""
    if isinstance(value, torch.Tensor):
        if value.requires_grad:
            out.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _tensors(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _tensors(v, out)
    return out


def _name_of(module, root):
    name = _names.get(module)
    if name is None:
        for sub_name, sub in root.named_modules():
            if sub not in _names:
                _names[sub] = sub_name or type(root).__name__
        name = _names.get(module)
        if name is None:
            name = _names[module] = type(module).__name__
    return name


class _BackwardCall:
    """One module call's backward scope on the thread that runs its backward."""
    __slots__ = ("name", "level", "thread", "__weakref__")

    def __init__(self, name):
        self.name, self.level, self.thread = name, None, None

    def enter(self, grad):
        if self.level is not None:
            return
        t = _thread()
        if t.generation != _generation:
            t.generation = _generation
            if _scopes.innermost("phase") is None:  # an autograd thread: what an earlier backward left open
                _scopes.close_to(0)
        self.level, self.thread = _scopes.depth(), threading.get_ident()
        _scopes.open(self.name, "module")

    def exit(self, grad):
        if self.level is not None and self.thread == threading.get_ident():
            _scopes.close_to(self.level)
            self.level = -1  # done: later hooks of this call do nothing


def _forward_pre(module, inputs):
    if _compiling() or not _C.running():
        return None
    t = _thread()
    if not t.modules and _scopes.innermost("phase") is None:
        t.forward_level = _scopes.depth()
        _scopes.open("forward", "phase")
    root = t.modules[0][0] if t.modules else module
    name = _name_of(module, root)
    # The inputs' gradient hooks are set now, not kept for the post hook: a forward that raises must not keep
    # its inputs (activations) alive.
    call = None
    inputs_with_grad = _tensors(inputs, []) if torch.is_grad_enabled() else []
    if inputs_with_grad:
        call = _BackwardCall(name)
        for x in inputs_with_grad:
            x.register_hook(call.exit)
    t.modules.append((module, _scopes.depth(), call))
    _scopes.open(name, "module")
    return None


def _forward_post(module, inputs, output):
    if _compiling():
        return None
    t = _thread()
    for i in range(len(t.modules) - 1, -1, -1):
        if t.modules[i][0] is module:
            break
    else:
        return None
    _, level, call = t.modules[i]
    del t.modules[i:]
    _scopes.close_to(level)
    if call is not None:
        for x in _tensors(output, []):
            x.register_hook(call.enter)
    if not t.modules and t.forward_level is not None:
        _scopes.close_to(t.forward_level)
        t.forward_level = None
    return None


def _backward(original):
    @functools.wraps(original)
    def backward(*args, **kwargs):
        global _generation
        if not _C.running():
            return original(*args, **kwargs)
        _generation += 1
        t = _thread()
        t.generation = _generation
        level = _scopes.depth()
        _scopes.open("backward", "phase")
        try:
            return original(*args, **kwargs)
        finally:
            _scopes.close_to(level)
    return backward


def _optimizer_begin(*_):
    t = _thread()
    if t.forward_level is not None:  # a forward that raised, or a step inside forward
        _scopes.close_to(t.forward_level)
        t.forward_level = None
        t.modules.clear()
    t.optimizer_level = _scopes.depth()
    _scopes.open("optimizer", "phase")


def _optimizer_end(*_):
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
            print(f"memrec: recording window: {e}", file=sys.stderr)
    open_step()


def open_step():
    """Opens "step N" (N = optimizer steps taken so far) on this thread, when recording."""
    if steps.level is not None and steps.thread == threading.get_ident():
        return
    level = _scopes.depth()
    if _scopes.open(f"step {steps.taken}", "step"):
        steps.level, steps.thread = level, threading.get_ident()


def forget_step():
    steps.level = steps.thread = None


def _wrap_step(cls):
    step = cls.__dict__.get("step")
    if step is None or getattr(step, "_memrec_wrapped", False):
        return

    @functools.wraps(step)
    def wrapped(self, *args, **kwargs):
        t = _thread()
        if t.in_step:  # a subclass's step calling its parent's
            return step(self, *args, **kwargs)
        t.in_step = True
        _optimizer_begin()
        try:
            return step(self, *args, **kwargs)
        finally:
            t.in_step = False
            _optimizer_end()

    wrapped._memrec_wrapped = True
    cls.step = wrapped


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def _hook_optimizers():
    opt = importlib.import_module("torch.optim.optimizer")  # torch.optim deletes the attribute on 1.13
    if hasattr(opt, "register_optimizer_step_pre_hook"):  # torch >= 2.0
        opt.register_optimizer_step_pre_hook(_optimizer_begin)
        opt.register_optimizer_step_post_hook(_optimizer_end)
        return
    for cls in _all_subclasses(torch.optim.Optimizer):
        _wrap_step(cls)
    init = torch.optim.Optimizer.__init__

    @functools.wraps(init)
    def init_and_wrap(self, *args, **kwargs):
        init(self, *args, **kwargs)
        _wrap_step(type(self))

    torch.optim.Optimizer.__init__ = init_and_wrap


def install():
    """Installs the global hooks once per process (they cost a check while nothing records)."""
    global _installed
    if _installed:
        return
    _installed = True
    modules = torch.nn.modules.module
    modules.register_module_forward_pre_hook(_forward_pre)
    modules.register_module_forward_hook(_forward_post)
    torch.autograd.backward = _backward(torch.autograd.backward)
    _hook_optimizers()
