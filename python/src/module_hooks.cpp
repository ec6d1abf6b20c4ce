// The global module hooks (module_pre_hook and module_post_hook, registered by memrec/_hooks.py as they are, or
// called from its Python hooks where a compiler traces those): each opens or closes the module's scope. Python
// does the rare part: the thread's outermost call (its phase, the owners) and naming a module the first time
// (module_open).
//
// Each module is named once: its name, interned, is kept by the module's address while the module lives, with a
// serial number that tells it from a later module at the same address; a weak reference's callback forgets it, so
// the module is neither kept alive nor given an attribute. Each thread keeps its open module calls, outermost first,
// with the scope depth before each, by address and serial (not a reference: a call whose forward raised is never
// closed by its post hook, and a thread may end with it).
#include <string>
#include <unordered_map>
#include <vector>

#include "python_module.h"

namespace memrec_python {
namespace {

struct Named {
  memrec::ScopeName name;
  uint64_t serial = 0;
  PyObject* weakref = nullptr;  // owned; its callback forgets the module
};
std::unordered_map<const PyObject*, Named> g_named;  // by module address, under the interpreter's lock
uint64_t g_serial = 0;

constexpr size_t kNoForward = SIZE_MAX;

struct OpenCall {
  const PyObject* module;  // for its address only
  uint64_t serial;
  size_t level;  // scope depth before the call's scope
};

struct ThreadCalls {
  std::vector<OpenCall> open;       // outermost first
  size_t forward_level = kNoForward;  // depth before the "forward" or "recompute" phase the outermost call opened
  bool recompute = false;
};
thread_local ThreadCalls t_calls;

const Named* named(const PyObject* module) {
  auto it = g_named.find(module);
  return it == g_named.end() ? nullptr : &it->second;
}

void open_call(ThreadCalls& t, const PyObject* module, const Named& n) {
  size_t level = scope_depth();
  open_scope(*n.name.text, n.name, memrec::ScopeKind::module);
  t.open.push_back(OpenCall{module, n.serial, level});
}

// Closes the forward or recompute phase the thread's outermost call opened, with the module scopes inside it.
void close_forward(ThreadCalls& t) {
  if (t.forward_level != kNoForward) close_scopes_to(t.forward_level);
  t.open.clear();
  t.forward_level = kNoForward;
  t.recompute = false;
}

// A recompute stopped early (torch 2.x checkpoint's early stop raises out of the module, skipping its post hooks):
// the recorder closed it when backward moved on to the next autograd node.
bool recompute_over(const ThreadCalls& t) { return t.recompute && scope_depth() <= t.forward_level; }

PyObject* forget_named(PyObject* address, PyObject* weakref) {
  auto it = g_named.find(static_cast<const PyObject*>(PyLong_AsVoidPtr(address)));
  if (it != g_named.end() && it->second.weakref == weakref) {
    Py_DECREF(it->second.weakref);
    g_named.erase(it);
  }
  PyErr_Clear();
  Py_RETURN_NONE;
}

PyMethodDef forget_named_def = {"forget_named", forget_named, METH_O, "a named module died"};

// Names `module` for as long as it lives; nullptr with a Python error when it cannot be (no weak references).
const Named* name_module(PyObject* module, std::string_view name) {
  PyObject* weakref = watch(module, &forget_named_def);
  if (!weakref) return nullptr;
  Named& n = g_named[module];
  n = Named{memrec::intern_scope_name(name), ++g_serial, weakref};
  return &n;
}

// Opens the module call's scope on this thread; False when Python must first do the rare part (the outermost call,
// or a module not named yet), which then calls module_open.
PyObject* module_enter(PyObject*, PyObject* module) {
  if (!recording()) Py_RETURN_TRUE;
  ThreadCalls& t = t_calls;
  if (!t.open.empty() && recompute_over(t)) close_forward(t);  // the next layer's recompute, or a new forward
  const Named* n = t.open.empty() ? nullptr : named(module);
  if (!n) Py_RETURN_FALSE;
  open_call(t, module, *n);
  Py_RETURN_TRUE;
}

// module_open(module, name): after Python's part, opens the call's scope, naming the module if it is not yet.
PyObject* module_open(PyObject*, PyObject* const* args, Py_ssize_t n_args) {
  std::optional<std::string_view> name = text_arg(n_args == 2 ? args[1] : nullptr, "module_open(module, name: str)");
  if (!name) return nullptr;
  const Named* n = named(args[0]);
  if (!n) n = name_module(args[0], *name);
  if (!n) return nullptr;
  open_call(t_calls, args[0], *n);
  Py_RETURN_NONE;
}

// The module's innermost open call on this thread ends, with what opened inside it; the outermost one closes the
// phase it opened.
PyObject* module_exit(PyObject*, PyObject* module) {
  ThreadCalls& t = t_calls;
  const Named* n = t.open.empty() ? nullptr : named(module);
  if (!n) Py_RETURN_NONE;
  size_t i = t.open.size();
  while (i > 0 && (t.open[i - 1].module != module || t.open[i - 1].serial != n->serial)) --i;
  if (i == 0) Py_RETURN_NONE;
  close_scopes_to(t.open[i - 1].level);
  t.open.resize(i - 1);
  if (t.open.empty()) close_forward(t);
  Py_RETURN_NONE;
}

// outermost_module(module): the module of the thread's outermost open call (`module` when that one has died since),
// or None when none is open.
PyObject* outermost_module(PyObject*, PyObject* module) {
  const ThreadCalls& t = t_calls;
  if (t.open.empty()) Py_RETURN_NONE;
  const Named* n = named(t.open[0].module);
  PyObject* root = n && n->serial == t.open[0].serial ? const_cast<PyObject*>(t.open[0].module) : module;
  Py_INCREF(root);
  return root;
}

PyObject* open_forward(PyObject*, PyObject* phase) {
  std::optional<std::string_view> name = text_arg(phase, "open_forward(phase: str)");
  if (!name) return nullptr;
  ThreadCalls& t = t_calls;
  t.forward_level = scope_depth();
  t.recompute = *name == "recompute";
  open_scope(*name, {}, memrec::ScopeKind::phase);
  Py_RETURN_NONE;
}

PyObject* close_forward_py(PyObject*, PyObject* stopped_only) {
  ThreadCalls& t = t_calls;
  if (stopped_only == Py_True ? recompute_over(t) : t.forward_level != kNoForward) close_forward(t);
  Py_RETURN_NONE;
}

PyObject* forget_module_calls(PyObject*, PyObject*) {
  t_calls = ThreadCalls{};
  Py_RETURN_NONE;
}

// The forward hooks' Python side, set by set_module_hooks: the rare part (memrec/_hooks.py _module_begins) and the
// repair of an error of memrec's own (_hooks._repair); both owned. g_scopes: the recording asked for scopes.
PyObject* g_begins = nullptr;
PyObject* g_repair = nullptr;
bool g_scopes = false;

// module_pre_hook(module, inputs) and module_post_hook(module, inputs, output): the global forward pre and post
// hooks, with no Python frame of their own. They read the module's identity only (never the inputs or output, nor
// the module's __len__, __bool__, __eq__ or __hash__), return None and let no error of memrec's reach the program.
PyObject* module_pre_hook(PyObject*, PyObject* const* args, Py_ssize_t n_args) {
  if (!g_scopes || n_args < 1) Py_RETURN_NONE;
  PyObject* opened = module_enter(nullptr, args[0]);
  if (opened == Py_False) {
    Py_DECREF(opened);
    opened = g_begins ? PyObject_CallOneArg(g_begins, args[0]) : Py_NewRef(Py_None);
  }
  Py_XDECREF(opened);
  if (!opened && !handed_over(g_repair)) return nullptr;
  Py_RETURN_NONE;
}

PyObject* module_post_hook(PyObject*, PyObject* const* args, Py_ssize_t n_args) {
  if (!g_scopes || n_args < 1) Py_RETURN_NONE;
  Py_DECREF(module_exit(nullptr, args[0]));
  Py_RETURN_NONE;
}

// set_module_hooks(scopes, begins, repair): whether the forward hooks open scopes, and their Python side.
PyObject* set_module_hooks(PyObject*, PyObject* const* args, Py_ssize_t n_args) {
  if (n_args != 3 || !PyCallable_Check(args[1]) || !PyCallable_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "set_module_hooks(scopes: bool, begins: callable, repair: callable)");
    return nullptr;
  }
  int scopes = PyObject_IsTrue(args[0]);
  if (scopes < 0) return nullptr;
  g_scopes = scopes;
  Py_XSETREF(g_begins, Py_NewRef(args[1]));
  Py_XSETREF(g_repair, Py_NewRef(args[2]));
  Py_RETURN_NONE;
}

}  // namespace

