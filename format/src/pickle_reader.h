// A safe unpickler for Python pickle protocols 2-5 that builds a value tree and never runs code.
// Private to the snapshot library: pickle_import.cpp walks the tree into a Snapshot.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <sys/mman.h>

namespace memrec::pickle {

enum class Kind : uint8_t { none, boolean, integer, uinteger, floating, string, bytes, list, tuple, dict };
std::string_view to_string(Kind k);

// One value. 16 bytes: a history of millions of entries makes tens of millions of these.
// Containers keep their items in chunks (one per APPENDS/SETITEMS batch) so that a container filled in several
// batches, with other values built in between, needs no copying. Dict items alternate key, value.
struct Node {
  Kind kind = Kind::none;
  uint16_t depth = 0;  // containers: 1 + the deepest item added; bounds nesting
  uint32_t count = 0;  // string/bytes: length; containers: items (a dict counts keys and values)
  union {
    int64_t i;      // integer, boolean
    uint64_t u;     // uinteger: values in [2^63, 2^64)
    double f;       // floating
    struct {
      uint32_t first;  // string/bytes: offset into the input; containers: first chunk (or kNoChunk)
      uint32_t last;   // containers: last chunk
    } ref;
  };
  Node() : i(0) {}
};
static_assert(sizeof(Node) == 16);

struct Chunk {
  uint32_t begin = 0;  // into Tree::items
  uint32_t count = 0;
  uint32_t next = 0;   // next chunk or kNoChunk
};
inline constexpr uint32_t kNoChunk = UINT32_MAX;

// The parsed pickle. Nodes refer to each other by index, so memo cycles cannot leak and nothing recurses.
class Tree {
 public:
  std::span<const uint8_t> input;
  std::vector<Node> nodes;
  std::vector<uint32_t> items;
  std::vector<Chunk> chunks;
  uint32_t root = 0;

  const Node& operator[](uint32_t id) const { return nodes[id]; }
  std::string_view string(uint32_t id) const {
    const Node& n = nodes[id];
    return {reinterpret_cast<const char*>(input.data()) + n.ref.first, n.count};
  }
  // Calls f(item) for each item of a container, in order.
  template <typename F>
  void for_each_item(uint32_t id, F&& f) const {
    for (uint32_t c = nodes[id].ref.first; c != kNoChunk; c = chunks[c].next)
      for (uint32_t k = chunks[c].begin, e = k + chunks[c].count; k < e; ++k) f(items[k]);
  }
};

// Asks Linux for transparent huge pages on a reserved, untouched vector. The tree of a large pickle, the events and
// the pickle written span hundreds of MB; faulting them in 4 KiB pages took half the import time in our VMs.
template <typename T>
inline void advise_huge_pages(std::vector<T>& v) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  auto begin = (reinterpret_cast<uintptr_t>(v.data()) + kHuge - 1) & ~(kHuge - 1);
  auto end = (reinterpret_cast<uintptr_t>(v.data() + v.capacity())) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // a hint: failure is fine
}

inline constexpr uint16_t kMaxDepth = 200;

// Parses `bytes` (which must outlive the tree: strings point into it). Throws memrec::Error with the byte
// offset on anything outside the data-only subset or malformed.
Tree parse(std::span<const uint8_t> bytes);

// Throws Error unless `head`, the first bytes of an input of `size` bytes, starts a pickle parse() can read: two
// bytes tell, so a reader can refuse a large file of something else before reading it whole.
void check_start(std::span<const uint8_t> head, uint64_t size);

}  // namespace memrec::pickle
