#include "symbolize.h"

#include <backtrace.h>
#include <cxxabi.h>
#include <link.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "internal.h"

namespace memrec::detail {
namespace {

backtrace_state* libbacktrace() {
  // One state per process (libbacktrace never frees one); it reads the executable and every loaded library.
  static backtrace_state* state = backtrace_create_state(nullptr, /*threaded=*/1, nullptr, nullptr);
  return state;
}

std::string demangle(const char* name) {
  if (!name) return {};
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !out) return name;
  std::string s(out);
  std::free(out);
  return s;
}

struct RawFrame {
  std::string function, file;
  int line = 0;
};

int on_pcinfo(void* data, uintptr_t, const char* file, int line, const char* function) {
  if (file || function) static_cast<std::vector<RawFrame>*>(data)->push_back({demangle(function), file ? file : "", line});
  return 0;
}

void on_syminfo(void* data, uintptr_t, const char* name, uintptr_t, uintptr_t) {
  if (name) *static_cast<std::string*>(data) = demangle(name);
}

void on_error(void*, const char*, int) {}  // missing debug info is normal (stripped libraries)

bool is_internal(std::string_view function) {
  return function.find("memrec::detail::") != std::string_view::npos || function.starts_with("_Unwind_") ||
         function.starts_with("torch::unwind::") || function.starts_with("boost::stacktrace::");
}

// CPython's frame-evaluation loop (_PyEval_EvalFrameDefault, PyEval_EvalFrameEx, ...).
bool is_interpreter(std::string_view function) { return function.find("PyEval_EvalFrame") != std::string_view::npos; }

}  // namespace

// Loaded objects' address ranges, for Frame::library without dladdr's per-call symbol scan.
struct Symbolizer::Modules {
  struct Range {
    uint64_t begin, end, base;  // base: the object's load address
    std::string path;
  };
  std::vector<Range> ranges;

  void reload() {
    ranges.clear();
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          auto* self = static_cast<Modules*>(data);
          std::string path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : executable();
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const auto& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_LOAD) continue;
            uint64_t begin = info->dlpi_addr + ph.p_vaddr;
            self->ranges.push_back({begin, begin + ph.p_memsz, info->dlpi_addr, path});
          }
          return 0;
        },
        this);
    std::sort(ranges.begin(), ranges.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
  }

  const Range* find(uint64_t pc) const {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), pc, [](uint64_t p, auto& r) { return p < r.begin; });
    if (it == ranges.begin()) return nullptr;
    --it;
    return pc < it->end ? &*it : nullptr;
  }

  const Range* lookup(uint64_t pc) {
    if (const Range* r = find(pc)) return r;
    reload();  // a library loaded since the last look
    return find(pc);
  }

  static std::string executable() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, n) : "";
  }
};

Symbolizer::Symbolizer() : modules_(std::make_unique<Modules>()) {}

