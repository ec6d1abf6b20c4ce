"""What `memrec record` starts in each Python process once it imports torch (see _boot/sitecustomize.py).

Options come from the environment that `memrec record` sets. Not recorded: launchers (torchrun's agent, which
has no rank but starts the ranks), and children of a recording process (DataLoader workers, multiprocessing
spawn): the first recording process in a line of descent marks the environment it passes on.
"""
import os
import sys

_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def _is_launcher():
    argv = list(getattr(sys, "orig_argv", None) or sys.argv)
    for i, arg in enumerate(argv[:3]):
        if os.path.basename(arg) == "torchrun":
            return True
        if arg == "-m" and i + 1 < len(argv) and argv[i + 1] in _LAUNCHER_MODULES:
            return True
        if arg.replace(os.sep, "/").endswith(("torch/distributed/run.py", "torch/distributed/launch.py")):
            return True
    return False


def output_path(base, environ, pid):
    """run.memrec -> run.rank3.memrec with RANK=3 in the environment, else run.pid1234.memrec."""
    root, ext = os.path.splitext(base)
    rank = environ.get("RANK")
    return f"{root}.rank{rank}{ext}" if rank is not None and rank.isdigit() else f"{root}.pid{pid}{ext}"


def _window(spec):
    """wait=W,warmup=N,active=A (checked by `memrec record`) -> (first step, steps) recorded."""
    v = dict(item.split("=") for item in spec.split(","))
    first = int(v.get("wait", 0)) + int(v.get("warmup", 0))
    return first, int(v["active"])


def main():
    env = os.environ
    base = env.get("MEMREC_RECORD_OUTPUT")
    if not base or env.get("MEMREC_RECORD_PARENT") or _is_launcher():
        return
    env["MEMREC_RECORD_PARENT"] = str(os.getpid())
    path = output_path(base, env, os.getpid())
    session = env.get("MEMREC_RECORD_SESSION")
    if session:
        with open(session, "a") as f:  # one short append per process: atomic
            f.write(path + "\n")

    import memrec
    from memrec import _hooks, _profiler

    options = dict(stacks=env.get("MEMREC_RECORD_STACKS", "all"),
                   kernels={"on": True, "all": "all"}.get(env.get("MEMREC_RECORD_KERNELS", "on"), False),
                   ops={"on": "steps", "all": True}.get(env.get("MEMREC_RECORD_OPS", "on"), False),
                   device_memory=env.get("MEMREC_RECORD_DEVICE_MEMORY", "on") == "on",
                   max_events=int(env.get("MEMREC_RECORD_MAX_EVENTS", "0")),
                   metadata={"command": env.get("MEMREC_RECORD_COMMAND", " ".join(sys.argv))})
    spec = env.get("MEMREC_RECORD_WINDOW")
    _hooks.install()
    _profiler.install()  # from torch's import on: every profiler the program starts is seen
    if not spec:
        memrec.start(path, **options)
        return
    first, active = _window(spec)

    def on_step(taken):
        if taken == first:
            memrec.start(path, **options)
        elif taken == first + active:
            memrec.stop()

    _hooks.steps.on_step = on_step
    if first == 0:
        memrec.start(path, **options)
