"""Owners: which parameter, buffer, gradient or optimizer state a block holds, sent to the recording as raw facts
(the storage's base address and size, a name, a module, a kind) that the reader attaches to the block's whole life.

Scanned, never per allocation:
- on the first outermost forward of each root module in a recording: its parameters and buffers (named as the
  module scopes are, `_hooks._name_of`: the model's own paths, `_modules`), and their gradients;
- at the end of each outermost backward on a thread, raising or not: the gradients of the parameters known so far;
- after every optimizer step: its parameters and gradients, and its state (`exp_avg`, `momentum_buffer`, ...) on
  the first step of a recording and whenever the state changed shape.
Nothing is sent for a tensor sent before with the same storage (the same storage object at the same address); a
new tensor (a gradient after zero_grad(set_to_none=True)) or a new storage under the same tensor is sent even at an
old address, as its block is a new one. That per-tensor work, the names known so far and the walks over them are
memrec._C's (python/src/owners.cpp): it reads a torch.Tensor or Parameter through its TensorImpl, running no Python
code. No hook is put on the program's tensors, no tensor is kept alive, nothing is allocated on the device.
"""
import weakref

import torch

from . import _C, _modules

KINDS = {"parameter": 0, "buffer": 1, "gradient": 2, "optimizer_state": 3}
_Tensor = torch.Tensor

_roles = {}      # an optimizer state's key -> its role number in memrec._C's table of what was sent (0 and 1 are the
                 # tensor's and its gradient's)
_scanned = {}    # id(root) -> weak reference: roots scanned in this recording
_optimizers = {} # id(optimizer) -> (weak reference, id(state), len(state)) when its state was last read
_pending = {}    # id(optimizer) -> weak reference: optimizers stepped before any root was scanned (names unknown)
enabled = True   # start(owners=...): the scans run


def reset(recording_cuda, scan):
    """A recording starts: everything is sent again, to the allocator it records (when `scan`)."""
    global enabled
    enabled = bool(scan)
    _C.owners_reset(bool(recording_cuda))
    _scanned.clear()
    _optimizers.clear()
    _pending.clear()


class Failures:
    """Errors of memrec's own in the owner scans (a tensor whose storage cannot be read): what they would have
    named stays unowned, and the file says so."""
    count = 0
    first = ""


def _failed(error):
    Failures.count += 1
    if not Failures.first:
        Failures.first = f"{type(error).__name__}: {error}"
    try:
        _C.set_metadata("notes.owners", f"memrec's owner scans met {Failures.count} internal error(s); the blocks "
                        f"they would have named have no owner (first: {Failures.first})")
    except Exception:  # noqa: BLE001  nothing of memrec's reaches the program
        pass


_C.owners_init(torch.Tensor, torch.nn.Parameter, _failed)


def on_forward(root, name_of):
    """The outermost module call of a thread begins: scans `root` once per recording; name_of(module, root) names
    modules as their scopes are named."""
    key = id(root)
    ref = _scanned.get(key)
    if ref is not None and ref() is root:
        return
    _scanned[key] = weakref.ref(root)
    # each module once, in named_parameters' order (a tied tensor keeps its first name), running none of its code
    for _, sub in _modules.walk(root):
        module = name_of(sub, root)
        for kind, tensors in ((KINDS["parameter"], _modules.table(sub, "_parameters")),
                              (KINDS["buffer"], _modules.table(sub, "_buffers"))):
            for local, t in tensors.items():
                if t is not None:
                    _C.owners_tensor(t, f"{module}.{local}", module, kind)
    pending = [ref() for ref in _pending.values()]
    _pending.clear()
    for opt in pending:
        if opt is not None:
            on_step(opt)


def on_backward_end():
    """The outermost backward of a thread ended (or raised): the gradients it left on known parameters."""
    _C.owners_gradients()


def on_step(opt):
    """After optimizer.step(): its parameters and gradients; its state when it is new or changed shape. Parameters
    no scanned root holds are named "{optimizer class}.param_groups.{group}.{index}", with no module."""
    state = opt.state
    shape = (id(state), len(state))
    seen = _optimizers.get(id(opt))
    changed = seen is None or seen[0]() is not opt or seen[1:] != shape
    params = _C.owners_step(opt.param_groups, type(opt).__name__, not _scanned, changed)
    if params is None:  # no root scanned in this recording yet: the next forward names them
        _pending[id(opt)] = weakref.ref(opt)
        return
    if not changed:
        return
    _optimizers[id(opt)] = (weakref.ref(opt),) + shape
    for p, name, module in params:
        for key, value in (state.get(p) or {}).items():  # .get: opt.state is a defaultdict
            if isinstance(value, _Tensor):
                role = _roles.setdefault(key, len(_roles) + 2)
                _C.owners_send(value, p, role, f"{name}.{key}", module, KINDS["optimizer_state"])
