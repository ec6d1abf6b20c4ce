"""Owners: which parameter, buffer, gradient or optimizer state a block holds, sent to the recording as raw facts
(the storage's base address and size, a name, a module, a kind) that the reader attaches to the block's whole life.

Scanned, never per allocation:
- on the first outermost forward of each root module in a recording: its parameters and buffers (named as the
  module scopes are, `_hooks._name_of`: the model's own paths, `_modules`), and their gradients;
- at the end of each outermost backward on a thread, raising or not: the gradients of the parameters known so far;
- after every optimizer step: its parameters and gradients, and its state (`exp_avg`, `momentum_buffer`, ...) on
  the first step of a recording and whenever the state changed shape.
Nothing is sent for a tensor sent before with the same storage, and the same tensor at the same data pointer is
passed over before its storage is read, so a scan of unchanged tensors costs a dictionary look-up and a call each; a
new tensor (a gradient after zero_grad(set_to_none=True)) is sent even at an old address, as its block is a new
one. No hook is put on the program's tensors, no tensor is kept alive, nothing is allocated on the device: the
storage's address and size are read, on torch 1.13 through Tensor._storage() (the untyped storage that storage()
wraps in a TypedStorage built in Python, some 7,000 instructions more) and on torch 2.x through
Tensor.untyped_storage() (storage() warns there).
"""
import weakref

import torch

from . import _C, _modules

KINDS = {"parameter": 0, "buffer": 1, "gradient": 2, "optimizer_state": 3}
_Tensor, _Parameter, _strided = torch.Tensor, torch.nn.Parameter, torch.strided

_untyped = hasattr(torch.Tensor, "untyped_storage")
_known = {}      # id(tensor) -> (weak reference, name, module, kind): parameters and buffers named so far
_last = {}       # (id(tensor or its parameter), role) -> (weak reference to the tensor, storage address, data
                 # pointer) sent
_scanned = {}    # id(root) -> weak reference: roots scanned in this recording
_optimizers = {} # id(optimizer) -> (weak reference, id(state), len(state)) when its state was last read
_pending = {}    # id(optimizer) -> weak reference: optimizers stepped before any root was scanned (names unknown)
cuda = False     # the recording is of the CUDA allocator (else of the CPU allocator, device 0)
enabled = True   # start(owners=...): the scans run


def reset(recording_cuda, scan):
    """A recording starts: everything is sent again, to the allocator it records (when `scan`)."""
    global cuda, enabled
    cuda, enabled = bool(recording_cuda), bool(scan)
    _last.clear()
    _scanned.clear()
    _optimizers.clear()
    _pending.clear()


def _device_of(t):
    """The recording's device index of tensor t, or None when the recording does not see its memory. (t.device
    builds a torch.device at each call; these do not.)"""
    if cuda:
        return t.get_device() if t.is_cuda else None
    return 0 if t.is_cpu else None


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


def _send(t, key, name, module, kind):
    """Sends t's storage as owned by `name`, unless t was sent under `key` with this storage in this recording."""
    try:
        if type(t) is not _Tensor and type(t) is not _Parameter:
            t = getattr(t, "_local_tensor", t)  # DTensor (FSDP2): the local shard's storage
        last = _last.get(key)
        if last is not None and last[0]() is t and last[2] == t.data_ptr():  # the same tensor, storage, offset
            return
        device = _device_of(t)
        if device is None or t.layout != _strided:
            return
        try:
            s = t.untyped_storage() if _untyped else t._storage()
        except NotImplementedError:  # no storage of its own (torch.func's wrappers): it owns no block
            return
        addr = s.data_ptr()
        if not addr or last is not None and last[1] == addr and last[0]() is t:
            return
        size = s.nbytes()
        if size and _C.own(device, addr, size, name, module, KINDS[kind]):
            _last[key] = (weakref.ref(t), addr, t.data_ptr())
    except Exception as e:  # noqa: BLE001  one tensor memrec cannot read
        _failed(e)


def _remember(t, name, module, kind):
    key = id(t)

    def forget(ref):
        if _known.get(key, (None,))[0] is ref:
            del _known[key]

    _known[key] = (weakref.ref(t, forget), name, module, kind)


def _named(t):
    """(name, module, kind) of a parameter or buffer named so far, or None."""
    entry = _known.get(id(t))
    if entry is not None and entry[0]() is t:
        return entry[1:]
    return None


def _send_tensor(t, name, module, kind):
    """A parameter or buffer, and a parameter's gradient."""
    _send(t, (id(t), 0), name, module, kind)
    grad = t.grad if kind == "parameter" and t.is_leaf else None
    if grad is not None:
        _send(grad, (id(t), 1), name + ".grad", module, "gradient")


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
        for kind, tensors in (("parameter", _modules.table(sub, "_parameters")),
                              ("buffer", _modules.table(sub, "_buffers"))):
            for local, t in tensors.items():
                if t is None:
                    continue
                named = _named(t)
                if named is None:
                    named = (f"{module}.{local}", module, kind)
                    _remember(t, *named)
                _send_tensor(t, *named)
    pending = [ref() for ref in _pending.values()]
    _pending.clear()
    for opt in pending:
        if opt is not None:
            on_step(opt)


def on_backward_end():
    """The outermost backward of a thread ended (or raised): the gradients it left on known parameters."""
    for ref, name, module, kind in list(_known.values()):
        t = ref() if kind == "parameter" else None
        grad = t.grad if t is not None and t.is_leaf else None
        if grad is not None:
            _send(grad, (id(t), 1), name + ".grad", module, "gradient")


def on_step(opt):
    """After optimizer.step(): its parameters and gradients; its state when it is new or changed shape. Parameters
    no scanned root holds are named "{optimizer class}.param_groups.{group}.{index}", with no module."""
    params = []
    unnamed = False
    for g, group in enumerate(opt.param_groups):
        for i, p in enumerate(group["params"]):
            if type(p) is _Parameter or isinstance(p, _Tensor):  # `is` first: the common case, cheaper
                named = _named(p)
                unnamed |= named is None
                params.append((p, named, named or (f"{type(opt).__name__}.param_groups.{g}.{i}", "", "parameter")))
    if unnamed and not _scanned:  # no root scanned in this recording yet: the next forward names them
        _pending[id(opt)] = weakref.ref(opt)
        return
    for p, known, named in params:
        if known is None:
            _remember(p, *named)
        _send_tensor(p, *named)
    state = opt.state
    shape = (id(state), len(state))
    seen = _optimizers.get(id(opt))
    if seen is not None and seen[0]() is opt and seen[1:] == shape:
        return
    _optimizers[id(opt)] = (weakref.ref(opt),) + shape
    for p, _, (name, module, _) in params:
        for key, value in (state.get(p) or {}).items():  # .get: opt.state is a defaultdict
            if isinstance(value, _Tensor):
                _send(value, (id(p), key), f"{name}.{key}", module, "optimizer_state")
