#include "memrec/allocator_model.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

namespace memrec {

using namespace alloc_sizes;

namespace {

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// The next of `divisions` equal steps between the powers of two around size (c10's roundup_power2_next_division).
uint64_t next_division(uint64_t size, uint64_t divisions) {
  if (std::has_single_bit(size)) return size;
  uint64_t floor = std::bit_floor(size);
  uint64_t step = floor >> (std::bit_width(divisions) - 1);
  if (step == 0) return floor << 1;
  uint64_t down = size & ~(step - 1);
  return down == size ? size : down + step;
}

constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();
// No device holds this much; sizes past it would wrap in the rounding and the sums.
constexpr uint64_t kMaxRequest = 1ull << 60;

}  // namespace

uint64_t AllocatorModel::round_size(const AllocConf& c, uint64_t size) {
  if (size < kMinBlockSize) return kMinBlockSize;
  int index = std::clamp(static_cast<int>(std::bit_width(size)) - 1 - 20, 0, static_cast<int>(kRoundupIntervals) - 1);
  uint64_t divisions = c.roundup_divisions[index];
  if (divisions > 1 && size > kMinBlockSize * divisions) return next_division(size, divisions);
  return round_up(size, kMinBlockSize);
}

uint64_t AllocatorModel::allocation_size(uint64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return round_up(size, kRoundLarge);
}

AllocatorModel::AllocatorModel(const AllocConf& conf, uint64_t device_total, uint64_t device_limit)
    : conf_(conf), total_(device_total), limit_(device_limit), allowed_(kUnlimited) {
  if (conf.memory_fraction > 0 && total_ != kUnlimited)
    allowed_ = static_cast<uint64_t>(conf.memory_fraction * static_cast<double>(total_));
  // c10 reserves address space for 1 1/8 of the device's memory per expandable segment.
  uint64_t device = total_ != kUnlimited ? total_ : limit_ != kUnlimited ? limit_ : 1ull << 40;
  va_size_ = device + device / 8;
}

uint32_t AllocatorModel::new_block(const Block& b) {
  uint32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
    blocks_[id] = b;
  } else {
    id = static_cast<uint32_t>(blocks_.size());
    blocks_.push_back(b);
  }
  blocks_[id].live = true;
  return id;
}

void AllocatorModel::drop_block(uint32_t id) {
  blocks_[id].live = false;
  free_ids_.push_back(id);
}

void AllocatorModel::insert_free(uint32_t id) {
  Pool& pool = pool_of(blocks_[id].small);
  blocks_[id].gc_base = pool.get_free_calls;
  pool.blocks.insert(key(id));
}

void AllocatorModel::erase_free(uint32_t id) { pool_of(blocks_[id].small).blocks.erase(key(id)); }

// c10's try_merge_blocks condition: a neighbour that is free, not waiting on streams, and mapped alike.
bool AllocatorModel::may_merge(uint32_t id) const {
  return id != kNone && !blocks_[id].allocated && !blocks_[id].pending;
}

void AllocatorModel::note(Action a, uint64_t size, uint16_t stream) {
  if (keep_actions_) actions_.push_back({a, size, stream});
}

bool AllocatorModel::within_fraction(uint64_t bytes) const { return allowed_ == kUnlimited || reserved_ + bytes <= allowed_; }
bool AllocatorModel::within_device(uint64_t bytes) const { return limit_ == kUnlimited || reserved_ + bytes <= limit_; }

uint32_t AllocatorModel::malloc(uint64_t size, uint16_t stream, uint32_t tag) {
  if (size >= kMaxRequest)
    throw Error(fmt::format("an allocation of {} bytes was recorded as served: no device holds 1 EiB; the file is "
                            "damaged", size));
  uint64_t rounded = round_size(conf_, size);
  uint32_t id = find_or_create(rounded, stream, false);
  if (id == kNone) {
    ++ooms_;
    id = find_or_create(rounded, stream, true);
  }
  return hand_out(id, rounded, tag);
}

