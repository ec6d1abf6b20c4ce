// The Model Context Protocol over stdio (JSON-RPC 2.0, one message a line): initialize, ping, tools/list and
// tools/call, over tools the caller gives. Knows nothing of memrec's analyses: `memrec mcp` (cli/cmd_mcp.cpp) hands
// it the tools, each answering with the JSON of a command's --json. Every bad message gets a JSON-RPC error object;
// none ends the server.
#pragma once

#include <functional>
#include <istream>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace memrec::mcp {

// Thrown by a tool for a request it cannot answer (a file that does not load, a time that does not parse): the
// client gets "invalid params" (-32602) with the message. Any other exception is an "internal error" (-32603).
struct InvalidParams : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Tool {
  std::string name, description;
  // A JSON Schema object whose properties are strings (with enum), integers (with minimum, maximum), booleans or
  // arrays of strings (with minItems, maxItems): arguments are checked against it before `call` sees them.
  nlohmann::json input_schema;
  std::function<nlohmann::json(const nlohmann::json& arguments)> call;  // returns a JSON object
};

// The JSON-RPC error codes the server answers with.
enum ErrorCode { kParseError = -32700, kInvalidRequest = -32600, kMethodNotFound = -32601, kInvalidParams = -32602,
                 kInternalError = -32603 };

// Why `arguments` do not fit `schema` ("'top' must be an integer from 1 to 100000, got 0"), or "" when they do.
std::string check_arguments(const nlohmann::json& schema, const nlohmann::json& arguments);

class Server {
 public:
  Server(std::string name, std::string version, std::vector<Tool> tools);

  // The reply to one message, or nothing for a notification (a message without id).
  std::optional<nlohmann::json> reply(std::string_view message);
  // Replies to each line of `in` with one line on `out` until `in` ends.
  void serve(std::istream& in, std::ostream& out);

 private:
  nlohmann::json initialize(const nlohmann::json& params) const;
  nlohmann::json list_tools() const;
  nlohmann::json call_tool(const nlohmann::json& params) const;
  nlohmann::json dispatch(const std::string& method, const nlohmann::json& params) const;

  std::string name_, version_;
  std::vector<Tool> tools_;
};

}  // namespace memrec::mcp
