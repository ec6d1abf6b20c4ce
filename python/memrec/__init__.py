"""memrec: record where a PyTorch program's memory goes, into .memrec files (docs/python.md).

    with memrec.record("run.memrec"):
        train()

Module, phase (forward/backward/optimizer) and step scopes come from global hooks; memrec.scope() and
memrec.mark() add your own.
"""
import torch  # noqa: F401  first: memrec._C uses the libtorch that torch loaded

from ._recording import mark, record, running, scope, start, stop

__all__ = ["record", "start", "stop", "running", "scope", "mark"]
