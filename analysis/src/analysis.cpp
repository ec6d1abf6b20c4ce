#include "memrec/analysis.h"

#include <algorithm>
#include <cctype>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "memrec/attribution.h"
#include "memrec/frames.h"
#include "memrec/sites.h"

namespace memrec {
namespace {

constexpr std::array<std::string_view, kCategoryCount> kCategoryNames = {
    "parameter", "input", "activation", "gradient", "optimizer_state", "temporary", "unknown"};
constexpr std::array<std::string_view, kGroupByCount> kGroupByNames = {"stack", "op",   "module", "phase",
                                                           "category", "layer", "pool", "owner"};
constexpr uint64_t kBlockGranularity = 512;  // the caching allocator's kMinBlockSize

Category categorize_by_phase(uint32_t alloc_step, uint32_t free_step, const Replay& r, const PhaseIndex& phases) {
  if (alloc_step == kNoEvent) return Category::unknown;
  int64_t born = r.time_of(alloc_step);
  bool freed = free_step != kNoEvent;
  int64_t died = freed ? r.time_of(free_step) : INT64_MAX;
  uint32_t phase = phases.at(born);
  if (!phase && phases.inferred()) return phases.size() && died > phases.last_end() ? Category::parameter : Category::unknown;
  if (!phase) {
    if (died < phases.next_start(born)) return Category::temporary;
    return died > phases.last_end() ? Category::parameter : Category::input;
  }
  if (died <= phases.end(phase)) return Category::temporary;
  switch (phases.kind(phase)) {
    case PhaseKind::forward:
    case PhaseKind::recompute: return Category::activation;
    case PhaseKind::backward: return Category::gradient;
    case PhaseKind::optimizer: return Category::optimizer_state;
    default: return Category::unknown;
  }
}

// A block's owner decides its category; without one, its phases and lifetime do.
Category categorize_one(const Snapshot& s, uint32_t id, const Replay& r, const PhaseIndex& phases) {
  uint32_t row = r.has_owners() ? r.owner_of(id) : kNoOwner;
  if (row != kNoOwner) return category_of(s.owners[row].kind);
  return categorize_by_phase(r.alloc_steps()[id], r.free_steps()[id], r, phases);
}

// Half-open address ranges of reserved memory. Adding merges nothing; removing splits as needed,
// which handles expandable segments (map/unmap of pieces) and whole segments alike.
class RangeSet {
 public:
  struct Range {
    uint64_t size;
    uint16_t stream;
  };
  void add(uint64_t addr, uint64_t size, uint16_t stream) { remove(addr, size), ranges_[addr] = {size, stream}; }
  void remove(uint64_t addr, uint64_t size) {
    uint64_t end = addr + size;
    auto it = ranges_.upper_bound(addr);
    if (it != ranges_.begin()) --it;
    while (it != ranges_.end() && it->first < end) {
      uint64_t a = it->first, e = a + it->second.size;
      uint16_t stream = it->second.stream;
      if (e <= addr) { ++it; continue; }
      it = ranges_.erase(it);
      if (a < addr) ranges_[a] = {addr - a, stream};
      if (e > end) it = ranges_.emplace(end, Range{e - end, stream}).first, ++it;
    }
  }
  const std::map<uint64_t, Range>& ranges() const { return ranges_; }

