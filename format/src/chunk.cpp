// The zstd frames of .memrec chunks (docs/format.md): level 3, content size and checksum in every frame.
#include "chunk.h"

#include <zstd.h>
#include <zstd_errors.h>

#include <fmt/format.h>

#include "memrec/snapshot.h"

namespace memrec::format_detail {

OpenedFile open_for_reading(const std::string& path) {
  OpenedFile o{File(std::fopen(path.c_str(), "rb"))};
  if (!o.file) throw Error(fmt::format("{}: cannot open: {}", path, errno_text()));
  if (fstat(fileno(o.file.get()), &o.st) != 0) throw Error(fmt::format("{}: cannot stat: {}", path, errno_text()));
  if (S_ISDIR(o.st.st_mode)) throw Error(fmt::format("{}: is a directory, not a .memrec file", path));
  return o;
}

void read_failed(const std::string& path) { throw Error(fmt::format("{}: read failed: {}", path, errno_text())); }

namespace {

constexpr int kZstdLevel = 3;

}  // namespace

size_t compress_bound(size_t raw_size) { return ZSTD_compressBound(raw_size); }

void ZstdFree::operator()(ZSTD_CCtx_s* c) const { ZSTD_freeCCtx(c); }
void ZstdFree::operator()(ZSTD_DCtx_s* d) const { ZSTD_freeDCtx(d); }

Compressor::Compressor() : cctx_(ZSTD_createCCtx()) {
  ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_compressionLevel, kZstdLevel);
  ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_contentSizeFlag, 1);
}

std::string_view Compressor::compress(std::string_view raw, std::string_view name) {
  out_.resize(ZSTD_compressBound(raw.size()));
  size_t n = ZSTD_compress2(cctx_.get(), out_.data(), out_.size(), raw.data(), raw.size());
  if (ZSTD_isError(n)) throw Error(fmt::format("{}: zstd: {}", name, ZSTD_getErrorName(n)));
  return {out_.data(), n};
}

Decompressor::Decompressor() : dctx_(ZSTD_createDCtx()) {}

std::string_view Decompressor::decompress(std::string_view compressed, uint32_t raw_size) {
  // Frame header (RFC 8878): magic, then a descriptor byte whose bit 2 says a content checksum follows.
  if (compressed.size() < 5 || get_le<uint32_t>(compressed.data()) != ZSTD_MAGICNUMBER)
    throw Error("not a zstd frame");
  if (!(static_cast<uint8_t>(compressed[4]) & 0x04)) throw Error("zstd frame without a checksum");
  if (ZSTD_getFrameContentSize(compressed.data(), compressed.size()) != raw_size)
    throw Error("zstd frame content size differs from the chunk's raw size");
  if (ZSTD_findFrameCompressedSize(compressed.data(), compressed.size()) != compressed.size())
    throw Error("zstd frame size differs from the chunk's");
  raw_.resize(raw_size);
  size_t n = ZSTD_decompressDCtx(dctx_.get(), raw_.data(), raw_.size(), compressed.data(), compressed.size());
  if (ZSTD_isError(n)) {
    if (ZSTD_getErrorCode(n) == ZSTD_error_checksum_wrong) throw Error("bad checksum (corrupt data)");
    throw Error(fmt::format("corrupt data: zstd: {}", ZSTD_getErrorName(n)));
  }
  if (n != raw_size) throw Error(fmt::format("decompressed {} bytes, expected {}", n, raw_size));
  return raw_;
}

}  // namespace memrec::format_detail
