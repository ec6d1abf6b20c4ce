// The allocator's state after the first events of a history: the live segments, the live blocks (allocated, or
// freed and pending on streams) and the owner rows that name them. The writer keeps one as it writes and stores it
// every so many events (live_state chunks); a range read starts from the last one before its range, applies the
// events up to the range, and gives the range its start and end state from it (docs/format.md, The index).
// Private to the format library.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "address_map.h"
#include "memrec/snapshot.h"
#include "payload.h"

namespace memrec::format_detail {

class LiveState {
 public:
  LiveState() = default;
  // The state before the first event: the recorded start state when the snapshot has one.
  explicit LiveState(const Snapshot& s);
  LiveState(LiveState&&) = default;
  LiveState& operator=(LiveState&&) = default;

  // Applies the next event, after the owner rows placed before it (name()).
  void apply(const Event& e);
  // Owner row `row`: it names the block live at its address until that block is freed.
  void name(uint64_t row, const Owner& o);

  // The live segments of every device with the blocks in them, in address order, each segment's free ranges as
  // inactive blocks: what PyTorch's snapshot lists. Segments the history made carry the pool and size class that
  // `recorded` (the file's start or end state) gives the same address and size, else the default pool.
  std::vector<Segment> segments(const Snapshot& recorded) const;
  // The owner rows that name live blocks, in row order.
  std::vector<std::pair<uint64_t, Owner>> owners() const;
  size_t blocks() const;

  // The state's rows, as a live_state chunk stores them.
  struct BlockRow {
    uint8_t device = 0;
    uint64_t addr = 0, requested = 0, size = 0;
    uint32_t stack = 0;
    bool pending = false;  // freed, the free pending on streams
  };
  struct SegmentRow {
    Segment segment;          // without blocks
    bool from_event = false;  // made by a segment event: its pool and size class are not known
  };
  struct OwnerRow {
    uint64_t row = 0;
    Owner owner;
  };
  std::vector<SegmentRow> segment_rows() const;
  std::vector<BlockRow> block_rows() const;
  std::vector<OwnerRow> owner_rows() const;
  static LiveState from_rows(const std::vector<SegmentRow>& segments, const std::vector<BlockRow>& blocks,
                             const std::vector<OwnerRow>& owners);

 private:
  struct Live {
    uint64_t requested = 0, size = 0;
    uint32_t stack = 0;
    bool pending = false;
  };
  using Key = std::pair<uint8_t, uint64_t>;  // device, address
  AddressMap<Live>& on(uint8_t device);
  void put_block(uint8_t device, uint64_t addr, const Live& b);
  void forget_owners(uint8_t device, uint64_t addr);

  std::map<Key, SegmentRow> segments_;
  std::array<std::unique_ptr<AddressMap<Live>>, 256> blocks_;  // by device, made on first use
  std::map<Key, std::vector<OwnerRow>> owners_;
};

template <class IO> void fields(IO& io, LiveState::SegmentRow& r) {
  fields(io, r.segment);
  io.flag(r.from_event);
}
template <class IO> void fields(IO& io, LiveState::BlockRow& b) {
  io(b.device, b.addr, b.requested, b.size, b.stack);
  io.flag(b.pending);
}
template <class IO> void fields(IO& io, LiveState::OwnerRow& o) {
  io(o.row);
  fields(io, o.owner);
}

}  // namespace memrec::format_detail
