// The payload of a .memrec chunk of rows (events, kernels, scopes, device memory, samples): each field of a row type
// is a column of LEB128 varints, deltas zigzag-coded, after the first row index, the row count and each column's size.
// Private to the format library: the writer encodes, the reader decodes and checks every value.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "chunk.h"
#include "memrec/snapshot.h"
#include "payload.h"

namespace memrec::format_detail {

inline uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t unzigzag(uint64_t u) { return static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1); }

template <class T> uint64_t as_u64(T v) { return static_cast<uint64_t>(v); }

class ColumnEncoder {
 public:
  static constexpr size_t kMaxVarint = 10;
  // Starts n empty columns with room for `rows` values each, keeping earlier chunks' buffers.
  void reset(size_t n, size_t rows) {
    cols_.resize(n);
    for (Column& c : cols_) {
      if (c.bytes.size() < rows * kMaxVarint) c.bytes.resize(rows * kMaxVarint);
      c.used = 0;
    }
  }
  template <class T> void value(size_t c, const T& v) { put(cols_[c], as_u64(v)); }
  // Wrapping difference: any two values of T give a delta that decodes back exactly.
  template <class T> void delta(size_t c, const T& v, T prev) {
    put(cols_[c], zigzag(static_cast<int64_t>(as_u64(v) - as_u64(prev))));
  }
  size_t count() const { return cols_.size(); }
  std::string_view column(size_t c) const { return {cols_[c].bytes.data(), cols_[c].used}; }

 private:
  struct Column {
    std::string bytes;  // sized for the worst case up front: no capacity check per value
    size_t used = 0;
  };
  static void put(Column& c, uint64_t v) {
    char* p = c.bytes.data() + c.used;
    size_t n = 0;
    for (; v >= 0x80; v >>= 7) p[n++] = static_cast<char>(v | 0x80);
    p[n++] = static_cast<char>(v);
    c.used += n;
  }
  std::vector<Column> cols_;
};

template <size_t N> class ColumnDecoder {
 public:
  struct Cursor {
    const uint8_t* p;
    const uint8_t* end;
  };
  explicit ColumnDecoder(const std::array<Cursor, N>& cols) : cols_(cols) {}
  template <class T> [[gnu::always_inline]] void value(size_t c, T& v) {
    uint64_t x = get(c);
    if constexpr (std::is_enum_v<T>) {
      if (x >= kEnumCount<T>) fail(fmt::format("column {}: enum value {} out of range", c, x));
    } else if constexpr (sizeof(T) < 8) {
      if (x > std::numeric_limits<T>::max()) fail(fmt::format("column {}: value {} too large", c, x));
    }
    v = static_cast<T>(x);
  }
  template <class T> [[gnu::always_inline]] void delta(size_t c, T& v, T prev) {
    v = static_cast<T>(as_u64(prev) + static_cast<uint64_t>(unzigzag(get(c))));
  }
  void expect_end() const {
    for (size_t c = 0; c < N; ++c)
      if (cols_[c].p != cols_[c].end) throw Error(fmt::format("column {} has unused bytes", c));
  }

 private:
  [[gnu::always_inline]] uint64_t get(size_t c) {
    Cursor& k = cols_[c];
    if (k.p != k.end && *k.p < 0x80) return *k.p++;  // most values fit in one byte
    uint64_t v = 0;
    for (int shift = 0; k.p != k.end && shift < 64; shift += 7) {
      uint8_t b = *k.p++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail(fmt::format("column {} ends inside a varint or holds one too long", c));
  }
  // Out of line, so that the decoding loop stays small.
  [[noreturn, gnu::cold, gnu::noinline]] static void fail(const std::string& msg) { throw Error(msg); }
  std::array<Cursor, N> cols_;
};

// Payload: first row index u64, row count u64, byte size of each column u64, then the columns.
// Calls each(row) for every row encoded: the writer's index notes their times on the way. Rows [at, at + n) of
// `rows` are rows [first, first + n) of the table (a writer may have let go of the rows before `rows`).
template <class T, class Each>
void encode_rows(Out& out, ColumnEncoder& enc, const PackedVector<T>& rows, size_t at, uint64_t first, size_t n,
                 Each each) {
  enc.reset(Columns<T>::kCount, n);
  T prev{};
  rows.for_each(at, at + n, [&](size_t, const T& r) {
    Columns<T>::row(enc, r, prev);
    each(r);
    prev = r;
  });
  out(first, static_cast<uint64_t>(n));
  for (size_t c = 0; c < enc.count(); ++c) out(static_cast<uint64_t>(enc.column(c).size()));
  for (size_t c = 0; c < enc.count(); ++c) out.blob(enc.column(c));
}

// The rows of one chunk, decoded in order on demand: first the row index and count (checked before any column is
// read, so that a chunk out of order is reported as that), then the columns.
template <class T> class RowReader {
  static constexpr size_t kCols = Columns<T>::kCount;

 public:
  explicit RowReader(In& in) : in_(in) { in_(first_, rows_); }
  uint64_t first() const { return first_; }
  uint64_t rows() const { return rows_; }
  // Reads the column sizes and checks that every column lies in the chunk. Call before next().
  void open() {
    std::array<uint64_t, kCols> sizes{};
    for (uint64_t& size : sizes) in_(size);
    // Every row takes at least one byte in each column.
    if (rows_ > kMaxRowsPerChunk || rows_ > in_.remaining()) throw Error(fmt::format("row count {} too large", rows_));
    std::array<typename ColumnDecoder<kCols>::Cursor, kCols> cursors;
    for (size_t c = 0; c < kCols; ++c) {
      auto b = in_.blob(sizes[c]);
      auto p = reinterpret_cast<const uint8_t*>(b.data());
      cursors[c] = {p, p + b.size()};
    }
    in_.expect_end();
    dec_.emplace(cursors);
  }
  // Decodes the next rows into `out`, as many as fit and are left; returns how many.
  size_t next(std::span<T> out) {
    // Decoder and row in locals: stores into `out` (byte fields) could alias members and keep them off registers.
    ColumnDecoder<kCols> dec = *dec_;
    T row = row_;
    size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), rows_ - done_));
    for (size_t k = 0; k < n; ++k) {
      Columns<T>::row(dec, row, T(row));
      out[k] = row;
    }
    *dec_ = dec, row_ = row, done_ += n;
    return n;
  }
  uint64_t left() const { return rows_ - done_; }
  // Every row read and every column consumed.
  void expect_end() const { dec_->expect_end(); }

 private:
  In& in_;
  uint64_t first_ = 0, rows_ = 0, done_ = 0;
  std::optional<ColumnDecoder<kCols>> dec_;
  T row_{};
};

// Decodes a chunk of rows that must start at row `have` and hands them to take(std::span<const T>) in batches
// small enough to stay in cache until they are packed.
template <class T, class Take> void decode_rows(In& in, uint64_t have, std::string_view table, Take take) {
  RowReader<T> r(in);
  check_first(r.first(), have, table);
  r.open();
  std::array<T, PackedVector<T>::kBlockRows> batch;
  while (size_t k = r.next(batch)) take(std::span<const T>(batch.data(), k));
  r.expect_end();
}

}  // namespace memrec::format_detail
