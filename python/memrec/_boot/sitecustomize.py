# Put on PYTHONPATH by `memrec record`: records a Python process from the moment it imports torch (processes
# that never import torch record nothing), then runs the sitecustomize this one hides, if any.
import importlib
import importlib.abc
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _tell_memrec(note):
    """A note for `memrec record` to print when the program has ended: the program's own stderr stays its own.
    (memrec._say does the same; this one must work where importing memrec failed.)"""
    try:
        with open(os.environ["MEMREC_RECORD_SESSION"], "a") as f:
            f.write("!" + note.replace("\n", " ") + "\n")
    except Exception:
        pass


def _why(error):
    if isinstance(error, ModuleNotFoundError) and error.name == "memrec":  # pip's memrec is on no PYTHONPATH
        return (f"{sys.executable} cannot import memrec: run the program with the Python memrec is installed in "
                "(`python -m memrec record train.py` does)")
    return str(error)


class _TorchWatcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when torch is imported, starts the recorder right after torch's __init__ ran.

    It stays on sys.meta_path until torch is executed: libraries ask importlib.util.find_spec("torch") before
    importing it (transformers, datasets), and that spec is thrown away."""

    started = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        finders = (getattr(f, "find_spec", None) for f in sys.meta_path if f is not self)
        spec = next(filter(None, (find(name, path, target) for find in finders if find)), None)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_record(module):
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            exec_module(module)
            if _TorchWatcher.started:
                return
            _TorchWatcher.started = True
            try:
                from memrec import _autostart
                _autostart.main()
            except Exception as e:  # the program runs on unrecorded rather than fail because of memrec
                _tell_memrec(f"not recording process {os.getpid()}: {_why(e)}")

        spec.loader.exec_module = exec_then_record
        return spec

def _chain():
    """Imports the next sitecustomize on sys.path (Debian has one), as if ours were not there."""
    ours = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    try:
        importlib.import_module("sitecustomize")
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
    finally:  # our folder goes back where it was; what the other sitecustomize added stays
        for i, p in enumerate(saved):
            if os.path.abspath(p or ".") == _here and p not in sys.path:
                sys.path.insert(min(i, len(sys.path)), p)
        sys.modules.setdefault("sitecustomize", ours)


if "torch" not in sys.modules:
    sys.meta_path.insert(0, _TorchWatcher())
_chain()
