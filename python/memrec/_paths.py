"""The model's own path of each module (`blocks.0.fc1`), as the user's model names it: the parts that wrappers add
are left out, so module scopes, layers and owners carry one name per module however the model is wrapped.

A wrapper is told by its type, never by an attribute's name alone (a user's own submodule may be called `module`):
DistributedDataParallel and DataParallel (`module`), FSDP (`_fsdp_wrapped_module`), checkpoint and offload
wrappers (`_checkpoint_wrapped_module`), torch.compile's OptimizedModule (`_orig_mod`). A wrapper takes the path of
the module it wraps. Classes are looked up in sys.modules: no instance can exist of a class whose module was never
imported, and nothing is imported here. Only identity and type checks and the modules' own `_modules` are used: no
method of the program's objects runs.
"""
import sys

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


def wrapped(module):
    """The module that `module` wraps, when it is a wrapper by type; else None."""
    kind = type(module)
    for where, name, attr in _WRAPPERS:
        cls = getattr(sys.modules.get(where), name, None)
        if isinstance(cls, type) and issubclass(kind, cls):
            inner = module._modules.get(attr)
            return inner if inner is not module else None
    return None


def unwrapped(module):
    """The innermost module under `module`'s wrappers (`module` itself when it is none)."""
    seen = 0
    inner = wrapped(module)
    while inner is not None and seen < 16:  # a bound on wrappers of wrappers
        module, inner, seen = inner, wrapped(inner), seen + 1
    return module


# FSDP2's fully_shard gives a module a class of its own, FSDP{its class}, made of FSDPModule and its class
_FSDP_MODULES = (("torch.distributed.fsdp._fully_shard._fully_shard", "FSDPModule"),
                 ("torch.distributed._composable.fsdp.fully_shard", "FSDPModule"))


def class_name(module):
    """A root module's name: the class of the model its wrappers wrap (as the program wrote it, under FSDP2 too)."""
    kind = type(unwrapped(module))
    for where, name in _FSDP_MODULES:
        fsdp = getattr(sys.modules.get(where), name, None)
        if isinstance(fsdp, type) and issubclass(kind, fsdp):
            own = [base for base in kind.__bases__ if not issubclass(base, fsdp)]
            return own[0].__name__ if own else kind.__name__
    return kind.__name__


def model_paths(root):
    """(module, path) for each module under root, once each, in named_modules' order; "" for the root and what it
    wraps."""
    seen = set()  # ids: hashing a module could run the program's __hash__
    out = []
    todo = [(root, "")]
    while todo:
        module, path = todo.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        out.append((module, path))
        inner = wrapped(module)
        children = [(sub, path if sub is inner else f"{path}.{name}" if path else name)
                    for name, sub in module._modules.items() if sub is not None]
        todo.extend(reversed(children))
    return out