 private:
  std::map<uint64_t, Range> ranges_;
};

// Forward, a grow adds and a shrink removes; rewinding does the opposite.
void apply_segment(RangeSet& set, const Event& e, bool forward) {
  if (is_segment_grow(e.action) == forward) set.add(e.addr, e.size, e.stream);
  else set.remove(e.addr, e.size);
}

RangeSet segments_after(const Snapshot& s, const Replay& r, uint32_t step) {
  RangeSet set;
  uint8_t device = r.device();
  const auto& initial = s.has_segments_start ? s.segments_start : s.segments_end;
  for (const Segment& seg : initial)
    if (seg.device == device) set.add(seg.addr, seg.total_size, seg.stream);
  const auto& changes = r.segment_steps();
  if (!s.has_segments_start)
    for (auto k = changes.rbegin(); k != changes.rend(); ++k) apply_segment(set, r.event(*k), false);
  for (uint32_t k : changes) {
    if (step == kNoEvent || k > step) break;
    apply_segment(set, r.event(k), true);
  }
  return set;
}

uint64_t rounded(uint64_t size) {
  return std::max(kBlockGranularity, (size + kBlockGranularity - 1) / kBlockGranularity * kBlockGranularity);
}

// A live or pending block of one segment; pieces are kept in address order.
struct Piece {
  uint64_t addr, size;
  bool pending;
};

uint16_t busiest_stream(const std::map<uint64_t, RangeSet::Range>& ranges) {
  std::map<uint16_t, uint64_t> bytes;
  for (const auto& [addr, range] : ranges) bytes[range.stream] += range.size;
  auto it = std::max_element(bytes.begin(), bytes.end(), [](auto& a, auto& b) { return a.second < b.second; });
  return it == bytes.end() ? 0 : it->first;
}

void account_segment(uint64_t seg_addr, const RangeSet::Range& seg, const std::vector<Piece>& pieces,
                     bool main_stream, Fragmentation& f) {
  uint64_t used = 0, cursor = seg_addr, seg_end = seg_addr + seg.size;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    // The block's estimated extent, clipped so estimates never overlap the next block or leave the segment.
    uint64_t limit = i + 1 < pieces.size() ? pieces[i + 1].addr : seg_end;
    uint64_t extent = std::max(p.size, std::min(rounded(p.size), limit - p.addr));
    if (p.pending) f.pending_free += p.size;
    f.rounding += extent - p.size;
    f.largest_free = std::max(f.largest_free, p.addr > cursor ? p.addr - cursor : 0);
    cursor = std::max(cursor, p.addr + extent);
    used += extent;
  }
  f.largest_free = std::max(f.largest_free, seg_addr + seg.size - cursor);
  uint64_t free = seg.size - std::min(seg.size, used);
  if (pieces.empty()) f.cached_free += free;
  else if (main_stream) f.split_free += free;
  else f.other_stream += free;
}

}  // namespace

std::string_view to_string(Category c) { return kCategoryNames.at(static_cast<size_t>(c)); }

std::string_view to_string(GroupBy g) { return kGroupByNames.at(static_cast<size_t>(g)); }

std::optional<GroupBy> group_by_from_string(std::string_view s) {
  for (size_t i = 0; i < kGroupByNames.size(); ++i)
    if (kGroupByNames[i] == s) return static_cast<GroupBy>(i);
  return std::nullopt;
}

std::vector<std::string> group_by_names() { return {kGroupByNames.begin(), kGroupByNames.end()}; }

