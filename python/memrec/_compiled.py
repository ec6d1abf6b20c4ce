"""torch.compile's generated code mapped back to the model, for the reader (format/src/compiled_code.h).

When inductor writes a graph's Python module, each line that begins a node's code is noted with the FX node's
module (nn_module_stack; fwd_nn_module_stack in a backward graph) and the model's source frames (the node's stack
trace), and the whole map goes to the recording as its "compiled_code" metadata, again after each compile. Nothing
is compiled again, and memrec imports inductor only when the program calls torch.compile with inductor.

A module compiled in place (`module.compile()`, as compile_repeated_blocks does) runs its hooks inside the compiled
region, where they do nothing: its compiled call is run inside the module's scope instead, so the code that repeated
blocks share is named by the block whose call ran it (the FX nodes' modules are relative to the compiled module).

DDP's optimizer splits a compiled graph into pieces, one per gradient bucket, each compiled on its own; pieces alike
(the same layer's code, one bucket each) run one generated file, whose map names the modules of the piece it was
made for. Each piece is named `compiled_submod_N` (N in the order compiled) and its FX nodes' modules are noted,
in node order ("compiled_pieces" metadata): the reader gives a node run by another piece that piece's modules,
aligned with those of the piece the file was made for.

A graph that inductor loads from its cache is not lowered again: its map is read from the file memrec wrote beside
the generated one when it was compiled under memrec (GENERATED.memrec.json), else it is made from the line map
inductor keeps with the cached graph, which has the source frames but neither the FX node nor the modules.
"""
import functools
import importlib
import inspect
import json
import os
import re
import types

import torch

from . import _C, _modules

# generated file -> [[first line, [module, ...outermost first], FX node, [[file, line, function], ...]], ...]
_tables = {}
# piece of a split graph -> its name, and name -> [module, ...] of its FX nodes in node order
_piece_names = _modules.Names()
_pieces = {}
_TRACE = re.compile(r'File "(.+)", line (\d+), in (.+)\n')
_ROOT = re.compile(r"^(?:L\[['\"][^'\"]*['\"]\]|self)")
_GETATTR = re.compile(r"getattr\(([^()]*), ['\"]([^'\"]+)['\"]\)")
_ITEM = re.compile(r"(?:\._modules)?\[['\"]?([^'\"\]]+)['\"]?\]")


class Failures:
    """Errors of memrec's own while mapping compiled code: those lines stay unmapped, and the file says so."""
    count = 0


def _failed(error):
    Failures.count += 1
    try:
        _C.set_metadata("notes.compiled_code", f"memrec could not map compiled code to the model {Failures.count} "
                        f"time(s); those blocks keep the generated code's lines ({type(error).__name__}: {error})")
    except Exception:  # noqa: BLE001  nothing of memrec's reaches the program
        pass


def module_paths(stack):
    """The modules of an nn_module_stack, outermost first, named as memrec names modules, relative to the compiled
    one: "L['self'].transformer.h[3].attn" and "L['self']._modules['h']._modules['3']" -> "transformer.h.3.attn",
    "h.3"; the compiled module itself ("L['self']") is left out."""
    paths = []
    for value in (stack or {}).values():
        path = str(value[0] if isinstance(value, tuple) else value)
        while _GETATTR.search(path):
            path = _GETATTR.sub(r"\1.\2", path)
        path = _ITEM.sub(r".\1", _ROOT.sub("", path)).strip(".")
        if path:
            paths.append(path)
    return paths


