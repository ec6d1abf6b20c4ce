"""start/stop/record/scope/mark: one recording at a time per process."""
import atexit
import contextlib
import functools
import os

import torch

from . import _C, _compiled, _hooks, _owners, _profiler, _scopes
from ._say import say, under_memrec_record

_HIDE = os.path.dirname(os.path.abspath(__file__)) + os.sep  # memrec's own frames stay out of the stacks
_options = None          # the running recording's start() arguments
_process_hooked = False  # atexit, fork and CUDA-init handlers are registered once per process


def start(path="run.memrec", *, stacks="all", kernels=True, max_events=0, scopes=True, owners=True,
          ops="steps", device_memory=True, metadata=None):
    """Starts recording this process into `path`.

    stacks: "all" (Python and C++ frames), "python", "cpp" or "off". kernels: True traces CUDA kernels on the
    first 3 steps, then on every 10th; "all" on every step; False on none. scopes: module, phase and step scopes from
    global hooks. owners: name the blocks of parameters, gradients and optimizer state (scanned at forward, backward
    and step ends). ops: aten op and record_function scopes (a RecordFunction callback on every op): "steps" on the
    kernels' steps only (the first 3, then every 10th; before the first optimizer step, and in a program that takes
    none, on every op), so a CPU-bound step pays torch's per-op cost on those steps alone and the C++ frames name the
    op elsewhere; True on every op of every step; False on none.
    device_memory: device memory outside the caching allocator (CUPTI memory calls, NVML). A program that
    initializes CUDA is recorded on the CUDA caching allocator from then on (the file restarts there); one that
    never does is recorded on the CPU allocator.
    """
    global _options
    if kernels not in (True, False, "all"):
        raise ValueError(f'kernels must be True, False or "all", not {kernels!r}')
    if isinstance(ops, str) and ops != "steps":
        raise ValueError(f'ops must be True, False or "steps", not {ops!r}')
    _profiler.install()
    cuda = _C.cuda_built() and torch.cuda.is_initialized()
    meta = {"python.torch_version": torch.__version__}
    meta.update(metadata or {})
    options = dict(path=os.fspath(path), stacks=stacks, kernels=kernels, max_events=int(max_events),
                   metadata=meta, cuda=cuda, quiet=under_memrec_record(), ops=bool(ops), op_steps=ops == "steps",
                   device_memory=bool(device_memory), modules=bool(scopes))
    _start_c(options)
    _owners.reset(cuda, owners)
    _compiled.publish()
    _options = options
    _hook_process()
    _compiled.install()
    _hooks.enable(scopes)
    if scopes:
        _hooks.install()
        _hooks.open_step()


def _start_c(o):
    every = {"kernel_every": 1} if o["kernels"] == "all" else {}
    _C.start(o["path"], o["stacks"], bool(o["kernels"]), o["max_events"], o["cuda"], o["metadata"], _HIDE,
             _profiler.busy(), o["quiet"], o["ops"], o["device_memory"], o["modules"], cupti_kineto=_profiler.kineto(),
             op_steps=o["op_steps"], **every)


def stop():
    """Stops recording and writes the file. Returns (events, dropped), or None when nothing was recording."""
    global _options
    if not _C.running():
        return None
    _scopes.close_to(0)
    _hooks.forget_step()
    _options = None
    return _C.stop()


def running():
    return bool(_C.running())


@contextlib.contextmanager
def record(path="run.memrec", **options):
    """with memrec.record("run.memrec"): ... records the block (options as for start())."""
    start(path, **options)
    try:
        yield
    finally:
        stop()


class scope(contextlib.ContextDecorator):
    """A named scope: `with memrec.scope("data"):` or `@memrec.scope("data")`."""

    def __init__(self, name):
        self.name = str(name)
        self._level = None

    def _recreate_cm(self):  # each decorated call gets its own level (threads, recursion)
        return scope(self.name)

    def __enter__(self):
        self._level = _scopes.depth()
        _scopes.open(self.name, "annotation")
        return self

    def __exit__(self, *exc):
        _scopes.close_to(self._level)
        return False


def mark(text):
    """An instant annotation (a scope with no duration) at this point of the recording."""
    level = _scopes.depth()
    if _scopes.open(str(text), "annotation"):
        _scopes.close_to(level)


def _switch_to_cuda():
    """CUDA has just been initialized: record its caching allocator from here on, in the same file."""
    o = _options
    if o is None or o["cuda"] or not _C.running() or not torch.cuda.is_available():
        return
    opened = _scopes.take_all()
    _C.stop()
    o["cuda"] = True
    try:  # runs inside torch.cuda's lazy init: an error here must not become the program's
        _start_c(o)
    except Exception as e:
        say(f"cannot record the CUDA allocator of process {os.getpid()}, not recording: {e}")
        return
    _owners.reset(True, _owners.enabled)
    _compiled.publish()
    _scopes.reopen(opened)


def _after_fork_in_child():
    global _options
    if _C.running():
        _C.forget_after_fork()
    _scopes.forget()
    _hooks.forget_step()
    _owners.reset(False, _owners.enabled)
    _options = None


def _stop_at_exit():
    """Finishes the file as the process ends. A failure is not the program's: its file then reads as cut short."""
    try:
        stop()
    except Exception:
        pass


def _stopping_first(exit_now):
    """os._exit skips atexit: the recording is finished first, so what it held is kept."""
    @functools.wraps(exit_now)
    def _exit(status):
        if _C.running():
            _stop_at_exit()
        exit_now(status)
    return _exit


def _hook_process():
    global _process_hooked
    if _process_hooked:
        return
    _process_hooked = True
    atexit.register(_stop_at_exit)
    os._exit = _stopping_first(os._exit)
    os.register_at_fork(after_in_child=_after_fork_in_child)
    if _C.cuda_built():
        torch.cuda._lazy_call(_switch_to_cuda)
