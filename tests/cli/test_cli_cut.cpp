// Every command on a .memrec cut short (a real CUDA recording, cut after its header, inside chunks and between
// them): it answers for the prefix it holds, exits 0, and says once on stderr that the file was cut short;
// JSON, HTML and Perfetto outputs carry the same note.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/process.h"
#include "memrec/format.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

using test::CommandResult;
using test::read_bytes;
using test::quote;
using test::run_command;
using test::TempDir;

const std::string kFixture = test::data("torch_2layer_all.pickle");


// stdout and stderr apart.
struct Output {
  int exit_code;
  std::string out, err;
};

Output memrec(const TempDir& dir, const std::string& args) {
  std::string err = dir / "stderr";
  CommandResult r = run_command("bash -c " + quote(quote(MEMREC_BINARY) + " " + args + " 2>" + quote(err)));
  return {r.exit_code, r.output, read_bytes(err)};
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Offsets that cut the file: right after its header, at each chunk boundary, and inside each chunk.
std::vector<size_t> cut_offsets(const std::string& bytes) {
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    return v;
  };
  std::vector<size_t> out = {16, 20};
  for (size_t at = 16; at + 12 <= bytes.size(); at += 12 + u32(at + 8)) {
    if (at > 16) out.push_back(at);
    out.push_back(at + 12 + u32(at + 8) / 2);
  }
  return out;
}

TEST(CliCut, EveryCommandSaysTheFileWasCutShort) {
  TempDir dir;
  std::string whole = dir / "whole.memrec", cut = dir / "cut.memrec";
  ASSERT_EQ(memrec(dir, "import " + quote(kFixture) + " -o " + quote(whole)).exit_code, 0);
  std::string bytes = read_bytes(whole);
  const std::vector<std::string> commands = {
      "info " + quote(cut),
      "stats " + quote(cut),
      "diff " + quote(whole) + " " + quote(cut),
      "report " + quote(cut) + " --no-screenshot -o " + quote(dir / "out.html"),
      "export " + quote(cut) + " -o " + quote(dir / "out.pickle"),
      "export " + quote(cut) + " -o " + quote(dir / "out.json"),
  };
  size_t unplaced_cuts = 0;  // cut after the events, before the end state: blocks in segments the file lost
  for (size_t n : cut_offsets(bytes)) {
    std::ofstream(cut, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(n));
    const std::string note = fmt::format("{} was cut short (no footer): {} events read; the rest is lost", cut,
                                         read_file(cut).events.size());
    for (const std::string& c : commands) {
      Output r = memrec(dir, c);
      EXPECT_EQ(r.exit_code, 0) << c << " at " << n << "\n" << r.err;
      EXPECT_EQ(r.err, "memrec: note: " + note + "\n") << c << " at " << n;
      EXPECT_EQ(count(r.out, "cut short"), 0u) << c << " at " << n << ": the note is said once, on stderr";
    }
    // whatif needs module scopes, which this recording lacks: the note comes before that error.
    Output whatif = memrec(dir, "whatif checkpoint " + quote(cut));
    EXPECT_EQ(whatif.err.rfind("memrec: note: " + note + "\nmemrec: error: ", 0), 0u) << whatif.err;
    EXPECT_EQ(count(read_bytes(dir / "out.html"), note), 1u) << n;
    EXPECT_EQ(count(read_bytes(dir / "out.pickle"), note), 1u) << n;
    EXPECT_EQ(nlohmann::json::parse(read_bytes(dir / "out.json"))["metadata"]["memrec_warnings"], nlohmann::json::array({note})) << n;
    Output stats = memrec(dir, "stats --json " + quote(cut));
    nlohmann::json j = nlohmann::json::parse(stats.out);
    EXPECT_EQ(j["warnings"], nlohmann::json::array({note})) << n;
    const nlohmann::json& f = j["fragmentation"];
    uint64_t buckets = 0;
    for (const char* key : {"rounding", "pending_free", "split_free", "other_stream", "cached_free"}) buckets += f[key].get<uint64_t>();
    EXPECT_EQ(buckets, f["reserved"].get<uint64_t>() - f["allocated"].get<uint64_t>()) << n;
    if (f["unplaced"].get<uint64_t>()) EXPECT_EQ(count(read_bytes(dir / "out.html"), "Not counted: "), 1u) << n;
    unplaced_cuts += f["unplaced"].get<uint64_t>() > 0;
    Output diff = memrec(dir, "diff --json " + quote(cut) + " " + quote(whole));
    EXPECT_EQ(nlohmann::json::parse(diff.out)["warnings"], nlohmann::json::array({note})) << n;
  }
  EXPECT_GT(unplaced_cuts, 0u);
  // The last cut's pickle, as Python reads it.
  CommandResult py = run_command("/usr/bin/python3 -c " +
                                 quote("import pickle,sys; d = pickle.load(open(sys.argv[1], \"rb\")); "
                                       "print(d[\"memrec_warnings\"], sum(map(len, d[\"device_traces\"])))") +
                                 " " + quote(dir / "out.pickle"));
  EXPECT_EQ(py.output, fmt::format("['{}'] {}\n", fmt::format("{} was cut short (no footer): {} events read; the rest is lost",
                                                              cut, read_file(cut).events.size()),
                                   read_file(cut).events.size()));
  Output full = memrec(dir, "stats --json " + quote(whole));
  EXPECT_EQ(full.err, "");
  EXPECT_TRUE(nlohmann::json::parse(full.out)["warnings"].empty());
}

// A writer that never closed its file (a killed run), with a layer to checkpoint.
TEST(CliCut, WhatifJsonCarriesTheNote) {
  TempDir dir;
  std::string path = dir / "killed.memrec";
  Snapshot s;
  auto scope = [&](ScopeKind kind, const char* name, int64_t start, int64_t end, uint32_t parent) {
    s.scopes.push_back(Scope{start, end, s.strings.intern(name), parent, kind, 0});
    return static_cast<uint32_t>(s.scopes.size() - 1);
  };
  uint32_t layer = scope(ScopeKind::module, "layers.0", 100, 200, scope(ScopeKind::phase, "forward", 100, 200, 0));
  scope(ScopeKind::phase, "backward", 200, 300, 0);
  s.events.push_back(Event{.time_ns = 110, .addr = 0x10, .size = 4096, .scope = layer, .action = Action::alloc});
  s.events.push_back(Event{.time_ns = 250, .addr = 0x10, .size = 4096, .action = Action::free_requested});
  Writer(path).flush(s);
  const std::string note = path + " was cut short (no footer): 2 events read; the rest is lost";
  Output r = memrec(dir, "whatif checkpoint --json " + quote(path));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "memrec: note: " + note + "\n");
  EXPECT_EQ(nlohmann::json::parse(r.out)["warnings"], nlohmann::json::array({note}));
}

TEST(CliCut, ImportOfAMemrecFileSaysSo) {
  TempDir dir;
  std::string run = dir / "run.memrec";
  ASSERT_EQ(memrec(dir, "import " + quote(kFixture) + " -o " + quote(run)).exit_code, 0);
  Output r = memrec(dir, "import " + quote(run) + " -o " + quote(dir / "again.memrec"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "memrec: error: " + run + " is a .memrec file already: import reads PyTorch snapshot pickles; "
                   "every other command reads .memrec files as they are\n");
}

}  // namespace
}  // namespace memrec
