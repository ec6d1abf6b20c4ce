#!/usr/bin/env python3
"""Independent reference for the phases and categories memrec infers for a PyTorch snapshot without phase scopes
(docs/analysis.md), computed from the pickle with python3's own pickle module. Prints JSON, one object per
device: "phases" (the inferred phase of each alloc entry, in trace order) and "live_at_peak" (bytes live at the
allocated peak by category)."""
import json
import pickle
import re
import sys

ENGINE = re.compile(r"(^|[ *&])torch::autograd::(Engine::|python::PythonEngine::|backward\b)")


def frame_marker(frame):
    name, file = frame["name"], frame["filename"]
    if ENGINE.search(name):
        return "backward"
    if "torch/autograd/" in file and name.split(".")[-1] in ("backward", "_engine_run_backward"):
        return "backward"
    if file.endswith("torch/_tensor.py") and name.split(".")[-1] == "backward":
        return "backward"
    if "torch/optim/" in file or re.search(r"(^|[ *&])torch::optim::", name):
        return "optimizer"
    if file.endswith("torch/nn/modules/module.py") and name.split(".")[-1] in ("_call_impl", "_wrapped_call_impl"):
        return "forward"
    return None


def stack_phase(frames):
    found = None
    for f in frames:  # innermost first: the last marker is the outermost
        found = frame_marker(f) or found
    return found


def optimizer_annotations(snapshot, device):
    spans, open_at = [], {}
    for a in snapshot.get("external_annotations", []):
        if a["device"] != device or not a["name"].startswith("Optimizer.step"):
            continue
        if a["stage"] == "START":
            open_at.setdefault(a["name"], []).append(a["time_us"])
        elif open_at.get(a["name"]):
            spans.append((open_at[a["name"]].pop(), a["time_us"]))
    for starts in open_at.values():
        spans += [(s, float("inf")) for s in starts]
    return spans


def phases_of(snapshot, device):
    trace = snapshot["device_traces"][device]
    optimizer = optimizer_annotations(snapshot, device)
    phases, current = [], None
    for e in trace:
        if e["action"] != "alloc":
            continue
        t = e["time_us"]
        if any(s <= t <= end for s, end in optimizer):
            current = "optimizer"
        elif e.get("frames"):
            current = stack_phase(e["frames"])
        phases.append((t, current))
    return phases


def intervals_of(phases, last_time):
    out = []
    for i, (t, p) in enumerate(phases):
        if i > 0 and phases[i - 1][1] == p:
            continue
        if out and out[-1][1] is None:
            out[-1][1] = max(out[-1][0], t - 1)
        if p is not None:
            out.append([t, None, p])
    if out and out[-1][1] is None:
        out[-1][1] = last_time
    return out


CATEGORY = {"forward": "activation", "backward": "gradient", "optimizer": "optimizer_state"}


def category(intervals, born, died):
    holding = [iv for iv in intervals if iv[0] <= born <= iv[1]]
    if not holding:
        last_end = max((iv[1] for iv in intervals), default=None)
        return "parameter" if last_end is not None and died > last_end else "unknown"
    start, end, phase = holding[-1]
    return "temporary" if died <= end else CATEGORY[phase]


def live_at_peak(snapshot, device, intervals):
    sys.path.insert(0, __import__("os").path.dirname(__file__))
    from replay_reference import replay
    peak_index = replay(snapshot, device)["allocated_index"]
    trace = snapshot["device_traces"][device]
    blocks, freed_at, live_at = {}, {}, {}
    pre_freed = 0  # bytes of blocks live before the trace and freed by the peak
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            blocks[i] = e
            live_at[e["addr"]] = i
        elif e["action"] == "free_requested":
            born = live_at.pop(e["addr"], None)
            if born is not None:
                freed_at[born] = i
            elif i <= peak_index:
                pre_freed += e["size"]
    bytes_by = {}
    for i, e in blocks.items():
        if i > peak_index or freed_at.get(i, len(trace)) <= peak_index:
            continue
        died = trace[freed_at[i]]["time_us"] if i in freed_at else float("inf")
        c = category(intervals, e["time_us"], died)
        bytes_by[c] = bytes_by.get(c, 0) + e["size"]
    pre_live = replay(snapshot, device)["initial_allocated"] - pre_freed
    if pre_live:
        bytes_by["unknown"] = bytes_by.get("unknown", 0) + pre_live
    return bytes_by


def reference(snapshot, device):
    trace = snapshot["device_traces"][device]
    phases = phases_of(snapshot, device)
    last_time = max((e["time_us"] for e in trace), default=0)
    intervals = intervals_of(phases, last_time)
    return {"phases": [p or "" for _, p in phases], "live_at_peak": live_at_peak(snapshot, device, intervals)}


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        snap = pickle.load(f)
    print(json.dumps([reference(snap, d) for d in range(len(snap["device_traces"]))]))
