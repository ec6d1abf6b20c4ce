#include "memrec/frames.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include <fmt/format.h>

namespace memrec {
namespace {

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

// Words of the overload names that end at::_ops struct names ("empty_memory_format", "to_dtype_layout") that no aten
// op name in a training step ends with. An overload word with a capital ("Tensor", "IntList") is never part of an
// op's name.
constexpr std::array<std::string_view, 19> kOverloadWords = {
    "out",   "memory", "format", "dim",   "names", "dtype",      "layout",    "device", "int",  "ints",
    "using", "self",   "other",  "start", "step",  "correction", "generator", "mode",   "float"};

bool is_overload_word(std::string_view word) {
  return !word.empty() && (std::isupper(static_cast<unsigned char>(word[0])) ||
                           std::find(kOverloadWords.begin(), kOverloadWords.end(), word) != kOverloadWords.end());
}

// "sum_dim_IntList" -> "sum"; "add__Tensor" -> "add_" (the trailing '_' of an in-place op stops it).
std::string_view drop_overload(std::string_view name) {
  for (size_t cut = name.rfind('_'); cut != std::string_view::npos && cut > 0 && is_overload_word(name.substr(cut + 1));
       cut = name.rfind('_'))
    name = name.substr(0, cut);
  return name;
}

}  // namespace

std::string_view op_struct(std::string_view short_name) {
  constexpr std::string_view kOps = "at::_ops::";
  if (!short_name.starts_with(kOps)) return {};
  short_name.remove_prefix(kOps.size());
  return short_name.substr(0, short_name.find("::"));
}

std::string frame_op(std::string_view function) {
  if (function.find("at::_ops::") == std::string_view::npos) return {};  // short_function() only where it may be one
  std::string short_name = short_function(function);
  std::string_view name = op_struct(short_name);
  return name.empty() ? std::string{} : fmt::format("aten::{}", drop_overload(name));
}

std::vector<std::string> stack_ops(const Snapshot& s, uint32_t stack) {
  std::vector<std::string> ops;
  std::span<const uint32_t> frames = s.stacks[stack];
  for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
    uint32_t function = s.frames[*f].function;
    std::string op = function ? frame_op(s.strings[function]) : std::string{};
    if (!op.empty() && (ops.empty() || ops.back() != op)) ops.push_back(std::move(op));
  }
  return ops;
}

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

}  // namespace memrec
