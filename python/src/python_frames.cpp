#include "python_frames.h"

#include <frameobject.h>

#include <algorithm>

#ifdef MEMREC_INTERPRETER_FRAMES
#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#endif

namespace memrec_python {
namespace {

constexpr uint32_t kHidden = UINT32_MAX;
constexpr uint64_t kHiddenWord = UINT64_MAX;

bool interpreter_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

// Sets the pending error aside while frames are looked at: an allocation can happen while one is set.
class SavedError {
 public:
  SavedError() { PyErr_Fetch(&type_, &value_, &trace_); }
  ~SavedError() { PyErr_Restore(type_, value_, trace_); }
  SavedError(const SavedError&) = delete;
  SavedError& operator=(const SavedError&) = delete;

 private:
  PyObject *type_ = nullptr, *value_ = nullptr, *trace_ = nullptr;
};

std::string utf8_attr(PyObject* o, const char* name) {
  PyObject* v = PyObject_GetAttrString(o, name);
  if (!v) {
    PyErr_Clear();
    return {};
  }
  const char* s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : nullptr;
  std::string out = s ? s : "";
  if (!s) PyErr_Clear();
  Py_DECREF(v);
  return out;
}

int public_lasti(PyFrameObject* f) {
#if PY_VERSION_HEX >= 0x030B0000
  return PyFrame_GetLasti(f);
#else
  return f->f_lasti;
#endif
}

#ifdef MEMREC_INTERPRETER_FRAMES
// What PyEval_GetFrame and PyFrame_GetBack pass over: frames not started yet (making their cells, creating a
// generator) and, on 3.12, the entry frames the interpreter keeps on the C stack.
bool passed_over(_PyInterpreterFrame* f) {
#if PY_VERSION_HEX >= 0x030C0000
  if (f->owner == FRAME_OWNED_BY_CSTACK) return true;
#endif
  return _PyFrame_IsIncomplete(f);
}

_PyInterpreterFrame* first_shown(_PyInterpreterFrame* f) {
  while (f && passed_over(f)) f = f->previous;
  return f;
}

// As PyFrame_GetLasti: the byte offset of the last instruction, -1 before the first.
int interpreter_lasti(_PyInterpreterFrame* f) {
  int i = _PyInterpreterFrame_LASTI(f);
  return i < 0 ? -1 : i * int(sizeof(_Py_CODEUNIT));
}

// As PyCode_Addr2Line, reading the code's line table only (3.11's also reads a line array that a tracing thread may
// be filling at that moment). The range starts as CPython's own _PyCode_InitAddressRange (not exported) sets it.
int line_of(PyCodeObject* code, int lasti) {
  if (lasti < 0) return code->co_firstlineno;
  PyCodeAddressRange range;
  range.opaque.lo_next = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(code->co_linetable));
  range.opaque.limit = range.opaque.lo_next + PyBytes_GET_SIZE(code->co_linetable);
  range.opaque.computed_line = code->co_firstlineno;
  range.ar_start = -1;
  range.ar_end = 0;
  range.ar_line = -1;
  return _PyCode_CheckLineNumber(lasti, &range);
}

// A str's text as UTF-8, read where it lies: nothing allocated or cached in the object, so no interpreter lock is
// needed while the object lives (str is immutable). False for a legacy (not compact) str and for surrogates, which
// PyUnicode_AsUTF8 refuses too.
bool utf8_in_place(PyObject* o, std::string& out) {
  if (!o || !PyUnicode_Check(o) || !PyUnicode_IS_COMPACT(o)) return false;
  const void* data = PyUnicode_DATA(o);
  Py_ssize_t n = PyUnicode_GET_LENGTH(o);
  if (PyUnicode_IS_ASCII(o)) {
    out.assign(static_cast<const char*>(data), n);
    return true;
  }
  int kind = PyUnicode_KIND(o);
  out.clear();
  for (Py_ssize_t i = 0; i < n; ++i) {
    Py_UCS4 c = PyUnicode_READ(kind, data, i);
    if (c >= 0xD800 && c < 0xE000) return false;
    if (c < 0x80) {
      out += char(c);
    } else if (c < 0x800) {
      out += {char(0xC0 | c >> 6), char(0x80 | (c & 0x3F))};
    } else if (c < 0x10000) {
      out += {char(0xE0 | c >> 12), char(0x80 | (c >> 6 & 0x3F)), char(0x80 | (c & 0x3F))};
    } else {
      out += {char(0xF0 | c >> 18), char(0x80 | (c >> 12 & 0x3F)), char(0x80 | (c >> 6 & 0x3F)), char(0x80 | (c & 0x3F))};
    }
  }
  return true;
}

SeenPlace place_of(_PyInterpreterFrame* f) {
  PyCodeObject* code = f->f_code;
  return {f->prev_instr, code, code->co_qualname, code->co_filename, code->co_linetable, code->co_firstlineno, 0};
}

// Whether `seen` (found by the frame's instruction) was made for the code the frame runs.
bool still_names(const SeenPlace& seen, PyCodeObject* code) {
  return seen.code == code && seen.function == code->co_qualname && seen.file == code->co_filename &&
         seen.lines == code->co_linetable && seen.first_line == code->co_firstlineno;
}

// A thread's own places, on the heap behind a trivially destructible pointer: allocations may outlive the thread's
// thread_locals (their destructors free tensors), and then go to the shared table alone.
struct ThreadPlaces {
  uint64_t owner;
  SeenPlaces places;
};
thread_local ThreadPlaces* t_places = nullptr;
thread_local bool t_exited = false;
struct ThreadPlacesEnd {
  ~ThreadPlacesEnd() {
    delete t_places;
    t_places = nullptr;
    t_exited = true;
  }
};
#endif

uint64_t word_for(uint32_t id, int line) {
  return id == kHidden ? kHiddenWord : (uint64_t(id) << 32) | uint32_t(line > 0 ? line : 0);
}

std::atomic<uint64_t> g_serials{0};

}  // namespace