bool natural_less(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i_end = a.find_first_not_of("0123456789", i), j_end = b.find_first_not_of("0123456789", j);
      std::string_view x = a.substr(i, i_end - i), y = b.substr(j, j_end - j);
      x.remove_prefix(std::min(x.find_first_not_of('0'), x.size()));
      y.remove_prefix(std::min(y.find_first_not_of('0'), y.size()));
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = i_end == std::string_view::npos ? a.size() : i_end;
      j = j_end == std::string_view::npos ? b.size() : j_end;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

std::string layer_of(const std::string& module) {
  // The path up to its first numeric component: the repeated block of any model ("layers.3", "transformer.h.3",
  // "model.blocks.3"). Without one, the first two components.
  for (size_t begin = 0; begin < module.size();) {
    size_t end = std::min(module.find('.', begin), module.size());
    if (end > begin && std::all_of(module.begin() + begin, module.begin() + end, [](char c) { return c >= '0' && c <= '9'; }))
      return module.substr(0, end);
    begin = end + 1;
  }
  size_t dot = module.find('.');
  if (dot == std::string::npos) return module;
  return module.substr(0, module.find('.', dot + 1));
}

std::vector<std::string> run_layers(const Snapshot& s, uint8_t device) {
  std::set<std::string, decltype(&natural_less)> layers(&natural_less);
  for (uint32_t i = 1; i < s.scopes.size(); ++i)
    if (s.scopes[i].kind == ScopeKind::module && s.scopes[i].device == device) layers.insert(layer_of(s.strings[s.scopes[i].name]));
  return {layers.begin(), layers.end()};
}

std::string find_layer(const std::vector<std::string>& layers, const std::string& given) {
  if (std::find(layers.begin(), layers.end(), given) != layers.end()) return given;
  std::vector<std::string> numbered;
  if (!given.empty() && std::all_of(given.begin(), given.end(), ::isdigit))
    std::copy_if(layers.begin(), layers.end(), std::back_inserter(numbered), [&](const std::string& l) { return l.ends_with("." + given); });
  if (numbered.size() == 1) return numbered[0];
  if (numbered.size() > 1) throw Error(fmt::format("layer '{}' could be {}: give its name", given, fmt::join(numbered, " or ")));
  if (layers.empty()) throw Error(fmt::format("unknown layer '{}': the run has no module scopes", given));
  throw Error(fmt::format("unknown layer '{}' (the run's layers are {})", given,
                          layers.size() <= 8 ? fmt::format("{}", fmt::join(layers, ", ")) : layers.front() + " .. " + layers.back()));
}

Category category_of(OwnerKind k) {
  switch (k) {
    case OwnerKind::parameter:
    case OwnerKind::buffer: return Category::parameter;
    case OwnerKind::gradient: return Category::gradient;
    case OwnerKind::optimizer_state: return Category::optimizer_state;
  }
  return Category::unknown;
}

std::vector<Category> categorize(const Snapshot& s, const Replay& r) {
  PhaseIndex phases(s, r.device());
  std::vector<Category> out;
  out.reserve(r.allocations().size());
  for (uint32_t id = 0; id < r.allocations().size(); ++id)
    out.push_back(categorize_one(s, id, r, phases));
  return out;
}

std::string owner_label(const Snapshot& s, const Replay& r, uint32_t id) {
  uint32_t row = r.owner_of(id);
  if (row == kNoOwner) return {};
  uint32_t others = r.owner_names(id) - 1;
  std::string name = s.strings[s.owners[row].name];
  return others ? fmt::format("{} (+{})", name, others) : name;
}

std::string enclosing_scope(const Snapshot& s, uint32_t scope, ScopeKind kind) {
  uint32_t id = enclosing_scope_id(s, scope, kind);
  return id ? s.strings[s.scopes[id].name] : std::string{};
}

std::string group_key(const Snapshot& s, const Allocation& a, GroupBy by, Category c) {
  switch (by) {
    case GroupBy::stack: return allocation_site(s, a.stack);
    case GroupBy::op: {
      if (uint32_t op = enclosing_scope_id(s, a.scope, ScopeKind::op)) return s.strings[s.scopes[op].name];
      std::vector<std::string> ops = stack_ops(s, a.stack);  // no op scope: the op its C++ frames enter
      return ops.empty() ? std::string{} : std::move(ops.back());
    }
    case GroupBy::module: return enclosing_scope(s, a.scope, ScopeKind::module);
    case GroupBy::phase: return enclosing_scope(s, a.scope, ScopeKind::phase);
    case GroupBy::layer: return layer_of(enclosing_scope(s, a.scope, ScopeKind::module));
    case GroupBy::category: return std::string(to_string(c));
    case GroupBy::pool: break;  // by address and time: pool_keys()
    case GroupBy::owner: break;  // by the replay's owners: group_allocations()
  }
  return {};
}

uint64_t group_source(const Snapshot& s, const Allocation& a, GroupBy by, Category c) {
  switch (by) {
    case GroupBy::stack: return a.stack;
    case GroupBy::category: return static_cast<uint32_t>(c);
    case GroupBy::op: return enclosing_scope_id(s, a.scope, ScopeKind::op) ? a.scope : uint64_t{1} << 32 | a.stack;
    default: return a.scope;
  }
}

namespace {

// Files blocks under `by` the way group_allocations() groups them, one block at a time: a key is found once per
// stack, scope, category or owner, and the pools of all the blocks at once.
class Filer {
 public:
  // `ids`: the blocks that will be filed, in this order.
  Filer(const Snapshot& s, const Replay& r, std::span<const uint32_t> ids, GroupBy by) : s_(s), r_(r), ids_(ids), by_(by) {
    by_owner_ = r.has_owners() && (by == GroupBy::module || by == GroupBy::layer || by == GroupBy::owner);
    if (by == GroupBy::pool) pools_ = pool_keys(s, r, ids);
    if (by == GroupBy::phase) {  // without phase scopes, a block's phase is the inferred phase it was allocated in
      inferred_.emplace(s, r.device());
      if (!inferred_->inferred()) inferred_.reset();
    }
  }

  // The key index of ids[i], which is the block `a` with owner row `row` (or kNoOwner) and category `c`. Sets
  // `new_stack` when the block is the first of its stack in its group (GroupBy::stack: Group::stacks counts them).
  uint32_t file(size_t i, const Allocation& a, uint32_t row, Category c, bool& new_stack) {
    new_stack = false;
    if (by_owner_ && row != kNoOwner)
      if (std::optional<uint32_t> owned = owner_key(ids_[i], row)) return *owned;
    if (by_ == GroupBy::owner) return key_index("");
    if (by_ == GroupBy::pool) return key_index(std::move(pools_[i]));
    if (inferred_) return key_index(std::string(to_string(inferred_phase(a))));
    auto [it, fresh] = by_source_.try_emplace(group_source(s_, a, by_, c), 0);
    if (fresh) it->second = key_index(group_key(s_, a, by_, c));
    new_stack = fresh && by_ == GroupBy::stack;
    return it->second;
  }

  std::vector<std::string>& keys() { return keys_; }

 private:
  uint32_t key_index(std::string key) {
    if (key.empty()) key = "<none>";
    auto [it, fresh] = index_.try_emplace(key, static_cast<uint32_t>(keys_.size()));
    if (fresh) keys_.push_back(std::move(key));
    return it->second;
  }

  // An owned block's key: its owner's name, or its owner's module or layer; none when the owner has no module.
  std::optional<uint32_t> owner_key(uint32_t id, uint32_t row) {
    Owner o = s_.owners[row];
    if (by_ != GroupBy::owner && o.module == 0) return std::nullopt;  // no module: where it was allocated
    uint32_t names = by_ == GroupBy::owner ? r_.owner_names(id) : 0;
    uint64_t source = by_ == GroupBy::owner ? uint64_t(names) << 32 | o.name : o.module;
    auto [it, fresh] = by_owner_source_.try_emplace(source, 0);
    if (fresh) {
      const std::string& module = s_.strings[o.module];
      it->second = key_index(by_ == GroupBy::owner ? owner_label(s_, r_, id) : by_ == GroupBy::layer ? layer_of(module) : module);
    }
    return it->second;
  }

  PhaseKind inferred_phase(const Allocation& a) const {
    uint32_t phase = a.alloc_step == kNoEvent ? 0 : inferred_->at(r_.time_of(a.alloc_step));
    return phase ? inferred_->kind(phase) : PhaseKind::none;
  }

  const Snapshot& s_;
  const Replay& r_;
  std::span<const uint32_t> ids_;
  GroupBy by_;
  bool by_owner_ = false;
  std::vector<std::string> pools_;
  std::optional<PhaseIndex> inferred_;
  std::vector<std::string> keys_;
  std::unordered_map<std::string, uint32_t> index_;
  std::unordered_map<uint64_t, uint32_t> by_source_;        // group_source() -> key index
  std::unordered_map<uint64_t, uint32_t> by_owner_source_;  // owner module, or names and name -> key index
};

// group_allocations() with each block's category from `category_of(id)`; by_category: fill Group::by_category.
// Adds an owned block's bytes to its group's owner; `at` finds an owner's row in a group by (group, owner name).
void add_owned(Group& g, uint32_t group, uint32_t name, uint64_t bytes,
               std::unordered_map<uint64_t, uint32_t>& at) {
  g.owned += bytes;
  auto [it, fresh] = at.try_emplace(uint64_t(group) << 32 | name, static_cast<uint32_t>(g.owners.size()));
  if (fresh) g.owners.emplace_back(name, 0);
  g.owners[it->second].second += bytes;
}

template <class CategoryOf>
std::vector<Group> group_with(const Snapshot& s, const Replay& r, std::span<const uint32_t> ids, GroupBy by,
                              CategoryOf category_of, bool by_category) {
  Filer filer(s, r, ids, by);
  std::vector<Group> out;
  std::unordered_map<uint64_t, uint32_t> owner_at;
  for (size_t i = 0; i < ids.size(); ++i) {
    uint32_t id = ids[i];
    const Allocation& a = r.allocations()[id];
    Category c = category_of(id);
    uint32_t row = r.has_owners() ? r.owner_of(id) : kNoOwner;
    bool new_stack = false;
    uint32_t group = filer.file(i, a, row, c, new_stack);
    if (group == out.size()) out.push_back(Group{.key = filer.keys()[group]});
    Group& g = out[group];
    if (new_stack && g.stacks++ == 0) g.stack = a.stack;
    g.bytes += a.size;
    ++g.count;
    if (by_category) g.by_category[static_cast<size_t>(c)] += a.size;
    if (row != kNoOwner) add_owned(g, group, s.owners[row].name, a.size, owner_at);
  }
  std::sort(out.begin(), out.end(), [](const Group& a, const Group& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : natural_less(a.key, b.key);
  });
  for (Group& g : out)
    std::sort(g.owners.begin(), g.owners.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

}  // namespace

std::vector<Group> group_allocations(const Snapshot& s, const Replay& r, std::span<const uint32_t> ids, GroupBy by) {
  PhaseIndex phases(s, r.device());  // categories of the given blocks only: categorize() reads every block's times
  auto category_of = [&](uint32_t id) { return categorize_one(s, id, r, phases); };
  return group_with(s, r, ids, by, category_of, true);
}

std::vector<Group> group_allocations(const Snapshot& s, const Replay& r, std::span<const uint32_t> ids, GroupBy by,
                                     std::span<const Category> categories) {
  auto category_of = [&](uint32_t id) { return categories.empty() ? Category::unknown : categories[id]; };
  return group_with(s, r, ids, by, category_of, !categories.empty());
}

BlockKeys block_keys(const Snapshot& s, const Replay& r, std::span<const uint32_t> ids, GroupBy by,
                     std::span<const Category> categories) {
  Filer filer(s, r, ids, by);
  BlockKeys out;
  out.of.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    uint32_t id = ids[i];
    bool new_stack = false;
    out.of.push_back(filer.file(i, r.allocations()[id], r.has_owners() ? r.owner_of(id) : kNoOwner, categories[id], new_stack));
  }
  out.keys = std::move(filer.keys());
  return out;
}

std::vector<Group> group_live(const Snapshot& s, const Replay& r, uint32_t step, GroupBy by) {
  return group_allocations(s, r, r.live_after(step), by);
}

std::vector<KernelStats> kernel_stats(const Snapshot& s, uint8_t device) {
  std::unordered_map<uint32_t, KernelStats> by_name;
  for (const Kernel& k : s.kernels) {
    if (k.device != device) continue;
    KernelStats& st = by_name[k.name];
    st.name = s.strings[k.name];
    st.kind = k.kind;
    ++st.count;
    st.total_ns += k.end_ns - k.start_ns;
    st.max_ns = std::max(st.max_ns, k.end_ns - k.start_ns);
  }
  std::vector<KernelStats> out;
  for (auto& [name, st] : by_name) out.push_back(std::move(st));
  std::sort(out.begin(), out.end(), [](const KernelStats& a, const KernelStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return out;
}

uint32_t scope_at(const Snapshot& s, ScopeKind kind, uint8_t device, int64_t t) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < s.scopes.size(); ++i) {
    const Scope& sc = s.scopes[i];
    bool open_at_t = sc.start_ns <= t && (sc.end_ns < sc.start_ns || t <= sc.end_ns);
    if (sc.kind == kind && sc.device == device && open_at_t &&
        (best == 0 || sc.start_ns >= s.scopes[best].start_ns))
      best = i;
  }
  return best;
}

bool is_cpu_device(const Snapshot& s, uint8_t device) {
  auto type = s.metadata.find(fmt::format("device.{}.type", device));
  return type != s.metadata.end() && type->second == "cpu";
}

Fragmentation fragmentation_after(const Snapshot& s, const Replay& r, uint32_t step) {
  RangeSet set = segments_after(s, r, step);
  const auto& ranges = set.ranges();
  Fragmentation f;
  f.cpu = is_cpu_device(s, r.device());
  std::map<uint64_t, std::vector<Piece>> pieces;  // segment addr -> blocks inside it
  for (uint32_t id = 0; id < r.alloc_steps().size(); ++id) {
    // Decided on the step arrays: most blocks are long gone, and only the others need their event.
    uint32_t born = r.alloc_steps()[id], freed = r.free_steps()[id], released = r.completed_steps()[id];
    bool allocated = live_after_step(born, freed, step);
    bool pending = !allocated && freed != kNoEvent && born != kNoEvent && (step != kNoEvent && freed <= step) &&
                   (released == kNoEvent || released > step);
    if (!allocated && !pending) continue;
    Allocation a = r.allocation(id);
    auto it = ranges.upper_bound(a.addr);
    bool placed = it != ranges.begin() && a.addr < std::prev(it)->first + std::prev(it)->second.size;
    if (allocated) (placed ? f.allocated : f.unplaced) += a.size;
    if (placed) pieces[std::prev(it)->first].push_back({a.addr, a.size, pending});
  }
  uint16_t main = busiest_stream(ranges);
  for (const auto& [addr, range] : ranges) {
    f.reserved += range.size;
    ++f.segments;
    auto& list = pieces[addr];
    std::sort(list.begin(), list.end(), [](const Piece& a, const Piece& b) { return a.addr < b.addr; });
    account_segment(addr, range, list, range.stream == main, f);
  }
  return f;
}

std::string_view why_no_segments(const Fragmentation& f) {
  return f.cpu ? "the CPU allocator keeps no cache" : "the recording holds no segment events or end state";
}

std::vector<OomReport> explain_ooms(const Snapshot& s, const Replay& r) {
  std::vector<uint32_t> steps;
  r.for_each_step(0, r.steps(), [&](uint32_t step, const Event& e) __attribute__((always_inline)) {
    if (e.action == Action::oom) steps.push_back(step);
  });
  std::vector<OomReport> out;
  for (uint32_t step : steps) {
    Event e = r.event(step);
    OomReport o;
    o.step = step;
    o.time_ns = e.time_ns;
    o.requested = e.size;
    o.device_free = e.addr;
    o.totals = r.after(step);
    o.fragmentation = fragmentation_after(s, r, step);
    uint64_t cached = o.totals.reserved - std::min(o.totals.reserved, o.totals.allocated);
    o.caused_by_fragmentation = cached >= o.requested && o.fragmentation.largest_free < o.requested;
    o.top_sites = group_live(s, r, step, GroupBy::stack);
    if (o.top_sites.size() > 10) o.top_sites.resize(10);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace memrec
