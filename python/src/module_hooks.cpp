// The global module hooks' work per module call (memrec/_hooks.py calls module_enter and module_exit from its
// forward pre and post hooks): one C call each, which opens or closes the module's scope. Python does the rare
// part: the thread's outermost call (its phase, the owners) and naming a module the first time (module_open).
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
  PyObject* address = PyLong_FromVoidPtr(module);
  PyObject* forget = address ? PyCFunction_New(&forget_named_def, address) : nullptr;
  PyObject* weakref = forget ? PyWeakref_NewRef(module, forget) : nullptr;
  Py_XDECREF(forget);
  Py_XDECREF(address);
  if (!weakref) return nullptr;
  Named& n = g_named[module];
  n = Named{memrec::intern_scope_name(name), ++g_serial, weakref};
  return &n;
}

// module_enter(module) -> bool: opens the module call's scope on this thread; False when Python must first do the
// rare part (the outermost call, or a module not named yet) and then call module_open.
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

// module_exit(module): the module's innermost open call on this thread ends, with what opened inside it; the
// outermost one closes the phase it opened.
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

}  // namespace

PyMethodDef module_call_methods[] = {
    {"module_enter", module_enter, METH_O,
     "module_enter(module) -> bool: opens the module call's scope; False when Python's part comes first "
     "(the thread's outermost call, or a module not named yet), then module_open"},
    {"module_open", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(module_open)), METH_FASTCALL,
     "module_open(module, name): opens the module call's scope, naming the module (while it lives) if not yet"},
    {"module_exit", module_exit, METH_O, "module_exit(module): the module's innermost open call on this thread ends"},
    {"outermost_module", outermost_module, METH_O,
     "outermost_module(module): the module of this thread's outermost open call (module if it has died), or None"},
    {"open_forward", open_forward, METH_O,
     "open_forward(phase): the outermost call opens the 'forward' or 'recompute' phase; its end closes it"},
    {"close_forward", close_forward_py, METH_O,
     "close_forward(stopped_only): closes the forward or recompute phase this thread left open, with its module "
     "scopes (stopped_only: only a recompute the recorder closed already)"},
    {"forget_module_calls", forget_module_calls, METH_NOARGS, "this thread's module calls start afresh"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace memrec_python
