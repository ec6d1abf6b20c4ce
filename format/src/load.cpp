#include "memrec/load.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiled_code.h"
#include "memrec/format.h"
#include "memrec/model_names.h"
#include "memrec/pickle.h"
#include "memrec/range.h"

namespace memrec {
namespace {

constexpr unsigned char kPickleProto = 0x80;

int first_byte(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path + ": " + std::strerror(errno));
  return in.get();
}

// The recorder's notes are the file's to print; compiled code is mapped to the model's source and modules, modules
// and owners are named by the model's own paths, and PyTorch's own blocks (DDP's buckets, cuBLAS's workspaces) by
// what they are.
Snapshot read_recording(const std::string& path, const std::optional<Range>& range) {
  Snapshot s = range ? read_range(path, *range).snapshot : read_file(path);
  resolve_compiled_code(s);
  name_modules_by_model_path(s);
  own_framework_blocks(s);
  add_notes(s);
  return s;
}

Snapshot read_any(const std::string& path, const std::optional<Range>& range) {
  if (is_memrec_file(path)) return read_recording(path, range);
  if (first_byte(path) != kPickleProto) throw Error(path + " is neither a .memrec file nor a pickle snapshot");
  Snapshot s = import_pickle_file(path);
  return range ? cut_range(s, *range, path) : s;
}

// The windows the recorder did not trace CUPTI's records in (recorder.cupti_gaps, written by recorder/src/cupti.cpp:
// [{"what", "from_ns", "to_ns" or null while open at the end, "why"}]), as notes timed from the first event:
// "kernels not traced from +2.1 s to +3.4 s: the program's profiler held CUPTI" ("from the start" when the window
// opened before the first event).
void add_gap_notes(Snapshot& s) {
  auto it = s.metadata.find("recorder.cupti_gaps");
  if (it == s.metadata.end()) return;
  nlohmann::json gaps = nlohmann::json::parse(it->second, nullptr, false);
  if (!gaps.is_array()) return s.warnings.push_back("recorder.cupti_gaps is not a list: " + it->second);
  int64_t origin = s.events.empty() ? 0 : s.events.front().time_ns;
  auto at = [&](const nlohmann::json& ns) {  // a window opened before the first event began with the recording
    int64_t t = ns.get<int64_t>();
    return t <= origin ? std::string("the start") : fmt::format("+{:.1f} s", double(t - origin) / 1e9);
  };
  auto field = [](const nlohmann::json& g, const char* key) { return g.value(key, nlohmann::json()); };
  for (const nlohmann::json& g : gaps) {
    if (!g.is_object() || !field(g, "what").is_string() || !field(g, "from_ns").is_number_integer()) continue;
    nlohmann::json to = field(g, "to_ns");
    s.warnings.push_back(fmt::format("{} not traced from {} to {}: {}", g["what"].get<std::string>(), at(g["from_ns"]),
                                     to.is_number_integer() ? at(to) : std::string("the end"),
                                     field(g, "why").is_string() ? g["why"].get<std::string>() : "CUPTI was held"));
  }
}

}  // namespace

void add_notes(Snapshot& s) {
  for (const auto& [key, value] : s.metadata)
    if (key.starts_with("notes.")) s.warnings.push_back(value);
  add_gap_notes(s);
}

void print_warnings(const Snapshot& s, std::FILE* out) {
  for (const std::string& w : s.warnings) std::fprintf(out, "memrec: note: %s\n", w.c_str());
}

Snapshot load_snapshot(const std::string& path, std::FILE* notes, const std::optional<Range>& range) {
  Snapshot s = read_any(path, range);
  if (notes) print_warnings(s, notes);
  return s;
}

FileStamp file_stamp(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {};
  return {st.st_size, st.st_mtim};
}

}  // namespace memrec
