// A model of c10's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, PyTorch 2.4 to 2.11), driven by the
// requests a run made, to predict what the allocator would reserve under other PYTORCH_CUDA_ALLOC_CONF settings.
//
// It keeps the allocator's own structures: blocks linked within their segment, free blocks in per-pool sets ordered
// by (stream, size, address) for the best-fit search, the small (<= 1 MiB) and large pools, 2 MiB / 20 MiB / rounded
// segments, splitting and merging, max_split_size, the release-and-retry steps before an OOM,
// garbage_collection_threshold and expandable segments. Addresses are the model's own.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec {

namespace alloc_sizes {
inline constexpr uint64_t kMinBlockSize = 512;          // every block is a multiple of this
inline constexpr uint64_t kSmallSize = 1ull << 20;      // largest request served by the small pool
inline constexpr uint64_t kSmallBuffer = 2ull << 20;    // small pool segment
inline constexpr uint64_t kLargeBuffer = 20ull << 20;   // segment for 1 to 10 MiB requests
inline constexpr uint64_t kMinLargeAlloc = 10ull << 20; // from here a segment is the request rounded
inline constexpr uint64_t kRoundLarge = 2ull << 20;     // ... up to this
inline constexpr size_t kRoundupIntervals = 16;         // roundup_power2_divisions: 1 MiB, 2 MiB, ... 32 GiB and up
}  // namespace alloc_sizes

// The native allocator's settings, as PYTORCH_CUDA_ALLOC_CONF gives them.
struct AllocConf {
  uint64_t max_split_size = std::numeric_limits<uint64_t>::max();  // max_split_size_mb; max = unset
  uint64_t max_non_split_rounding = alloc_sizes::kLargeBuffer;     // max_non_split_rounding_mb
  double garbage_collection_threshold = 0;                          // 0 = off
  double memory_fraction = 0;                                       // per_process_memory_fraction; 0 = unset
  bool expandable_segments = false;
  std::array<uint32_t, alloc_sizes::kRoundupIntervals> roundup_divisions{};  // per size interval; 0 or 1 = 512 B

  bool operator==(const AllocConf&) const = default;
};

// Parses PYTORCH_CUDA_ALLOC_CONF's syntax ("expandable_segments:True,max_split_size_mb:128",
// "roundup_power2_divisions:[256:1,512:2,>:8]"), with c10's limits. Options that do not change device memory
// (pinned_*, release_lock_on_cudamalloc, ...) are accepted and ignored; backend:cudaMallocAsync is refused (another
// allocator). Throws Error with one sentence naming the bad part.
AllocConf parse_alloc_conf(std::string_view text);
// The settings in PYTORCH_CUDA_ALLOC_CONF's syntax, only those that differ from the defaults ("" for the defaults).
std::string to_string(const AllocConf& c);

// The settings a run was recorded with, from metadata["allocator_settings"] (memrec's recorder and PyTorch's
// snapshots both write it); nullopt when the file does not say. Settings of newer PyTorch versions that the model does
// not know are skipped.
std::optional<AllocConf> recorded_alloc_conf(const Snapshot& s);

// What the model's allocator did to reserved memory, in the trace's terms.
struct SegmentAction {
  Action action = Action::segment_alloc;  // segment_alloc, segment_free, segment_map, segment_unmap
  uint64_t size = 0;
  uint16_t stream = 0;
  bool operator==(const SegmentAction&) const = default;
};

class AllocatorModel {
 public:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

  // device_total: the device's memory (per_process_memory_fraction and garbage_collection_threshold are fractions of
  // it); device_limit: the bytes cudaMalloc can give the allocator in all (less than the total: the CUDA context and
  // libraries hold some). Either may be max() for unknown / no limit.
  AllocatorModel(const AllocConf& conf, uint64_t device_total, uint64_t device_limit);

  // Allocates like DeviceCachingAllocator::malloc and returns a handle for the allocation. `tag` is the caller's,
  // kept on the block (the event that allocated it). When even the release-and-retry steps leave no room, the request
  // is counted as an OOM and served past the limit, so that the replay goes on.
  uint32_t malloc(uint64_t size, uint16_t stream, uint32_t tag = kNone);
  // The program freed the allocation: it stops counting as allocated.
  void free_requested(uint32_t handle);
  // Its stream uses are over (at once without record_stream): the block returns to its pool. A free the allocator
  // already completed (release_cached_blocks synchronizes and completes every pending free) is ignored.
  void free_completed(uint32_t handle);
  // Tries a request the way the OOM path does, without keeping the block: whether it would have succeeded.
  bool try_malloc(uint64_t size, uint16_t stream);
  // torch.cuda.empty_cache(): releases every cached block that is not split.
  void empty_cache();
  // Takes over a segment as a snapshot lists it (a cudaMalloc segment, or the mapped front of an expandable one),
  // with its blocks in address order. Returns a handle per block, kNone for the free ones.
  struct StartBlock {
    uint64_t size;
    BlockState state;
    uint32_t tag;
  };
  std::vector<uint32_t> adopt_segment(uint64_t addr, uint16_t stream, bool small, bool expandable,
                                      const std::vector<StartBlock>& blocks);
  // Where cudaMalloc put the run's segments, in order: a new segment of the size the next of them has gets its
  // address. Among cached blocks of one size the best-fit search takes the lowest address, so a replay under the
  // run's own settings needs CUDA's addresses to choose as the run did. Other segments are placed top-down, as CUDA
  // tends to.
  void use_segment_addresses(std::vector<std::pair<uint64_t, uint64_t>> sizes_and_addresses) {
    recorded_addresses_ = std::move(sizes_and_addresses);
  }

