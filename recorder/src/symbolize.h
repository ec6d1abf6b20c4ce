// Turns raw return addresses into Snapshot frames, once per unique address (libbacktrace: function names from
// the symbol tables, file:line where DWARF exists), and strips the recorder's own frames.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "memrec/recorder.h"
#include "memrec/snapshot.h"

namespace memrec::detail {

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  // Appends the frame ids of `pcs` (innermost first, inlined frames expanded) to `out`, leaving out the frames
  // of the recorder and the unwinders (they never enter the snapshot). Words with kScriptFrameBit are the
  // interpreter's frames: they replace the C++ frames from the innermost to the outermost frame-evaluation
  // function (the interpreter's own machinery), or follow the C++ frames when there is none.
  void frames_of(std::span<const uint64_t> pcs, Snapshot& s, std::vector<uint32_t>& out);
  // The id in s.stacks of `pcs`' frames (0 when none is kept). A stack seen before in this recording (in a training
  // loop, nearly every one) is found by its words, not symbolized again.
  uint32_t stack_of(std::span<const uint64_t> pcs, Snapshot& s);
  // Loads the symbol tables and debug info of every loaded object (libbacktrace's one-time cost, about 0.3-0.7 s
  // with libtorch), so that later lookups are microseconds. Called on the drain thread as recording starts.
  void warm_up();
  // A new recording: its snapshot starts with no frames, so every address is resolved into it afresh.
  void start(ScriptFrames* script);
  size_t unique_pcs() const { return cache_.size(); }
  double seconds() const { return seconds_; }

 private:
  struct Resolved {
    uint32_t first = 0;  // into ids_
    uint16_t count = 0;     // 0 for internal frames
    bool internal = false;
    bool interpreter = false;  // the interpreter's frame-evaluation function
  };
  const Resolved& resolve(uint64_t pc, Snapshot& s);
  uint32_t script_frame(uint64_t word, Snapshot& s);

  struct Modules;
  std::unique_ptr<Modules> modules_;
  std::unordered_map<uint64_t, Resolved> cache_;
  std::vector<uint32_t> ids_;
  ScriptFrames* script_ = nullptr;
  std::unordered_map<uint64_t, uint32_t> script_cache_;  // word -> frame id
  struct KnownStack {
    std::vector<uint64_t> pcs;
    uint32_t id;
  };
  std::unordered_map<uint64_t, std::vector<KnownStack>> stacks_;  // hash of the words -> the stacks with it
  std::vector<uint32_t> frame_ids_;
  double seconds_ = 0;
};

}  // namespace memrec::detail
