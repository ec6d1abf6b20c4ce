#include "schedule.h"

#include <charconv>
#include <map>
#include <string_view>

#include <fmt/core.h>

#include "memrec/snapshot.h"

namespace memrec::cli {

Schedule parse_schedule(const std::string& spec) {
  Schedule s;
  std::map<std::string_view, int*> fields{{"wait", &s.wait}, {"warmup", &s.warmup}, {"active", &s.active}};
  auto bad = [&](const std::string& why) {
    return Error(fmt::format("--record '{}': {} (expected wait=W,warmup=N,active=A with active at least 1)", spec, why));
  };
  std::string_view rest = spec;
  for (bool last = false; !last;) {
    std::string_view item = rest.substr(0, rest.find(','));
    last = item.size() == rest.size();
    rest.remove_prefix(std::min(rest.size(), item.size() + 1));
    size_t eq = item.find('=');
    auto field = fields.find(item.substr(0, eq));
    if (eq == std::string_view::npos || field == fields.end())
      throw bad(fmt::format("'{}' is not wait=, warmup= or active=", item));
    if (!field->second) throw bad(fmt::format("{} given twice", field->first));
    std::string_view num = item.substr(eq + 1);
    int& value = *field->second;
    auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), value);
    if (num.empty() || ec != std::errc() || end != num.data() + num.size() || value < 0)
      throw bad(fmt::format("'{}' is not a non-negative number", num));
    field->second = nullptr;
  }
  if (s.active < 1) throw bad("no active steps");
  return s;
}

}  // namespace memrec::cli
