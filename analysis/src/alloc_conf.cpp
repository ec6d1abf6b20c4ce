// PYTORCH_CUDA_ALLOC_CONF: parsing (c10/core/AllocatorConfig.cpp's syntax and limits), printing, and the settings a
// recording says it ran with.
#include <bit>
#include <charconv>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "memrec/allocator_model.h"

namespace memrec {

using namespace alloc_sizes;

namespace {

constexpr uint64_t kMiB = 1ull << 20;

// Settings that change nothing the model sees (host memory, locking, OOM reporting).
const std::set<std::string, std::less<>> kIgnored = {
    "release_lock_on_cudamalloc", "release_lock_on_hipmalloc", "pinned_use_cuda_host_register",
    "pinned_use_hip_host_register", "pinned_num_register_threads", "pinned_use_background_threads",
    "pinned_reserve_segment_size_mb", "pinned_free_catch_all", "graph_capture_record_stream_reuse",
    "throw_on_cudamalloc_oom"};

// The allocator's lexer: ',' ':' '[' ']' are tokens of their own, spaces vanish.
std::vector<std::string> lex(std::string_view text) {
  std::vector<std::string> out;
  std::string word;
  for (char c : text) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!word.empty()) out.push_back(std::move(word)), word.clear();
      out.emplace_back(1, c);
    } else if (c != ' ') {
      word += c;
    }
  }
  if (!word.empty()) out.push_back(std::move(word));
  return out;
}

class Parser {
 public:
  // lenient: settings this model does not know (of newer PyTorch versions) are skipped instead of refused.
  Parser(std::string_view text, bool lenient) : text_(text), tokens_(lex(text)), lenient_(lenient) {}

  AllocConf run() {
    AllocConf c;
    while (i_ < tokens_.size()) {
      std::string name = next("a setting name");
      expect(":");
      setting(c, name);
      if (i_ < tokens_.size()) expect(",");
    }
    return c;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(fmt::format("allocator settings '{}': {}", text_, why));
  }
  std::string next(const char* what) {
    if (i_ >= tokens_.size()) fail(fmt::format("expected {} at the end", what));
    return tokens_[i_++];
  }
  void expect(const char* token) {
    if (i_ >= tokens_.size()) fail(fmt::format("expected '{}' at the end", token));
    std::string got = next(token);
    if (got != token) fail(fmt::format("expected '{}' but found '{}'", token, got));
  }
  uint64_t integer(const std::string& name) {
    std::string t = next("a number");
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size()) fail(fmt::format("{} must be a whole number, not '{}'", name, t));
    return v;
  }
  double real(const std::string& name, double low, double high) {
    std::string t = next("a number");
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != t.size() || !std::isfinite(v)) fail(fmt::format("{} must be a number, not '{}'", name, t));
    if (v <= low || v > high) fail(fmt::format("{} must be in ({:g}, {:g}), not {}", name, low, high, t));
    return v;
  }
  bool boolean(const std::string& name) {
    std::string t = next("True or False");
    if (t != "True" && t != "False") fail(fmt::format("{} must be True or False, not '{}'", name, t));
    return t == "True";
  }
  uint64_t megabytes(const std::string& name) {
    uint64_t mb = integer(name);
    if (mb < kLargeBuffer / kMiB) fail(fmt::format("{} must be at least {}", name, kLargeBuffer / kMiB));
    return mb > UINT64_MAX / kMiB ? UINT64_MAX : mb * kMiB;
  }
  uint32_t divisions() {
    uint64_t d = integer("roundup_power2_divisions");
    if (d != 0 && !std::has_single_bit(d)) fail(fmt::format("roundup_power2_divisions must be 0 or a power of 2, not {}", d));
    return static_cast<uint32_t>(std::min<uint64_t>(d, UINT32_MAX));
  }

  void setting(AllocConf& c, const std::string& name) {
    if (name == "max_split_size_mb") {
      c.max_split_size = megabytes(name);
    } else if (name == "max_non_split_rounding_mb") {
      c.max_non_split_rounding = megabytes(name);
    } else if (name == "garbage_collection_threshold") {
      c.garbage_collection_threshold = real(name, 0, 1);
      if (c.garbage_collection_threshold >= 1) fail("garbage_collection_threshold must be below 1");
    } else if (name == "per_process_memory_fraction") {
      c.memory_fraction = real(name, 0, 1);
    } else if (name == "expandable_segments") {
      c.expandable_segments = boolean(name);
    } else if (name == "roundup_power2_divisions") {
      roundup(c);
    } else if (name == "backend") {
      std::string b = next("a backend");
      if (b != "native") fail(fmt::format("backend:{} is not the caching allocator this model follows", b));
    } else if (kIgnored.contains(name)) {
      next("a value");
    } else if (lenient_) {
      for (int depth = 0; i_ < tokens_.size() && (depth > 0 || tokens_[i_] != ","); ++i_)
        depth += tokens_[i_] == "[" ? 1 : tokens_[i_] == "]" ? -1 : 0;
    } else {
      fail(fmt::format("unknown setting '{}'", name));
    }
  }

  // roundup_power2_divisions:N for every size, or [MB:N,...,>:N] per power-of-two interval (c10's rules: the first
  // entry also covers the intervals below it, '>' the intervals after the last one named).
  void roundup(AllocConf& c) {
    auto& d = c.roundup_divisions;
    if (i_ >= tokens_.size() || tokens_[i_] != "[") {
      d.fill(divisions());
      return;
    }
    ++i_;
    bool first = true;
    size_t last = 0;
    while (i_ < tokens_.size() && tokens_[i_] != "]") {
      std::string interval = next("an interval");
      expect(":");
      uint32_t value = divisions();
      if (interval == ">") {
        std::fill(d.begin() + static_cast<ptrdiff_t>(last), d.end(), value);
      } else {
        uint64_t mb = 0;
        auto [end, ec] = std::from_chars(interval.data(), interval.data() + interval.size(), mb);
        if (ec != std::errc() || end != interval.data() + interval.size() || !std::has_single_bit(mb))
          fail(fmt::format("roundup_power2_divisions intervals must be powers of 2 (in MB) or '>', not '{}'", interval));
        size_t index = std::min<size_t>(std::bit_width(mb) - 1, kRoundupIntervals - 1);
        if (first) std::fill(d.begin(), d.begin() + static_cast<ptrdiff_t>(index), value);
        first = false;
        d[index] = value;
        last = index;
      }
      if (i_ < tokens_.size() && tokens_[i_] == ",") ++i_;
    }
    expect("]");
  }

  std::string_view text_;
  std::vector<std::string> tokens_;
  bool lenient_;
  size_t i_ = 0;
};

