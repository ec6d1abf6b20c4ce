#!/usr/bin/env python3
"""Independent reference for `memrec stats --by pool`: the requested bytes (what memrec counts as allocated) of the
blocks allocated at the end of a PyTorch snapshot pickle, by the segment_pool_id of the segment that holds them,
keyed as memrec names pools.

  pool_bytes.py IN.pickle   prints {"default pool": bytes, "pool (1, 0)": bytes, ...} as JSON
"""
import json
import pickle
import sys


def pool_key(pool_id):
    return "default pool" if tuple(pool_id) == (0, 0) else "pool ({}, {})".format(*pool_id)


def main(path):
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    out = {}
    for seg in snapshot["segments"]:
        key = pool_key(seg.get("segment_pool_id", (0, 0)))
        for block in seg["blocks"]:
            if block["state"] == "active_allocated":
                out[key] = out.get(key, 0) + block["requested_size"]
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