PyMethodDef module_call_methods[] = {
    {"module_open", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(module_open)), METH_FASTCALL,
     "module_open(module, name): opens the module call's scope, naming the module (while it lives) if not yet"},
    {"outermost_module", outermost_module, METH_O,
     "outermost_module(module): the module of this thread's outermost open call (module if it has died), or None"},
    {"open_forward", open_forward, METH_O,
     "open_forward(phase): the outermost call opens the 'forward' or 'recompute' phase; its end closes it"},
    {"close_forward", close_forward_py, METH_O,
     "close_forward(stopped_only): closes the forward or recompute phase this thread left open, with its module "
     "scopes (stopped_only: only a recompute the recorder closed already)"},
    {"forget_module_calls", forget_module_calls, METH_NOARGS, "this thread's module calls start afresh"},
    {"module_pre_hook", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(module_pre_hook)), METH_FASTCALL,
     "module_pre_hook(module, inputs): the global forward pre hook; opens the module call's scope"},
    {"module_post_hook", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(module_post_hook)), METH_FASTCALL,
     "module_post_hook(module, inputs, output): the global forward hook; the module's call ends"},
    {"set_module_hooks", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(set_module_hooks)), METH_FASTCALL,
     "set_module_hooks(scopes, begins, repair): whether the forward hooks open scopes; Python's rare part and "
     "the repair of memrec's own errors"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace memrec_python
