// memrec mcp driven as an agent's client drives it: one process, JSON-RPC lines over its stdin and stdout. Each tool
// answers with exactly the JSON of its command's --json; every bad request gets a JSON-RPC error and the server goes
// on answering.
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/process.h"
#include "common/rank_runs.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::quote;

// `memrec mcp` with a pipe to its stdin and one from its stdout; its stderr (notes) goes to /dev/null.
class McpSession {
 public:
  McpSession() {
    int to[2], from[2];
    if (pipe(to) != 0 || pipe(from) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_adddup2(&files, to[0], 0);
    posix_spawn_file_actions_adddup2(&files, from[1], 1);
    posix_spawn_file_actions_addopen(&files, 2, "/dev/null", O_WRONLY, 0);
    for (int fd : {to[0], to[1], from[0], from[1]}) posix_spawn_file_actions_addclose(&files, fd);
    char* argv[] = {const_cast<char*>(MEMREC_BINARY), const_cast<char*>("mcp"), nullptr};
    int rc = posix_spawn(&pid_, MEMREC_BINARY, &files, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&files);
    close(to[0]), close(from[1]);
    in_ = to[1], out_ = from[0];
    if (rc != 0) throw std::runtime_error("cannot start memrec mcp");
  }
  ~McpSession() {
    if (in_ >= 0) close(in_);
    close(out_);
    if (pid_ > 0) kill(pid_, SIGKILL), waitpid(pid_, nullptr, 0);
  }

  void send(const std::string& line) {
    std::string data = line + "\n";
    ASSERT_EQ(write(in_, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  }
  // The next line the server writes, parsed; throws after 60 s without one.
  json receive() {
    for (size_t end; (end = buffer_.find('\n')) == std::string::npos;) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 60'000) <= 0) throw std::runtime_error("no reply from memrec mcp in 60 s");
      char chunk[65536];
      ssize_t n = read(out_, chunk, sizeof chunk);
      if (n <= 0) throw std::runtime_error("memrec mcp closed its stdout");
      buffer_.append(chunk, static_cast<size_t>(n));
    }
    size_t end = buffer_.find('\n');
    json reply = json::parse(buffer_.substr(0, end));
    buffer_.erase(0, end + 1);
    return reply;
  }
  json request(const std::string& method, const json& params) {
    send(json{{"jsonrpc", "2.0"}, {"id", ++id_}, {"method", method}, {"params", params}}.dump());
    json reply = receive();
    EXPECT_EQ(reply["id"], id_) << reply;
    return reply;
  }
  // The structured result of a tool, checked to be what its text content says too.
  json call(const std::string& tool, const json& arguments) {
    json reply = request("tools/call", {{"name", tool}, {"arguments", arguments}});
    EXPECT_TRUE(reply.contains("result")) << reply;
    const json& result = reply["result"];
    EXPECT_EQ(result["isError"], false);
    EXPECT_EQ(json::parse(result["content"][0]["text"].get<std::string>()), result["structuredContent"]);
    return result["structuredContent"];
  }
  // The exit code once stdin is closed.
  int finish() {
    close(in_), in_ = -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  int id_ = 0;
  std::string buffer_;
};

// The command's --json output, without its notes (stderr, which run_command folds into the output).
json command_json(const std::string& args) {
  auto r = test::memrec(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  std::istringstream lines(r.output);
  std::string out;
  for (std::string line; std::getline(lines, line);)
    if (!line.starts_with("memrec: note: ")) out += line + "\n";
  return json::parse(out);
}

const std::string kOwners = test::data("adam_mlp_cpu.memrec");  // named parameters, gradients, optimizer state
const std::string kLayers = test::data("transformer_2layer_cpu.memrec");
const std::string kPickle = test::data("torch_2layer_all.pickle");
const std::string kPython = test::data("torch_2layer_python.pickle");
const std::string kOom = test::data("alloc_oom.memrec");

TEST(CliMcp, HandshakeListsTheTools) {
  McpSession s;
  json init = s.request("initialize", {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()},
                                       {"clientInfo", {{"name", "test"}, {"version", "1"}}}});
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(init["result"]["serverInfo"]["name"], "memrec");
  EXPECT_TRUE(init["result"]["capabilities"].contains("tools"));
  s.send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");  // a notification: no reply
  json list = s.request("tools/list", json::object());
  std::vector<std::string> names;
  for (const json& t : list["result"]["tools"]) {
    names.push_back(t["name"]);
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t;
    EXPECT_FALSE(t["description"].get<std::string>().empty());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"info", "stats", "diff", "ranks", "whatif_checkpoint", "whatif_allocator",
                                      "whatif_scale", "growth", "advise"}));
  EXPECT_EQ(s.finish(), 0);
}

TEST(CliMcp, EachToolAnswersWhatItsCommandPrints) {
  McpSession s;
  EXPECT_EQ(s.call("info", {{"file", kOwners}}), command_json("info " + quote(kOwners)));
  EXPECT_EQ(s.call("stats", {{"file", kPickle}}), command_json("stats " + quote(kPickle)));
  EXPECT_EQ(s.call("stats", {{"file", kOwners}, {"by", "owner"}, {"top", 5}}),
            command_json("stats " + quote(kOwners) + " --by owner --top 5"));
  EXPECT_EQ(s.call("stats", {{"file", kLayers}, {"at", "1s"}, {"by", "layer"}, {"device", 0}}),
            command_json("stats " + quote(kLayers) + " --at 1s --by layer --device 0"));
  EXPECT_EQ(s.call("stats", {{"file", kPickle}, {"full_stack", true}, {"kernels", true}}),
            command_json("stats " + quote(kPickle) + " --full-stack --kernels"));
  EXPECT_EQ(s.call("diff", {{"a", kPython}, {"b", kPickle}, {"by", "module"}}),
            command_json("diff " + quote(kPython) + " " + quote(kPickle) + " --by module"));
  EXPECT_EQ(s.call("stats", {{"file", kPython}, {"range", "15ms..25ms"}}),
            command_json("stats " + quote(kPython) + " --range 15ms..25ms"));
  EXPECT_EQ(s.call("diff", {{"a", kPython}, {"b", kPickle}, {"range", "1ms..5ms"}}),
            command_json("diff " + quote(kPython) + " " + quote(kPickle) + " --range 1ms..5ms"));
  EXPECT_EQ(s.call("whatif_checkpoint", {{"file", kLayers}, {"layers", "0"}}),
            command_json("whatif checkpoint " + quote(kLayers) + " --layers 0"));
  EXPECT_EQ(s.call("whatif_allocator", {{"file", kOom}, {"alloc_conf", "expandable_segments:True"}}),
            command_json("whatif allocator " + quote(kOom) + " --alloc-conf expandable_segments:True"));
  const std::string b2 = test::data("scale_batch2.memrec"), b4 = test::data("scale_batch4.memrec");
  EXPECT_EQ(s.call("whatif_scale", {{"files", {b2, b4}}, {"sizes", "2,4"}, {"predict", "8,16"}}),
            command_json("whatif scale " + quote(b2) + " " + quote(b4) + " --sizes 2,4 --predict 8,16"));
  EXPECT_EQ(s.call("growth", {{"file", kLayers}, {"device_memory", "1GiB"}}),
            command_json("growth " + quote(kLayers) + " --device-memory 1GiB"));
  EXPECT_EQ(s.call("advise", {{"file", b4}, {"scale_with", {b2}}, {"sizes", "4,2"}, {"device_memory", "1GiB"}}),
            command_json("advise " + quote(b4) + " --scale-with " + quote(b2) + " --sizes 4,2 --device-memory 1GiB"));
  test::RankFiles ranks;
  ranks.add("r.rank0.memrec", test::rank_run(0, 1'000'000, "h"));
  ranks.add("r.rank1.memrec", test::rank_run(3 * test::kMiB, 1'000'020, "h"));
  EXPECT_EQ(s.call("ranks", {{"files", ranks.paths}, {"top", 3}}), command_json("stats --by rank --top 3 " + ranks.quoted()));
  EXPECT_EQ(s.finish(), 0);
}

// The error's code, after checking the reply is a JSON-RPC error object for request `id`.
int error_code(const json& reply, const json& id) {
  EXPECT_EQ(reply["jsonrpc"], "2.0") << reply;
  EXPECT_EQ(reply["id"], id) << reply;
  EXPECT_FALSE(reply.contains("result")) << reply;
  EXPECT_TRUE(reply["error"]["message"].is_string()) << reply;
  return reply["error"]["code"].is_number_integer() ? reply["error"]["code"].get<int>() : 0;
}

TEST(CliMcp, BadRequestsGetErrorsAndTheServerGoesOn) {
  McpSession s;
  s.send("{not json");
  EXPECT_EQ(error_code(s.receive(), nullptr), -32700);
  s.send(R"([1, 2])");
  EXPECT_EQ(error_code(s.receive(), nullptr), -32600);
  s.send(R"({"jsonrpc":"1.0","id":7,"method":"ping"})");
  EXPECT_EQ(error_code(s.receive(), 7), -32600);
  EXPECT_EQ(error_code(s.request("resources/list", json::object()), 1), -32601);
  EXPECT_EQ(error_code(s.request("tools/call", {{"name", "heap"}}), 2), -32602);
  EXPECT_EQ(error_code(s.request("tools/call", {{"arguments", json::object()}}), 3), -32602);
  auto bad = [&](const json& arguments, const std::string& says) {
    json reply = s.request("tools/call", {{"name", "stats"}, {"arguments", arguments}});
    EXPECT_EQ(reply["error"]["code"], -32602) << reply;
    EXPECT_NE(reply["error"]["message"].get<std::string>().find(says), std::string::npos) << reply;
  };
  bad(json::object(), "missing argument 'file'");
  bad({{"file", kPickle}, {"top", 0}}, "'top' must be an integer from 1 to 100000");
  bad({{"file", kPickle}, {"by", "colour"}}, "'by' must be one of");
  bad({{"file", kPickle}, {"at", "yesterday"}}, "--at");
  bad({{"file", kPickle}, {"colour", "red"}}, "unknown argument 'colour'");
  bad({{"file", 42}}, "'file' must be a string");
  bad({{"file", "/no/such/run.memrec"}}, "/no/such/run.memrec");
  bad({{"file", test::data("")}}, test::data(""));  // a folder
  bad({{"file", kPickle}, {"device", 9}}, "device 9");
  EXPECT_EQ(s.request("ping", json::object())["result"], json::object());
  EXPECT_EQ(s.call("stats", {{"file", kPickle}})["peak_allocated"], command_json("stats " + quote(kPickle))["peak_allocated"]);
  EXPECT_EQ(s.finish(), 0);
}

}  // namespace
}  // namespace memrec
