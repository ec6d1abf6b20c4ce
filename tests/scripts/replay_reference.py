#!/usr/bin/env python3
"""Independent reference for memrec's replay: peaks of a PyTorch snapshot pickle, computed with python3's
own pickle module in a forward pass (blocks freed but never allocated in the trace, and blocks still
allocated at the end without an alloc in the trace, were live before recording). Prints JSON."""
import json
import pickle
import sys


def replay(snapshot, device):
    trace = snapshot["device_traces"][device]
    allocated_in_trace, pre_existing = set(), {}
    for e in trace:
        if e["action"] == "alloc":
            allocated_in_trace.add(e["addr"])
        elif e["action"] == "free_requested" and e["addr"] not in allocated_in_trace:
            pre_existing[e["addr"]] = e["size"]
    for seg in snapshot["segments"]:
        if seg["device"] != device:
            continue
        addr = seg["address"]
        for b in seg["blocks"]:
            if b["state"] == "active_allocated" and addr not in allocated_in_trace:
                pre_existing[addr] = b["requested_size"]
            addr += b["size"]
    growth = sum(e["size"] if e["action"] in ("segment_alloc", "segment_map") else
                 -e["size"] if e["action"] in ("segment_free", "segment_unmap") else 0 for e in trace)
    reserved = sum(s["total_size"] for s in snapshot["segments"] if s["device"] == device) - growth
    live = dict(pre_existing)
    allocated = sum(live.values())
    peak = {"allocated": allocated, "allocated_index": -1, "reserved": reserved, "reserved_index": -1,
            "initial_allocated": allocated, "initial_reserved": reserved, "pre_existing": len(pre_existing)}
    for i, e in enumerate(trace):
        a = e["action"]
        if a == "alloc":
            live[e["addr"]] = e["size"]
            allocated += e["size"]
        elif a == "free_requested":
            allocated -= live.pop(e["addr"])
        elif a in ("segment_alloc", "segment_map"):
            reserved += e["size"]
        elif a in ("segment_free", "segment_unmap"):
            reserved -= e["size"]
        if allocated > peak["allocated"]:
            peak["allocated"], peak["allocated_index"] = allocated, i
        if reserved > peak["reserved"]:
            peak["reserved"], peak["reserved_index"] = reserved, i
    peak["final_allocated"] = allocated
    peak["final_reserved"] = reserved
    return peak


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        snap = pickle.load(f)
    print(json.dumps([replay(snap, d) for d in range(len(snap["device_traces"]))]))
