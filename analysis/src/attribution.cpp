#include "memrec/attribution.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "memrec/analysis.h"
#include "memrec/frames.h"
#include "memrec/sites.h"

namespace memrec {
namespace {

bool is_stack_grouping(Grouping g) { return g == Grouping::stack_top_down || g == Grouping::stack_bottom_up; }

ScopeKind scope_kind(Grouping g) {
  switch (g) {
    case Grouping::op: return ScopeKind::op;
    case Grouping::module: return ScopeKind::module;
    default: return ScopeKind::phase;
  }
}

}  // namespace

std::string_view to_string(Grouping g) {
  static constexpr std::array<std::string_view, kGroupingCount> names = {"stack (top-down)", "stack (bottom-up)",
                                                                         "op", "module", "phase"};
  return names.at(static_cast<size_t>(g));
}

GroupPaths::GroupPaths(const Snapshot& s, const Replay& r, Grouping g, Frames f)
    : s_(s), r_(r), grouping_(g), frames_(f) {
  if (g == Grouping::op) index_ops();
}

// The names of the scopes of the grouping's kind from the outermost to `scope`. Parents have lower ids; the bound
// stops a malformed cycle.
void GroupPaths::scope_chain(uint32_t scope, std::vector<uint32_t>& out) const {
  out.clear();
  ScopeKind kind = scope_kind(grouping_);
  for (uint32_t sc = scope, hops = 0; sc != 0 && sc < s_.scopes.size() && hops < s_.scopes.size();
       sc = s_.scopes[sc].parent, ++hops)
    if (s_.scopes[sc].kind == kind) out.push_back(s_.scopes[sc].name);
  std::reverse(out.begin(), out.end());
}

// Every op the snapshot's strings name, as a scope's name or by an entry point, with its key: the whole table, so
// that a key does not depend on which blocks were filed first.
void GroupPaths::index_ops() {
  const std::vector<std::string>& strings = s_.strings.all();
  for (uint32_t id = 1; id < strings.size(); ++id)
    if (strings[id].starts_with("aten::")) op_keys_.try_emplace(strings[id], id);
  for (uint32_t id = 1; id < strings.size(); ++id)
    if (std::string op = frame_op(strings[id]); !op.empty()) op_keys_.try_emplace(std::move(op), kFrameOp | id);
}

// The keys of the ops the stack's C++ frames enter, outermost first.
void GroupPaths::frame_ops(uint32_t stack, std::vector<uint32_t>& out) const {
  out.clear();
  for (const std::string& op : stack_ops(s_, stack)) out.push_back(op_keys_.at(op));
}

// An owner's module nested as the module's first scope of that name is; the name alone where the module never ran.
const std::vector<uint32_t>& GroupPaths::owner_path(uint32_t module) {
  auto [it, fresh] = by_owner_.try_emplace(module);
  if (!fresh) return it->second;
  if (module_scope_.empty())
    for (uint32_t sc = 1; sc < s_.scopes.size(); ++sc)
      if (s_.scopes[sc].kind == ScopeKind::module) module_scope_.try_emplace(s_.scopes[sc].name, sc);
  auto scope = module_scope_.find(module);
  if (scope == module_scope_.end()) it->second = {module};
  else scope_chain(scope->second, it->second);
  return it->second;
}

const std::vector<uint32_t>& GroupPaths::of(uint32_t id) {
  const Allocation a = r_.allocations()[id];
  if (grouping_ == Grouping::module && r_.has_owners()) {
    uint32_t row = r_.owner_of(id);
    if (row != kNoOwner && s_.owners[row].module) return owner_path(s_.owners[row].module);
  }
  bool stacks = is_stack_grouping(grouping_);
  uint64_t source = stacks ? a.stack : a.scope;
  if (grouping_ == Grouping::op) source = group_source(s_, a, GroupBy::op, Category::unknown);
  bool by_frames = !stacks && source >> 32;  // no op scope around it: the ops its C++ frames enter
  auto [it, fresh] = by_source_.try_emplace(source);
  std::vector<uint32_t>& path = it->second;
  if (fresh) {
    if (by_frames) {
      frame_ops(a.stack, path);
    } else if (!stacks) {
      scope_chain(a.scope, path);
    } else {
      if (frames_ == Frames::user) path = user_frames(s_, a.stack);  // innermost first
      else path.assign(s_.stacks[a.stack].begin(), s_.stacks[a.stack].end());
      if (grouping_ == Grouping::stack_top_down) std::reverse(path.begin(), path.end());
    }
    if (path.empty()) path.push_back(kMissing);
  }
  return path;
}

Attribution::Attribution(const Snapshot& s, const Replay& r, std::span<const uint32_t> ids, Grouping g, Frames f)
    : s_(s), grouping_(g), frames_(f), nodes_(1) {
  GroupPaths paths(s, r, g, f);
  std::unordered_map<uint64_t, uint32_t> child_of;  // (parent << 32 | key) -> node
  leaves_.reserve(ids.size());
  for (uint32_t id : ids) {
    uint64_t size = r.allocations()[id].size;
    uint32_t node = 0;
    nodes_[0].bytes += size;
    nodes_[0].blocks += 1;
    for (uint32_t key : paths.of(id)) {
      auto [it, fresh] = child_of.try_emplace(uint64_t{node} << 32 | key, static_cast<uint32_t>(nodes_.size()));
      if (fresh) {
        nodes_.push_back(GroupNode{.key = key, .parent = node, .depth = nodes_[node].depth + 1, .children = {}});
        nodes_[node].children.push_back(it->second);
      }
      node = it->second;
      nodes_[node].bytes += size;
      nodes_[node].blocks += 1;
    }
    leaves_.push_back(node);
  }
  for (GroupNode& n : nodes_)
    std::stable_sort(n.children.begin(), n.children.end(),
                     [&](uint32_t a, uint32_t b) { return nodes_[a].bytes > nodes_[b].bytes; });
}

std::vector<uint32_t> Attribution::path(uint32_t node) const {
  std::vector<uint32_t> keys;
  for (; node != 0; node = nodes_[node].parent) keys.push_back(nodes_[node].key);
  std::reverse(keys.begin(), keys.end());
  return keys;
}

std::string Attribution::label(uint32_t node) const {
  return node == 0 ? "all live memory" : key_label(s_, grouping_, nodes_[node].key);
}

std::string frame_label(const Snapshot& s, uint32_t frame) {
  const Frame& f = s.frames[frame];
  std::string name = f.function ? short_function(s.strings[f.function]) : fmt::format("0x{:x}", f.pc);
  if (!f.file) return name;
  return f.line ? fmt::format("{}  {}:{}", name, s.strings[f.file], f.line)
                : fmt::format("{}  {}", name, s.strings[f.file]);
}

std::string key_label(const Snapshot& s, Grouping g, uint32_t key) {
  if (key == kMissing) return is_stack_grouping(g) ? "<no stack>" : fmt::format("<no {}>", to_string(g));
  if (is_stack_grouping(g)) return frame_label(s, key);
  return g == Grouping::op && (key & kFrameOp) ? frame_op(s.strings[key & ~kFrameOp]) : s.strings[key];
}

GroupMatcher::GroupMatcher(const Snapshot& s, const Replay& r, Grouping g, Frames f, std::vector<uint32_t> prefix)
    : paths_(s, r, g, f), prefix_(std::move(prefix)) {}

bool GroupMatcher::operator()(uint32_t id) {
  const std::vector<uint32_t>& path = paths_.of(id);
  return path.size() >= prefix_.size() && std::equal(prefix_.begin(), prefix_.end(), path.begin());
}

namespace {

struct Reserved {
  uint64_t size = 0;
  uint16_t stream = 0;
  const Segment* recorded = nullptr;  // the segment in segments_start/end it is, if the snapshot lists it
  bool expandable = false;            // mapped by segment_map
};

// Segments at the start: the recorded start state, else the end state with the trace undone.
std::map<uint64_t, Reserved> initial_segments(const Snapshot& s, const Replay& r) {
  std::map<uint64_t, Reserved> segs;
  uint8_t device = r.device();
  for (const Segment& seg : s.has_segments_start ? s.segments_start : s.segments_end)
    if (seg.device == device || r.steps() == 0) segs[seg.addr] = Reserved{seg.total_size, seg.stream, &seg};
  if (s.has_segments_start) return segs;
  const auto& changes = r.segment_steps();
  for (auto k = changes.rbegin(); k != changes.rend(); ++k) {
    Event e = r.event(*k);
    if (is_segment_grow(e.action)) segs.erase(e.addr);
    else segs[e.addr] = Reserved{e.size, e.stream, nullptr, e.action == Action::segment_unmap};
  }
  return segs;
}

// Applies one segment event to the map of segments by address.
void apply_segment_step(std::map<uint64_t, SegmentAt>& segs, const Event& e) {
  if (is_segment_grow(e.action))
    segs[e.addr] = SegmentAt{.addr = e.addr, .size = e.size, .stream = e.stream,
                             .expandable = e.action == Action::segment_map, .blocks = {}};
  else segs.erase(e.addr);
}

std::vector<SegmentAt> values(const std::map<uint64_t, SegmentAt>& segs) {
  std::vector<SegmentAt> out;
  out.reserve(segs.size());
  for (const auto& [addr, seg] : segs) out.push_back(seg);
  return out;
}

}  // namespace

SegmentHistory::SegmentHistory(const Snapshot& s, const Replay& r) : r_(r) {
  std::map<uint64_t, SegmentAt> segs;
  for (const auto& [addr, seg] : initial_segments(s, r))
    segs[addr] = SegmentAt{.addr = addr, .size = seg.size, .stream = seg.stream,
                           .expandable = seg.expandable || (seg.recorded && seg.recorded->is_expandable),
                           .recorded = seg.recorded, .blocks = {}};
  const auto& changes = r.segment_steps();
  for (size_t i = 0; i <= changes.size(); ++i) {
    if (checkpoint_at_.empty() || i - checkpoint_at_.back() >= std::max<size_t>(256, segs.size())) {
      checkpoint_at_.push_back(i);
      checkpoints_.push_back(values(segs));
    }
    if (i < changes.size()) apply_segment_step(segs, r.event(changes[i]));
  }
}

std::vector<SegmentAt> SegmentHistory::at(uint32_t step, std::span<const uint32_t> live) const {
  const auto& changes = r_.segment_steps();
  size_t applied = step == kNoEvent ? 0 : static_cast<size_t>(std::upper_bound(changes.begin(), changes.end(), step) - changes.begin());
  size_t c = static_cast<size_t>(std::upper_bound(checkpoint_at_.begin(), checkpoint_at_.end(), applied) - checkpoint_at_.begin()) - 1;
  std::map<uint64_t, SegmentAt> segs;
  for (const SegmentAt& seg : checkpoints_[c]) segs.emplace_hint(segs.end(), seg.addr, seg);
  for (size_t i = checkpoint_at_[c]; i < applied; ++i) apply_segment_step(segs, r_.event(changes[i]));
  std::vector<SegmentAt> out = values(segs);
  // Each live block's address and size read once, then filed by address.
  struct Placed {
    uint64_t addr, size;
    uint32_t id;
  };
  std::vector<Placed> blocks;
  blocks.reserve(live.size());
  for (uint32_t id : live) {
    Allocation a = r_.allocation(id);
    blocks.push_back(Placed{a.addr, a.size, id});
  }
  std::sort(blocks.begin(), blocks.end(), [](const Placed& a, const Placed& b) { return a.addr < b.addr; });
  SegmentAt outside;
  auto seg = out.begin();
  for (const Placed& b : blocks) {
    while (seg != out.end() && seg->addr + seg->size <= b.addr) ++seg;
    SegmentAt* home = seg != out.end() && seg->addr <= b.addr ? &*seg : &outside;
    home->blocks.push_back(b.id);
    home->allocated += b.size;
  }
  if (!outside.blocks.empty()) out.push_back(std::move(outside));
  return out;
}

std::string pool_name(const Segment& seg) {
  if (seg.pool_id[0] == 0 && seg.pool_id[1] == 0) return "default pool";
  return fmt::format("pool ({}, {})", seg.pool_id[0], seg.pool_id[1]);
}

std::vector<SegmentAt> segments_at(const Snapshot& s, const Replay& r, uint32_t step) {
  return SegmentHistory(s, r).at(step, r.live_after(step));
}

namespace {

std::string pool_key(const Segment* seg) { return seg ? pool_name(*seg) : "unknown pool"; }

// The segment of segments_end on the replay's device that holds [addr, addr + size), or null.
const Segment* end_segment_holding(const Snapshot& s, const Replay& r, uint64_t addr, uint64_t size) {
  for (const Segment& seg : s.segments_end)
    if (seg.device == r.device() && seg.addr <= addr && addr + size <= seg.addr + seg.total_size) return &seg;
  return nullptr;
}

// For each segment step, the recorded segment it grows: only a grow that is the last segment event at its address
// survives to the end and so is (part of) a segment of segments_end.
std::vector<const Segment*> recorded_growths(const Snapshot& s, const Replay& r) {
  const auto& changes = r.segment_steps();
  std::map<uint64_t, size_t> last_at;
  for (size_t i = 0; i < changes.size(); ++i) last_at[r.event(changes[i]).addr] = i;
  std::vector<const Segment*> out(changes.size(), nullptr);
  for (auto [addr, i] : last_at) {
    Event e = r.event(changes[i]);
    if (is_segment_grow(e.action)) out[i] = end_segment_holding(s, r, e.addr, e.size);
  }
  return out;
}

}  // namespace

std::vector<std::string> pool_keys(const Snapshot& s, const Replay& r, std::span<const uint32_t> ids) {
  // Walk the segment events once, the blocks in allocation order; each block looks up the segments of its time.
  std::vector<uint32_t> order(ids.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  auto born = [&](uint32_t i) { return r.alloc_steps()[ids[i]] + 1; };  // kNoEvent (pre-existing) wraps to 0
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return born(a) < born(b); });
  std::map<uint64_t, Reserved> segs = initial_segments(s, r);
  std::vector<const Segment*> growths = recorded_growths(s, r);
  const auto& changes = r.segment_steps();
  size_t next = 0;
  std::vector<std::string> out(ids.size());
  for (uint32_t i : order) {
    for (; next < changes.size() && changes[next] + 1 <= born(i); ++next) {
      Event e = r.event(changes[next]);
      if (is_segment_grow(e.action)) segs[e.addr] = Reserved{e.size, e.stream, growths[next]};
      else segs.erase(e.addr);
    }
    uint64_t addr = r.allocations()[ids[i]].addr;
    auto it = segs.upper_bound(addr);
    const Segment* home = nullptr;
    if (it != segs.begin()) {
      const auto& [start, seg] = *std::prev(it);
      if (addr < start + seg.size) home = seg.recorded;
    }
    out[i] = pool_key(home);
  }
  return out;
}

}  // namespace memrec
