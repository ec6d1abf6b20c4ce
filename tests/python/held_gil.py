# A worker thread allocates inside TorchScript (the interpreter's lock released) while the main thread holds the
# interpreter's lock, spinning in Python: memrec must name the worker's frames, all first seen then, without
# waiting for the lock. Usage: held_gil.py RECORDING. Exits 1 when the worker made no progress while the
# # lock was held; prints the line of the worker's call and the allocations it made then. On torch 2.11 the worker
# makes no progress while the lock is held even without memrec (its TorchScript call waits for the lock there), so
# this runs where it shows something: torch 1.13's CPU allocator (the ctest PythonFrames.*).
import sys
import threading
import time
from typing import List

import torch

import memrec

ALLOCS = 2000


@torch.jit.script
def churn(go: torch.Tensor, done: torch.Tensor, n: int) -> int:
    done.fill_(-1)  # here, the lock released
    while int(go.item()) == 0:  # no allocation until the main thread holds the lock
        pass
    done.fill_(0)
    kept: List[torch.Tensor] = []
    for i in range(n):
        kept.append(torch.empty(1000 + i % 7))
        done.add_(1)
    return len(kept)


def worker(go, done):
    churn(go, done, ALLOCS)


go, done = torch.zeros(1, dtype=torch.int64), torch.zeros(1, dtype=torch.int64)
go_view, done_view = go.numpy(), done.numpy()  # read and written in place: no call that releases the lock
churn(torch.ones(1, dtype=torch.int64), torch.zeros(1, dtype=torch.int64), 0)  # compiled here
with memrec.record(sys.argv[1], stacks="python", kernels=False):
    thread = threading.Thread(target=worker, args=(go, done))
    thread.start()
    while done_view[0] == 0:  # until the worker waits in churn
        time.sleep(0.001)
    sys.setswitchinterval(1000.0)  # the main thread keeps the lock while it runs Python
    go_view[0] = 1
    deadline = time.monotonic() + 10
    while done_view[0] < ALLOCS and time.monotonic() < deadline:
        pass
    made = int(done_view[0])
    sys.setswitchinterval(0.005)
    thread.join()
print(worker.__code__.co_firstlineno + 1, made)
sys.exit(0 if made == ALLOCS else 1)
