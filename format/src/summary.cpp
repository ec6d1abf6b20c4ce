// The summary chunk (docs/format.md, The summary): put before the footer of a closed file, found from the footer.
#include "memrec/format.h"

#include "chunk.h"
#include "payload.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace memrec {

using namespace format_detail;

namespace {

// The end of a file, where the footer and (usually) the summary lie: read at once.
constexpr size_t kTailBytes = 16 << 10;
constexpr uint32_t kFooterRaw = 9 * sizeof(uint64_t);  // totals, the last index, the summary

struct Footer {
  uint64_t offset = 0;  // of its chunk header
  Totals totals;
  uint64_t index = 0, summary = 0;  // offsets; 0 = none
};

struct Tail {
  std::string bytes;
  uint64_t at = 0;  // the file offset of bytes[0]
  uint64_t size = 0;
};

// nullopt for a file that is not a .memrec file.
std::optional<Tail> read_tail(int fd, const std::string& path, uint64_t size) {
  char magic[kMagic.size()];
  if (size < kFileHeaderSize || ::pread(fd, magic, sizeof magic, 0) != sizeof magic ||
      std::memcmp(magic, kMagic.data(), sizeof magic) != 0)
    return std::nullopt;
  Tail t;
  t.size = size;
  t.at = size > kFileHeaderSize + kTailBytes ? size - kTailBytes : 0;
  t.bytes.resize(size - t.at);
  if (::pread(fd, t.bytes.data(), t.bytes.size(), static_cast<off_t>(t.at)) != static_cast<ssize_t>(t.bytes.size()))
    read_failed(path);
  return t;
}

// The footer is the last chunk: its header lies within 12 + compress_bound(72) bytes of the end. nullopt when the
// file has none (cut short).
std::optional<Footer> find_footer(const Tail& t, Decompressor& dec) {
  size_t span = kChunkHeaderSize + compress_bound(kFooterRaw);
  uint64_t from = std::max<uint64_t>(t.size > span ? t.size - span : 0, std::max<uint64_t>(t.at, kFileHeaderSize));
  for (uint64_t off = from; off + kChunkHeaderSize <= t.size; ++off) {
    const char* h = t.bytes.data() + (off - t.at);
    uint32_t raw = get_le<uint32_t>(h + 4), comp = get_le<uint32_t>(h + 8);
    if (get_le<uint32_t>(h) != static_cast<uint32_t>(ChunkType::footer) || raw < 7 * sizeof(uint64_t) ||
        raw > kFooterRaw || raw % sizeof(uint64_t) || comp != t.size - off - kChunkHeaderSize)
      continue;
    try {
      In in(dec.decompress(std::string_view(h + kChunkHeaderSize, comp), raw));
      Footer f;
      f.offset = off;
      fields(in, f.totals);
      if (in.remaining()) in(f.index);
      if (in.remaining()) in(f.summary);
      return f;
    } catch (const Error&) {  // bytes that only look like a footer's header
    }
  }
  return std::nullopt;
}

void pread_all(int fd, const std::string& path, char* into, size_t n, uint64_t at) {
  if (::pread(fd, into, n, static_cast<off_t>(at)) != static_cast<ssize_t>(n)) read_failed(path);
}

void write_all(int fd, const std::string& path, std::string_view bytes, uint64_t at) {
  if (::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(at)) != static_cast<ssize_t>(bytes.size()))
    throw Error(fmt::format("{}: write failed: {}", path, errno_text()));
}

// A chunk's bytes: header and frame.
std::string chunk_bytes(ChunkType type, std::string_view raw, Compressor& c, const std::string& path) {
  if (raw.size() > kMaxRawSize) throw Error(fmt::format("{}: a summary of {} bytes is too large", path, raw.size()));
  std::string_view frame = c.compress(raw, path);
  std::string out(kChunkHeaderSize, '\0');
  put_le(out.data(), static_cast<uint32_t>(type));
  put_le(out.data() + 4, static_cast<uint32_t>(raw.size()));
  put_le(out.data() + 8, static_cast<uint32_t>(frame.size()));
  return out.append(frame);
}

}  // namespace

std::optional<std::string> read_summary(const std::string& path) {
  OpenedFile f = open_for_reading(path);
  int fd = fileno(f.file.get());
  std::optional<Tail> tail = read_tail(fd, path, static_cast<uint64_t>(f.st.st_size));
  if (!tail) return std::nullopt;
  const Tail& t = *tail;
  Decompressor dec;
  std::optional<Footer> footer = find_footer(t, dec);
  if (!footer || footer->summary == 0) return std::nullopt;
  auto bad = [&](std::string_view why) {
    return Error(fmt::format("{}: the summary chunk at offset {} {}", path, footer->summary, why));
  };
  if (footer->summary < kFileHeaderSize || footer->summary + kChunkHeaderSize > footer->offset)
    throw bad("lies outside the file");
  std::string bytes;
  if (footer->summary >= t.at) bytes = t.bytes.substr(footer->summary - t.at, footer->offset - footer->summary);
  else bytes.resize(footer->offset - footer->summary), pread_all(fd, path, bytes.data(), bytes.size(), footer->summary);
  const char* h = bytes.data();
  uint32_t raw = get_le<uint32_t>(h + 4), comp = get_le<uint32_t>(h + 8);
  if (get_le<uint32_t>(h) != static_cast<uint32_t>(ChunkType::summary) || raw > kMaxRawSize ||
      comp != bytes.size() - kChunkHeaderSize)
    throw bad("is not one");
  try {
    return std::string(dec.decompress(std::string_view(h + kChunkHeaderSize, comp), raw));
  } catch (const Error& e) {
    throw bad(e.what());
  }
}

void attach_summary(const std::string& path, std::string_view summary) {
  File file(std::fopen(path.c_str(), "r+be"));
  if (!file) throw Error(fmt::format("{}: cannot open for writing: {}", path, errno_text()));
  int fd = fileno(file.get());
  struct stat st {};
  if (fstat(fd, &st) != 0) throw Error(fmt::format("{}: cannot stat: {}", path, errno_text()));
  std::optional<Tail> t = read_tail(fd, path, static_cast<uint64_t>(st.st_size));
  if (!t) throw Error(fmt::format("{}: not a .memrec file: it cannot hold a summary", path));
  Decompressor dec;
  std::optional<Footer> footer = find_footer(*t, dec);
  if (!footer) throw Error(fmt::format("{}: no footer (the file was cut short): it cannot hold a summary", path));
  uint64_t at = footer->summary ? footer->summary : footer->offset;  // a summary already there is replaced
  Compressor c;
  std::string bytes = chunk_bytes(ChunkType::summary, summary, c, path);
  std::string raw;
  {
    Out out(raw);
    fields(out, footer->totals);
    out(footer->index, at);
  }
  bytes += chunk_bytes(ChunkType::footer, raw, c, path);
  if (::ftruncate(fd, static_cast<off_t>(at)) != 0) throw Error(fmt::format("{}: cannot truncate: {}", path, errno_text()));
  write_all(fd, path, bytes, at);
}

}  // namespace memrec
