// Human-readable summaries shared by `memrec info`, `memrec run` and the viewer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memrec/sites.h"  // allocation_site, top_frames
#include "memrec/snapshot.h"

namespace memrec {

// "1.5 GiB (1610612736 bytes)"-style without the bytes: "1.50 GiB".
std::string format_bytes(uint64_t bytes);
// Duration in the largest unit that keeps it above 1: "12.3 ms".
std::string format_duration(int64_t ns);
// A frame as "function (file:line)" or "function (library)" when no file is known.
std::string format_frame(const Snapshot& s, uint32_t frame_id);
// A demangled function name as sites print it: no return type, argument or template lists, clone suffixes
// ([clone .isra.0], .cold) or qualifiers; "at::native::foo(...)::{lambda(int)#1}::operator()(int) const" ->
// "at::native::foo::{lambda#1}"; operator names stay whole ("Node::operator()", "operator<<").
std::string short_function(std::string_view name);
// The whole `memrec info` report.
std::string info_report(const Snapshot& s);

}  // namespace memrec
