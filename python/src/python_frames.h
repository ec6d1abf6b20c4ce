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

#ifdef MEMREC_INTERPRETER_FRAMES
// Where a frame record stood when its word was made: its instruction, and what named its code then. A code object
// named without the interpreter's lock is not kept alive, and another may be born at its address: an entry names
// a frame only while its code still has the same names. One cache line each.
struct alignas(64) SeenPlace {
  const void* at = nullptr;  // the frame's last instruction (prev_instr)
  const void* code = nullptr;
  const void* function = nullptr;  // co_qualname
  const void* file = nullptr;      // co_filename
  const void* lines = nullptr;     // co_linetable
  int first_line = 0;
  uint64_t word = 0;
};

// Instruction pointer → SeenPlace, open addressing, grown at half full.
class SeenPlaces {
 public:
  const SeenPlace* find(const void* at) const {  // inline: once per frame of every capture
    for (size_t i = slot_of(at);; i = (i + 1) & mask_) {
      if (slots_[i].at == at) return &slots_[i];
      if (!slots_[i].at) return nullptr;
    }
  }
  void set(const SeenPlace& place);

 private:
  size_t slot_of(const void* at) const {
    return (reinterpret_cast<uintptr_t>(at) * 0x9e3779b97f4a7c15ULL >> 32) & mask_;
  }
  std::vector<SeenPlace> slots_ = std::vector<SeenPlace>(1024);
  size_t mask_ = 1023;  // slots_.size() - 1
  size_t used_ = 0;
};
#endif

// One word per frame, (names id << 32) | line; an id stands for a (function, file) pair, whose names are copied
// once for the drain thread, which never touches Python.
//
// On Python 3.11 and 3.12 the frames are read from the interpreter's own frame records (no frame object made, no
// reference count touched), without the interpreter's lock: a thread's records change only as it runs, and it
// runs none while it sits in the allocator below them. Each frame costs one lookup by instruction pointer in the
// thread's own table, then in one shared by all threads (under a mutex never held while waiting for the
// interpreter's lock); a place first seen is named from its code's strings and line table, read in place. The
// first 16 walks made under the interpreter's lock (at start(), then captures on threads that hold it) also walk
// the public API and compare; the records are read without the lock only after one matched, and any difference
// makes the public walk the only one for good. Elsewhere the public API walks, under the lock.
class PythonFrames final : public memrec::ScriptFrames {
 public:
  PythonFrames();
  int capture(uint64_t* out, int max, bool may_block) override;
  bool captures_unlocked() override;
  // On a thread holding the interpreter's lock (Python's start()), before any capture: the first comparison of the
  // frame records with the public API, on this thread's stack, so that no thread needs the lock to make it.
  void check();
  void describe(uint64_t word, std::string& function, std::string& file, uint32_t& line) override;

  // Frames of code in files under `prefix` (memrec's own hooks) are left out of every stack.
  void hide(std::string prefix);
  // Which walk gives the frames, for the recording's metadata: "interpreter frames" or "public API (why)".
  std::string walk_name() const;
  // Frames left out since the last call: first seen where they could be named neither without the interpreter's
  // lock nor with it (under the CUDA allocator's lock).
  uint64_t take_unnamed() { return unnamed_.exchange(0); }

 private:
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
  struct Names {
    std::string function, file;
    bool operator==(const Names&) const = default;
  };
  struct NamesHash {
    size_t operator()(const Names& n) const {
      return std::hash<std::string>()(n.function) ^ (std::hash<std::string>()(n.file) * 0x9e3779b97f4a7c15ULL);
    }
  };

  int walk(uint64_t* out, int max);
  int walk_public(uint64_t* out, int max);
#ifdef MEMREC_INTERPRETER_FRAMES
  int walk_records(PyThreadState* ts, uint64_t* out, int max, bool gil, int& unnamed);
  bool word_of_record(struct _PyInterpreterFrame* f, bool gil, SeenPlaces* mine, uint64_t& word);
  SeenPlaces* thread_places();
  bool same_as_public(uint64_t* out, int max);
  bool records_match_public();
#endif
  uint64_t word_of(PyCodeObject* code, int lasti, PyFrameObject* f);
  uint32_t intern(PyCodeObject* code);
  uint32_t intern(Names names);  // under mu_

  const uint64_t serial_;  // which PythonFrames a thread's table belongs to
  std::unordered_map<PyCodeObject*, uint32_t> ids_;       // under the GIL
  std::unordered_map<Place, uint64_t, PlaceHash> words_;  // under the GIL
  std::atomic<int> checks_left_{16};                      // captures still walked both ways (changed under the GIL)
  std::atomic<bool> checked_{false};                      // one of them matched
  std::atomic<bool> interpreter_walk_;                    // whether the interpreter's frames are read
  std::string why_public_;                                // under the GIL, set once
  std::atomic<uint64_t> unnamed_{0};
  mutable std::mutex mu_;  // guards what follows against the drain thread and threads without the GIL
  std::string hidden_prefix_;
  std::unordered_map<Names, uint32_t, NamesHash> name_ids_;
  std::vector<Names> names_;
#ifdef MEMREC_INTERPRETER_FRAMES
  SeenPlaces places_;
#endif
};

}  // namespace memrec_python
