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
#endif

}  // namespace

PythonFrames::PythonFrames() {
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
  if (!PyGILState_GetThisThreadState()) return 0;  // a thread Python never ran on (autograd's device threads)
  if (!may_block && !PyGILState_Check()) return 0;
  PyGILState_STATE gil = PyGILState_Ensure();
  int n = walk(out, max);
  PyGILState_Release(gil);
  return n;
}

void PythonFrames::describe(uint64_t word, std::string& function, std::string& file, uint32_t& line) {
  uint32_t id = static_cast<uint32_t>(word >> 32);
  std::lock_guard lock(mu_);
  if (id < codes_.size()) function = codes_[id].function, file = codes_[id].file;
  line = static_cast<uint32_t>(word);
}

std::string PythonFrames::walk_name() const {
  return interpreter_walk_ ? "interpreter frames" : "public API (" + why_public_ + ")";
}

int PythonFrames::walk(uint64_t* out, int max) {
#ifdef MEMREC_INTERPRETER_FRAMES
  if (interpreter_walk_ && checks_left_ > 0) {
    --checks_left_;
    if (!same_as_public(out, max)) {
      interpreter_walk_ = false;
      why_public_ = "the interpreter's frames differed from the public API's";
    }
  }
  if (interpreter_walk_) return walk_interpreter(out, max);
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
int PythonFrames::walk_interpreter(uint64_t* out, int max) {
  int n = 0;
  for (_PyInterpreterFrame* f = first_shown(PyThreadState_Get()->cframe->current_frame); f && n < max;
       f = first_shown(f->previous)) {
    uint64_t* known = instruction_words_.find(f->prev_instr);
    uint64_t word = known ? *known : word_of(f->f_code, interpreter_lasti(f), nullptr);
    if (!known) instruction_words_.add(f->prev_instr, word);
    if (word != kHiddenWord) out[n++] = word;
  }
  return n;
}

void PythonFrames::InstructionWords::add(const void* at, uint64_t word) {
  if (2 * (used_ + 1) > slots_.size()) {
    std::vector<Slot> old(2 * slots_.size());
    old.swap(slots_);
    used_ = 0;
    for (const Slot& slot : old)
      if (slot.at) add(slot.at, slot.word);
  }
  size_t i = slot_of(at);
  while (slots_[i].at) i = (i + 1) & (slots_.size() - 1);
  slots_[i] = {at, word};
  ++used_;
}

// The records against the public API, frame by frame, then both walks' words. A record is read only where it is
// the thread's current one or the previous of one that matched, so a layout unlike the header's fails the check
// instead of following a wild pointer.
bool PythonFrames::same_as_public(uint64_t* out, int max) {
  if (!records_match_public()) return false;
  std::vector<uint64_t> words(max);
  int n = walk_public(words.data(), max);
  return walk_interpreter(out, max) == n && std::equal(out, out + n, words.data());
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
  if (added) {
    uint32_t id = intern(code);
    int line = f ? PyFrame_GetLineNumber(f) : PyCode_Addr2Line(code, lasti);
    if (id != kHidden) it->second = (uint64_t(id) << 32) | uint32_t(line > 0 ? line : 0);
  }
  return it->second;
}

uint32_t PythonFrames::intern(PyCodeObject* code) {
  auto [it, added] = ids_.try_emplace(code, 0);
  if (added) {
    Py_INCREF(code);
    SavedError saved;
    PyObject* o = reinterpret_cast<PyObject*>(code);
    std::string function = utf8_attr(o, "co_qualname");  // Python >= 3.11
    if (function.empty()) function = utf8_attr(o, "co_name");
    std::string file = utf8_attr(o, "co_filename");
    if (!hidden_prefix_.empty() && file.starts_with(hidden_prefix_)) {
      it->second = kHidden;
    } else {
      std::lock_guard lock(mu_);
      it->second = static_cast<uint32_t>(codes_.size());
      codes_.push_back({std::move(function), std::move(file)});
    }
  }
  return it->second;
}

}  // namespace memrec_python
