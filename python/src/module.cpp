// memrec._C: the recorder for Python programs, on the CPython C API (no binding library needed), linked against
// the libtorch that `import torch` loads. The hooks live in the Python package; this module adds the Python frames
// of every allocation, keeps the stack of scopes Python opened on each thread (python_scopes.cpp) and does the
// module hooks' work per call (module_hooks.cpp).
#include "python_module.h"

#include <frameobject.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

bool interpreter_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

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

// The Python stack of the allocating thread: one word per frame, (code id << 32) | line. Code objects are interned
// under the GIL and kept alive (one reference each), so an id always names the same code; their names are
// copied once for the drain thread, which never touches Python. Each frame costs one lookup by (code, last
// instruction): the line is decoded from the code's line table once per place, not at every allocation.
class PythonFrames final : public memrec::ScriptFrames {
 public:
  int capture(uint64_t* out, int max, bool may_block) override {
    if (!interpreter_alive()) return 0;
    if (!PyGILState_GetThisThreadState()) return 0;  // a thread Python never ran on (autograd's device threads)
    if (!may_block && !PyGILState_Check()) return 0;
    PyGILState_STATE gil = PyGILState_Ensure();
    int n = walk(out, max);
    PyGILState_Release(gil);
    return n;
  }

  // Frames of code in files under `prefix` (memrec's own hooks) are left out of every stack.
  void hide(std::string prefix) { hidden_prefix_ = std::move(prefix); }

  void describe(uint64_t word, std::string& function, std::string& file, uint32_t& line) override {
    uint32_t id = static_cast<uint32_t>(word >> 32);
    std::lock_guard lock(mu_);
    if (id < codes_.size()) function = codes_[id].function, file = codes_[id].file;
    line = static_cast<uint32_t>(word);
  }

 private:
  struct Code {
    std::string function, file;
  };
  static constexpr uint32_t kHidden = UINT32_MAX;
  static constexpr uint64_t kHiddenWord = UINT64_MAX;
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

  int walk(uint64_t* out, int max) {
    PyObject* error_type = nullptr, *error_value = nullptr, *error_trace = nullptr;
    PyErr_Fetch(&error_type, &error_value, &error_trace);  // an allocation can happen while an error is set
    PyFrameObject* f = PyEval_GetFrame();
    Py_XINCREF(f);
    int n = 0;
    while (f && n < max) {
      PyCodeObject* code = PyFrame_GetCode(f);
      uint64_t word = word_of(f, code);
      if (word != kHiddenWord) out[n++] = word;
      Py_DECREF(code);
      PyFrameObject* back = PyFrame_GetBack(f);
      Py_DECREF(f);
      f = back;
    }
    Py_XDECREF(f);
    PyErr_Restore(error_type, error_value, error_trace);
    return n;
  }

  static int last_instruction(PyFrameObject* f) {
#if PY_VERSION_HEX >= 0x030B0000
    return PyFrame_GetLasti(f);
#else
    return f->f_lasti;
#endif
  }

  uint64_t word_of(PyFrameObject* f, PyCodeObject* code) {
    auto [it, added] = words_.try_emplace(Place{code, last_instruction(f)}, kHiddenWord);
    if (added) {
      uint32_t id = intern(code);
      int line = PyFrame_GetLineNumber(f);
      if (id != kHidden) it->second = (uint64_t(id) << 32) | uint32_t(line > 0 ? line : 0);
    }
    return it->second;
  }

  uint32_t intern(PyCodeObject* code) {
    auto [it, added] = ids_.try_emplace(code, 0);
    if (added) {
      Py_INCREF(code);
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

  std::string hidden_prefix_;
  std::unordered_map<PyCodeObject*, uint32_t> ids_;  // under the GIL
  std::unordered_map<Place, uint64_t, PlaceHash> words_;  // under the GIL
  std::mutex mu_;                                     // guards codes_ against the drain thread
  std::vector<Code> codes_;
};

// One recorder per process. Leaked on purpose after fork() (its thread and file belong to the parent).
memrec::Recorder* g_recorder = nullptr;
std::shared_ptr<PythonFrames> g_frames;  // lives as long as the process: it owns the code references

PyObject* fail(const std::exception& e) {
  PyErr_SetString(PyExc_RuntimeError, e.what());
  return nullptr;
}

bool parse_stacks(const std::string& stacks, memrec::RecorderOptions& opt) {
  if (stacks != "all" && stacks != "python" && stacks != "cpp" && stacks != "off") return false;
  opt.stacks = stacks == "all" || stacks == "cpp";
  if (stacks == "all" || stacks == "python") {
    if (!g_frames) g_frames = std::make_shared<PythonFrames>();
    opt.script = g_frames;
  }
  return true;
}

PyObject* start(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"path",  "stacks",     "kernels", "max_events", "cuda",          "metadata",
                                "hide",  "cupti_busy", "quiet",   "ops",        "device_memory", "modules",
                                "kernel_every", nullptr};
  const char* path = nullptr;
  const char* stacks = "all";
  int kernels = 1, cuda = 0, quiet = 0, ops = 1, device_memory = 1, modules = 0;
  unsigned long long max_events = 0;
  unsigned int kernel_every = memrec::RecorderOptions{}.kernel_every;
  PyObject* metadata = nullptr;
  const char* hide = "";
  const char* cupti_busy = "";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|spKpO!ssppppI", const_cast<char**>(names), &path, &stacks, &kernels,
                                   &max_events, &cuda, &PyDict_Type, &metadata, &hide, &cupti_busy, &quiet, &ops,
                                   &device_memory, &modules, &kernel_every))
    return nullptr;
  if (g_recorder && g_recorder->running()) {
    PyErr_SetString(PyExc_RuntimeError, "memrec is already recording in this process");
    return nullptr;
  }
  memrec::RecorderOptions opt;
  opt.output = path;
  opt.kernels = kernels;
  opt.kernel_every = kernel_every;
  opt.cupti_busy = cupti_busy;
  opt.quiet = quiet;
  opt.cuda = cuda;
  opt.cpu = !cuda;
  opt.max_events = max_events;
  opt.ops = ops;
  opt.user_ops = ops;  // torch.compile's regions, DDP's and the optimizer's record_function blocks
  opt.device_memory = device_memory;
  opt.module_scopes = modules;  // the scope hooks' module scopes, in backward too
  if (!parse_stacks(stacks, opt)) {
    PyErr_Format(PyExc_ValueError, "stacks must be all, python, cpp or off, not '%s'", stacks);
    return nullptr;
  }
  if (g_frames) g_frames->hide(hide);  // the same folder every time: memrec's package
  try {
    delete g_recorder;
    g_recorder = new memrec::Recorder(opt);
    g_recorder->start();
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (metadata && PyDict_Next(metadata, &pos, &key, &value)) {
      const char* k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
      const char* v = PyUnicode_Check(value) ? PyUnicode_AsUTF8(value) : nullptr;
      if (k && v) g_recorder->set_metadata(k, v);
    }
    PyErr_Clear();
  } catch (const std::exception& e) {
    return fail(e);
  }
  Py_RETURN_NONE;
}

