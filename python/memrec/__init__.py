"""memrec: record where a PyTorch program's memory goes, into .memrec files (docs/python.md).

    with memrec.record("run.memrec"):
        train()

Module, phase (forward/backward/optimizer) and step scopes come from global hooks; memrec.scope() and
memrec.mark() add your own. In IPython, `%load_ext memrec` adds the `%%memrec` cell magic.
"""

__all__ = ["record", "start", "stop", "running", "scope", "mark"]


def __getattr__(name):
    """The recorder loads on first use: it imports torch (seconds), which `python -m memrec info` never needs."""
    if name not in __all__:
        raise AttributeError(f"module 'memrec' has no attribute {name!r}")
    from . import _recording  # imports torch first: memrec._C uses the libtorch that torch loaded
    return getattr(_recording, name)


def load_ipython_extension(ipython):
    from ._magics import register
    register(ipython)
