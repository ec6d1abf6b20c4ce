// A .memrec file on disk (docs/format.md): a 16-byte file header, then chunks of
// [type u32][raw size u32][compressed size u32][zstd frame with content checksum].
// Private to the format library: the writer and the reader share these constants, the chunk types and the zstd
// frames, so that what one writes is exactly what the other accepts.
#pragma once

#include <array>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <sys/stat.h>

#include <cstring>
#include <memory>
#include <string>
#include <string_view>

struct ZSTD_CCtx_s;
struct ZSTD_DCtx_s;

namespace memrec::format_detail {

static_assert(std::endian::native == std::endian::little, "the .memrec format is little-endian");

constexpr std::array<char, 8> kMagic = {'\x89', 'M', 'E', 'M', 'R', 'E', 'C', '\n'};
constexpr size_t kFileHeaderSize = 16;   // magic, version u32, flags u32
constexpr size_t kChunkHeaderSize = 12;  // type u32, raw size u32, compressed size u32
constexpr uint32_t kMaxRawSize = 64u << 20;     // the reader refuses larger chunks before allocating
constexpr size_t kRowsPerChunk = 1 << 16;       // events, kernels, scopes per chunk the writer makes
constexpr uint64_t kMaxRowsPerChunk = 1 << 20;  // what the reader accepts
constexpr size_t kTableBytesPerChunk = 1 << 20; // the writer splits string tables near this size

enum class ChunkType : uint32_t {
  strings = 1, frames, stacks, streams, scopes, scope_ends, events, kernels, metadata, end_state, footer,
  event_contexts, device_memory, memory_samples, owners, index, live_state, summary,
};
constexpr uint32_t kChunkTypeCount = 18;
constexpr std::array<std::string_view, kChunkTypeCount + 1> kChunkTypeNames = {
    "?",      "strings", "frames",  "stacks",   "streams",   "scopes",
    "scope_ends", "events", "kernels", "metadata", "end_state", "footer", "event_contexts",
    "device_memory", "memory_samples", "owners", "index", "live_state", "summary"};

// ---- Bytes on disk ----

template <class T> void put_le(char* p, T v) { std::memcpy(p, &v, sizeof v); }
template <class T> T get_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline std::string errno_text() { return std::strerror(errno); }

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

// A file opened for reading, with what fstat says of it (size, identity): a file that cannot be opened or is a
// folder is one clear error.
struct OpenedFile {
  File file;
  struct stat st {};
};
OpenedFile open_for_reading(const std::string& path);
[[noreturn]] void read_failed(const std::string& path);

// ---- zstd frames: one per chunk, each with its content size and a checksum. ----

// The most a raw chunk of raw_size bytes can compress to; a larger compressed size is corrupt.
size_t compress_bound(size_t raw_size);

// Frees zstd's contexts, declared here without zstd.h.
struct ZstdFree {
  void operator()(ZSTD_CCtx_s* c) const;
  void operator()(ZSTD_DCtx_s* d) const;
};

// Compresses chunk after chunk, reusing its context and output buffer.
class Compressor {
 public:
  Compressor();
  // The frame for `raw`, valid until the next call; a zstd error is thrown prefixed with `name`.
  std::string_view compress(std::string_view raw, std::string_view name);

 private:
  std::unique_ptr<ZSTD_CCtx_s, ZstdFree> cctx_;
  std::string out_;
};

// Decompresses chunk after chunk, reusing its context and output buffer.
class Decompressor {
 public:
  Decompressor();
  // The raw payload, valid until the next call. Refuses a frame that is not exactly one zstd frame of raw_size
  // bytes with a checksum, and one whose checksum is wrong.
  std::string_view decompress(std::string_view compressed, uint32_t raw_size);

 private:
  std::unique_ptr<ZSTD_DCtx_s, ZstdFree> dctx_;
  std::string raw_;
};

}  // namespace memrec::format_detail
