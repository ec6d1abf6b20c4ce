// The parts of memrec._C (module.cpp): each file adds its functions to the module.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <optional>
#include <string_view>

#include "memrec/recorder.h"

namespace memrec_python {

// Whether this process records.
bool recording();

// `arg` as UTF-8 text; nullopt with a Python error set (a TypeError saying `usage` when `arg` is no str or null).
inline std::optional<std::string_view> text_arg(PyObject* arg, const char* usage) {
  Py_ssize_t len = 0;
  const char* text = arg && PyUnicode_Check(arg) ? PyUnicode_AsUTF8AndSize(arg, &len) : nullptr;
  if (text) return std::string_view(text, size_t(len));
  if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, usage);
  return std::nullopt;
}

// A weak reference to `o` whose callback calls forget(address of o, the weak reference), so that a table kept by
// address forgets o when it dies; nullptr with a Python error when o takes no weak references.
inline PyObject* watch(PyObject* o, PyMethodDef* forget) {
  PyObject* address = PyLong_FromVoidPtr(o);
  PyObject* callback = address ? PyCFunction_New(forget, address) : nullptr;
  PyObject* weakref = callback ? PyWeakref_NewRef(o, callback) : nullptr;
  Py_XDECREF(callback);
  Py_XDECREF(address);
  return weakref;
}

// A Python error is set: an Exception of memrec's own goes to handler(error) and is cleared (true); any other (a
// KeyboardInterrupt) stays set for the program (false).
bool handed_over(PyObject* handler);

// This thread's scopes (python_scopes.cpp): open one (`interned` when the caller keeps its name), the depth, and
// closing the innermost ones down to a depth.
bool open_scope(std::string_view name, memrec::ScopeName interned, memrec::ScopeKind kind);
size_t scope_depth();
void close_scopes_to(size_t depth);

extern PyMethodDef scope_methods[];        // python_scopes.cpp
extern PyMethodDef module_call_methods[];  // module_hooks.cpp
extern PyMethodDef owner_methods[];        // owners.cpp

}  // namespace memrec_python
