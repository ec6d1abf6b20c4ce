// The site of an allocation: the first frame of the user's code, below the allocator, the dispatcher, autograd,
// the interpreter and torch's own Python files. One rule for `stats`, `info`, `report` and the viewer
// (docs/attribution.md lists what counts as internal and how to extend it).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec {

inline constexpr uint32_t kNoFrame = UINT32_MAX;

// The user's own internal patterns, added to the built-in list for this process: MEMREC_INTERNAL (patterns
// separated by ':') read at the first use, plus what add_internal_patterns adds (the commands' --internal).
// A pattern marks a frame internal when the frame's function name (shortened) starts with it, or its file or
// library path contains it: "mylib::detail::", "transformers/", "libmyalloc.so".
void add_internal_patterns(std::span<const std::string> patterns);
const std::vector<std::string>& internal_patterns();

// Whether a frame's file is Python source ("x.py", "<frozen ...>").
bool is_python_file(std::string_view file);

// Whether a frame is the user's code: named, and neither built-in internal nor matched by internal_patterns().
bool is_user_frame(const Snapshot& s, uint32_t frame);

// The frame id of a stack's site: its first user frame (innermost first); with none, the op the framework ran
// (the outermost at::_ops frame, else the first frame that is not the unwinder, the allocator or a tensor
// factory). kNoFrame for the empty stack.
uint32_t site_frame(const Snapshot& s, uint32_t stack);

// The site in one line: "Attention.forward (train.py:29)", "aten::mm" where no frame is user code, "<no stack>".
std::string site_label(const Snapshot& s, uint32_t stack);

// The op that allocated, for context beside the site: "aten::addmm" from the outermost at::_ops frame below the
// site, else the first framework frame; "" when the site is the stack's first frame.
std::string op_label(const Snapshot& s, uint32_t stack);

// Where an allocation came from, in one line, the site first: "Attention.forward (train.py:29) via aten::addmm",
// "train (train.py:80) via aten::mm in MmBackward0" where the user's line ran autograd on its own thread (CPU);
// where no frame is user code, the op and the autograd node or torch function it ran in: "aten::mm in
// AddmmBackward0". `stats --by stack` groups by it; names only, no addresses, so it matches across runs.
std::string allocation_site(const Snapshot& s, uint32_t stack);

// The first `n` frames of a stack that say where the program allocated: unwinder, recorder and
// allocator-internal frames are skipped (the way memory_viz filters them).
std::vector<uint32_t> top_frames(const Snapshot& s, uint32_t stack, size_t n);

// The frames of a stack the user reads, innermost first: the op that allocated (when a user frame calls it), then
// the user's frames; the site alone where no frame is the user's. What a folded flame graph shows: no
// interpreter, runpy, libc, autograd engine or dispatcher rows.
std::vector<uint32_t> user_frames(const Snapshot& s, uint32_t stack);

// Every frame of a stack, innermost first, marked for showing the whole stack.
struct MarkedFrame {
  uint32_t frame = 0;
  bool user = false;  // is_user_frame
  bool site = false;  // the frame site_frame chose
};
std::vector<MarkedFrame> marked_frames(const Snapshot& s, uint32_t stack);

}  // namespace memrec
