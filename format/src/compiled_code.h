#pragma once
#include "memrec/snapshot.h"

namespace memrec {

// torch.compile's generated code, mapped back to the model (metadata "compiled_code", written by the Python
// recorder when inductor compiles a graph): {generated file: [[first line, module path, FX node, [[file, line,
// function], ...innermost first]], ...]}. Each stack through a mapped line gets the model's source frames just
// inside the generated frame, and each event with such a stack a module scope named for the FX node's module
// (nested in the module that ran the compiled code), so every analysis sees compiled code as it sees eager code.
// Idempotent: a resolved stack no longer ends in a mapped line's range without its source frames.
void resolve_compiled_code(Snapshot& s);

}  // namespace memrec
