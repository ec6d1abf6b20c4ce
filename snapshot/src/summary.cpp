#include "memrec/summary.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include <fmt/format.h>

#include "memrec/replay.h"

namespace memrec {
namespace {

std::string scope_path(const Snapshot& s, uint32_t scope) {
  std::string path;
  for (int depth = 0; scope != 0 && scope < s.scopes.size() && depth < 64; ++depth) {
    const Scope& sc = s.scopes[scope];
    path = path.empty() ? s.strings[sc.name] : s.strings[sc.name] + " > " + path;
    scope = sc.parent;
  }
  return path;
}

void append_metadata(std::string& out, const Snapshot& s) {
  for (const auto& [key, value] : s.metadata) {
    if (key == "allocator_settings" || key == "pickle_extra") {  // long JSON; `memrec export` keeps it
      out += fmt::format("  {:<22} ({} bytes of JSON, kept for export)\n", key, value.size());
      continue;
    }
    out += fmt::format("  {:<22} {}\n", key, value);
  }
}

void append_action_counts(std::string& out, const Snapshot& s) {
  std::array<uint64_t, kActionCount> counts{};
  for (const Event& e : s.events) ++counts[static_cast<size_t>(e.action)];
  out += "events by action:\n";
  for (int a = 0; a < kActionCount; ++a)
    if (counts[a]) out += fmt::format("  {:<16} {:>12}\n", to_string(static_cast<Action>(a)), counts[a]);
}

std::string when(const Replay& r, uint32_t step, int64_t start_ns) {
  if (step == kNoEvent) return "at start";
  return fmt::format("at +{} (event {} of this device)", format_duration(r.time_of(step) - start_ns), step);
}

void append_largest_live(std::string& out, const Snapshot& s, const Replay& r, uint32_t step) {
  auto ids = r.live_after(step);
  const auto& allocs = r.allocations();
  std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return allocs[a].size > allocs[b].size; });
  ids.resize(std::min<size_t>(ids.size(), 10));
  out += fmt::format("  largest live allocations at the allocated peak:\n");
  for (uint32_t id : ids) {
    const Allocation& a = allocs[id];
    std::string origin = a.alloc_step == kNoEvent ? "before recording" : scope_path(s, a.scope);
    out += fmt::format("    {:>12}  0x{:x}  {}\n", format_bytes(a.size), a.addr, origin);
    if (a.stack) out += fmt::format("        {}\n", allocation_site(s, a.stack));
  }
}

void append_device(std::string& out, const Snapshot& s, uint8_t device) {
  Replay r(s, device);
  int64_t start = r.time_of(kNoEvent);
  int64_t end = r.steps() == 0 ? start : r.time_of(r.steps() - 1);
  out += fmt::format("device {}: {} events over {}\n", device, r.steps(), format_duration(end - start));
  out += fmt::format("  peak allocated  {:>12}  {}\n", format_bytes(r.peak_allocated().bytes),
                     when(r, r.peak_allocated().step, start));
  out += fmt::format("  peak reserved   {:>12}  {}\n", format_bytes(r.peak_reserved().bytes),
                     when(r, r.peak_reserved().step, start));
  out += fmt::format("  at start: {} allocated, {} reserved; {} blocks were live before recording\n",
                     format_bytes(r.initial().allocated), format_bytes(r.initial().reserved),
                     std::ranges::count(r.alloc_steps(), kNoEvent));
  if (r.unmatched_frees())
    out += fmt::format("  warning: {} frees did not match a live block\n", r.unmatched_frees());
  for (uint32_t step = 0; step < r.steps(); ++step) {
    const Event& e = r.event(step);
    if (e.action == Action::oom)
      out += fmt::format("  OOM at +{}: requested {} with {} free on the device ({} allocated, {} reserved)\n",
                         format_duration(e.time_ns - start), format_bytes(e.size), format_bytes(e.addr),
                         format_bytes(r.after(step).allocated), format_bytes(r.after(step).reserved));
  }
  append_largest_live(out, s, r, r.peak_allocated().step);
}

// Suffixes the compiler adds to a function it cloned or split: GCC's "foo.isra.0", "foo.cold", and what the
// demangler makes of them, " [clone .constprop.0] [clone .cold]".
std::string_view drop_clone_suffixes(std::string_view name) {
  for (bool again = true; again;) {
    again = false;
    while (name.ends_with(' ')) name.remove_suffix(1);
    if (name.ends_with(']')) {
      size_t open = name.rfind(" [clone .");
      if (open != std::string_view::npos) name = name.substr(0, open), again = true;
      continue;
    }
    for (std::string_view kind : {".isra.", ".constprop.", ".part.", ".lto_priv.", ".cold", ".localalias"}) {
      size_t at = name.rfind(kind);
      if (at == 0 || at == std::string_view::npos) continue;
      std::string_view rest = name.substr(at + kind.size());
      if (rest.find_first_not_of("0123456789") != std::string_view::npos) continue;
      name = name.substr(0, at), again = true;
    }
  }
  return name;
}

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }

