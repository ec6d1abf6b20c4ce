// A part of a recording: a time range or a range of training steps (`memrec stats run.memrec --range 10s..20s`,
// `--steps 3..5`). The part reads as a recording that began at the range's start: what was live then (segments,
// blocks, the owners naming them) is its start state, what was live at its end its end state, and its events,
// kernels and scopes are those in the range (docs/format.md, The index).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "memrec/format.h"
#include "memrec/snapshot.h"

namespace memrec {

struct Range {
  enum class Kind { time, steps };
  Kind kind = Kind::time;
  // Times after the recording's first event (ns), or step numbers ("step N" scopes); both ends included.
  int64_t first = 0, last = 0;
  std::string flag;  // as given, "--range 10s..20s": notes name it
};

// A time after the start, as --at and --range take it: 1.5s, 250ms, 40us, 300ns, or a plain number of seconds.
// Throws Error naming `flag` and what it `wants` for anything else.
int64_t parse_duration(const std::string& text, std::string_view flag, std::string_view wants);

// --range T1..T2 (times after the start) or --steps A..B (step numbers); empty strings for flags not given. Throws
// Error with one sentence for a range that is not one, or for both flags at once.
std::optional<Range> parse_range(const std::string& range, const std::string& steps);

struct RangeRead {
  Snapshot snapshot;
  size_t chunks_read = 0;   // chunks decompressed, index and live state included
  size_t chunks_total = 0;  // chunks in the file
};

// The part of a .memrec file a range asks for. With the index a complete file carries, only the chunks the range
// needs are read (and a live state before it); a file without one, or whose index does not hold together, is
// read whole, and the snapshot's warnings say so.
RangeRead read_range(const std::string& path, const Range& range, const ReadOptions& options = {});
// The same over a file's bytes already in memory; errors and notes name ".memrec buffer".
RangeRead read_range(std::span<const uint8_t> bytes, const Range& range, const ReadOptions& options = {});
// The same part of a snapshot read whole (any input: pickles too). `name` is the input's, for notes and errors.
Snapshot cut_range(const Snapshot& s, const Range& range, const std::string& name);

}  // namespace memrec