PythonFrames::PythonFrames() : serial_(++g_serials) {
#ifdef MEMREC_INTERPRETER_FRAMES
  interpreter_walk_ = true;
#elif PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
  interpreter_walk_ = false;
  why_public_ = "built without the interpreter's internal headers";
#else
  interpreter_walk_ = false;
  why_public_ = "memrec reads the frame records of Python 3.11 and 3.12 only, this is " PY_VERSION;
#endif
}

int PythonFrames::capture(uint64_t* out, int max, bool may_block) {
  if (!interpreter_alive()) return 0;
  PyThreadState* ts = PyGILState_GetThisThreadState();
  if (!ts) return 0;  // a thread Python never ran on (autograd's device threads)
#ifdef MEMREC_INTERPRETER_FRAMES
  // Once one check matched, more only where the lock is held anyway and the caller may block (the public walk
  // makes frame objects, which may run a garbage collection).
  bool unlocked = checked_.load(std::memory_order_acquire) && interpreter_walk_.load(std::memory_order_relaxed) &&
                  (!may_block || checks_left_.load(std::memory_order_relaxed) == 0 || !PyGILState_Check());
  if (unlocked) {
    int unnamed = 0;
    int n = walk_records(ts, out, max, /*gil=*/false, unnamed);
    if (!unnamed) return n;
    if (!may_block) {
      if (!PyGILState_Check()) {
        unnamed_ += unnamed;
        return n;
      }
      unnamed = 0;
      return walk_records(ts, out, max, /*gil=*/true, unnamed);  // held already; no check under the caller's lock
    }
  }
#endif
  if (!may_block && !PyGILState_Check()) return 0;
  PyGILState_STATE gil = PyGILState_Ensure();
  int n = walk(out, max);
  PyGILState_Release(gil);
  return n;
}

bool PythonFrames::captures_unlocked() {
  return checked_ && interpreter_walk_;  // check() ran at start(), before the recorder asks
}

