#include <algorithm>
#include <array>
#include <new>

#include "memrec/mcp.h"

namespace memrec::mcp {
namespace {

using nlohmann::json;

// The protocol versions this server speaks, newest first: it answers a client in the client's version when it
// knows it, else in the newest.
constexpr std::array<std::string_view, 3> kVersions = {"2025-06-18", "2025-03-26", "2024-11-05"};

// A request the server refuses, as the JSON-RPC error it becomes.
struct RpcError {
  int code;
  std::string message;
};

json error_reply(const json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

// The id of a well-formed request (string, number or null), or null.
json id_of(const json& message) {
  if (!message.is_object() || !message.contains("id")) return nullptr;
  const json& id = message["id"];
  return id.is_string() || id.is_number() ? id : json(nullptr);
}

// JSON as one line; bytes that are not UTF-8 (a frame name from a binary) become U+FFFD instead of failing.
std::string text_of(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void check_request(const json& message) {
  if (!message.is_object()) throw RpcError{kInvalidRequest, "a request is a JSON object"};
  if (message.value("jsonrpc", json()) != "2.0") throw RpcError{kInvalidRequest, "\"jsonrpc\" must be \"2.0\""};
  if (!message.contains("method") || !message["method"].is_string())
    throw RpcError{kInvalidRequest, "\"method\" must be a string"};
  if (message.contains("id") && !message["id"].is_string() && !message["id"].is_number_integer())
    throw RpcError{kInvalidRequest, "\"id\" must be a string or an integer"};
  if (message.contains("params") && !message["params"].is_object())
    throw RpcError{kInvalidRequest, "\"params\" must be an object"};
}

}  // namespace

Server::Server(std::string name, std::string version, std::vector<Tool> tools)
    : name_(std::move(name)), version_(std::move(version)), tools_(std::move(tools)) {}

json Server::initialize(const json& params) const {
  const json asked = params.value("protocolVersion", json());
  bool known = asked.is_string() && std::find(kVersions.begin(), kVersions.end(), asked.get<std::string>()) != kVersions.end();
  return {{"protocolVersion", known ? asked : json(kVersions.front())},
          {"capabilities", {{"tools", {{"listChanged", false}}}}},
          {"serverInfo", {{"name", name_}, {"version", version_}}}};
}

json Server::list_tools() const {
  json tools = json::array();
  for (const Tool& t : tools_)
    tools.push_back({{"name", t.name}, {"description", t.description}, {"inputSchema", t.input_schema}});
  return {{"tools", std::move(tools)}};
}

json Server::call_tool(const json& params) const {
  if (!params.contains("name") || !params["name"].is_string())
    throw RpcError{kInvalidParams, "tools/call needs \"name\", the tool's name"};
  const std::string name = params["name"];
  auto tool = std::find_if(tools_.begin(), tools_.end(), [&](const Tool& t) { return t.name == name; });
  if (tool == tools_.end()) throw RpcError{kInvalidParams, "unknown tool '" + name + "' (tools/list names them)"};
  const json arguments = params.value("arguments", json::object());
  if (std::string why = check_arguments(tool->input_schema, arguments); !why.empty())
    throw RpcError{kInvalidParams, name + ": " + why};
  json result;
  try {
    result = tool->call(arguments);
  } catch (const InvalidParams& e) {
    throw RpcError{kInvalidParams, name + ": " + e.what()};
  }
  return {{"content", json::array({{{"type", "text"}, {"text", text_of(result)}}})},
          {"structuredContent", result},
          {"isError", false}};
}

json Server::dispatch(const std::string& method, const json& params) const {
  if (method == "initialize") return initialize(params);
  if (method == "ping") return json::object();
  if (method == "tools/list") return list_tools();
  if (method == "tools/call") return call_tool(params);
  throw RpcError{kMethodNotFound, "unknown method '" + method + "'"};
}

std::optional<json> Server::reply(std::string_view text) {
  json message = json::parse(text, nullptr, false);
  if (message.is_discarded()) return error_reply(nullptr, kParseError, "not JSON");
  json id = id_of(message);
  try {
    check_request(message);
    const json params = message.value("params", json::object());
    bool notification = !message.contains("id");
    if (notification) return std::nullopt;  // notifications/initialized, cancellations: nothing to answer
    return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", dispatch(message["method"], params)}};
  } catch (const RpcError& e) {
    return error_reply(id, e.code, e.message);
  } catch (const std::bad_alloc&) {
    return error_reply(id, kInternalError, "out of host memory");
  } catch (const std::exception& e) {
    return error_reply(id, kInternalError, e.what());
  }
}

void Server::serve(std::istream& in, std::ostream& out) {
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (std::optional<json> r = reply(line)) out << text_of(*r) << '\n' << std::flush;
  }
}

}  // namespace memrec::mcp
