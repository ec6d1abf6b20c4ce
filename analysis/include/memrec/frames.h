// How a stack frame is named wherever memrec shows one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec {

// A frame as "function (file:line)" or "function (library)" when no file is known.
std::string format_frame(const Snapshot& s, uint32_t frame_id);
// A demangled function name as sites print it: no return type, argument or template lists, clone suffixes
// ([clone .isra.0], .cold) or qualifiers; "at::native::foo(...)::{lambda(int)#1}::operator()(int) const" ->
// "at::native::foo::{lambda#1}"; operator names stay whole ("Node::operator()", "operator<<").
std::string short_function(std::string_view name);
// The at::_ops struct an ATen operator entry point belongs to, from short_function()'s form of its name:
// "at::_ops::empty_memory_format::call" or "::redispatch" -> "empty_memory_format"; "" for any other function.
std::string_view op_struct(std::string_view short_name);
// The aten op a function (as symbolized) is the entry point of, named as an op scope (RecordFunction) names it:
// the schema name, without the overload the struct name ends with ("_memory_format", "_Tensor", "_dim_IntList").
// "at::_ops::empty_memory_format::call(...)" -> "aten::empty". "" for any other function.
std::string frame_op(std::string_view function);
// The ops a stack's C++ frames enter, outermost first; an op entered twice in a row (call, then redispatch) once.
std::vector<std::string> stack_ops(const Snapshot& s, uint32_t stack);

}  // namespace memrec
