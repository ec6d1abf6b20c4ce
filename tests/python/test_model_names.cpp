// The model's own names on real programs recorded with `memrec record` (Debian's torch 1.13 on the CPU): a model in
// DistributedDataParallel (gloo, one rank) with checkpoint-wrapped blocks gets the layer and owner names of the same
// model unwrapped, the DDP wrapper is no layer (its gradient bucket is a "ddp bucket"), and a user's submodule called
// `module` keeps its name; the blocks, one class called in a loop, hold the same activation bytes each; `memrec diff`
// lines the two runs' layers up.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/process.h"
#include "memrec/analysis.h"
#include "memrec/load.h"

namespace memrec {
namespace {

using test::run_command;
using test::TempDir;

const std::string kPython = MEMREC_TEST_PYTHON;
constexpr uint64_t kMarkBytes = 12345 * 64;
const std::string kBucket = "ddp bucket";

std::string record(const TempDir& dir, const std::string& mode) {
  std::string file = dir / (mode + ".memrec");
  auto r = run_command("RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=0 " + test::quote(MEMREC_BINARY) +
                       " record -o " + file + " -- " + kPython + " " +
                       test::source("tests/python/programs/wrapped_blocks.py") + " " + mode);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return file;
}

std::set<std::string> owner_names(const Snapshot& s) {
  std::set<std::string> names;
  for (const Owner& o : s.owners) names.insert(s.strings[o.name]);
  return names;
}

// What is live, grouped `by`, when the marker block is allocated (the end of the last forward).
std::map<std::string, Group> live_at_mark(const Snapshot& s, GroupBy by) {
  Replay r(s, 0);
  uint32_t id = 0;
  while (id < r.allocations().size() && r.size_of(id) != kMarkBytes) ++id;
  EXPECT_LT(id, r.allocations().size()) << "no marker block";
  std::map<std::string, Group> out;
  if (id == r.allocations().size()) return out;
  for (Group& g : group_live(s, r, r.alloc_steps()[id], by)) out[g.key] = std::move(g);
  return out;
}

// Activation bytes per layer at the marker.
std::map<std::string, uint64_t> activations_at_mark(const Snapshot& s) {
  std::map<std::string, uint64_t> out;
  for (const auto& [layer, g] : live_at_mark(s, GroupBy::layer))
    out[layer] = g.by_category[static_cast<size_t>(Category::activation)];
  return out;
}

class ModelNames : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    plain_ = record(*dir_, "plain");
    wrapped_ = record(*dir_, "wrapped");
  }
  static void TearDownTestSuite() { delete dir_; }
  static inline TempDir* dir_ = nullptr;
  static inline std::string plain_, wrapped_;
};

TEST_F(ModelNames, WrappedModelHasTheLayersAndOwnersOfThePlainOne) {
  Snapshot plain = load_snapshot(plain_), wrapped = load_snapshot(wrapped_);
  std::vector<std::string> layers = run_layers(wrapped, 0);
  EXPECT_EQ(layers, (std::vector<std::string>{"Net", "blocks.0", "blocks.1", "blocks.2", "blocks.3", "head"}));
  EXPECT_EQ(layers, run_layers(plain, 0));
  std::set<std::string> owners = owner_names(wrapped);
  for (const char* name : {"blocks.0.fc1.weight", "blocks.0.fc1.weight.grad", "blocks.0.fc1.weight.exp_avg",
                           "blocks.3.module.bias.exp_avg_sq", "head.weight"})
    EXPECT_TRUE(owners.count(name)) << name;
  EXPECT_EQ(owners.erase(kBucket), 1u);  // DDP's own blocks: the only owner the plain run lacks
  EXPECT_EQ(owners, owner_names(plain));
  for (const Owner& o : wrapped.owners)
    if (o.module && wrapped.strings[o.name] != kBucket)
      EXPECT_TRUE(wrapped.strings[o.name].starts_with(wrapped.strings[o.module] + ".")) << wrapped.strings[o.name];
}

// DDP's gradient bucket (one here: the model is smaller than a bucket) holds a copy of every gradient: at the end
// of the last forward it is the "ddp bucket" row of `stats --by layer` and `--by owner`, with the parameters'
// bytes, as gradient; the DDP wrapper's own module holds none of it.
TEST_F(ModelNames, DdpsBucketIsNamedForWhatItIs) {
  Snapshot wrapped = load_snapshot(wrapped_);
  uint64_t parameters = 0;
  for (const Owner& o : wrapped.owners)
    if (o.kind == OwnerKind::parameter) parameters += o.size;
  ASSERT_GT(parameters, 0u);
  for (const char* by : {"layer", "owner"}) {
    std::map<std::string, Group> groups = live_at_mark(wrapped, *group_by_from_string(by));
    ASSERT_TRUE(groups.count(kBucket)) << by;
    EXPECT_EQ(groups[kBucket].bytes, parameters) << by;
    EXPECT_EQ(groups[kBucket].by_category[static_cast<size_t>(Category::gradient)], parameters) << by;
    EXPECT_LT(groups["Net"].bytes, parameters) << by;  // the loss only, not the bucket
  }
}

TEST_F(ModelNames, BlocksCalledInALoopHoldTheSameActivations) {
  std::map<std::string, uint64_t> layers = activations_at_mark(load_snapshot(plain_));
  uint64_t total = 0;
  for (int i = 0; i < 4; ++i) total += layers["blocks." + std::to_string(i)];
  ASSERT_GT(total, 0u);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(double(layers["blocks." + std::to_string(i)]), total / 4.0, total / 40.0) << i;
}

TEST_F(ModelNames, DiffLinesTheLayersUp) {
  auto r = test::memrec("diff " + plain_ + " " + wrapped_ + " --by layer --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto rows = nlohmann::json::parse(r.output.substr(r.output.find('{'))).at("rows");
  std::set<std::string> both;
  for (const auto& row : rows) {
    std::string key = row.at("key");
    EXPECT_EQ(key.find("module."), std::string::npos) << key;
    EXPECT_NE(key, "DistributedDataParallel");
    if (row.at("a_bytes").get<uint64_t>() > 0 && row.at("b_bytes").get<uint64_t>() > 0) both.insert(key);
  }
  for (const char* layer : {"blocks.0", "blocks.1", "blocks.2", "blocks.3", "head"}) EXPECT_TRUE(both.count(layer)) << layer;
}

}  // namespace
}  // namespace memrec
