"""What every zoo program shares: a seeded start on the device named by --device (or ZOO_DEVICE, default cpu),
losses printed exactly, and on CUDA the caching allocator's counts printed last, as JSON.

A program that needs what this machine lacks calls skip(): it prints why and exits with SKIP.
"""
import argparse
import collections
import contextlib
import json
import os
import sys
import tempfile

SKIP = 77  # exit status of a skipped program (automake's convention)


def skip(reason):
    print(f"skipped: {reason}")
    sys.exit(SKIP)


def setup(argv=None):
    """Parses --device, seeds, and returns the torch.device."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default=os.environ.get("ZOO_DEVICE", "cpu"))
    args = parser.parse_args(argv)
    if args.device.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            skip("no CUDA device")
        torch.use_deterministic_algorithms(True, warn_only=True)
    return device


def needs(condition, reason):
    if not condition:
        skip(reason)


def loss(step, value, label="loss"):
    """One line per value, exact: float.hex of the Python float."""
    print(f"step {step} {label} {float(value).hex()}")


def values(label, tensor):
    """Every element of a small tensor, exactly."""
    print(f"{label} " + " ".join(float(v).hex() for v in tensor.detach().flatten().tolist()))


def finish(device):
    """On CUDA: the allocator's own counts, last, for the zoo runner to compare with the recording."""
    import torch
    if device.type != "cuda":
        return
    torch.cuda.synchronize(device)
    s = torch.cuda.memory_stats(device)
    keys = ["allocation.all.allocated", "allocation.all.freed", "segment.all.allocated", "segment.all.freed",
            "allocated_bytes.all.peak", "requested_bytes.all.peak", "reserved_bytes.all.peak"]
    print(json.dumps({k: s.get(k, 0) for k in keys}, sort_keys=True))


def recording():
    """Under `import memrec` (a `# zoo: both` program's second recorded run, ZOO_MEMREC_OUT set): memrec.record of
    the block; otherwise nothing."""
    out = os.environ.get("ZOO_MEMREC_OUT")
    if not out:
        return contextlib.nullcontext()
    import memrec
    return memrec.record(out)


@contextlib.contextmanager
def one_rank(device):
    """A process group of this process alone (gloo on the CPU, NCCL on CUDA), met through a file in a temporary
    directory, so that programs run at once have no port to collide on; destroyed at the end."""
    import inspect

    import torch
    import torch.distributed as dist
    bound = {}
    if device.type == "cuda" and "device_id" in inspect.signature(dist.init_process_group).parameters:
        # bound to its device (PyTorch 2.3 on), NCCL starts at once and guesses no device
        index = device.index if device.index is not None else torch.cuda.current_device()
        bound["device_id"] = torch.device("cuda", index)
    with tempfile.TemporaryDirectory(prefix="zoo-rank-") as tmp:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=f"file://{tmp}/store",
                                rank=0, world_size=1, **bound)
        try:
            yield
        finally:
            dist.destroy_process_group()


class ProfilerCycles:
    """torch.profiler's on_trace_ready for a program that profiles itself: per cycle, the events of the model's own
    ops (other op and [memory] event counts vary from run to run on the CPU), the device events, and those of them
    the window's ops launched; show() prints them. torch.profiler waits for the device when a window closes, not
    when it opens: a kernel launched before the window that starts after it opened is in the trace too, linked to
    none of the window's ops (as are the GPU annotations of record_function blocks), so a program reads its loss
    before the profiler's step. With SELF_PROFILING_EDGES=1
    the device events of each cycle that belong to none of its ops go to stderr."""

    def __init__(self, ops):
        self.ops, self.cycles = ops, []

    def __call__(self, prof):
        import torch
        cpu = torch.autograd.DeviceType.CPU
        events = prof.events()
        ops = collections.Counter(e.name for e in events if e.name in self.ops)
        of_ops = collections.Counter(k.name for e in events if e.device_type == cpu for k in e.kernels)
        on_device = sum(1 for e in events if e.device_type != cpu)
        self.cycles.append((" ".join(f"{op.split('::')[-1]} {ops[op]}" for op in self.ops), on_device,
                            sum(of_ops.values())))
        if os.environ.get("SELF_PROFILING_EDGES") == "1":
            others = collections.Counter(e.name for e in events if e.device_type != cpu) - of_ops
            print(f"cycle {len(self.cycles) - 1}: device events of no op: {dict(others)}", file=sys.stderr)

    def show(self):
        for cycle, (ops, on_device, of_ops) in enumerate(self.cycles):
            print(f"cycle {cycle}: {ops}; {on_device} device events, {of_ops} of its ops")
