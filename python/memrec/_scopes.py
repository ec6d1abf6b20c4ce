"""Scopes on the recording's clock, kept per thread in stack order by memrec._C (the recorder's scopes are per
thread).

Callers remember depth() before opening and close_to() it afterwards, so a scope that an exception skipped is
closed with its enclosing one, and nothing is closed that was not opened (open() returns False while nothing
records).
"""
from . import _C

KINDS = {"phase": 0, "module": 1, "op": 2, "step": 3, "annotation": 4}
PHASE, MODULE, STEP = KINDS["phase"], KINDS["module"], KINDS["step"]

depth = _C.scope_depth
close_to = _C.close_scopes_to


def open(name, kind):  # noqa: A001  the scope API's own verb
    return _C.open_scope(name, KINDS[kind])


def innermost(kind):
    return _C.innermost_scope(KINDS[kind])


def take_all():
    """Closes this thread's scopes and returns them, outermost first, to reopen() after a restart."""
    return _C.take_scopes()


def reopen(scopes):
    for name, kind in scopes:
        _C.open_scope(name, kind)


forget = _C.forget_scopes  # in a forked child: drop this thread's scopes without touching the parent's recording
