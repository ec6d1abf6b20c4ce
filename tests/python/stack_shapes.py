# Allocations from many shapes of Python code, each beside the stack traceback.extract_stack() sees at that place.
# Usage: stack_shapes.py RECORDING EXPECTED. test_python_frames.cpp records with memrec and compares; EXPECTED gets
# one row per frame, innermost first: bytes<TAB>file<TAB>line<TAB>function.
import asyncio
import contextlib
import functools
import sys
import threading
import traceback

import torch

import memrec

expected = {}
counts = iter(range(1001, 10**6))  # each allocation its own size


def alloc():
    n = next(counts); expected[n * 4] = (traceback.extract_stack(), torch.empty(n))  # noqa: E702 (one line: same place)


def deep(k):
    return deep(k - 1) if k else alloc()


def größe_大():  # a name that is not ASCII: its UTF-8 is two and three bytes a character
    alloc()


def generator():
    for i in range(2):
        alloc()
        yield i


def delegating():
    yield from generator()


async def inner():
    await asyncio.sleep(0)
    alloc()


async def agen():
    alloc()
    yield 1


async def outer():
    await inner()
    async for _ in agen():
        pass
    await asyncio.gather(inner(), inner())


class WithProperty:
    @property
    def size(self):
        alloc()
        return 1


class Managed:
    def __enter__(self):
        alloc()

    def __exit__(self, *exc):
        alloc()


@contextlib.contextmanager
def managed():
    alloc()
    yield


def raising():
    try:
        raise ValueError("x")
    except ValueError:
        alloc()
    try:
        return 1
    finally:
        alloc()


def shapes():
    deep(40)
    deep(100)  # deeper than memrec's 64 frames: the innermost ones
    list(generator())
    list(delegating())
    asyncio.run(outer())
    (lambda: alloc())()
    [alloc() for _ in range(2)]
    list(alloc() for _ in range(2))
    {alloc() for _ in range(1)}
    sorted([3, 1, 2], key=lambda x: (alloc(), x)[1])
    list(map(lambda x: alloc(), range(2)))
    functools.partial(alloc)()
    größe_大()
    WithProperty().size
    raising()
    with Managed():
        alloc()
    with managed():
        alloc()

    class Body:
        alloc()

    exec("alloc()")
    for k in range(100):  # code objects that die, and new ones born at their addresses
        made = {"alloc": alloc}
        exec(compile("\n" * (k % 3) + f"def f{k}():\n    alloc()\n", f"<reborn{k % 2}>", "exec"), made)
        made[f"f{k}"]()
    exec(compile("def f():\n    alloc()\nf()\n", "<generated>", "exec"))
    worker = threading.Thread(target=deep, args=(5,))
    worker.start()
    worker.join()


with memrec.record(sys.argv[1], stacks="python", kernels=False):
    shapes()
    shapes()  # the second time round every place is known
with open(sys.argv[2], "w") as out:
    for size, (stack, _) in expected.items():
        for frame in reversed(stack):
            out.write(f"{size}\t{frame.filename}\t{frame.lineno}\t{frame.name}\n")
print("interpreter frames" if (3, 11) <= sys.version_info[:2] <= (3, 12) else "public API")
