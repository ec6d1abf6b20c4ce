// Scopes that do not nest with ops: a Python hook run inside an autograd op opens a module scope that outlives
// the op (and closes inside a later one). Each end closes its own entry, whatever lies above it, and a user
// scope's parent is the enclosing user scope, not the op that happened to run its hook.
#include <gtest/gtest.h>

#include <ATen/record_function.h>
#include <c10/core/Allocator.h>

#include <map>
#include <string>

#include "memrec/analysis.h"
#include "memrec/recorder.h"

namespace memrec {
namespace {

// A block of `bytes` from libtorch's CPU allocator (the recorder's wrapper), freed at once.
void allocate(size_t bytes) { (void)c10::GetAllocator(c10::DeviceType::CPU)->allocate(bytes); }

// The names of the scopes enclosing each allocation of a given size, innermost first, joined with " < ".
std::map<uint64_t, std::string> chains(const Snapshot& s) {
  std::map<uint64_t, std::string> out;
  for (const Event& e : s.events) {
    if (e.action != Action::alloc) continue;
    std::string chain;
    for (uint32_t sc = e.scope; sc != 0; sc = s.scopes[sc].parent)
      chain += (chain.empty() ? "" : " < ") + s.strings[s.scopes[sc].name];
    out[e.size] = chain;
  }
  return out;
}

TEST(InterleavedScopes, AUserScopeOpenedInsideAnOpOutlivesIt) {
  RecorderOptions options;
  options.stacks = false;
  options.cuda = false;  // the CPU allocator's blocks, also where a GPU is
  Recorder rec(options);
  rec.start();
  {
    at::RecordFunction op_a(at::RecordScope::FUNCTION);
    op_a.before("op_a");
    allocate(1001);
    ASSERT_TRUE(open_scope("h.0", ScopeKind::module));  // a backward hook inside op_a
  }                                                      // op_a ends; h.0 stays open
  allocate(1002);
  {
    at::RecordFunction op_b(at::RecordScope::FUNCTION);
    op_b.before("op_b");
    allocate(1003);
  }
  {
    at::RecordFunction op_c(at::RecordScope::FUNCTION);
    op_c.before("op_c");
    close_scope();  // h.0 closes inside op_c (the hook on an input's gradient), which goes on
    allocate(1004);
  }
  allocate(1005);
  rec.stop();

  auto c = chains(rec.snapshot());
  EXPECT_EQ(c.at(1001), "op_a");
  EXPECT_EQ(c.at(1002), "h.0");
  EXPECT_EQ(c.at(1003), "op_b < h.0");
  EXPECT_EQ(c.at(1004), "op_c");
  EXPECT_EQ(c.at(1005), "");
  for (uint32_t id = 1; id < rec.snapshot().scopes.size(); ++id)
    EXPECT_GE(rec.snapshot().scopes[id].end_ns, rec.snapshot().scopes[id].start_ns) << "scope " << id << " left open";
}

}  // namespace
}  // namespace memrec