def _row(line, node):
    """One line-map entry of inductor's wrapper code: the FX node whose code begins at `line`."""
    meta = getattr(node, "meta", None) or {}
    trace, name = getattr(node, "stack_trace", None) or meta.get("stack_trace") or "", getattr(node, "name", "")
    frames = [[f, int(n), fn] for f, n, fn in reversed(_TRACE.findall(trace))]
    modules = module_paths(meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack"))
    return [int(line), modules, str(name), frames]


def _trace_row(line, trace):
    """A line-map entry of a cached graph: inductor kept the node's stack trace only."""
    return [int(line), [], "", [[f, int(n), fn] for f, n, fn in reversed(_TRACE.findall(trace or ""))]]


def _beside(path):
    return f"{path}.memrec.json"


def _note(path, line_map):
    """A graph lowered here: its map, kept beside the generated file for the runs that load it from the cache."""
    try:
        if path and line_map:
            _tables[str(path)] = [_row(line, node) for line, node in line_map]
            with open(_beside(path), "w") as f:
                json.dump(_tables[str(path)], f, separators=(",", ":"))
            publish()
    except Exception as e:  # noqa: BLE001  nothing of memrec's reaches the program
        _failed(e)


def _loaded(path, linemap):
    """A generated file loaded (from the cache, or just lowered: then _note replaces this with the full map)."""
    try:
        if not path or str(path) in _tables:
            return
        if os.path.exists(_beside(path)):
            with open(_beside(path)) as f:
                _tables[str(path)] = json.load(f)
        elif linemap:
            _tables[str(path)] = [_trace_row(line, trace) for line, trace in linemap]
        else:
            return
        publish()
    except Exception as e:  # noqa: BLE001  nothing of memrec's reaches the program
        _failed(e)


def publish():
    """Sends the map to the running recording (at its start too: graphs compiled before it still run)."""
    if _tables and _C.running():
        _C.set_metadata("compiled_code", json.dumps(_tables, separators=(",", ":")))
    if _pieces and _C.running():
        _C.set_metadata("compiled_pieces", json.dumps(_pieces, separators=(",", ":")))


def piece_name(module):
    """The name of a split graph's piece (`compiled_submod_N`), or None for any other module."""
    return _piece_names.get(module)


def note_piece(piece, graph_module):
    """A piece of a split graph compiled: named, with its FX nodes' modules in node order."""
    try:
        modules = {}  # ordered, each once
        for node in graph_module.graph.nodes:
            meta = getattr(node, "meta", None) or {}
            for path in module_paths(meta.get("nn_module_stack")):
                modules.setdefault(path)
        name = f"compiled_submod_{len(_pieces)}"
        _pieces[name] = list(modules)
        _piece_names.set(piece, name)
        publish()
    except Exception as e:  # noqa: BLE001  nothing of memrec's reaches the program
        _failed(e)


def _hook_split_graphs():
    """DDP's optimizer (torch._dynamo.backends.distributed): each piece it compiles is noted (note_piece)."""
    try:
        if not importlib.import_module("torch.distributed").is_available():
            return  # no DDP, so no graph it splits
        distributed = importlib.import_module("torch._dynamo.backends.distributed")
    except ImportError:
        return  # a torch without DDP's optimizer
    compiler = getattr(distributed, "SubmodCompiler", None)
    original = getattr(compiler, "compile_submod", None)
    if original is None or getattr(original, "_memrec", False):
        return

    @functools.wraps(original)
    def compile_submod(self, input_mod, *args, **kwargs):
        piece = original(self, input_mod, *args, **kwargs)
        note_piece(piece, input_mod)
        return piece

    compile_submod._memrec = True
    compiler.compile_submod = compile_submod


def _hook_inductor():
    graph = __import__("torch._inductor.graph", fromlist=["GraphLowering"])
    lowering = graph.GraphLowering
    original = getattr(lowering, "_compile_to_module_lines", None)
    if original is None or getattr(original, "_memrec", False):
        return

    @functools.wraps(original)
    def compile_to_module_lines(self, wrapper_code, *args, **kwargs):
        module = original(self, wrapper_code, *args, **kwargs)
        _note(getattr(self, "cache_path", None) or getattr(module, "__file__", None),
              getattr(wrapper_code, "line_map", None))
        return module

    compile_to_module_lines._memrec = True
    lowering._compile_to_module_lines = compile_to_module_lines
    _hook_cache_loads()
    try:
        _hook_split_graphs()
    except Exception as e:  # noqa: BLE001  pieces keep the maps' modules then
        _failed(e)


def _hook_cache_loads():
    cache = __import__("torch._inductor.codecache", fromlist=["PyCodeCache"]).PyCodeCache
    load = cache.load_by_key_path
    if getattr(load, "_memrec", False) or not hasattr(load, "__func__"):
        return
    signature = inspect.signature(load)

    @functools.wraps(load)
    def load_and_map(cls, *args, **kwargs):
        module = load.__func__(cls, *args, **kwargs)
        try:
            given = signature.bind_partial(*args, **kwargs).arguments
        except TypeError as e:
            _failed(e)
        else:
            _loaded(given.get("path") or getattr(module, "__file__", None), given.get("linemap"))
        return module

    load_and_map._memrec = True
    cache.load_by_key_path = classmethod(load_and_map)


def install():
    """Wraps torch.compile (torch 2.x): a call with inductor hooks inductor's code writer first."""
    compile_ = getattr(torch, "compile", None)
    if compile_ is None or getattr(compile_, "_memrec", False):
        return

    @functools.wraps(compile_)
    def compile_and_map(*args, **kwargs):
        if kwargs.get("backend", "inductor") == "inductor":
            try:
                _hook_inductor()
            except Exception as e:  # noqa: BLE001  no map then; the program's compile goes on as without memrec
                _failed(e)
        compiled = compile_(*args, **kwargs)
        try:
            module = _module_compiled_in_place(args[0] if args else kwargs.get("model"), compiled)
        except Exception as e:  # noqa: BLE001  the program gets its compiled call as without memrec
            _failed(e)
            return compiled
        return compiled if module is None else _in_module_scope(module, compiled)

    compile_and_map._memrec = True
    torch.compile = compile_and_map


def _module_compiled_in_place(target, compiled):
    """The module whose `module.compile()` this is (it compiles its bound _call_impl, which runs the module hooks
    inside the compiled region, where they do nothing), or None: a compile of anything else, or one that compiled
    nothing (TORCH_COMPILE_DISABLE)."""
    call_impl = torch.nn.Module._call_impl
    if type(target) is not types.MethodType or target.__func__ is not call_impl:  # type checks: no program code runs
        return None
    if type(compiled) is types.MethodType and compiled.__func__ is call_impl:
        return None
    return target.__self__ if issubclass(type(target.__self__), torch.nn.Module) else None


def _in_module_scope(module, compiled):
    """`compiled`, run inside the module's scope, as the module hooks open it around an eager call: the compiled
    code's blocks are then named by the block that ran it (repeated blocks compiled in place share their code)."""
    from . import _hooks

    @functools.wraps(compiled)
    def call(*args, **kwargs):
        _hooks._forward_pre(module, args)
        try:
            return compiled(*args, **kwargs)
        finally:
            _hooks._forward_post(module, args, None)
    return call
