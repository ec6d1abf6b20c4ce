// The parts of memrec._C (module.cpp): each file adds its functions to the module.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <string_view>

#include "memrec/recorder.h"

namespace memrec_python {

// Whether this process records.
bool recording();

// This thread's scopes (python_scopes.cpp): open one (`interned` when the caller keeps its name), the depth, and
// closing the innermost ones down to a depth.
bool open_scope(std::string_view name, memrec::ScopeName interned, memrec::ScopeKind kind);
size_t scope_depth();
void close_scopes_to(size_t depth);

extern PyMethodDef scope_methods[];        // python_scopes.cpp
extern PyMethodDef module_call_methods[];  // module_hooks.cpp

}  // namespace memrec_python
