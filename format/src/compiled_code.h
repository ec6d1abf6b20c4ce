#pragma once
#include "memrec/snapshot.h"

namespace memrec {

// torch.compile's generated code, mapped back to the model (metadata "compiled_code", written by the Python
// recorder when inductor compiles a graph): {generated file: [[first line, [module path, ...outermost first],
// FX node, [[file, line, function], ...innermost first]], ...]}. Each stack through a mapped line gets the model's
// source frames just inside the generated frame, and each event with such a stack the FX node's module scopes,
// nested as eager calls nest, inside the module that ran the compiled code: every analysis sees compiled code as it
// sees eager code. Resolving a resolved file changes nothing.
void resolve_compiled_code(Snapshot& s);

}  // namespace memrec