bool AllocatorModel::try_malloc(uint64_t size, uint16_t stream) {
  if (size >= kMaxRequest) {
    ++ooms_;
    return false;
  }
  uint64_t rounded = round_size(conf_, size);
  uint32_t id = find_or_create(rounded, stream, false);
  if (id == kNone) {
    ++ooms_;
    return false;
  }
  uint32_t handle = hand_out(id, rounded, kNone);
  free_requested(handle);
  free_completed(handle);
  return true;
}

// alloc_found_block: split off the front of the block when should_split says so, and mark it allocated.
uint32_t AllocatorModel::hand_out(uint32_t id, uint64_t size, uint32_t tag) {
  id = take(id, size);
  Block& b = blocks_[id];
  b.allocated = true;
  b.tag = tag;
  b.handle = static_cast<uint32_t>(handles_.size());
  handles_.push_back(id);
  allocated_ += b.size;
  return b.handle;
}

// The three tries of DeviceCachingAllocator::malloc: a cached block, a new segment, and new segments after
// releasing oversize blocks and then every unsplit cached block. `force` serves the request past the limit.
uint32_t AllocatorModel::find_or_create(uint64_t size, uint16_t stream, bool force) {
  Pool& pool = pool_of(size <= kSmallSize);
  uint64_t alloc_size = allocation_size(size);
  if (uint32_t id = find_free(pool, size, stream); id != kNone) return id;
  if (force) return new_segment(pool, size, alloc_size, stream, true);
  if (allowed_ != kUnlimited && conf_.garbage_collection_threshold > 0) garbage_collect();
  if (uint32_t id = new_segment(pool, size, alloc_size, stream, false); id != kNone) return id;
  if (release_available(pool, size, stream))
    if (uint32_t id = new_segment(pool, size, alloc_size, stream, false); id != kNone) return id;
  release_cached();
  return new_segment(pool, size, alloc_size, stream, false);
}

// get_free_block: the smallest cached block of the stream that fits, within the oversize rules.
uint32_t AllocatorModel::find_free(Pool& pool, uint64_t size, uint16_t stream) {
  if (allowed_ != kUnlimited && conf_.garbage_collection_threshold > 0) ++pool.get_free_calls;
  auto it = pool.blocks.lower_bound(Key{stream, size, 0, 0});
  if (it == pool.blocks.end() || it->stream != stream) return kNone;
  auto expandable = [&](uint32_t id) { return blocks_[id].segment != kNone; };
  if (expandable(it->id)) {
    if (conf_.expandable_segments) {
      // A block followed by unmapped space counts as the size it can grow to.
      auto growable = [&](uint32_t id) {
        uint32_t n = blocks_[id].next;
        return blocks_[id].size + (n != kNone && !blocks_[n].mapped ? blocks_[n].size : 0);
      };
      for (auto next = std::next(it); expandable(it->id) && next != pool.blocks.end() && next->stream == stream &&
                                      growable(next->id) < growable(it->id);)
        it = next++;
    } else {
      do ++it;
      while (it != pool.blocks.end() && expandable(it->id) && it->stream == stream);
      if (it == pool.blocks.end() || it->stream != stream) return kNone;
    }
  }
  if (size < conf_.max_split_size && it->size >= conf_.max_split_size) return kNone;
  if (size >= conf_.max_split_size && it->size >= size + conf_.max_non_split_rounding) return kNone;
  uint32_t id = it->id;
  pool.blocks.erase(it);
  return id;
}

bool AllocatorModel::should_split(uint32_t id, uint64_t size) const {
  uint64_t remaining = blocks_[id].size - size;
  if (blocks_[id].small || conf_.expandable_segments) return remaining >= kMinBlockSize;
  return size < conf_.max_split_size && remaining > kSmallSize;
}

