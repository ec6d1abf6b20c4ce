"""A program's modules read as a guest: by identity and through the instance's own dictionary, so that no code of
the program's runs (no __len__, __bool__, __eq__, __hash__, __getattr__, __getattribute__, nor an override of
named_modules); torch.compile's OptimizedModule raises in __len__ when the module it wraps has none.
"""
import weakref


def table(module, name):
    """One of the dicts nn.Module keeps in its instance (_modules, _parameters, _buffers; OrderedDicts on torch
    1.13) as a plain dict, read with dict's own methods; {} when there is none."""
    try:
        found = object.__getattribute__(module, "__dict__").get(name)
    except (AttributeError, TypeError):
        return {}
    return dict(dict.items(found)) if isinstance(found, dict) else {}


def unwrapped(module):
    """The module torch.compile's OptimizedModule wraps (its `_orig_mod` submodule), else the module itself."""
    inner = table(module, "_modules").get("_orig_mod")
    return module if inner is None else inner


def walk(root):
    """(path, module) of root and each module under it, in named_modules' order, each module once."""
    seen = set()
    todo = [("", root)]
    while todo:
        path, module = todo.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        yield path, module
        subs = [(f"{path}.{name}" if path else name, sub) for name, sub in table(module, "_modules").items()
                if sub is not None]
        todo.extend(reversed(subs))


class Names:
    """Names of modules by identity while they live (a weak reference's callback forgets each): no hash or == of
    the program's objects, as a WeakKeyDictionary would call."""

    def __init__(self):
        self._by_id = {}  # id(module) -> (weak reference, name)

    def get(self, module):
        entry = self._by_id.get(id(module))
        return entry[1] if entry is not None and entry[0]() is module else None

    def set(self, module, name):
        key = id(module)
        by_id = self._by_id

        def forget(ref):
            if by_id.get(key, (None,))[0] is ref:
                del by_id[key]

        by_id[key] = (weakref.ref(module, forget), name)
