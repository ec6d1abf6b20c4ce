#!/usr/bin/env python3
"""Writes small fuzzing seeds: a PyTorch-shaped memory snapshot in pickle protocols 2, 4 and 5, and one with the
fields of newer PyTorch versions (line 2^64-1, forward_frames, an annotate entry, host traces) in protocol 4.
The .memrec and exported seeds are made from these with `memrec import` / `memrec export`; indexed.memrec, with index
and live_state chunks, is tests/data/alloc_oom.memrec written in flushes of 128 events by a memrec::Writer with
WriterOptions{.events_per_live_state = 64}."""
import pickle
import sys

frames = [{"name": "forward", "filename": "model.py", "line": 12}, {"name": "<module>", "filename": "train.py", "line": 3}]
trace = [
    {"action": "segment_alloc", "addr": 0x7F0000000000, "size": 2097152, "stream": 0, "time_us": 1795314799501898,
     "compile_context": "N/A", "user_metadata": "", "frames": frames},
    {"action": "alloc", "addr": 0x7F0000000000, "size": 1024, "stream": 0, "time_us": 1795314799501900,
     "compile_context": "N/A", "user_metadata": "", "frames": frames},
    {"action": "free_requested", "addr": 0x7F0000000000, "size": 1024, "stream": 0, "time_us": 1795314799501950,
     "compile_context": "N/A", "user_metadata": "", "frames": frames[:1]},
    {"action": "free_completed", "addr": 0x7F0000000000, "size": 1024, "stream": 0, "time_us": 1795314799501951,
     "compile_context": "N/A", "user_metadata": "", "frames": []},
    {"action": "oom", "addr": 1024, "size": 1 << 40, "stream": 0, "time_us": 1795314799502000,
     "compile_context": "N/A", "user_metadata": "", "frames": frames},
]
snapshot = {
    "segments": [{"device": 0, "address": 0x7F0000000000, "total_size": 2097152, "allocated_size": 0,
                  "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
                  "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
                  "blocks": [{"address": 0x7F0000000000, "size": 2097152, "requested_size": 0, "state": "inactive",
                              "frames": []}]}],
    "device_traces": [trace],
    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "expandable_segments": False,
                           "garbage_collection_threshold": 0.0},
    "external_annotations": [{"stage": "START", "name": "Optimizer.step#Adam.step", "device": 0,
                              "time_us": 1795314799501890},
                             {"stage": "END", "name": "Optimizer.step#Adam.step", "device": 0,
                              "time_us": 1795314799501990}],
}
out = sys.argv[1]
for protocol in (2, 4, 5):
    with open(f"{out}/tiny_p{protocol}.pickle", "wb") as f:
        pickle.dump(snapshot, f, protocol=protocol)

newer = dict(snapshot)
newer["device_traces"] = [trace + [
    {"action": "annotate", "addr": 0x7F0000000000, "size": 1024, "stream": 0, "time_us": 1795314799502001,
     "compile_context": "Torch-Compiled Region: 0/0", "user_metadata": {"retained_by": "autograd"},
     "frames": [{"name": "pack", "filename": "hooks.py", "line": 2**64 - 1}],
     "forward_frames": ['  File "model.py", line 12, in forward\n']}]]
newer["host_traces"] = [{"action": "alloc", "addr": 0x55000000, "size": 4096, "stream": 0, "time_us": 1795314799501899,
                         "frames": frames}]
with open(f"{out}/newer_p4.pickle", "wb") as f:
    pickle.dump(newer, f, protocol=4)