std::string megabytes_text(uint64_t bytes) { return std::to_string(bytes / kMiB); }

// Per-interval divisions in the bracket syntax, as short as c10's rules allow: the first entry covers the run of
// equal values it ends, the intervals between are named one by one, '>' repeats the last run from where it starts.
std::string divisions_list(const std::array<uint32_t, kRoundupIntervals>& r) {
  size_t first_end = 1, last_start = r.size() - 1;
  while (first_end < r.size() && r[first_end] == r[0]) ++first_end;
  while (last_start > first_end && r[last_start - 1] == r.back()) --last_start;
  std::vector<std::string> items;
  auto entry = [&](size_t i) { items.push_back(fmt::format("{}:{}", uint64_t{1} << i, r[i])); };
  entry(first_end - 1);
  for (size_t i = first_end; i <= last_start; ++i) entry(i);
  if (last_start + 1 < r.size()) items.push_back(fmt::format(">:{}", r.back()));
  return fmt::format("{}", fmt::join(items, ","));
}

}  // namespace

AllocConf parse_alloc_conf(std::string_view text) { return Parser(text, false).run(); }

std::string to_string(const AllocConf& c) {
  AllocConf d;
  std::vector<std::string> parts;
  if (c.expandable_segments) parts.push_back("expandable_segments:True");
  if (c.max_split_size != d.max_split_size) parts.push_back("max_split_size_mb:" + megabytes_text(c.max_split_size));
  if (c.max_non_split_rounding != d.max_non_split_rounding)
    parts.push_back("max_non_split_rounding_mb:" + megabytes_text(c.max_non_split_rounding));
  if (c.garbage_collection_threshold > 0)
    parts.push_back(fmt::format("garbage_collection_threshold:{:g}", c.garbage_collection_threshold));
  if (c.memory_fraction > 0) parts.push_back(fmt::format("per_process_memory_fraction:{:g}", c.memory_fraction));
  const auto& r = c.roundup_divisions;
  if (std::all_of(r.begin(), r.end(), [&](uint32_t v) { return v == r[0]; })) {
    if (r[0] != 0) parts.push_back(fmt::format("roundup_power2_divisions:{}", r[0]));
  } else {
    parts.push_back(fmt::format("roundup_power2_divisions:[{}]", divisions_list(r)));
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

namespace {

// PyTorch writes an unset max_split_size as SIZE_MAX, which Python shows as -1.
uint64_t split_size_of(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() < 0) return UINT64_MAX;
  if (v.is_number_integer()) return static_cast<uint64_t>(v.get<int64_t>());
  throw Error("allocator_settings: max_split_size is not a number");
}

// roundup_power2_divisions as PyTorch's snapshot writes it ({"1": 0, "2": 0, ... MB intervals}) or as a list.
void read_divisions(const nlohmann::json& v, AllocConf& c) {
  if (v.is_array()) {
    for (size_t i = 0; i < v.size() && i < kRoundupIntervals; ++i) c.roundup_divisions[i] = v[i].get<uint32_t>();
  } else if (v.is_object()) {
    for (const auto& [mb, n] : v.items()) {
      uint64_t m = 0;
      auto [end, ec] = std::from_chars(mb.data(), mb.data() + mb.size(), m);
      if (ec != std::errc() || end != mb.data() + mb.size() || !std::has_single_bit(m)) continue;
      c.roundup_divisions[std::min<size_t>(std::bit_width(m) - 1, kRoundupIntervals - 1)] = n.get<uint32_t>();
    }
  }
}

}  // namespace

std::optional<AllocConf> recorded_alloc_conf(const Snapshot& s) {
  auto it = s.metadata.find("allocator_settings");
  if (it == s.metadata.end()) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  AllocConf c;
  bool known = false;
  // The text first (it alone has max_non_split_rounding_mb and per_process_memory_fraction), then the parsed fields.
  for (const char* key : {"PYTORCH_CUDA_ALLOC_CONF", "last_allocator_settings"}) {
    if (!j.contains(key) || !j[key].is_string()) continue;
    c = Parser(j[key].get<std::string>(), true).run();
    known = true;
    break;
  }
  try {
    if (j.contains("max_split_size")) c.max_split_size = split_size_of(j["max_split_size"]), known = true;
    if (j.contains("garbage_collection_threshold") && j["garbage_collection_threshold"].is_number())
      c.garbage_collection_threshold = j["garbage_collection_threshold"].get<double>(), known = true;
    if (j.contains("expandable_segments") && j["expandable_segments"].is_boolean())
      c.expandable_segments = j["expandable_segments"].get<bool>(), known = true;
    if (j.contains("roundup_power2_divisions")) read_divisions(j["roundup_power2_divisions"], c), known = true;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("allocator_settings in the file's metadata: ") + e.what());
  }
  if (!known) return std::nullopt;
  return c;
}

}  // namespace memrec
