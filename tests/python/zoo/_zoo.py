"""What every zoo program shares: a seeded start on the device named by --device (or ZOO_DEVICE, default cpu),
losses printed exactly, and on CUDA the caching allocator's counts printed last, as JSON.

A program that needs what this machine lacks calls skip(): it prints why and exits with SKIP.
"""
import argparse
import json
import os
import sys

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
    import contextlib
    out = os.environ.get("ZOO_MEMREC_OUT")
    if not out:
        return contextlib.nullcontext()
    import memrec
    return memrec.record(out)