void Symbolizer::warm_up() {
  auto t0 = std::chrono::steady_clock::now();
  auto pc = reinterpret_cast<uintptr_t>(&libbacktrace);
  std::vector<RawFrame> ignored;
  std::string name;
  backtrace_pcinfo(libbacktrace(), pc, &on_pcinfo, &on_error, &ignored);
  backtrace_syminfo(libbacktrace(), pc, &on_syminfo, &on_error, &name);
  modules_->reload();
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
Symbolizer::~Symbolizer() = default;

void Symbolizer::start(ScriptFrames* script) {
  script_ = script;
  cache_.clear();
  ids_.clear();
  script_cache_.clear();
  stacks_.clear();
  seconds_ = 0;
}

uint32_t Symbolizer::stack_of(std::span<const uint64_t> pcs, Snapshot& s) {
  uint64_t h = pcs.size();
  for (uint64_t w : pcs) h = std::rotl((h ^ w) * 0x9E3779B97F4A7C15ull, 29);
  std::vector<KnownStack>& same_hash = stacks_[h];
  for (const KnownStack& k : same_hash)
    if (std::ranges::equal(k.pcs, pcs)) return k.id;
  frame_ids_.clear();
  frames_of(pcs, s, frame_ids_);
  uint32_t id = frame_ids_.empty() ? 0 : s.stacks.intern(frame_ids_);
  same_hash.push_back({{pcs.begin(), pcs.end()}, id});
  return id;
}

const Symbolizer::Resolved& Symbolizer::resolve(uint64_t pc, Snapshot& s) {
  if (auto it = cache_.find(pc); it != cache_.end()) return it->second;
  auto t0 = std::chrono::steady_clock::now();
  // Return addresses point after the call: look up the call instruction itself.
  std::vector<RawFrame> raw;
  backtrace_pcinfo(libbacktrace(), pc - 1, &on_pcinfo, &on_error, &raw);
  if (raw.empty()) raw.emplace_back();
  // The symbol table names the real (outermost) function fully qualified; DWARF names may lack namespaces.
  std::string symbol;
  backtrace_syminfo(libbacktrace(), pc - 1, &on_syminfo, &on_error, &symbol);
  if (!symbol.empty()) raw.back().function = std::move(symbol);

  const auto* module = modules_->lookup(pc);
  std::string library = module ? module->path : "";
  Resolved r{static_cast<uint32_t>(ids_.size()), 0, false};
  for (const RawFrame& f : raw) {
    r.internal = r.internal || is_internal(f.function);
    r.interpreter = r.interpreter || is_interpreter(f.function);
  }
  for (RawFrame& f : raw) {
    if (r.internal) break;  // the recorder's and unwinders' frames never enter the snapshot
    if (f.function.empty()) {  // nothing names it: say where it is rather than leave it blank
      auto base = std::string_view(library).substr(library.rfind('/') + 1);
      f.function = module ? fmt::format("{}+0x{:x}", base, pc - module->base)
                          : fmt::format("0x{:x}", pc);
    }
    Frame frame{pc, s.strings.intern(f.function), s.strings.intern(f.file), s.strings.intern(library),
                static_cast<uint32_t>(std::max(f.line, 0))};
    ids_.push_back(s.frames.intern(frame));
    ++r.count;
  }
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return cache_.emplace(pc, r).first->second;
}

uint32_t Symbolizer::script_frame(uint64_t word, Snapshot& s) {
  if (auto it = script_cache_.find(word); it != script_cache_.end()) return it->second;
  std::string function, file;
  uint32_t line = 0;
  if (script_) script_->describe(word & ~kScriptFrameBit, function, file, line);
  Frame frame{0, s.strings.intern(function), s.strings.intern(file), 0, line};
  return script_cache_.emplace(word, s.frames.intern(frame)).first->second;
}

void Symbolizer::frames_of(std::span<const uint64_t> pcs, Snapshot& s, std::vector<uint32_t>& out) {
  auto first_script = std::find_if(pcs.begin(), pcs.end(), [](uint64_t w) { return w & kScriptFrameBit; });
  size_t join = SIZE_MAX, resume = SIZE_MAX;  // out positions: first interpreter frame, just after the last
  for (auto it = pcs.begin(); it != first_script; ++it) {
    const Resolved& r = resolve(*it, s);
    if (r.interpreter) {
      if (join == SIZE_MAX) join = out.size();
      resume = out.size() + r.count;
    }
    out.insert(out.end(), ids_.begin() + r.first, ids_.begin() + r.first + r.count);
  }
  if (first_script == pcs.end()) return;
  std::vector<uint32_t> script;
  for (auto it = first_script; it != pcs.end(); ++it) script.push_back(script_frame(*it, s));
  if (join == SIZE_MAX) {
    out.insert(out.end(), script.begin(), script.end());
    return;
  }
  std::vector<uint32_t> outer(out.begin() + resume, out.end());
  out.resize(join);
  out.insert(out.end(), script.begin(), script.end());
  out.insert(out.end(), outer.begin(), outer.end());
}

}  // namespace memrec::detail
