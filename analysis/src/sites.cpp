#include "memrec/sites.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "memrec/frames.h"

namespace memrec {
namespace {

// Frames that say how a stack was taken, how the dispatcher routes an op, how a tensor factory or the
// allocator works inside, or how the interpreter runs: none of them says who allocated (top_frames, the op).
constexpr std::array<std::string_view, 30> kNoiseFunctions = {
    "unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "memrec::", "libcupti", "_start",
    "__libc_start_main", "__libc_init_first", "PyEval_", "PyObject_", "PyFunction_", "PyCMethod_", "_PyEval",
    "Py_RunMain", "Py_BytesMain", "PyRun_", "_PyRun_", "CUDACachingAllocator", "c10::alloc_cpu", "c10::impl::",
    "at::_ops::", "at::detail::empty", "(anonymous namespace)::wrapper_", "c10::Dispatcher", "c10::TensorImpl",
    "at::native::empty", "at::empty", "torch::autograd::VariableType::", "torch::autograd::THPVariable_",
    "c10::alloc"};
constexpr std::array<std::string_view, 11> kNoiseFiles = {
    "core/boxing", "Register", "/Redispatch", "pythonrun.c", "Modules/main.c", "Objects/call.c",
    "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h", "core/dispatch"};

// The built-in internal list (docs/attribution.md). C and C++ function names by prefix: PyTorch's namespaces
// (allocator, dispatcher, aten ops, autograd), the C++ and C runtimes, the CPython interpreter, memrec's recorder.
constexpr std::array<std::string_view, 15> kInternalPrefixes = {
    "c10::", "at::", "torch::", "caffe2::", "std::", "__gnu_cxx::", "__cxxabiv1::", "pybind11::", "memrec::detail::",
    "THP", "__libc_", "pthread_", "__pthread", "_dl_", "operator new"};
// Whole names of the C runtime's thread and program entry points.
constexpr std::array<std::string_view, 6> kInternalNames = {"_start", "clone", "__clone", "__clone3", "start_thread",
                                                            "execute_native_thread_routine"};  // std::thread's entry
// Files of C and C++ code by a fragment of their path: torch's headers and sources, its CUDA code as nvcc names
// it ("tmpxft_..._attention_backward.compute_120.cudafe1.cpp"), the C++ library's headers, glibc's sources.
constexpr std::array<std::string_view, 11> kInternalCFiles = {
    "/include/ATen/", "/include/c10/", "/include/torch/", "/include/c++/", "aten/src/", "torch/csrc/", "c10/core/",
    "c10/cuda/", ".cudafe1.", "/sysdeps/", "/csu/"};
// Shared libraries and the interpreter's executable: an unsymbolized frame names its file
// ("libtorch_cpu.so.1.13+0x1e09877"; "python3.11+0x547b96" from a python3 that links CPython statically).
constexpr std::array<std::string_view, 13> kInternalLibraries = {
    "libtorch", "libc10", "libpython", "python3", "libc.so", "libstdc++", "ld-linux", "libcuda", "libcublas",
    "libcudnn", "libnccl", "libcupti", "libffi"};
// Python files: torch's own (pip's site-packages, a venv's, Debian's dist-packages, a source checkout), the code
// torch.compile generates, memrec's Python package.
constexpr std::array<std::string_view, 8> kInternalPythonFiles = {
    "-packages/torch/", "/torch/nn/", "/torch/autograd/", "/torch/optim/", "/torch/_", "/torchinductor_",
    "/memrec/__init__.py", "/memrec/_autostart.py"};

bool contains_any(std::string_view text, std::span<const std::string_view> needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](std::string_view n) { return text.find(n) != std::string_view::npos; });
}

bool starts_with_any(std::string_view text, std::span<const std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view p) { return text.starts_with(p); });
}

bool is_noise(const Snapshot& s, const Frame& f) {
  return contains_any(s.strings[f.function], kNoiseFunctions) || contains_any(s.strings[f.file], kNoiseFiles);
}

// The standard library: under lib/python3.X but not in an installed package beneath it.
bool is_stdlib(std::string_view file) {
  return file.starts_with("<frozen ") ||
         (file.find("/lib/python3") != std::string_view::npos && file.find("-packages/") == std::string_view::npos);
}

// CPython's C API and interpreter loop: PyObject_Call, _PyEval_EvalFrameDefault, Py_RunMain (no namespace).
bool is_cpython(std::string_view name) {
  return (name.starts_with("Py") || name.starts_with("_Py")) && name.find('_') != std::string_view::npos &&
         name.find("::") == std::string_view::npos;
}