// Splits `size` bytes off the front of a block taken from its pool; the rest goes back to the pool.
uint32_t AllocatorModel::take(uint32_t id, uint64_t size) {
  if (!should_split(id, size)) return id;
  Block front = blocks_[id];
  front.size = size;
  front.next = id;
  uint32_t fid = new_block(front);
  Block& rest = blocks_[id];
  if (rest.prev != kNone) blocks_[rest.prev].next = fid;
  rest.prev = fid;
  rest.addr += size;
  rest.size -= size;
  insert_free(id);
  return fid;
}

// alloc_block: a new cudaMalloc segment of alloc_size (or mapped pages of an expandable segment).
uint32_t AllocatorModel::new_segment(Pool& pool, uint64_t size, uint64_t alloc_size, uint16_t stream, bool force,
                                     uint64_t addr) {
  if (!force && !within_fraction(alloc_size)) return kNone;
  if (conf_.expandable_segments) return expandable_block(pool, size, stream, force);
  if (!force && !within_device(alloc_size)) return kNone;
  Block b;
  b.addr = addr ? addr : segment_address(alloc_size);
  b.size = alloc_size;
  b.stream = stream;
  b.small = pool.small;
  reserved_ += alloc_size;
  ++device_allocs_;
  note(Action::segment_alloc, alloc_size, stream);
  return new_block(b);
}

uint64_t AllocatorModel::segment_address(uint64_t size) {
  if (next_recorded_ < recorded_addresses_.size() && recorded_addresses_[next_recorded_].first == size)
    return recorded_addresses_[next_recorded_++].second;
  next_down_ -= round_up(size, kRoundLarge);
  return next_down_;
}

// release_available_cached_blocks: with max_split_size set, free one oversize cached block that is large enough, or
// the largest ones until their bytes are.
bool AllocatorModel::release_available(Pool& pool, uint64_t size, uint16_t stream) {
  if (conf_.max_split_size == kUnlimited) return false;
  uint64_t wanted = std::max(size, conf_.max_split_size);
  auto releasable = [&](uint32_t id) { return blocks_[id].segment == kNone && blocks_[id].prev == kNone && blocks_[id].next == kNone; };
  auto it = pool.blocks.lower_bound(Key{stream, wanted, 0, 0});
  if (it != pool.blocks.end() && it->stream == stream && blocks_[it->id].segment == kNone) {
    if (!releasable(it->id)) return false;
    release_segment(it->id);
    return true;
  }
  if (it == pool.blocks.begin()) return false;
  uint64_t released = 0;
  --it;
  while (released < wanted && it->size >= conf_.max_split_size && it->stream == stream) {
    auto cur = it;
    bool first = cur == pool.blocks.begin();
    if (!first) --it;
    if (releasable(cur->id)) {
      released += cur->size;
      release_segment(cur->id);
    }
    if (first) break;
  }
  return released >= wanted;
}

// release_cached_blocks: complete every pending free (it synchronizes), then free every unsplit cached block.
void AllocatorModel::release_cached() {
  std::vector<uint32_t> pending = std::move(pending_);
  pending_.clear();
  for (uint32_t h : pending) free_completed(h);
  release_pool(large_);
  release_pool(small_);
}

void AllocatorModel::release_pool(Pool& pool) {
  std::vector<uint32_t> to_unmap;
  for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
    uint32_t id = it->id;
    ++it;
    if (blocks_[id].segment != kNone)
      to_unmap.push_back(id);
    else if (blocks_[id].prev == kNone && blocks_[id].next == kNone)
      release_segment(id);
  }
  for (uint32_t id : to_unmap) {
    unmap(id);
    Block& b = blocks_[id];
    if (!b.mapped && b.prev == kNone && b.next == kNone) {  // the whole segment is unmapped: give its addresses back
      pool.unmapped.erase(AddrKey{b.stream, b.addr, id});
      expandables_[b.segment].alive = false;
      drop_block(id);
    }
  }
}

void AllocatorModel::release_segment(uint32_t id) {
  erase_free(id);
  reserved_ -= blocks_[id].size;
  ++device_frees_;
  note(Action::segment_free, blocks_[id].size, blocks_[id].stream);
  drop_block(id);
}

