// Checking tool arguments against the small part of JSON Schema the tools use, so a tool sees only arguments of
// the types and ranges it declared.
#include <algorithm>
#include <string>

#include "memrec/mcp.h"

namespace memrec::mcp {
namespace {

using nlohmann::json;

std::string check_integer(const std::string& name, const json& spec, const json& value) {
  bool in_range = value.is_number_integer() && (!spec.contains("minimum") || value >= spec["minimum"]) &&
                  (!spec.contains("maximum") || value <= spec["maximum"]);
  if (in_range) return "";
  std::string range = spec.contains("minimum") && spec.contains("maximum")
                          ? " from " + spec["minimum"].dump() + " to " + spec["maximum"].dump()
                          : "";
  return "'" + name + "' must be an integer" + range + ", got " + value.dump();
}

std::string check_string(const std::string& name, const json& spec, const json& value) {
  if (!value.is_string()) return "'" + name + "' must be a string, got " + value.dump();
  if (spec.contains("enum") && std::find(spec["enum"].begin(), spec["enum"].end(), value) == spec["enum"].end())
    return "'" + name + "' must be one of " + spec["enum"].dump() + ", got " + value.dump();
  return "";
}

std::string check_array(const std::string& name, const json& spec, const json& value) {
  bool strings = value.is_array() && std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_string(); });
  if (!strings) return "'" + name + "' must be an array of strings, got " + value.dump();
  if (value.size() < spec.value("minItems", size_t{0}))
    return "'" + name + "' needs at least " + spec["minItems"].dump() + " items";
  if (spec.contains("maxItems") && value.size() > spec["maxItems"].get<size_t>())
    return "'" + name + "' takes at most " + spec["maxItems"].dump() + " items";
  return "";
}

std::string check_value(const std::string& name, const json& spec, const json& value) {
  const std::string type = spec.value("type", "");
  if (type == "integer") return check_integer(name, spec, value);
  if (type == "string") return check_string(name, spec, value);
  if (type == "array") return check_array(name, spec, value);
  if (type == "boolean" && !value.is_boolean()) return "'" + name + "' must be true or false, got " + value.dump();
  return "";
}

std::string names(const json& properties) {
  std::string out;
  for (const auto& [name, spec] : properties.items()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

std::string check_arguments(const json& schema, const json& arguments) {
  if (!arguments.is_object()) return "\"arguments\" must be an object";
  const json properties = schema.value("properties", json::object());
  for (const json& required : schema.value("required", json::array()))
    if (!arguments.contains(required)) return "missing argument '" + required.get<std::string>() + "'";
  for (const auto& [name, value] : arguments.items()) {
    if (!properties.contains(name)) return "unknown argument '" + name + "' (it takes " + names(properties) + ")";
    if (std::string why = check_value(name, properties[name], value); !why.empty()) return why;
  }
  return "";
}

}  // namespace memrec::mcp
