#!/usr/bin/env python3
"""Copies a one-device PyTorch memory snapshot pickle onto device N: `device_traces` becomes N empty traces and
then the recorded one, as torch.cuda.memory._snapshot() writes it for a run on cuda:N; segments and annotations
say device N. Usage: on_device.py IN.pickle OUT.pickle N"""
import pickle
import sys

source, target, device = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(source, "rb") as f:
    snapshot = pickle.load(f)
(trace,) = snapshot["device_traces"]
snapshot["device_traces"] = [[] for _ in range(device)] + [trace]
for item in snapshot["segments"] + snapshot.get("external_annotations", []):
    item["device"] = device
with open(target, "wb") as f:
    pickle.dump(snapshot, f, protocol=4)
