// Who holds the memory at an instant: the live blocks as a tree by call stack (top-down or bottom-up) or by
// op / module / phase scopes, and where they sit in the reserved segments. Sums are exact: every live block lands
// in exactly one leaf, and each node's bytes are the sum of its children's plus what ends at the node.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "memrec/replay.h"
#include "memrec/snapshot.h"

namespace memrec {

enum class Grouping : uint8_t { stack_top_down, stack_bottom_up, op, module, phase };
inline constexpr int kGroupingCount = 5;
std::string_view to_string(Grouping g);

// Key of a path element: a frame id for the stack groupings, the string id of a scope name otherwise.
// kMissing stands for "no stack" / "no scope of that kind".
inline constexpr uint32_t kMissing = std::numeric_limits<uint32_t>::max();
// Grouping::op files a block no op scope encloses under the ops its C++ frames enter (stack_ops): the key of such an
// op is the string id of its name where the snapshot has that string (as its op scopes do), else kFrameOp | the
// lowest string id of a function that enters it.
inline constexpr uint32_t kFrameOp = 1u << 31;

// Which frames the stack groupings keep: every frame, or user_frames() (the interpreter, runpy, libc, the autograd
// engine and the dispatcher folded away).
enum class Frames : uint8_t { all, user };

// How blocks are filed under a grouping: the keys of each, outermost first ({kMissing} when it has none), memoized
// per stack, scope or owner module so a tree over many blocks works each path out once. Grouping::op files a block
// no op scope encloses under the ops its C++ frames enter (kFrameOp). Grouping::module files a
// block the replay gives an owner with a module (a parameter, its gradient, its optimizer state) under that
// module, nested as the module's own scopes are, wherever the block was allocated.
class GroupPaths {
 public:
  // Keeps references to both; they must outlive it.
  GroupPaths(const Snapshot& s, const Replay& r, Grouping g, Frames f = Frames::all);
  // The path of allocation `id` of the replay; valid until the next call.
  const std::vector<uint32_t>& of(uint32_t id);
  Grouping grouping() const { return grouping_; }
  Frames frames() const { return frames_; }

 private:
  void scope_chain(uint32_t scope, std::vector<uint32_t>& out) const;
  void index_ops();
  void frame_ops(uint32_t stack, std::vector<uint32_t>& out) const;
  const std::vector<uint32_t>& owner_path(uint32_t module);

  const Snapshot& s_;
  const Replay& r_;
  Grouping grouping_;
  Frames frames_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> by_source_;  // by group_source()
  std::unordered_map<std::string, uint32_t> op_keys_;              // op name -> key, for frame_ops()
  std::unordered_map<uint32_t, std::vector<uint32_t>> by_owner_;   // by owner module string id
  std::unordered_map<uint32_t, uint32_t> module_scope_;            // module string id -> a scope of that name
  std::vector<uint32_t> path_;
};

struct GroupNode {
  uint32_t key = kMissing;
  uint32_t parent = 0;
  uint32_t depth = 0;  // root = 0
  uint64_t bytes = 0;
  uint64_t blocks = 0;
  std::vector<uint32_t> children;  // largest first
};

class Attribution {
 public:
  // Groups the given allocations (ids into r.allocations()), e.g. Replay::live_after(step).
  Attribution(const Snapshot& s, const Replay& r, std::span<const uint32_t> ids, Grouping g, Frames f = Frames::all);

  Grouping grouping() const { return grouping_; }
  Frames frames() const { return frames_; }
  // Node 0 is the root: every block given.
  const std::vector<GroupNode>& nodes() const { return nodes_; }
  const GroupNode& root() const { return nodes_[0]; }
  // For each id given, the node its path ended at.
  const std::vector<uint32_t>& leaves() const { return leaves_; }
  // Keys from the root's child down to `node`.
  std::vector<uint32_t> path(uint32_t node) const;
  std::string label(uint32_t node) const;

 private:
  const Snapshot& s_;
  Grouping grouping_;
  Frames frames_;
  std::vector<GroupNode> nodes_;
  std::vector<uint32_t> leaves_;
};

// "function  file:line" for a frame id, the function shortened (short_function), or the pc in hex when unsymbolized.
std::string frame_label(const Snapshot& s, uint32_t frame);
// Label of one key under a grouping.
std::string key_label(const Snapshot& s, Grouping g, uint32_t key);

// Whether a block falls under a node of a tree grouped as `g` and `f`: its path starts with the node's path.
// GroupPaths' memo makes testing every allocation of a long run about one lookup each.
class GroupMatcher {
 public:
  GroupMatcher(const Snapshot& s, const Replay& r, Grouping g, Frames f, std::vector<uint32_t> prefix);
  bool operator()(uint32_t id);

 private:
  GroupPaths paths_;
  std::vector<uint32_t> prefix_;
};

// One reserved segment at an instant and the live blocks in it, by address.
struct SegmentAt {
  uint64_t addr = 0;
  uint64_t size = 0;  // 0 for the pseudo-segment of blocks outside every known segment
  uint16_t stream = 0;
  bool expandable = false;            // a piece mapped by an expandable segment (segment_map)
  const Segment* recorded = nullptr;  // its entry in segments_start/end when the snapshot lists it there
  uint64_t allocated = 0;
  std::vector<uint32_t> blocks;  // allocation ids
};
// The segments reserved after `step` (kNoEvent: at the start), by address.
std::vector<SegmentAt> segments_at(const Snapshot& s, const Replay& r, uint32_t step);

// The reserved segments at any step, for a view that asks for a new step every frame (scrubbing): the segment map
// is kept every so many segment events (at least 256, at least the map's size, so the copies hold about one
// segment per event), and a step costs one copy, fewer updates than that, and filing its live blocks.
class SegmentHistory {
 public:
  // Keeps references to both; they must outlive it.
  SegmentHistory(const Snapshot& s, const Replay& r);
  // The segments after `step` with the given blocks (those live after it, e.g. from Timeline::live_at) filed in.
  std::vector<SegmentAt> at(uint32_t step, std::span<const uint32_t> live) const;

 private:
  const Replay& r_;
  std::vector<size_t> checkpoint_at_;                // segment events applied before each checkpoint
  std::vector<std::vector<SegmentAt>> checkpoints_;  // the segments then, by address, without blocks
};

// The pool of each given block (ids into Replay::allocations()): that of the segment holding its address when it
// was allocated. "pool (1, 0)" is a private pool (a CUDA graph's, a MemPool's), "default pool" the allocator's
// own; "unknown pool" when no segment the snapshot lists (segments_start/end) holds the block: segments seen only
// in the trace's events, blocks outside every segment, recordings without segments (CPU).
std::vector<std::string> pool_keys(const Snapshot& s, const Replay& r, std::span<const uint32_t> ids);
// A segment's pool as pool_keys() names it: "default pool", "pool (1, 0)".
std::string pool_name(const Segment& seg);

}  // namespace memrec
