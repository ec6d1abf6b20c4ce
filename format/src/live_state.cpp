#include "live_state.h"

#include <algorithm>

#include "memrec/replay.h"

namespace memrec::format_detail {
namespace {

// c10's small pool reserves segments of 2 MiB; every other segment a segment event makes is of the large pool.
constexpr uint64_t kSmallSegment = 2 << 20;

// The segment of the file's recorded start or end state at the same place and of the same size, if any.
const Segment* recorded_segment(const Snapshot& s, const Segment& seg) {
  for (const auto* list : {&s.segments_start, &s.segments_end})
    for (const Segment& r : *list)
      if (r.device == seg.device && r.addr == seg.addr && r.total_size == seg.total_size) return &r;
  return nullptr;
}

}  // namespace

LiveState::LiveState(const Snapshot& s) {
  if (!s.has_segments_start) return;
  for (const Segment& seg : s.segments_start) {
    Segment bare = seg;
    bare.blocks.clear();
    segments_[{seg.device, seg.addr}] = {bare, false};
    for (const Block& b : seg.blocks)
      if (b.state != BlockState::inactive)
        put_block(seg.device, b.addr, {b.requested_size, b.size, b.stack, b.state == BlockState::active_pending_free});
  }
}

AddressMap<LiveState::Live>& LiveState::on(uint8_t device) {
  std::unique_ptr<AddressMap<Live>>& blocks = blocks_[device];
  if (!blocks) [[unlikely]] blocks = std::make_unique<AddressMap<Live>>();
  return *blocks;
}

void LiveState::put_block(uint8_t device, uint64_t addr, const Live& b) { on(device).put(addr, b); }

// Owner rows at an address name the block there until it goes.
void LiveState::forget_owners(uint8_t device, uint64_t addr) {
  if (!owners_.empty()) owners_.erase({device, addr});
}

void LiveState::apply(const Event& e) {
  switch (e.action) {
    case Action::alloc:
      put_block(e.device, e.addr, {e.size, e.block_size(), e.stack, false});
      forget_owners(e.device, e.addr);  // they named a block before this one
      return;
    case Action::free_requested:
      if (Live* b = on(e.device).find(e.addr)) b->pending = true;
      return;
    case Action::free_completed:
      on(e.device).erase(e.addr);
      forget_owners(e.device, e.addr);
      return;
    default:
      if (is_segment_grow(e.action))
        segments_[{e.device, e.addr}] = {
            Segment{.addr = e.addr, .total_size = e.size, .stack = e.stack, .stream = e.stream, .device = e.device,
                    .is_large = e.size != kSmallSegment, .is_expandable = e.action == Action::segment_map, .blocks = {}},
            true};
      else if (is_segment_shrink(e.action))
        segments_.erase({e.device, e.addr});
  }
}

void LiveState::name(uint64_t row, const Owner& o) { owners_[{o.device, o.addr}].push_back({row, o}); }

std::vector<LiveState::BlockRow> LiveState::block_rows() const {
  std::vector<BlockRow> rows;
  for (size_t d = 0; d < blocks_.size(); ++d)
    if (blocks_[d])
      blocks_[d]->for_each([&](uint64_t addr, const Live& b) {
        rows.push_back({static_cast<uint8_t>(d), addr, b.requested, b.size, b.stack, b.pending});
      });
  std::sort(rows.begin(), rows.end(), [](const BlockRow& a, const BlockRow& b) {
    return std::pair(a.device, a.addr) < std::pair(b.device, b.addr);
  });
  return rows;
}

size_t LiveState::blocks() const {
  size_t n = 0;
  for (const auto& m : blocks_) n += m ? m->size() : 0;
  return n;
}

std::vector<LiveState::SegmentRow> LiveState::segment_rows() const {
  std::vector<SegmentRow> rows;
  for (const auto& [key, row] : segments_) rows.push_back(row);
  return rows;
}

std::vector<LiveState::OwnerRow> LiveState::owner_rows() const {
  std::vector<OwnerRow> rows;
  for (const auto& [key, named] : owners_) rows.insert(rows.end(), named.begin(), named.end());
  std::sort(rows.begin(), rows.end(), [](const OwnerRow& a, const OwnerRow& b) { return a.row < b.row; });
  return rows;
}

std::vector<std::pair<uint64_t, Owner>> LiveState::owners() const {
  std::vector<std::pair<uint64_t, Owner>> out;
  for (const OwnerRow& r : owner_rows()) out.emplace_back(r.row, r.owner);
  return out;
}

LiveState LiveState::from_rows(const std::vector<SegmentRow>& segments, const std::vector<BlockRow>& blocks,
                               const std::vector<OwnerRow>& owners) {
  LiveState st;
  for (const SegmentRow& r : segments) st.segments_[{r.segment.device, r.segment.addr}] = r;
  for (const BlockRow& b : blocks) st.put_block(b.device, b.addr, {b.requested, b.size, b.stack, b.pending});
  for (const OwnerRow& o : owners) st.owners_[{o.owner.device, o.owner.addr}].push_back(o);
  return st;
}

std::vector<Segment> LiveState::segments(const Snapshot& recorded) const {
  std::vector<BlockRow> blocks = block_rows();
  std::vector<Segment> out;
  auto next = blocks.begin();
  for (const auto& [key, row] : segments_) {
    Segment seg = row.segment;
    if (const Segment* r = row.from_event ? recorded_segment(recorded, seg) : nullptr)
      seg.pool_id[0] = r->pool_id[0], seg.pool_id[1] = r->pool_id[1], seg.is_large = r->is_large;
    seg.allocated_size = seg.active_size = seg.requested_size = 0;
    uint64_t end = seg.addr + seg.total_size, at = seg.addr;
    auto before = [&](const BlockRow& b) { return std::pair(b.device, b.addr) < std::pair(seg.device, seg.addr); };
    while (next != blocks.end() && before(*next)) ++next;  // blocks outside every segment are left out
    for (; next != blocks.end() && next->device == seg.device && next->addr < end; ++next) {
      if (next->addr > at) seg.blocks.push_back({at, next->addr - at, 0, 0, BlockState::inactive});
      seg.blocks.push_back({next->addr, next->size, next->requested, next->stack,
                            next->pending ? BlockState::active_pending_free : BlockState::active_allocated});
      seg.active_size += next->size;
      if (!next->pending) seg.allocated_size += next->size, seg.requested_size += next->requested;
      at = std::max(at, next->addr + next->size);
    }
    if (at < end) seg.blocks.push_back({at, end - at, 0, 0, BlockState::inactive});
    out.push_back(std::move(seg));
  }
  return out;
}

}  // namespace memrec::format_detail
