#include "app.h"

#include <cstdio>
#include <exception>
#include <new>
#include <optional>
#include <string>

#include <fmt/core.h>

namespace memrec::cli {
namespace {

// The option named `name` in the command that was being parsed (or the app itself).
const CLI::Option* find_option(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands())
    if (const CLI::Option* o = find_option(*sub, name)) return o;
  return app.get_option_no_throw(name);
}

// CLI11's Range validators (PositiveNumber, NonNegativeNumber, Range(a, b)) fail with "NAME: Value X not in range
// MIN to MAX", MAX printed as 309 digits for the unbounded ones. This says the same as one short sentence.
std::optional<std::string> range_sentence(const CLI::App& app, const CLI::ValidationError& e) {
  const std::string what = e.what();
  const size_t value = what.find(": Value "), range = what.rfind(" not in range "), to = what.rfind(" to ");
  if (value == std::string::npos || range == std::string::npos || to == std::string::npos || range < value || to < range)
    return std::nullopt;
  const std::string name = what.substr(0, value);
  const std::string got = what.substr(value + 8, range - value - 8);
  double min = 0, max = 0;
  try {
    min = std::stod(what.substr(range + 14, to - range - 14));
    max = std::stod(what.substr(to + 4));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  // The type name reads like "INT:POSITIVE": the value's type, then the validators' names.
  const CLI::Option* o = find_option(app, name);
  const std::string type = o ? o->get_type_name() : "";
  const bool integer = type.starts_with("INT") || type.starts_with("UINT");
  const char* kind = integer ? "integer" : "number";
  std::string rule = fmt::format("{} {} from {:g} to {:g}", integer ? "an" : "a", kind, min, max);
  if (max >= 1e300) rule = fmt::format("a {} {}", type.ends_with(":POSITIVE") ? "positive" : "non-negative", kind);
  return fmt::format("{} must be {} (got {})", name, rule, got);
}

}  // namespace

int run_app(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ValidationError& e) {
    std::optional<std::string> sentence = range_sentence(app, e);
    if (!sentence) return app.exit(e);
    fmt::print(stderr, "memrec: error: {}\n", *sentence);
    return e.get_exit_code();
  } catch (const CLI::Error& e) {  // parse errors, and RuntimeError for a chosen exit code
    return app.exit(e);
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "memrec: error: out of host memory: memrec could not allocate what it needs for this command\n");
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "memrec: error: {}\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace memrec::cli