// garbage_collect_cached_blocks: above threshold x allowed memory, free unsplit large blocks that waited longest
// (in get_free_block calls) until reserved is back under the threshold.
void AllocatorModel::garbage_collect() {
  auto threshold = static_cast<uint64_t>(conf_.garbage_collection_threshold * static_cast<double>(allowed_));
  if (reserved_ <= threshold) return;
  uint64_t target = reserved_ - threshold, reclaimed = 0;
  auto freeable = [&](uint32_t id) { return blocks_[id].prev == kNone && blocks_[id].next == kNone && blocks_[id].segment == kNone; };
  auto age = [&](uint32_t id) { return static_cast<uint64_t>(large_.get_free_calls - blocks_[id].gc_base); };
  uint64_t total_age = 0;
  int count = 0;
  for (const Key& k : large_.blocks)
    if (freeable(k.id)) total_age += age(k.id), ++count;
  bool freed = true;
  while (reclaimed < target && freed && count > 0) {
    double threshold_age = static_cast<double>(total_age) / count;
    freed = false;
    for (auto it = large_.blocks.begin(); it != large_.blocks.end();) {
      uint32_t id = it->id;
      ++it;
      if (freeable(id) && static_cast<double>(age(id)) >= threshold_age) {
        freed = true;
        reclaimed += blocks_[id].size;
        total_age -= age(id);
        --count;
        release_segment(id);
      }
    }
  }
}

void AllocatorModel::empty_cache() { release_cached(); }

void AllocatorModel::free_requested(uint32_t handle) {
  uint32_t id = handles_.at(handle);
  if (id == kNone || !blocks_[id].allocated) return;
  blocks_[id].allocated = false;
  blocks_[id].pending = true;
  allocated_ -= blocks_[id].size;
  pending_.push_back(handle);
  ++pending_count_;
}

void AllocatorModel::free_completed(uint32_t handle) {
  uint32_t id = handles_.at(handle);
  if (id == kNone) return;
  free_requested(handle);
  handles_[handle] = kNone;
  blocks_[id].pending = false;
  --pending_count_;
  if (pending_.size() > 64 && pending_.size() > 2 * pending_count_)  // drop the completed ones
    std::erase_if(pending_, [&](uint32_t h) { return handles_[h] == kNone; });
  blocks_[id].tag = blocks_[id].handle = kNone;
  return_block(id);
}

// free_block: merge with free neighbours and go back to the pool.
void AllocatorModel::return_block(uint32_t id) {
  for (uint32_t n : {blocks_[id].prev, blocks_[id].next})
    if (may_merge(n) && blocks_[n].mapped == blocks_[id].mapped) merge(id, n);
  insert_free(id);
}

void AllocatorModel::merge(uint32_t dst, uint32_t src) {
  Block& s = blocks_[src];
  if (s.mapped)
    erase_free(src);
  else
    pool_of(s.small).unmapped.erase(AddrKey{s.stream, s.addr, src});
  Block& d = blocks_[dst];
  if (d.prev == src) {
    d.addr = s.addr;
    d.prev = s.prev;
    if (d.prev != kNone) blocks_[d.prev].next = dst;
  } else {
    d.next = s.next;
    if (d.next != kNone) blocks_[d.next].prev = dst;
  }
  d.size += s.size;
  drop_block(src);
}

// try_allocate_expandable_block: map pages of the stream's expandable segment (at its lowest address with room)
// until one free block holds `size`.
uint32_t AllocatorModel::expandable_block(Pool& pool, uint64_t size, uint16_t stream, bool force) {
  uint32_t c = expandable_candidate(pool, size, stream);
  if (!blocks_[c].mapped && !map(c, std::min(blocks_[c].size, size), force)) return kNone;
  while (blocks_[c].size < size) {
    uint32_t next = blocks_[c].next;
    if (!map(next, std::min(size - blocks_[c].size, blocks_[next].size), force)) return kNone;
    c = next;  // it took in c when mapped
  }
  erase_free(c);
  return c;
}