  uint64_t reserved() const { return reserved_; }
  uint64_t allocated() const { return allocated_; }  // block bytes (rounded), as memory_stats() counts them
  uint64_t ooms() const { return ooms_; }
  uint64_t device_allocs() const { return device_allocs_; }  // cudaMalloc and cuMemMap calls
  uint64_t device_frees() const { return device_frees_; }
  uint32_t segments() const;  // reserved ranges: cudaMalloc segments and mapped runs of expandable segments
  // Keeps every segment action in segment_actions() (off by default: replays of long runs need not pay for it).
  void keep_segment_actions(bool on) { keep_actions_ = on; }
  const std::vector<SegmentAction>& segment_actions() const { return actions_; }

  // The blocks of each reserved range, in address order: what the allocator's snapshot() lists.
  struct BlockView {
    uint64_t addr, size;
    uint32_t tag;  // kNone when free
    bool allocated;
  };
  struct SegmentView {
    uint64_t addr, size;
    uint16_t stream;
    bool small, expandable;
    std::vector<BlockView> blocks;
  };
  std::vector<SegmentView> layout() const;

  static uint64_t round_size(const AllocConf& c, uint64_t size);
  static uint64_t allocation_size(uint64_t size);

 private:
  struct Block {
    uint64_t addr = 0, size = 0;
    int64_t gc_base = 0;
    uint32_t prev = kNone, next = kNone;
    uint32_t tag = kNone, handle = kNone;
    uint32_t segment = kNone;  // the expandable segment it lies in; kNone for a cudaMalloc segment
    uint16_t stream = 0;
    bool small = false, allocated = false, pending = false, mapped = true, live = false;
  };
  struct Key {  // free blocks ordered as c10's BlockComparatorSize: stream, size, address
    uint16_t stream;
    uint64_t size, addr;
    uint32_t id;
    auto operator<=>(const Key& o) const {
      if (stream != o.stream) return stream <=> o.stream;
      if (size != o.size) return size <=> o.size;
      return addr <=> o.addr;
    }
  };
  struct AddrKey {  // unmapped ranges of expandable segments, as BlockComparatorAddress
    uint16_t stream;
    uint64_t addr;
    uint32_t id;
    auto operator<=>(const AddrKey& o) const {
      if (stream != o.stream) return stream <=> o.stream;
      return addr <=> o.addr;
    }
  };
  struct Pool {
    bool small;
    std::set<Key> blocks;
    std::set<AddrKey> unmapped;
    int64_t get_free_calls = 0;
  };
  struct Expandable {
    uint64_t base, page;
    uint16_t stream;
    bool small;
    bool alive = true;
  };

  Pool& pool_of(bool small) { return small ? small_ : large_; }
  uint32_t new_block(const Block& b);
  void drop_block(uint32_t id);
  Key key(uint32_t id) const { return {blocks_[id].stream, blocks_[id].size, blocks_[id].addr, id}; }
  void insert_free(uint32_t id);
  void erase_free(uint32_t id);
  bool may_merge(uint32_t id) const;

  uint32_t find_free(Pool& pool, uint64_t size, uint16_t stream);
  bool should_split(uint32_t id, uint64_t size) const;
  uint32_t take(uint32_t id, uint64_t size);
  uint32_t find_or_create(uint64_t size, uint16_t stream, bool force);
  uint32_t hand_out(uint32_t id, uint64_t size, uint32_t tag);
  uint32_t new_segment(Pool& pool, uint64_t size, uint64_t alloc_size, uint16_t stream, bool ignore_limit,
                       uint64_t addr = 0);
  uint64_t segment_address(uint64_t size);
  bool within_fraction(uint64_t bytes) const;
  bool within_device(uint64_t bytes) const;
  bool release_available(Pool& pool, uint64_t size, uint16_t stream);
  void release_cached();
  void release_pool(Pool& pool);
  void release_segment(uint32_t id);
  void garbage_collect();
  void return_block(uint32_t id);
  void merge(uint32_t dst, uint32_t src);

  // Expandable segments.
  uint32_t expandable_block(Pool& pool, uint64_t size, uint16_t stream, bool ignore_limit);
  uint32_t expandable_candidate(Pool& pool, uint64_t size, uint16_t stream);
  uint32_t new_expandable(Pool& pool, uint16_t stream);
  bool map(uint32_t id, uint64_t size, bool ignore_limit);
  void unmap(uint32_t id);

  void note(Action a, uint64_t size, uint16_t stream);

  AllocConf conf_;
  uint64_t total_, limit_, allowed_;  // allowed_: the fraction's bytes; max when no fraction is set
  uint64_t va_size_;                  // address space of one expandable segment
  std::vector<Block> blocks_;
  std::vector<uint32_t> free_ids_;
  std::vector<Expandable> expandables_;
  Pool small_{true, {}, {}}, large_{false, {}, {}};
  std::vector<uint32_t> handles_;  // handle -> block; kNone once its free completed
  std::vector<uint32_t> pending_;  // handles freed but not completed, and some completed since (dropped lazily)
  size_t pending_count_ = 0;       // how many in pending_ are still pending
  std::vector<std::pair<uint64_t, uint64_t>> recorded_addresses_;
  size_t next_recorded_ = 0;
  uint64_t reserved_ = 0, allocated_ = 0;
  uint64_t next_down_ = 1ull << 45;     // cudaMalloc segments without a recorded address, placed downwards
  uint64_t next_expandable_ = 1ull << 46;  // expandable segments' address space, placed upwards
  uint64_t ooms_ = 0, device_allocs_ = 0, device_frees_ = 0;
  bool keep_actions_ = false;
  std::vector<SegmentAction> actions_;
};

}  // namespace memrec