void PythonFrames::check() {
#ifdef MEMREC_INTERPRETER_FRAMES
  if (checked_ || !interpreter_walk_ || !interpreter_alive() || !PyGILState_Check()) return;
  uint64_t words[128];
  walk(words, 128);
#endif
}

void PythonFrames::describe(uint64_t word, std::string& function, std::string& file, uint32_t& line) {
  uint32_t id = static_cast<uint32_t>(word >> 32);
  std::lock_guard lock(mu_);
  if (id < names_.size()) function = names_[id].function, file = names_[id].file;
  line = static_cast<uint32_t>(word);
}

void PythonFrames::hide(std::string prefix) {
  std::lock_guard lock(mu_);
  hidden_prefix_ = std::move(prefix);
}

std::string PythonFrames::walk_name() const {
  return interpreter_walk_ ? "interpreter frames" : "public API (" + why_public_ + ")";
}

int PythonFrames::walk(uint64_t* out, int max) {
#ifdef MEMREC_INTERPRETER_FRAMES
  if (interpreter_walk_ && checks_left_ > 0 && PyEval_GetFrame()) {  // an empty stack proves nothing
    --checks_left_;
    if (same_as_public(out, max)) {
      checked_ = true;
    } else {
      why_public_ = "the interpreter's frames differed from the public API's";
      interpreter_walk_ = false;
    }
  }
  int unnamed = 0;  // none: every frame is named under the GIL
  if (interpreter_walk_) return walk_records(PyThreadState_Get(), out, max, /*gil=*/true, unnamed);
#endif
  return walk_public(out, max);
}