// find_expandable_block: the lowest unmapped range of the stream (with the free block before it) that has room,
// else a new segment: address space only, nothing mapped.
uint32_t AllocatorModel::expandable_candidate(Pool& pool, uint64_t size, uint16_t stream) {
  auto allocatable = [&](uint32_t id) { return id != kNone && !blocks_[id].allocated && !blocks_[id].pending; };
  auto has_room = [&](uint32_t id) {
    uint64_t bytes = 0;
    for (; bytes < size && allocatable(id); id = blocks_[id].next) bytes += blocks_[id].size;
    return bytes >= size;
  };
  for (auto it = pool.unmapped.lower_bound(AddrKey{stream, 0, 0}); it != pool.unmapped.end() && it->stream == stream; ++it) {
    uint32_t c = it->id;
    if (allocatable(blocks_[c].prev)) c = blocks_[c].prev;
    if (has_room(c)) return c;
  }
  return new_expandable(pool, stream);
}

// A new expandable segment: its address space as one unmapped block.
uint32_t AllocatorModel::new_expandable(Pool& pool, uint16_t stream) {
  uint64_t page = pool.small ? kSmallBuffer : kLargeBuffer;
  Expandable es{.base = round_up(next_expandable_, page), .page = page, .stream = stream, .small = pool.small};
  uint64_t va = round_up(va_size_, page);
  next_expandable_ = es.base + va + page;
  Block b;
  b.addr = es.base;
  b.size = va;
  b.stream = stream;
  b.small = pool.small;
  b.mapped = false;
  b.segment = static_cast<uint32_t>(expandables_.size());
  expandables_.push_back(es);
  uint32_t id = new_block(b);
  pool.unmapped.insert(AddrKey{stream, b.addr, id});
  return id;
}

std::vector<uint32_t> AllocatorModel::adopt_segment(uint64_t addr, uint16_t stream, bool small, bool expandable,
                                                    const std::vector<StartBlock>& blocks) {
  Pool& pool = pool_of(small);
  uint64_t size = 0;
  for (const StartBlock& b : blocks) size += b.size;
  uint32_t head;
  if (expandable) {
    head = new_expandable(pool, stream);
    if (!map(head, size, true)) return {};
    erase_free(head);
  } else {
    head = new_segment(pool, size, size, stream, true, addr);
  }
  // Carve the blocks off the front, one by one; what is left after the last is a free block.
  std::vector<uint32_t> handles;
  uint32_t rest = head;
  for (size_t i = 0; i < blocks.size() && rest != kNone; ++i) {
    uint32_t id = rest;
    if (blocks_[rest].size > blocks[i].size) {
      Block front = blocks_[rest];
      front.size = blocks[i].size;
      front.next = rest;
      id = new_block(front);
      if (front.prev != kNone) blocks_[front.prev].next = id;
      blocks_[rest].prev = id;
      blocks_[rest].addr += blocks[i].size;
      blocks_[rest].size -= blocks[i].size;
    } else {
      rest = kNone;
    }
    if (blocks[i].state == BlockState::inactive) {
      insert_free(id);
      handles.push_back(kNone);
      continue;
    }
    Block& b = blocks_[id];
    b.allocated = true;
    b.tag = blocks[i].tag;
    b.handle = static_cast<uint32_t>(handles_.size());
    handles_.push_back(id);
    allocated_ += b.size;
    handles.push_back(b.handle);
    if (blocks[i].state == BlockState::active_pending_free) free_requested(b.handle);
  }
  if (rest != kNone) insert_free(rest);
  return handles;
}

