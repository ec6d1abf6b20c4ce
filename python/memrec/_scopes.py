"""Scopes on the recording's clock, kept per thread in stack order (the recorder's scopes are per thread).

Callers remember depth() before opening and close_to() it afterwards, so a scope that an exception skipped is
closed with its enclosing one, and nothing is closed that was not opened (open() returns False while nothing
records).
"""
import threading

from . import _C

KINDS = {"phase": 0, "module": 1, "op": 2, "step": 3, "annotation": 4}

_tls = threading.local()


def _stack():
    stack = getattr(_tls, "stack", None)
    if stack is None:
        stack = _tls.stack = []
    return stack


def depth():
    return len(_stack())


def open(name, kind):  # noqa: A001  the scope API's own verb
    if not _C.open_scope(name, KINDS[kind]):
        return False
    _stack().append((name, kind))
    return True


def close_to(level):
    stack = _stack()
    while len(stack) > level:
        stack.pop()
        _C.close_scope()


def innermost(kind):
    for name, k in reversed(_stack()):
        if k == kind:
            return name
    return None


def take_all():
    """Closes this thread's scopes and returns them, outermost first, to reopen() after a restart."""
    opened = list(_stack())
    close_to(0)
    return opened


def reopen(scopes):
    for name, kind in scopes:
        open(name, kind)


def forget():
    """In a forked child: drop this thread's scopes without touching the parent's recording."""
    _tls.stack = []