// The length of an operator's name starting at `at` ("operator()", "operator<<", "operator new[]"), or 0.
size_t operator_length(std::string_view text, size_t at) {
  constexpr std::string_view kOperator = "operator";
  if (text.substr(at, kOperator.size()) != kOperator || (at > 0 && is_identifier_char(text[at - 1]))) return 0;
  size_t end = at + kOperator.size();
  if (end == text.size() || is_identifier_char(text[end])) return 0;  // "operator_foo"
  std::string_view rest = text.substr(end);
  if (rest.starts_with("()") || rest.starts_with("[]")) return end + 2 - at;
  if (rest.starts_with("\"\"")) {  // a literal operator: operator""_kb
    end += 2;
    while (end < text.size() && is_identifier_char(text[end])) ++end;
    return end - at;
  }
  if (rest.starts_with(' ')) {  // operator new, operator delete[], or a conversion: operator bool
    size_t word = end + 1;
    while (word < text.size() && (is_identifier_char(text[word]) || text[word] == ':')) ++word;
    if (text.substr(word, 2) == "[]") word += 2;
    return word - at;
  }
  size_t symbols = 0;  // "<<=", "->*", "<=>" are the longest
  while (symbols < 3 && end + symbols < text.size() &&
         std::string_view("+-*/%^&|~!=<>,").find(text[end + symbols]) != std::string_view::npos)
    ++symbols;
  return symbols ? end + symbols - at : 0;
}

// The name without its argument, template and [abi:...] lists (nested ones included); operator names are kept
// whole, so "operator<<" and "operator()" do not open or close a list.
std::string drop_lists(std::string_view text) {
  std::string out;
  int depth = 0;
  for (size_t i = 0; i < text.size();) {
    if (size_t n = operator_length(text, i)) {
      if (depth == 0) out += text.substr(i, n);
      i += n;
      continue;
    }
    char c = text[i++];
    if (c == '(' || c == '<' || c == '[') ++depth;
    else if ((c == ')' || c == '>' || c == ']') && depth > 0) --depth;
    else if (depth == 0) out += c;
  }
  return out;
}

// Where the qualified name starts: after a return type ("std::vector<at::Tensor> at::foo"), found as the last
// space outside a "{lambda#1}" or "{unnamed type#1}" and not the one in "operator new".
size_t name_start(std::string_view text) {
  size_t start = 0;
  int braces = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{') ++braces;
    else if (text[i] == '}' && braces > 0) --braces;
    else if (text[i] == ' ' && braces == 0 && !text.substr(0, i).ends_with("operator")) start = i + 1;
  }
  return start;
}

}  // namespace

std::string short_function(std::string_view name) {
  std::string text(drop_clone_suffixes(name));
  const std::string anonymous = "(anonymous namespace)::";
  for (size_t at; (at = text.find(anonymous)) != std::string::npos;) text.erase(at, anonymous.size());
  text = drop_lists(text);
  for (bool again = true; again;) {
    again = false;
    while (text.ends_with(' ')) text.pop_back();  // "operator< <int>" leaves one
    for (std::string_view qualifier : {" const", " volatile", " &&", " &", " noexcept"})
      if (text.ends_with(qualifier)) text.resize(text.size() - qualifier.size()), again = true;
  }
  text = text.substr(name_start(text));
  // A lambda's body is its operator(): "at::native::foo::{lambda#1}" says all there is.
  if (text.ends_with("}::operator()")) text.resize(text.size() - std::string_view("::operator()").size());
  return text.empty() ? std::string(name) : text;
}

std::string format_bytes(uint64_t bytes) {
  constexpr std::array<const char*, 6> units = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < units.size()) v /= 1024.0, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, units[u]);
}

std::string format_duration(int64_t ns) {
  double v = static_cast<double>(ns);
  if (std::abs(v) < 1e3) return fmt::format("{} ns", ns);
  if (std::abs(v) < 1e6) return fmt::format("{:.1f} us", v / 1e3);
  if (std::abs(v) < 1e9) return fmt::format("{:.1f} ms", v / 1e6);
  return fmt::format("{:.3f} s", v / 1e9);
}

std::string format_frame(const Snapshot& s, uint32_t frame_id) {
  const Frame& f = s.frames[frame_id];
  std::string name = f.function ? s.strings[f.function] : fmt::format("0x{:x}", f.pc);
  const std::string& file = s.strings[f.file];
  bool known_file = !file.empty() && file != "??";
  if (known_file && f.line) return fmt::format("{} ({}:{})", name, file, f.line);
  if (known_file) return fmt::format("{} ({})", name, file);
  if (f.library) return fmt::format("{} ({})", name, s.strings[f.library]);
  return name;
}

std::string info_report(const Snapshot& s) {
  std::string out;
  append_metadata(out, s);
  out += fmt::format("{} events, {} kernels, {} scopes, {} stacks, {} frames, {} dropped events\n",
                     s.events.size(), s.kernels.size(), s.scopes.size() - 1, s.stacks.size() - 1,
                     s.frames.size(), s.dropped_events);
  append_action_counts(out, s);
  for (uint8_t d : devices_of(s)) append_device(out, s, d);
  return out;
}

}  // namespace memrec
