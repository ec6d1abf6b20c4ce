// The chunk layout of docs/format.md, for tests that damage a .memrec file chunk by chunk: a 16-byte file header,
// then [type][raw size][compressed size] + a zstd frame per chunk.
#pragma once

#include <zstd.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace memrec::test {

struct Chunk {
  size_t offset;  // of the chunk header
  uint32_t type, raw, compressed;
};

inline std::vector<Chunk> chunks_of(const std::string& bytes) {
  std::vector<Chunk> out;
  for (size_t off = 16; off + 12 <= bytes.size();) {
    Chunk c{off, 0, 0, 0};
    std::memcpy(&c.type, bytes.data() + off, 4);
    std::memcpy(&c.raw, bytes.data() + off + 4, 4);
    std::memcpy(&c.compressed, bytes.data() + off + 8, 4);
    out.push_back(c);
    off += 12 + c.compressed;
  }
  return out;
}

// Chunk c's raw payload; shorter than c.raw when its frame does not decompress.
inline std::string payload_of(const std::string& bytes, const Chunk& c) {
  std::string raw(c.raw, '\0');
  size_t n = ZSTD_decompress(raw.data(), raw.size(), bytes.data() + c.offset + 12, c.compressed);
  raw.resize(ZSTD_isError(n) ? 0 : n);
  return raw;
}

// The file with chunk c's payload replaced by `raw`, compressed again behind a valid checksum.
inline std::string with_payload(const std::string& bytes, const Chunk& c, const std::string& raw) {
  std::string frame(ZSTD_compressBound(raw.size()), '\0');
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  frame.resize(ZSTD_compress2(cctx, frame.data(), frame.size(), raw.data(), raw.size()));
  ZSTD_freeCCtx(cctx);
  auto size = static_cast<uint32_t>(frame.size()), raw_size = static_cast<uint32_t>(raw.size());
  std::string header = bytes.substr(c.offset, 12);
  std::memcpy(header.data() + 4, &raw_size, 4);
  std::memcpy(header.data() + 8, &size, 4);
  return bytes.substr(0, c.offset) + header + frame + bytes.substr(c.offset + 12 + c.compressed);
}

// The file with chunk c's payload edited.
inline std::string with_payload(const std::string& bytes, const Chunk& c,
                                const std::function<void(std::string&)>& edit) {
  std::string raw = payload_of(bytes, c);
  edit(raw);
  return with_payload(bytes, c, raw);
}

}  // namespace memrec::test