// map_block: back the front of an unmapped range with whole pages and merge it with free neighbours.
bool AllocatorModel::map(uint32_t id, uint64_t size, bool force) {
  const Expandable& es = expandables_[blocks_[id].segment];
  uint64_t bytes = round_up(size, es.page);
  if (!force && !within_device(bytes)) return false;
  Block& b = blocks_[id];
  Pool& pool = pool_of(b.small);
  pool.unmapped.erase(AddrKey{b.stream, b.addr, id});
  b.mapped = true;
  if (bytes < b.size) {
    Block rest = b;
    rest.addr = b.addr + bytes;
    rest.size = b.size - bytes;
    rest.mapped = false;
    rest.prev = id;
    uint32_t rid = new_block(rest);
    Block& m = blocks_[id];
    if (m.next != kNone) blocks_[m.next].prev = rid;
    m.next = rid;
    m.size = bytes;
    pool.unmapped.insert(AddrKey{rest.stream, rest.addr, rid});
  }
  uint16_t stream = blocks_[id].stream;
  for (uint32_t n : {blocks_[id].prev, blocks_[id].next})
    if (may_merge(n) && blocks_[n].mapped) merge(id, n);
  insert_free(id);
  reserved_ += bytes;
  ++device_allocs_;
  note(Action::segment_map, bytes, stream);
  return true;
}

// unmap_block: give back the whole pages inside a free block; the partial pages at its ends stay free blocks.
void AllocatorModel::unmap(uint32_t id) {
  const Expandable& es = expandables_[blocks_[id].segment];
  uint64_t start = blocks_[id].addr, end = start + blocks_[id].size;
  uint64_t first = es.base + round_up(start - es.base, es.page);
  uint64_t last = es.base + (end - es.base) / es.page * es.page;
  if (first >= last) return;
  erase_free(id);
  auto piece = [&](uint64_t addr, uint64_t size, bool before) {
    Block p = blocks_[id];
    p.addr = addr;
    p.size = size;
    p.prev = before ? blocks_[id].prev : id;
    p.next = before ? id : blocks_[id].next;
    uint32_t pid = new_block(p);
    if (before) {
      if (p.prev != kNone) blocks_[p.prev].next = pid;
      blocks_[id].prev = pid;
    } else {
      if (p.next != kNone) blocks_[p.next].prev = pid;
      blocks_[id].next = pid;
    }
    insert_free(pid);
  };
  if (first > start) piece(start, first - start, true);
  if (end > last) piece(last, end - last, false);
  Block& b = blocks_[id];
  b.addr = first;
  b.size = last - first;
  b.mapped = false;
  for (uint32_t n : {b.prev, b.next})
    if (may_merge(n) && !blocks_[n].mapped) merge(id, n);
  const Block& u = blocks_[id];
  pool_of(u.small).unmapped.insert(AddrKey{u.stream, u.addr, id});
  reserved_ -= last - first;
  ++device_frees_;
  note(Action::segment_unmap, last - first, u.stream);
}

uint32_t AllocatorModel::segments() const {
  uint32_t n = 0;
  for (const Block& b : blocks_)
    if (b.live && b.mapped && (b.prev == kNone || !blocks_[b.prev].mapped)) ++n;
  return n;
}

std::vector<AllocatorModel::SegmentView> AllocatorModel::layout() const {
  std::vector<SegmentView> out;
  for (uint32_t head = 0; head < blocks_.size(); ++head) {
    const Block& h = blocks_[head];
    if (!h.live || !h.mapped || (h.prev != kNone && blocks_[h.prev].mapped)) continue;
    SegmentView seg{h.addr, 0, h.stream, h.small, h.segment != kNone, {}};
    for (uint32_t id = head; id != kNone && blocks_[id].mapped; id = blocks_[id].next) {
      const Block& b = blocks_[id];
      bool used = b.allocated || b.pending;
      seg.blocks.push_back({b.addr, b.size, used ? b.tag : kNone, used});
      seg.size += b.size;
    }
    out.push_back(std::move(seg));
  }
  std::sort(out.begin(), out.end(), [](const SegmentView& a, const SegmentView& b) { return a.addr < b.addr; });
  return out;
}

}  // namespace memrec