int PythonFrames::walk_public(uint64_t* out, int max) {
  SavedError saved;
  PyFrameObject* f = PyEval_GetFrame();
  Py_XINCREF(f);
  int n = 0;
  while (f && n < max) {
    PyCodeObject* code = PyFrame_GetCode(f);
    uint64_t word = word_of(code, public_lasti(f), f);
    if (word != kHiddenWord) out[n++] = word;
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  Py_XDECREF(f);
  return n;
}

#ifdef MEMREC_INTERPRETER_FRAMES
// `ts`'s frames, read from its records: by the thread itself, which runs none of them meanwhile. A place the thread's
// table does not know goes to the shared one; without `gil`, one that cannot be named without the interpreter's lock
// is left out and counted in `unnamed`.
int PythonFrames::walk_records(PyThreadState* ts, uint64_t* out, int max, bool gil, int& unnamed) {
  SeenPlaces* mine = thread_places();
  int n = 0;
  for (_PyInterpreterFrame* f = first_shown(ts->cframe->current_frame); f && n < max;
       f = first_shown(f->previous)) {
    const SeenPlace* known = mine ? mine->find(f->prev_instr) : nullptr;
    uint64_t word;
    if (known && still_names(*known, f->f_code)) {
      word = known->word;
    } else if (!word_of_record(f, gil, mine, word)) {
      ++unnamed;
      continue;
    }
    if (word != kHiddenWord) out[n++] = word;
  }
  return n;
}

// The word of a place the thread's table (`mine`, which gets it) does not know: from the shared table, else named
// from its code's strings read in place, else (with `gil`) through the public API.
bool PythonFrames::word_of_record(_PyInterpreterFrame* f, bool gil, SeenPlaces* mine, uint64_t& word) {
  PyCodeObject* code = f->f_code;
  SeenPlace place = place_of(f);
  bool named = false;
  {
    std::lock_guard lock(mu_);
    const SeenPlace* known = places_.find(place.at);
    if (known && still_names(*known, code)) {
      place.word = known->word;
      named = true;
    } else {
      Names names;
      named = utf8_in_place(code->co_qualname, names.function) && utf8_in_place(code->co_filename, names.file);
      if (named && names.function.empty()) named = utf8_in_place(code->co_name, names.function);
      if (named) {
        place.word = word_for(intern(std::move(names)), line_of(code, interpreter_lasti(f)));
        places_.set(place);
      }
    }
  }
  if (!named && !gil) return false;
  if (!named) {
    place.word = word_of(code, interpreter_lasti(f), nullptr);
    std::lock_guard lock(mu_);
    places_.set(place);
  }
  if (mine) mine->set(place);
  word = place.word;
  return true;
}

SeenPlaces* PythonFrames::thread_places() {
  if (t_places && t_places->owner == serial_) return &t_places->places;
  if (t_exited) return nullptr;
  [[maybe_unused]] thread_local ThreadPlacesEnd end;  // frees the table when the thread exits
  delete t_places;
  t_places = new ThreadPlaces{serial_, {}};
  return &t_places->places;
}

void SeenPlaces::set(const SeenPlace& place) {
  size_t i = slot_of(place.at);
  while (slots_[i].at && slots_[i].at != place.at) i = (i + 1) & mask_;
  if (slots_[i].at) {  // the same instruction in a code born where a dead one was
    slots_[i] = place;
    return;
  }
  if (2 * (used_ + 1) > slots_.size()) {
    std::vector<SeenPlace> old(2 * slots_.size());
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    used_ = 0;
    for (const SeenPlace& p : old)
      if (p.at) set(p);
    set(place);
    return;
  }
  slots_[i] = place;
  ++used_;
}

// The records against the public API, frame by frame, then both walks' words. A record is read only where it is
// the thread's current one or the previous of one that matched, so a layout unlike the header's fails the check
// instead of following a wild pointer.
bool PythonFrames::same_as_public(uint64_t* out, int max) {
  if (!records_match_public()) return false;
  std::vector<uint64_t> words(max);
  int n = walk_public(words.data(), max);
  int unnamed = 0;
  return walk_records(PyThreadState_Get(), out, max, /*gil=*/true, unnamed) == n &&
         std::equal(out, out + n, words.data());
}

bool PythonFrames::records_match_public() {
  SavedError saved;
  PyFrameObject* f = PyEval_GetFrame();
  Py_XINCREF(f);
  _PyInterpreterFrame* record = PyThreadState_Get()->cframe->current_frame;
  bool same = true;
  while (f && same) {
    while (record && record != f->f_frame && passed_over(record)) record = record->previous;
    PyCodeObject* code = PyFrame_GetCode(f);
    same = record == f->f_frame && record->f_code == code && interpreter_lasti(record) == public_lasti(f);
    Py_DECREF(code);
    if (same) record = record->previous;
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  Py_XDECREF(f);
  return same && !first_shown(record);
}
#endif

uint64_t PythonFrames::word_of(PyCodeObject* code, int lasti, PyFrameObject* f) {
  auto [it, added] = words_.try_emplace(Place{code, lasti}, kHiddenWord);
  if (added) it->second = word_for(intern(code), f ? PyFrame_GetLineNumber(f) : PyCode_Addr2Line(code, lasti));
  return it->second;
}

// Keeps the code alive (one reference): its address stays its own for words_.
uint32_t PythonFrames::intern(PyCodeObject* code) {
  auto [it, added] = ids_.try_emplace(code, 0);
  if (added) {
    Py_INCREF(code);
    SavedError saved;
    PyObject* o = reinterpret_cast<PyObject*>(code);
    Names names{utf8_attr(o, "co_qualname"), utf8_attr(o, "co_filename")};  // co_qualname: Python >= 3.11
    if (names.function.empty()) names.function = utf8_attr(o, "co_name");
    std::lock_guard lock(mu_);
    it->second = intern(std::move(names));
  }
  return it->second;
}

uint32_t PythonFrames::intern(Names names) {
  auto [it, added] = name_ids_.try_emplace(names, 0);
  if (added) {
    if (!hidden_prefix_.empty() && names.file.starts_with(hidden_prefix_)) {
      it->second = kHidden;
    } else {
      it->second = static_cast<uint32_t>(names_.size());
      names_.push_back(std::move(names));
    }
  }
  return it->second;
}

}  // namespace memrec_python
