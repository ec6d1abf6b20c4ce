// memrec._C: the recorder for Python programs, on the CPython C API (no binding library needed), linked against
// the libtorch that `import torch` loads. The hooks live in the Python package; this module adds the Python frames
// of every allocation, keeps the stack of scopes Python opened on each thread (python_scopes.cpp) and does the
// module hooks' work per call (module_hooks.cpp) and the owner scans' per tensor (owners.cpp).
#include "python_frames.h"
#include "python_module.h"

#include <memory>
#include <string>

namespace {

// One recorder per process. Leaked on purpose after fork() (its thread and file belong to the parent).
memrec::Recorder* g_recorder = nullptr;
bool g_python_stacks = false;  // whether the recording takes Python frames from g_frames
std::shared_ptr<memrec_python::PythonFrames> g_frames;  // lives as long as the process: it owns the code references

PyObject* fail(const std::exception& e) {
  PyErr_SetString(PyExc_RuntimeError, e.what());
  return nullptr;
}

bool parse_stacks(const std::string& stacks, memrec::RecorderOptions& opt) {
  if (stacks != "all" && stacks != "python" && stacks != "cpp" && stacks != "off") return false;
  opt.stacks = stacks == "all" || stacks == "cpp";
  g_python_stacks = stacks == "all" || stacks == "python";
  if (g_python_stacks) {
    if (!g_frames) g_frames = std::make_shared<memrec_python::PythonFrames>();
    opt.script = g_frames;
  }
  return true;
}

PyObject* start(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"path",  "stacks",     "kernels", "max_events", "cuda",          "metadata",
                                "hide",  "cupti_busy", "quiet",   "ops",        "device_memory", "modules",
                                "kernel_every", "cupti_kineto", "op_steps", nullptr};
  const char* path = nullptr;
  const char* stacks = "all";
  int kernels = 1, cuda = 0, quiet = 0, ops = 1, device_memory = 1, modules = 0, cupti_kineto = 0, op_steps = 0;
  unsigned long long max_events = 0;
  unsigned int kernel_every = memrec::RecorderOptions{}.kernel_every;
  PyObject* metadata = nullptr;
  const char* hide = "";
  const char* cupti_busy = "";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|spKpO!ssppppIpp", const_cast<char**>(names), &path, &stacks,
                                   &kernels, &max_events, &cuda, &PyDict_Type, &metadata, &hide, &cupti_busy, &quiet,
                                   &ops, &device_memory, &modules, &kernel_every, &cupti_kineto, &op_steps))
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
  opt.cupti_kineto = cupti_kineto;
  opt.quiet = quiet;
  opt.cuda = cuda;
  opt.cpu = !cuda;
  opt.max_events = max_events;
  opt.ops = ops;
  opt.user_ops = ops;  // torch.compile's regions, DDP's and the optimizer's record_function blocks
  opt.ops_on_chosen_steps = op_steps;
  opt.device_memory = device_memory;
  opt.module_scopes = modules;  // the scope hooks' module scopes, in backward too
  if (!parse_stacks(stacks, opt)) {
    PyErr_Format(PyExc_ValueError, "stacks must be all, python, cpp or off, not '%s'", stacks);
    return nullptr;
  }
  if (g_frames) g_frames->hide(hide);  // the same folder every time: memrec's package
  if (g_python_stacks) g_frames->check();
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
    if (g_python_stacks) {
      g_recorder->set_metadata("recorder.python_frames", g_frames->walk_name());
      g_recorder->set_metadata("recorder.python_frames_unnamed", std::to_string(g_frames->take_unnamed()));
    }
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

PyObject* forget_after_fork(PyObject*, PyObject*) {
  if (g_recorder && g_recorder->running()) {
    memrec::forget_recording_after_fork();
    g_recorder = nullptr;  // leaked: stopping it would join a thread that does not exist here
  }
  Py_RETURN_NONE;
}

// The program's profiler starts (cupti_lend(why)) and stops (cupti_take_back()): memrec/_profiler.py.
PyObject* cupti_lend(PyObject*, PyObject* why) {
  std::optional<std::string_view> text = memrec_python::text_arg(why, "cupti_lend(why: str)");
  if (!text) return nullptr;
  if (memrec_python::recording()) g_recorder->lend_cupti(std::string(*text));
  Py_RETURN_NONE;
}

PyObject* cupti_take_back(PyObject*, PyObject*) {
  if (memrec_python::recording()) g_recorder->take_back_cupti();
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
     "quiet=False, ops=True, device_memory=True, modules=False, kernel_every=10, cupti_kineto=False, op_steps=False): "
     "hide leaves out the frames of files under that prefix; quiet prints nothing; modules: module scopes in "
     "backward, from the nodes each module call made; kernel_every: kernels traced on every Nth step after the first "
     "ones; cupti_busy: why CUPTI starts lent; cupti_kineto: torch.profiler's Kineto holds CUPTI's callback "
     "subscription; op_steps: op scopes on the kernels' steps only"},
    {"stop", stop, METH_NOARGS, "stop() -> (events, dropped) or None: writes the file"},
    {"running", running, METH_NOARGS, "whether this process records"},
    {"set_metadata", set_metadata, METH_VARARGS, "set_metadata(key, value): a metadata entry of the running recording"},
    {"forget_after_fork", forget_after_fork, METH_NOARGS, "in a forked child: stop recording, write nothing"},
    {"cuda_built", cuda_built, METH_NOARGS, "whether this build records the CUDA caching allocator"},
    {"cupti_lend", cupti_lend, METH_O,
     "cupti_lend(why): the program's profiler is about to use CUPTI; memrec lets go of it, the file names the window"},
    {"cupti_take_back", cupti_take_back, METH_NOARGS, "the program's profiler has stopped: memrec traces again"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "memrec._C", "memrec's recorder (docs/python.md)", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

bool memrec_python::recording() { return g_recorder && g_recorder->running(); }

bool memrec_python::handed_over(PyObject* handler) {
  if (!PyErr_ExceptionMatches(PyExc_Exception)) return false;
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* value = PyErr_GetRaisedException();  // with its traceback
#else
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (value && traceback) PyException_SetTraceback(value, traceback);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
#endif
  PyObject* done = handler && value ? PyObject_CallOneArg(handler, value) : nullptr;
  Py_XDECREF(done);
  Py_XDECREF(value);
  PyErr_Clear();
  return true;
}

PyMODINIT_FUNC PyInit__C() {
  PyObject* m = PyModule_Create(&module);
  if (m && (PyModule_AddFunctions(m, memrec_python::scope_methods) < 0 ||
            PyModule_AddFunctions(m, memrec_python::module_call_methods) < 0 ||
            PyModule_AddFunctions(m, memrec_python::owner_methods) < 0))
    Py_CLEAR(m);
  return m;
}
