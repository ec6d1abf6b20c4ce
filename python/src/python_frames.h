// The Python stack of the allocating thread, for memrec's recorder (module.cpp hands one PythonFrames to it).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "memrec/recorder.h"

// 3.11 and 3.12 keep a thread's frames in records of their own (_PyInterpreterFrame), whose layout only the
// interpreter's internal header gives; 3.13 changed it again, older versions have no such records.
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000 && __has_include(<internal/pycore_frame.h>)
#define MEMREC_INTERPRETER_FRAMES 1
#endif

namespace memrec_python {

// One word per frame, (code id << 32) | line. Code objects are interned under the GIL and kept alive (one reference
// each), so an id always names the same code; their names are copied once for the drain thread, which never touches
// Python. Each frame costs one lookup by (code, last instruction): the line is decoded from the code's line table
// once per place, not at every allocation.
//
// On Python 3.11 and 3.12 the frames are read from the interpreter's own frame records (no frame object made, no
// reference count touched); the first captures of the process also walk the public API and compare, and any
// difference makes the public walk the only one for good. Elsewhere the public API walks.
class PythonFrames final : public memrec::ScriptFrames {
 public:
  PythonFrames();
  int capture(uint64_t* out, int max, bool may_block) override;
  void describe(uint64_t word, std::string& function, std::string& file, uint32_t& line) override;

  // Frames of code in files under `prefix` (memrec's own hooks) are left out of every stack.
  void hide(std::string prefix) { hidden_prefix_ = std::move(prefix); }
  // Which walk gives the frames, for the recording's metadata: "interpreter frames" or "public API (why)".
  std::string walk_name() const;

 private:
  struct Code {
    std::string function, file;
  };
  struct Place {  // a code object (kept alive by intern) and its last instruction there
    PyCodeObject* code;
    int lasti;
    bool operator==(const Place&) const = default;
  };
  struct PlaceHash {
    size_t operator()(const Place& p) const {
      return std::hash<const void*>()(p.code) ^ (std::hash<int>()(p.lasti) * 0x9e3779b97f4a7c15ULL);
    }
  };

  // The interpreter walk's cache: instruction pointer → word. An instruction lies in exactly one code object, and
  // every code met is kept alive, so its address alone names the place. Open addressing, grown at half full.
  class InstructionWords {
   public:
    uint64_t* find(const void* at) {  // inline: once per frame of every capture
      for (size_t i = slot_of(at);; i = (i + 1) & (slots_.size() - 1)) {
        if (slots_[i].at == at) return &slots_[i].word;
        if (!slots_[i].at) return nullptr;
      }
    }
    void add(const void* at, uint64_t word);

   private:
    struct Slot {
      const void* at = nullptr;
      uint64_t word = 0;
    };
    size_t slot_of(const void* at) const {
      return (reinterpret_cast<uintptr_t>(at) * 0x9e3779b97f4a7c15ULL >> 32) & (slots_.size() - 1);
    }
    std::vector<Slot> slots_ = std::vector<Slot>(1024);
    size_t used_ = 0;
  };

  int walk(uint64_t* out, int max);
  int walk_public(uint64_t* out, int max);
#ifdef MEMREC_INTERPRETER_FRAMES
  int walk_interpreter(uint64_t* out, int max);
  bool same_as_public(uint64_t* out, int max);
  bool records_match_public();
#endif
  uint64_t word_of(PyCodeObject* code, int lasti, PyFrameObject* f);
  uint32_t intern(PyCodeObject* code);

  std::string hidden_prefix_;
  std::unordered_map<PyCodeObject*, uint32_t> ids_;       // under the GIL
  std::unordered_map<Place, uint64_t, PlaceHash> words_;  // under the GIL
  InstructionWords instruction_words_;                    // under the GIL
  int checks_left_ = 16;                                 // captures still walked both ways (under the GIL)
  std::atomic<bool> interpreter_walk_;                    // whether the interpreter's frames are read
  std::string why_public_;                                // under the GIL, set once
  mutable std::mutex mu_;                                 // guards codes_ against the drain thread
  std::vector<Code> codes_;
};

}  // namespace memrec_python
