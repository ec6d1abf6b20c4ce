// What live memory is: categories from phases and lifetimes, grouping of the live blocks at an instant,
// fragmentation of the reserved segments, and OOM explanations. Shared by `memrec stats`, `diff` and the viewer.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memrec/replay.h"
#include "memrec/snapshot.h"

namespace memrec {

// recompute: a forward run again inside backward (activation checkpointing), a phase of its own.
enum class PhaseKind : uint8_t { none, forward, backward, optimizer, other, recompute };

// The phases of one device, found by time: the recorded ones (ScopeKind::phase scopes, plus PyTorch's
// "Optimizer.step#..." annotations), or, where the device has no phase scopes (PyTorch's snapshots), phases
// inferred from the allocations' frames (phase_of_stack) and those annotations: each run of consecutive
// allocations of one phase is a phase from its first allocation to the next allocation outside the run; an
// allocation without frames (autograd's threads in a stacks="python" snapshot) continues the run before it.
class PhaseIndex {
 public:
  PhaseIndex(const Snapshot& s, uint8_t device);
  uint32_t at(int64_t t) const;         // id of the innermost phase holding t (1-based), or 0
  int64_t next_start(int64_t t) const;  // start of the first phase after t; INT64_MAX if none
  PhaseKind kind(uint32_t phase) const;
  int64_t start(uint32_t phase) const;
  int64_t end(uint32_t phase) const;    // INT64_MAX while open
  int64_t last_end() const { return last_end_; }  // when the last phase ended; INT64_MIN without phases
  bool inferred() const { return inferred_; }
  size_t size() const { return phases_.size(); }

