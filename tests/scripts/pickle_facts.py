#!/usr/bin/env python3
"""Independent reference for memrec's pickle tests: reads PyTorch memory snapshot pickles with Python's own
pickle module (data only: the files are ours or PyTorch's) and reports what the C++ side must agree with.

  pickle_facts.py facts IN.pickle OUT.json   facts about IN: every trace entry, segment, block, annotation
  pickle_facts.py diff A.pickle B.pickle     exit 0 if both load to equal objects, else print the first difference
                                             (A's free blocks requesting more than their size as memrec's export
                                             writes them: requesting their size)
  pickle_facts.py opcodes IN.pickle OUT.json protocol, opcode names and the largest |int| in IN
  pickle_facts.py proto5 IN.pickle OUT.pickle  re-dump IN with protocol 5
"""
import json
import pickle
import pickletools
import sys


def load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


class Frames:
    """Frames as indices into one table of [name, filename, line], to keep the facts file small."""

    def __init__(self):
        self.table = []
        self.index = {}

    def ids(self, frames):
        out = []
        for f in frames:
            key = (f["name"], f["filename"], f["line"])
            if key not in self.index:
                self.index[key] = len(self.table)
                self.table.append(list(key))
            out.append(self.index[key])
        return out


def facts(data):
    frames = Frames()
    events = []
    for device, trace in enumerate(data["device_traces"]):
        for e in trace:
            addr = e["device_free"] if e["action"] == "oom" else e.get("addr", 0)
            events.append({"device": device, "action": e["action"], "addr": addr, "size": e["size"],
                           "stream": e["stream"], "time_us": e["time_us"], "frames": frames.ids(e.get("frames", []))})
    segments = []
    for s in data["segments"]:
        blocks = [{"address": b["address"], "size": b["size"], "requested_size": b["requested_size"],
                   "state": b["state"], "frames": frames.ids(b.get("frames", []))} for b in s["blocks"]]
        segments.append({k: s[k] for k in ("device", "address", "total_size", "allocated_size", "active_size",
                                           "requested_size", "stream", "segment_type", "is_expandable")}
                        | {"segment_pool_id": list(s["segment_pool_id"]), "frames": frames.ids(s.get("frames", [])),
                           "blocks": blocks})
    counts = {}
    for e in events:
        counts[e["action"]] = counts.get(e["action"], 0) + 1
    return {"action_counts": counts, "events": events, "segments": segments,
            "annotations": data.get("external_annotations", []),
            "allocator_settings": data.get("allocator_settings"), "frames": frames.table}


def as_exported(data):
    for s in data.get("segments", []):
        for b in s["blocks"]:
            if b["state"] == "inactive":
                b["requested_size"] = min(b["requested_size"], b["size"])
    return data


def first_difference(a, b, path="top level"):
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a.keys() ^ b.keys())} differ"
        for k in a:
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def opcodes(path):
    with open(path, "rb") as f:
        data = f.read()
    names, protocol, largest = set(), None, 0
    for op, arg, _ in pickletools.genops(data):
        names.add(op.name)
        if op.name == "PROTO":
            protocol = arg
        if isinstance(arg, int) and op.name in ("BININT", "BININT1", "BININT2", "LONG1", "LONG4"):
            largest = max(largest, abs(arg))
    return {"protocol": protocol, "opcodes": sorted(names), "largest_int": largest}


def main(argv):
    mode = argv[1]
    if mode == "facts":
        with open(argv[3], "w") as f:
            json.dump(facts(load(argv[2])), f)
    elif mode == "diff":
        d = first_difference(as_exported(load(argv[2])), load(argv[3]))
        if d:
            print(d)
            return 1
    elif mode == "opcodes":
        with open(argv[3], "w") as f:
            json.dump(opcodes(argv[2]), f)
    elif mode == "proto5":
        with open(argv[3], "wb") as f:
            pickle.dump(load(argv[2]), f, protocol=5)
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
