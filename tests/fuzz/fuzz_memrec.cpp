// libFuzzer target: the .memrec reader, whole and for ranges, must turn any bytes into a Snapshot or a memrec::Error.
//
// Every chunk is a zstd frame with a content checksum, so plain byte mutations of a payload end at "bad
// checksum". The custom mutator below also mutates behind the checksum: it decompresses one chunk, lets
// libFuzzer mutate the raw payload, and recompresses it with a valid checksum, so the payload decoders (varint
// columns, cereal tables, id checks) see damaged data too.
#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "memrec/format.h"
#include "memrec/range.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

constexpr size_t kFileHeaderSize = 16;  // docs/format.md
constexpr size_t kChunkHeaderSize = 12;  // type u32, raw size u32, compressed size u32
constexpr uint32_t kMaxRaw = 1 << 20;    // larger chunks are left to the byte mutations

uint32_t get_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void put_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

struct Chunk {
  size_t offset, end;
  uint32_t raw_size;
};

// The complete chunks whose raw size the mutator is willing to decompress.
std::vector<Chunk> chunks_of(const uint8_t* data, size_t size) {
  std::vector<Chunk> out;
  for (size_t off = kFileHeaderSize; off + kChunkHeaderSize <= size;) {
    size_t end = off + kChunkHeaderSize + get_u32(data + off + 8);
    if (end > size) break;
    if (get_u32(data + off + 4) <= kMaxRaw) out.push_back({off, end, get_u32(data + off + 4)});
    off = end;
  }
  return out;
}

// Replaces chunk `c` of `data` by its raw payload mutated and recompressed; 0 when it cannot.
size_t mutate_payload(uint8_t* data, size_t size, size_t max_size, const Chunk& c) {
  std::vector<uint8_t> raw(2 * c.raw_size + 64);
  size_t n = ZSTD_decompress(raw.data(), raw.size(), data + c.offset + kChunkHeaderSize,
                             c.end - c.offset - kChunkHeaderSize);
  if (ZSTD_isError(n)) return 0;
  n = LLVMFuzzerMutate(raw.data(), n, raw.size());
  std::vector<uint8_t> chunk(kChunkHeaderSize + ZSTD_compressBound(n));
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  size_t compressed = ZSTD_compress2(cctx, chunk.data() + kChunkHeaderSize, chunk.size() - kChunkHeaderSize,
                                     raw.data(), n);
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(compressed)) return 0;
  chunk.resize(kChunkHeaderSize + compressed);
  std::memcpy(chunk.data(), data + c.offset, 4);  // the type
  put_u32(chunk.data() + 4, static_cast<uint32_t>(n));
  put_u32(chunk.data() + 8, static_cast<uint32_t>(compressed));
  size_t tail = size - c.end, new_size = c.offset + chunk.size() + tail;
  if (new_size > max_size) return 0;
  std::memmove(data + c.offset + chunk.size(), data + c.end, tail);
  std::memcpy(data + c.offset, chunk.data(), chunk.size());
  return new_size;
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  std::minstd_rand rng(seed);
  std::vector<Chunk> chunks = chunks_of(data, size);
  if (!chunks.empty() && rng() % 4 != 0)  // three in four behind the checksum
    if (size_t n = mutate_payload(data, size, max_size, chunks[rng() % chunks.size()])) return n;
  return LLVMFuzzerMutate(data, size, max_size);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  try {
    memrec::read_buffer(bytes);
  } catch (const memrec::Error&) {
  }
  // Range reads go through the index and the live states, which a whole read does not look into.
  for (const char* steps : {"0..0", "1..3"}) {
    try {
      memrec::read_range(bytes, *memrec::parse_range("", steps));
    } catch (const memrec::Error&) {
    }
  }
  try {
    memrec::read_range(bytes, *memrec::parse_range("1ms..2ms", ""));
  } catch (const memrec::Error&) {
  }
  return 0;
}
