"""A program's modules read as a guest, named by the model's own paths.

Read by identity, type and the instance's own dictionary, so that no code of the program's runs (no __len__,
__bool__, __eq__, __hash__, __getattr__, __getattribute__, nor an override of named_modules): torch.compile's
OptimizedModule raises in __len__ when the module it wraps has none.

Paths leave out the parts wrappers add (`blocks.0.fc1`, not `module._orig_mod.blocks.0._checkpoint_wrapped_module.
fc1`). A wrapper is told by its type, never by an attribute's name alone (a user's own submodule may be called
`module`): DistributedDataParallel and DataParallel (`module`), FSDP (`_fsdp_wrapped_module`), checkpoint and
offload wrappers (`_checkpoint_wrapped_module`), torch.compile's OptimizedModule (`_orig_mod`). A wrapper takes the
path of the module it wraps. Classes are looked up in sys.modules: no instance can exist of a class whose module
was never imported, and nothing is imported here.
"""
import sys
import weakref

# (module, class, attribute holding the wrapped module); a class missing from a torch version is passed over
_WRAPPERS = (
    ("torch.nn.parallel.distributed", "DistributedDataParallel", "module"),
    ("torch.nn.parallel.data_parallel", "DataParallel", "module"),
    ("torch.distributed.fsdp.fully_sharded_data_parallel", "FullyShardedDataParallel", "_fsdp_wrapped_module"),
    ("torch.distributed.algorithms._checkpoint.checkpoint_wrapper", "ActivationWrapper",
     "_checkpoint_wrapped_module"),
    ("torch.distributed.algorithms._checkpoint.checkpoint_wrapper", "CheckpointWrapper",
     "_checkpoint_wrapped_module"),
    ("torch._dynamo.eval_frame", "OptimizedModule", "_orig_mod"),
)

# FSDP2's fully_shard gives a module a class of its own, FSDP{its class}, made of FSDPModule and its class
_FSDP_MODULES = (("torch.distributed.fsdp._fully_shard._fully_shard", "FSDPModule"),
                 ("torch.distributed._composable.fsdp.fully_shard", "FSDPModule"))


def table(module, name):
    """One of the dicts nn.Module keeps in its instance (_modules, _parameters, _buffers; OrderedDicts on torch
    1.13) as a plain dict, read with dict's own methods; {} when there is none."""
    try:
        found = object.__getattribute__(module, "__dict__").get(name)
    except (AttributeError, TypeError):
        return {}
    return dict(dict.items(found)) if isinstance(found, dict) else {}


def _loaded_class(where, name):
    cls = getattr(sys.modules.get(where), name, None)
    return cls if isinstance(cls, type) else None


def wrapped(module):
    """The module that `module` wraps, when it is a wrapper by type; else None."""
    kind = type(module)
    for where, name, attr in _WRAPPERS:
        cls = _loaded_class(where, name)
        if cls is not None and issubclass(kind, cls):
            inner = table(module, "_modules").get(attr)
            return inner if inner is not module else None
    return None


def unwrapped(module):
    """The innermost module under `module`'s wrappers (`module` itself when it is none)."""
    inner, depth = wrapped(module), 0
    while inner is not None and depth < 16:  # a bound on wrappers of wrappers
        module, inner, depth = inner, wrapped(inner), depth + 1
    return module


def class_name(module):
    """A root module's name: the class of the model its wrappers wrap (as the program wrote it, under FSDP2 too)."""
    kind = type(unwrapped(module))
    for where, name in _FSDP_MODULES:
        fsdp = _loaded_class(where, name)
        if fsdp is not None and issubclass(kind, fsdp):
            own = [base for base in kind.__bases__ if not issubclass(base, fsdp)]
            return own[0].__name__ if own else kind.__name__
    return kind.__name__


def walk(root):
    """(path, module) of root and each module under it, in named_modules' order, each module once; a wrapper and
    what it wraps share one path ("" for the root)."""
    seen = set()  # ids: hashing a module could run the program's __hash__
    todo = [("", root)]
    while todo:
        path, module = todo.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        yield path, module
        inner = wrapped(module)
        subs = [(path if sub is inner else f"{path}.{name}" if path else name, sub)
                for name, sub in table(module, "_modules").items() if sub is not None]
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