bool builtin_internal(std::string_view name, std::string_view file, std::string_view library) {
  if (is_python_file(file)) return is_stdlib(file) || contains_any(file, kInternalPythonFiles);
  return starts_with_any(name, kInternalPrefixes) || std::ranges::find(kInternalNames, name) != kInternalNames.end() ||
         is_cpython(name) || contains_any(file, kInternalCFiles) || contains_any(library, kInternalLibraries) ||
         contains_any(name, kInternalLibraries);
}

bool user_internal(std::string_view name, std::string_view file, std::string_view library) {
  for (const std::string& p : internal_patterns())
    if (name.starts_with(p) || file.find(p) != std::string_view::npos || library.find(p) != std::string_view::npos)
      return true;
  return false;
}

std::vector<std::string> split_patterns(const char* text) {
  std::vector<std::string> out;
  std::string_view rest = text ? text : "";
  while (!rest.empty()) {
    size_t colon = rest.find(':');
    // "::" belongs to a namespace prefix ("mylib::detail::"), not a separator.
    while (colon != std::string_view::npos && colon + 1 < rest.size() && rest[colon + 1] == ':')
      colon = rest.find(':', colon + 2);
    std::string_view part = rest.substr(0, colon);
    if (!part.empty()) out.emplace_back(part);
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  }
  return out;
}

std::vector<std::string>& patterns() {
  static std::vector<std::string> list = split_patterns(std::getenv("MEMREC_INTERNAL"));
  return list;
}

std::string basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "forward (train.py:29)", "forward (train.py)" without a line, the bare name without a file.
std::string frame_site_label(const Snapshot& s, uint32_t id) {
  const Frame& f = s.frames[id];
  std::string name = f.function ? short_function(s.strings[f.function]) : fmt::format("0x{:x}", f.pc);
  const std::string& file = s.strings[f.file];
  if (file.empty() || file == "??") return name;
  if (f.line == 0 || f.line == kUnknownLine) return fmt::format("{} ({})", name, basename(file));
  return fmt::format("{} ({}:{})", name, basename(file), f.line);
}

// Index of the site in `frames`, or frames.size() when no frame is user code.
size_t user_index(const Snapshot& s, std::span<const uint32_t> frames) {
  for (size_t i = 0; i < frames.size(); ++i)
    if (is_user_frame(s, frames[i])) return i;
  return frames.size();
}

// Index of the outermost at::_ops frame among frames[0, end), or `end` when there is none.
size_t outermost_op(const Snapshot& s, std::span<const uint32_t> frames, size_t end) {
  for (size_t i = end; i-- > 0;)
    if (short_function(s.strings[s.frames[frames[i]].function]).starts_with("at::_ops::")) return i;
  return end;
}

// An at::_ops frame as the op's name: "at::_ops::add_Tensor::call" -> "aten::add_Tensor".
std::string op_name(const Snapshot& s, uint32_t frame) {
  return "aten::" + std::string(op_struct(short_function(s.strings[s.frames[frame].function])));
}

// Where the site and the op sit in a stack, found once: indexes into its frames, frames.size() for none.
struct Located {
  std::span<const uint32_t> frames;
  size_t user, op;  // op: the outermost at::_ops frame below the user frame (or in the whole stack without one)
};
Located locate(const Snapshot& s, uint32_t stack) {
  auto frames = s.stacks[stack];
  size_t user = user_index(s, frames);
  size_t op = outermost_op(s, frames, user);
  return {frames, user, op == user ? frames.size() : op};
}

// The first frame that is not noise (the op where nothing names it better), or kNoFrame.
uint32_t first_meaningful(const Snapshot& s, std::span<const uint32_t> frames) {
  auto it = std::find_if(frames.begin(), frames.end(), [&](uint32_t f) { return !is_noise(s, s.frames[f]); });
  return it == frames.end() ? (frames.empty() ? kNoFrame : frames.front()) : *it;
}

// The autograd node a frame runs ("torch::autograd::generated::AddmmBackward0::apply" -> "AddmmBackward0"), or "".
std::string autograd_node(std::string_view name) {
  constexpr std::string_view kNode = "torch::autograd::generated::", kApply = "::apply";
  if (!name.starts_with(kNode) || !name.ends_with(kApply)) return {};
  return std::string(name.substr(kNode.size(), name.size() - kNode.size() - kApply.size()));
}

// The autograd node among frames[0, end), the backward of the user's op: "" if none.
std::string node_below(const Snapshot& s, std::span<const uint32_t> frames, size_t end) {
  for (size_t i = 0; i < end && i < frames.size(); ++i) {
    std::string node = autograd_node(short_function(s.strings[s.frames[frames[i]].function]));
    if (!node.empty()) return node;
  }
  return {};
}

