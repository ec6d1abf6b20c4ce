// The scopes Python opened on each thread (memrec/_scopes.py, the hooks of memrec/_hooks.py).
#include <algorithm>
#include <string>
#include <vector>

#include "python_module.h"

namespace memrec_python {
namespace {

// The scopes Python opened on this thread, innermost last. Callers remember depth() before opening and close_to()
// it afterwards, so a scope an exception skipped closes with its enclosing one. Names are kept to reopen them after
// a restart (take_scopes): a pointer to an interned one, else a copy; entries past `depth` keep their strings'
// capacity, so an open allocates nothing once the stack has been this deep with names this long.
struct PythonScopes {
  struct Open {
    std::string copy;
    const std::string* interned = nullptr;
    int kind = 0;
    std::string_view name() const { return interned ? std::string_view(*interned) : std::string_view(copy); }
  };
  std::vector<Open> opened;
  size_t depth = 0;
};
thread_local PythonScopes t_scopes;

// This thread's scopes, less those the recorder closed on its own (a recompute stopped early): always the innermost.
PythonScopes& python_scopes() {
  PythonScopes& s = t_scopes;
  s.depth -= std::min<size_t>(s.depth, size_t(memrec::take_scopes_closed()));
  return s;
}

PyObject* name_object(const PythonScopes::Open& o) {
  return PyUnicode_FromStringAndSize(o.name().data(), Py_ssize_t(o.name().size()));
}

PyObject* open_scope_py(PyObject*, PyObject* const* args, Py_ssize_t n) {
  const char* usage = "open_scope(name: str, kind: int in 0..4)";
  std::optional<std::string_view> name = text_arg(n == 2 ? args[0] : nullptr, usage);
  long kind = name ? PyLong_AsLong(args[1]) : -1;
  if (!name || kind < 0 || kind > static_cast<long>(memrec::ScopeKind::annotation)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, usage);
    return nullptr;
  }
  return PyBool_FromLong(open_scope(*name, {}, static_cast<memrec::ScopeKind>(kind)));
}

PyObject* scope_depth_py(PyObject*, PyObject*) { return PyLong_FromSize_t(scope_depth()); }

PyObject* close_scopes_to_py(PyObject*, PyObject* level_arg) {
  Py_ssize_t level = PyLong_AsSsize_t(level_arg);
  if (level == -1 && PyErr_Occurred()) return nullptr;
  close_scopes_to(size_t(std::max<Py_ssize_t>(level, 0)));
  Py_RETURN_NONE;
}

PyObject* innermost_scope(PyObject*, PyObject* kind_arg) {
  long kind = PyLong_AsLong(kind_arg);
  if (kind == -1 && PyErr_Occurred()) return nullptr;
  const PythonScopes& s = python_scopes();
  for (size_t i = s.depth; i-- > 0;)
    if (s.opened[i].kind == kind) return name_object(s.opened[i]);
  Py_RETURN_NONE;
}

PyObject* take_scopes(PyObject*, PyObject*) {
  PythonScopes& s = python_scopes();
  PyObject* out = PyList_New(0);
  for (size_t i = 0; out && i < s.depth; ++i) {
    PyObject* entry = Py_BuildValue("(Ni)", name_object(s.opened[i]), s.opened[i].kind);
    if (!entry || PyList_Append(out, entry) < 0) Py_CLEAR(out);
    Py_XDECREF(entry);
  }
  if (!out) return nullptr;
  close_scopes_to(0);
  return out;
}

PyObject* forget_scopes(PyObject*, PyObject*) {
  t_scopes.depth = 0;
  memrec::take_scopes_closed();
  Py_RETURN_NONE;
}

}  // namespace

bool open_scope(std::string_view name, memrec::ScopeName interned, memrec::ScopeKind kind) {
  if (!(interned.text ? memrec::open_scope(interned, kind) : memrec::open_scope(name, kind))) return false;
  PythonScopes& s = python_scopes();
  if (s.depth == s.opened.size()) s.opened.emplace_back();
  PythonScopes::Open& o = s.opened[s.depth++];
  o.interned = interned.text;
  if (!interned.text) o.copy.assign(name);
  o.kind = int(kind);
  return true;
}

size_t scope_depth() { return python_scopes().depth; }

void close_scopes_to(size_t depth) {
  for (PythonScopes& s = python_scopes(); s.depth > depth; --s.depth) memrec::close_scope();
}

PyMethodDef scope_methods[] = {
    {"open_scope", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(open_scope_py)), METH_FASTCALL,
     "open_scope(name, kind) -> bool: opens a scope on this thread's stack; False when nothing records"},
    {"scope_depth", scope_depth_py, METH_NOARGS, "scopes open on this thread's stack"},
    {"close_scopes_to", close_scopes_to_py, METH_O, "close_scopes_to(depth): closes this thread's innermost scopes"},
    {"innermost_scope", innermost_scope, METH_O, "innermost_scope(kind) -> innermost open name of a kind, or None"},
    {"take_scopes", take_scopes, METH_NOARGS, "closes this thread's scopes, returns [(name, kind)] outermost first"},
    {"forget_scopes", forget_scopes, METH_NOARGS, "in a forked child: this thread's stack is empty, nothing closed"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace memrec_python
