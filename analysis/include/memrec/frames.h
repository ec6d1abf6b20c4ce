// How a stack frame is named wherever memrec shows one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "memrec/snapshot.h"

namespace memrec {

// A frame as "function (file:line)" or "function (library)" when no file is known.
std::string format_frame(const Snapshot& s, uint32_t frame_id);
// A demangled function name as sites print it: no return type, argument or template lists, clone suffixes
// ([clone .isra.0], .cold) or qualifiers; "at::native::foo(...)::{lambda(int)#1}::operator()(int) const" ->
// "at::native::foo::{lambda#1}"; operator names stay whole ("Node::operator()", "operator<<").
std::string short_function(std::string_view name);

}  // namespace memrec