// Stops and writes the file; returns (events, dropped) or None when nothing was recording.
PyObject* stop(PyObject*, PyObject*) {
  if (!g_recorder || !g_recorder->running()) Py_RETURN_NONE;
  try {
    g_recorder->stop();
    memrec::RecorderStats st = g_recorder->stats();
    return Py_BuildValue("(KK)", (unsigned long long)st.events,
                         (unsigned long long)(st.dropped + st.scopes_dropped + st.kernels_dropped));
  } catch (const std::exception& e) {
    return fail(e);
  }
}

PyObject* running(PyObject*, PyObject*) { return PyBool_FromLong(memrec_python::recording()); }

// Metadata of the running recording, written with the file; keys named notes.* are printed by every reader.
PyObject* set_metadata(PyObject*, PyObject* args) {
  const char *key = nullptr, *value = nullptr;
  if (!PyArg_ParseTuple(args, "ss", &key, &value)) return nullptr;
  if (g_recorder && g_recorder->running()) g_recorder->set_metadata(key, value);
  Py_RETURN_NONE;
}

// The owner of the block at addr (memrec/_owners.py); the arguments are checked there, the kind here.
PyObject* own(PyObject*, PyObject* args) {
  int device = 0, kind = 0;
  unsigned long long addr = 0, size = 0;
  const char *name = nullptr, *module = nullptr;
  Py_ssize_t name_len = 0, module_len = 0;
  if (!PyArg_ParseTuple(args, "iKKs#s#i", &device, &addr, &size, &name, &name_len, &module, &module_len, &kind))
    return nullptr;
  if (device < 0 || device > 255 || kind < 0 || kind >= memrec::kOwnerKindCount) {
    PyErr_SetString(PyExc_ValueError, "own: device or kind out of range");
    return nullptr;
  }
  return PyBool_FromLong(memrec::record_owner(static_cast<uint8_t>(device), addr, size, {name, size_t(name_len)},
                                              {module, size_t(module_len)}, static_cast<memrec::OwnerKind>(kind)));
}

PyObject* forget_after_fork(PyObject*, PyObject*) {
  if (g_recorder && g_recorder->running()) {
    memrec::forget_recording_after_fork();
    g_recorder = nullptr;  // leaked: stopping it would join a thread that does not exist here
  }
  Py_RETURN_NONE;
}

PyObject* cuda_built(PyObject*, PyObject*) {
#ifdef MEMREC_WITH_CUDA
  Py_RETURN_TRUE;
#else
  Py_RETURN_FALSE;
#endif
}

PyMethodDef methods[] = {
    {"start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(start)), METH_VARARGS | METH_KEYWORDS,
     "start(path, stacks='all', kernels=True, max_events=0, cuda=False, metadata=None, hide='', cupti_busy='', "
     "quiet=False, ops=True, device_memory=True, modules=False, kernel_every=10): hide leaves out the frames of files "
     "under that prefix; quiet prints nothing; modules: module scopes in backward, from the nodes each module call "
     "made; kernel_every: kernels traced on every Nth step after the first ones"},
    {"stop", stop, METH_NOARGS, "stop() -> (events, dropped) or None: writes the file"},
    {"running", running, METH_NOARGS, "whether this process records"},
    {"set_metadata", set_metadata, METH_VARARGS, "set_metadata(key, value): a metadata entry of the running recording"},
    {"own", own, METH_VARARGS,
     "own(device, addr, size, name, module, kind) -> bool: the block at addr belongs to name (kind: 0 parameter, "
     "1 buffer, 2 gradient, 3 optimizer state); False when nothing records or the row was dropped"},
    {"forget_after_fork", forget_after_fork, METH_NOARGS, "in a forked child: stop recording, write nothing"},
    {"cuda_built", cuda_built, METH_NOARGS, "whether this build records the CUDA caching allocator"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "memrec._C", "memrec's recorder (docs/python.md)", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

bool memrec_python::recording() { return g_recorder && g_recorder->running(); }

PyMODINIT_FUNC PyInit__C() {
  PyObject* m = PyModule_Create(&module);
  if (m && (PyModule_AddFunctions(m, memrec_python::scope_methods) < 0 ||
            PyModule_AddFunctions(m, memrec_python::module_call_methods) < 0))
    Py_CLEAR(m);
  return m;
}
