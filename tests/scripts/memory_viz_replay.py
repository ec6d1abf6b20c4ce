#!/usr/bin/env python3
"""Independent check of a snapshot pickle against what pytorch.org/memory_viz's Allocator State History does with it.

  memory_viz_replay.py IN.pickle    exit 0 if every row of every device can be drawn, else print the first that
                                    cannot and exit 1

memory_viz draws row i of a device by starting from `segments` (the state at dump time) and undoing the device's
trace entries from the last one down to i + 1: segment_alloc removes the segment at its address, segment_free puts
one back, free_completed puts a block back, free_requested marks an existing block, alloc removes its block. It then
places every block inside a segment by address; a block outside every segment, an undone free_requested of a block
it does not have, or a segment_alloc with no segment at its address throw (or silently remove the wrong segment).
Walking the entries backwards once and checking each change gives the same verdict for all rows at once.
"""
import bisect
import pickle
import sys


class State:
    def __init__(self):
        self.segments = {}  # addr -> size
        self.starts = []    # sorted segment addresses
        self.blocks = {}    # addr -> size

    def add_segment(self, addr, size):
        if addr not in self.segments:
            bisect.insort(self.starts, addr)
        self.segments[addr] = size

    def remove_segment(self, addr):
        if addr not in self.segments:
            return False
        del self.segments[addr]
        self.starts.pop(bisect.bisect_left(self.starts, addr))
        return True

    def segment_of(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0:
            return None
        start = self.starts[i]
        return start if addr < start + self.segments[start] else None


def check_device(data, device):
    state = State()
    for seg in data["segments"]:
        if seg["device"] != device:
            continue
        state.add_segment(seg["address"], seg["total_size"])
        for b in seg["blocks"]:
            if b["state"] in ("active_allocated", "active_pending_free"):
                state.blocks[b["address"]] = b["size"]
    for addr in state.blocks:
        if state.segment_of(addr) is None:
            return f"device {device}, last row: block {addr:#x} of segments lies in no segment"
    trace = data["device_traces"][device]
    for i in range(len(trace) - 1, 0, -1):
        e = trace[i]
        row = i - 1  # the row whose drawing has undone entries i and later
        action, addr = e["action"], e.get("addr")
        if action == "alloc":
            state.blocks.pop(addr, None)
        elif action == "free_requested":
            if addr not in state.blocks:
                return f"device {device}, row {row}: free_requested of {addr:#x}, a block it does not have"
        elif action == "free_completed":
            state.blocks[addr] = e["size"]
            if state.segment_of(addr) is None:
                return f"device {device}, row {row}: block {addr:#x} lies in no segment"
        elif action in ("segment_map", "segment_unmap"):
            return f"device {device}, row {row}: {action} (expandable segments) is not modelled here"
        elif action == "segment_free":
            state.add_segment(addr, e["size"])
        elif action == "segment_alloc":
            if not state.remove_segment(addr):
                return f"device {device}, row {row}: {action} at {addr:#x} has no segment there to remove"
            inside = [b for b in state.blocks if b >= addr and b < addr + e["size"] and state.segment_of(b) is None]
            if inside:
                return f"device {device}, row {row}: block {inside[0]:#x} lies in no segment"
    return None


def main(argv):
    with open(argv[1], "rb") as f:
        data = pickle.load(f)
    rows = 0
    for device, trace in enumerate(data["device_traces"]):
        problem = check_device(data, device)
        if problem:
            print(problem)
            return 1
        rows += len(trace)
    print(f"ok: {rows} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