 private:
  struct Interval {
    int64_t start = 0, end = INT64_MAX;
    PhaseKind kind = PhaseKind::none;
  };
  std::vector<Interval> phases_;  // sorted by start
  std::vector<uint32_t> enclosing_;  // per phase: the nearest earlier one holding its start (1-based), or 0
  int64_t last_end_ = INT64_MIN;
  bool inferred_ = false;
  void infer(const Snapshot& s, uint8_t device);
};

// The phase a stack's frames show, by its outermost marker frame: autograd's engine (torch::autograd::Engine,
// Python backward / _engine_run_backward in torch/autograd/, Tensor.backward in torch/_tensor.py) -> backward;
// torch/optim/ or torch::optim:: -> optimizer; Module._call_impl in torch/nn/modules/module.py -> forward.
PhaseKind phase_of_stack(const Snapshot& s, uint32_t stack);
std::string_view to_string(PhaseKind k);

// Like torch.profiler's memory categories, derived from the recorded phases and lifetimes, not from names.
enum class Category : uint8_t { parameter, input, activation, gradient, optimizer_state, temporary, unknown };
inline constexpr int kCategoryCount = 7;
std::string_view to_string(Category c);

// One category per Replay::allocations() entry:
//   allocated in forward and alive past it      -> activation
//   allocated in backward and alive past it     -> gradient
//   allocated in the optimizer and alive past it -> optimizer state
//   allocated in a recompute and alive past it  -> activation
//   allocated and freed inside one phase        -> temporary
//   allocated outside phases: freed before the next phase -> temporary; alive past the last phase (or never
//   freed) -> parameter; else input
//   live before recording began                 -> unknown
// Phases are ScopeKind::phase scopes named forward/backward/optimizer (PyTorch's "Optimizer.step#..."
// annotations count as optimizer phases). With inferred phases (PhaseIndex::inferred) a block allocated outside
// them is a parameter when it outlives the last phase, else unknown: nothing says what it was.
// A block with an owner (Replay::owner_of) takes the owner's category instead: parameter and buffer ->
// parameter, gradient -> gradient, optimizer state -> optimizer_state.
std::vector<Category> categorize(const Snapshot& s, const Replay& r);
Category category_of(OwnerKind k);

// What a block's owner says about it for grouping: the owner's name ("net.0.weight.exp_avg", with " (+N)" when
// N other names share the block), its module and the module's layer. Empty strings for a block without owner.
std::string owner_label(const Snapshot& s, const Replay& r, uint32_t id);

// module and layer: the module scope the block was allocated in, or, for a block with an owner, the owner's
// module. owner: the owner's name ("<none>" for blocks without one).
enum class GroupBy : uint8_t { stack, op, module, phase, category, layer, pool, owner };
inline constexpr size_t kGroupByCount = 8;
std::string_view to_string(GroupBy g);
std::optional<GroupBy> group_by_from_string(std::string_view s);
// Every grouping's name, in GroupBy's order: "stack", "op", "module", ...
std::vector<std::string> group_by_names();

struct Group {
  std::string key;  // comparable across runs: frame names, scope names, category names; no addresses
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::array<uint64_t, kCategoryCount> by_category{};  // bytes split by category
  uint32_t stack = 0;   // GroupBy::stack: the group's first stack (its key is allocation_site of it)
  uint32_t stacks = 0;  // GroupBy::stack: how many distinct stacks the group holds
  uint64_t owned = 0;   // bytes of the group's blocks that have an owner (Replay::owner_of)
  // Those bytes by owner name (a string id of Owner::name), largest first.
  std::vector<std::pair<uint32_t, uint64_t>> owners;
};

// A block's key under `by` as group_allocations() files it ("" when it has none); `c` is its category. Not for
// GroupBy::pool, whose keys come from pool_keys(). GroupBy::op: the innermost op scope around the block, else
// (recorded without op scopes, an imported pickle) the innermost aten op its C++ frames enter (stack_ops).
std::string group_key(const Snapshot& s, const Allocation& a, GroupBy by, Category c);
// What group_key() depends on, for a caller that works each key out once: the stack, the category, the scope, or
// under GroupBy::op the scope when an op scope encloses it, else the stack (as 1 << 32 | stack).
uint64_t group_source(const Snapshot& s, const Allocation& a, GroupBy by, Category c);
// The given allocations (ids into Replay::allocations()), grouped and sorted by bytes, largest first.
std::vector<Group> group_allocations(const Snapshot& s, const Replay& r, std::span<const uint32_t> ids, GroupBy by);
// The same with categorize()'s answer given, for a caller that groups many times (the viewer, at each instant);
// empty when the caller wants no split by category (then `by` is not GroupBy::category and by_category stays 0).
std::vector<Group> group_allocations(const Snapshot& s, const Replay& r, std::span<const uint32_t> ids, GroupBy by,
                                     std::span<const Category> categories);
// Each block's key under `by`, as group_allocations() files it ("<none>" for a block without one): block ids[i]
// has key keys[of[i]]. `categories` is categorize()'s answer. For a table of blocks with a column per grouping.
struct BlockKeys {
  std::vector<std::string> keys;
  std::vector<uint32_t> of;
};
BlockKeys block_keys(const Snapshot& s, const Replay& r, std::span<const uint32_t> ids, GroupBy by,
                     std::span<const Category> categories);
// The live blocks after `step`, grouped and sorted by bytes. Sums exactly to the live bytes.
std::vector<Group> group_live(const Snapshot& s, const Replay& r, uint32_t step, GroupBy by);

// GPU time per kernel name, largest total first.
struct KernelStats {
  std::string name;
  KernelKind kind = KernelKind::kernel;
  uint64_t count = 0;
  int64_t total_ns = 0;
  int64_t max_ns = 0;
  int64_t avg_ns() const { return total_ns / static_cast<int64_t>(count); }  // count is never 0
};
std::vector<KernelStats> kernel_stats(const Snapshot& s, uint8_t device);

// The innermost scope of `kind` on `device` whose interval holds t, or 0.
uint32_t scope_at(const Snapshot& s, ScopeKind kind, uint8_t device, int64_t t);

// The name of the enclosing scope of `kind` for a scope id, or "" (walks parents).
std::string enclosing_scope(const Snapshot& s, uint32_t scope, ScopeKind kind);
// Orders names with embedded numbers as people do: "layers.2" < "layers.10".
bool natural_less(std::string_view a, std::string_view b);
// The repeated block a module belongs to: its path up to the first numeric component ("layers.3.self_attn" ->
// "layers.3", "transformer.h.11.attn" -> "transformer.h.11"), else its first two components.
std::string layer_of(const std::string& module);
// The layers of the module scopes on `device`, in natural order: the names `stats --by layer` groups by.
std::vector<std::string> run_layers(const Snapshot& s, uint8_t device);
// The layer of `layers` that `given` names: its name ("layers.3", or "3" in an nn.Sequential), else a number naming
// the one layer whose last component it is ("3" for "layers.3"). Throws Error when none does, or several.
std::string find_layer(const std::vector<std::string>& layers, const std::string& given);

// Whether the recording says the device is the CPU (metadata device.N.type), whose allocator keeps no cache.
bool is_cpu_device(const Snapshot& s, uint8_t device);

// Reserved bytes minus allocated bytes, split into the causes the caching allocator's rules explain.
// Each free byte of every segment lands in exactly one field, so the fields sum to reserved - allocated.
struct Fragmentation {
  uint64_t reserved = 0;
  uint64_t allocated = 0;     // allocated bytes in the known segments
  uint64_t unplaced = 0;      // allocated bytes outside every known segment (a file cut before its end state)
  bool cpu = false;           // the device is the CPU (metadata device.N.type), whose allocator keeps no cache
  uint64_t rounding = 0;      // live blocks rounded up to the allocator's 512-byte granularity (estimated)
  uint64_t pending_free = 0;  // freed by the program but held until other streams finish (record_stream)
  uint64_t split_free = 0;    // free pieces of segments that also hold live blocks, on the busiest stream
  uint64_t other_stream = 0;  // free pieces of partly used segments that belong to other streams
  uint64_t cached_free = 0;   // whole segments with nothing live: cached, returnable by empty_cache()
  uint64_t largest_free = 0;  // largest contiguous free range in any segment
  uint64_t segments = 0;
};
Fragmentation fragmentation_after(const Snapshot& s, const Replay& r, uint32_t step);
// Why there are no segments to split (f.segments == 0), from the device's type, not from the missing state.
std::string_view why_no_segments(const Fragmentation& f);

struct OomReport {
  uint32_t step = kNoEvent;
  int64_t time_ns = 0;
  uint64_t requested = 0;
  uint64_t device_free = 0;  // what the driver said was free on the device
  Totals totals;
  Fragmentation fragmentation;
  bool caused_by_fragmentation = false;  // enough cached bytes in total, but no free range large enough
  std::vector<Group> top_sites;          // live memory at the OOM by stack
};
std::vector<OomReport> explain_ooms(const Snapshot& s, const Replay& r);

}  // namespace memrec