// Where a framework-only stack's op ran, for a key that tells such stacks apart: the autograd node
// ("AddmmBackward0") or torch's Python function ("_init_group (adam.py:182)") nearest outside the op; "" if none.
std::string framework_context(const Snapshot& s, std::span<const uint32_t> frames, uint32_t op) {
  auto it = std::find(frames.begin(), frames.end(), op);
  for (it = it == frames.end() ? it : it + 1; it != frames.end(); ++it) {
    const Frame& f = s.frames[*it];
    std::string name = short_function(s.strings[f.function]);
    if (std::string node = autograd_node(name); !node.empty()) return node;
    const std::string& file = s.strings[f.file];
    if (is_python_file(file) && f.line && builtin_internal(name, file, s.strings[f.library]))
      return frame_site_label(s, *it);
  }
  return {};
}

}  // namespace

bool is_python_file(std::string_view file) { return file.ends_with(".py") || file.starts_with("<frozen "); }

void add_internal_patterns(std::span<const std::string> added) {
  for (const std::string& p : added)
    if (!p.empty()) patterns().push_back(p);
}

const std::vector<std::string>& internal_patterns() { return patterns(); }

bool is_user_frame(const Snapshot& s, uint32_t id) {
  const Frame& f = s.frames[id];
  if (!f.function) return false;  // an address without a name is no code a user can open
  std::string name = short_function(s.strings[f.function]);
  const std::string& file = s.strings[f.file];
  const std::string& library = s.strings[f.library];
  return !builtin_internal(name, file, library) && !user_internal(name, file, library);
}

uint32_t site_frame(const Snapshot& s, uint32_t stack) {
  Located l = locate(s, stack);
  if (l.user < l.frames.size()) return l.frames[l.user];
  if (l.op < l.frames.size()) return l.frames[l.op];
  return first_meaningful(s, l.frames);
}

std::vector<uint32_t> user_frames(const Snapshot& s, uint32_t stack) {
  Located l = locate(s, stack);
  if (l.user == l.frames.size()) {
    uint32_t site = site_frame(s, stack);
    return site == kNoFrame ? std::vector<uint32_t>{} : std::vector<uint32_t>{site};
  }
  std::vector<uint32_t> out;
  if (l.op < l.user) out.push_back(l.frames[l.op]);
  for (size_t i = l.user; i < l.frames.size(); ++i)
    if (is_user_frame(s, l.frames[i])) out.push_back(l.frames[i]);
  return out;
}

std::string site_label(const Snapshot& s, uint32_t stack) {
  Located l = locate(s, stack);
  if (l.frames.empty()) return "<no stack>";
  if (l.user < l.frames.size()) return frame_site_label(s, l.frames[l.user]);
  if (l.op < l.frames.size()) return op_name(s, l.frames[l.op]);
  return frame_site_label(s, first_meaningful(s, l.frames));
}

std::string op_label(const Snapshot& s, uint32_t stack) {
  Located l = locate(s, stack);
  if (l.user == 0 || l.user == l.frames.size()) return {};
  if (l.op < l.frames.size()) return op_name(s, l.frames[l.op]);
  uint32_t first = first_meaningful(s, l.frames.first(l.user));
  return first == l.frames[l.user] ? std::string() : short_function(s.strings[s.frames[first].function]);
}

std::string allocation_site(const Snapshot& s, uint32_t stack) {
  Located l = locate(s, stack);
  std::string site = site_label(s, stack);
  if (l.user == l.frames.size()) {  // no user code: the op, and where it ran
    std::string context = l.frames.empty() ? "" : framework_context(s, l.frames, site_frame(s, stack));
    return context.empty() ? site : site + " in " + context;
  }
  std::string op = op_label(s, stack);
  std::string node = op.empty() ? std::string() : node_below(s, l.frames, l.user);
  return op.empty() ? site : site + " via " + op + (node.empty() ? "" : " in " + node);
}

std::vector<uint32_t> top_frames(const Snapshot& s, uint32_t stack, size_t n) {
  std::vector<uint32_t> out;
  for (uint32_t f : s.stacks[stack]) {
    if (out.size() == n) break;
    if (!is_noise(s, s.frames[f])) out.push_back(f);
  }
  return out;
}

std::vector<MarkedFrame> marked_frames(const Snapshot& s, uint32_t stack) {
  uint32_t site = site_frame(s, stack);
  std::vector<MarkedFrame> out;
  for (uint32_t f : s.stacks[stack]) {
    out.push_back({f, is_user_frame(s, f), f == site});
    if (f == site) site = kNoFrame;  // a recursive stack repeats the frame: mark the first
  }
  return out;
}

}  // namespace memrec
