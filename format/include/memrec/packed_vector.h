// PackedVector<T>: the rows of a table (events, kernels, scopes) kept column by column in blocks of 1024 rows,
// each column of a block stored as offsets from the block's smallest value in as few bytes as that block's
// spread needs. A 40-byte Event takes about 20 bytes, and any row is still read in O(1).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "memrec/huge_pages.h"

namespace memrec {

// Columns<T>::row(c, row, prev) visits T's fields as numbered columns: c.value(i, field) or
// c.delta(i, field, base) (the .memrec format codes those as differences; in memory they are plain values).
// Specialized next to each row type; kCount is the number of columns.
template <class T> struct Columns;

namespace packed_detail {

// Order-preserving map to 64 bits, so that a block's smallest key is its base.
template <class F> uint64_t to_key(F v) {
  if constexpr (std::is_enum_v<F>) return static_cast<uint64_t>(static_cast<std::underlying_type_t<F>>(v));
  else if constexpr (std::is_signed_v<F>) return static_cast<uint64_t>(static_cast<int64_t>(v)) ^ (uint64_t{1} << 63);
  else return static_cast<uint64_t>(v);
}
template <class F> F from_key(uint64_t k) {
  if constexpr (std::is_enum_v<F>) return static_cast<F>(k);
  else if constexpr (std::is_signed_v<F>) return static_cast<F>(static_cast<int64_t>(k ^ (uint64_t{1} << 63)));
  else return static_cast<F>(k);
}

inline constexpr std::array<uint64_t, 9> kMasks = {
    0, 0xff, 0xffff, 0xffffff, 0xffffffff, 0xffffffffff, 0xffffffffffff, 0xffffffffffffff, ~uint64_t{0}};

inline int bytes_for(uint64_t spread) { return (std::bit_width(spread) + 7) / 8; }

// Visitors for Columns<T>::row. Keys: every field's key into a column-major table, with each column's range.
template <class Table, size_t N> struct CollectKeys {
  Table& keys;
  std::array<uint64_t, N>& lo;
  std::array<uint64_t, N>& hi;
  size_t j;
  template <class F> [[gnu::always_inline]] void value(size_t c, const F& v) {
    uint64_t k = to_key(v);
    keys[c][j] = k;
    lo[c] = std::min(lo[c], k);
    hi[c] = std::max(hi[c], k);
  }
  template <class F> [[gnu::always_inline]] void delta(size_t c, const F& v, F) { value(c, v); }
};

// Fields from a packed block's row j.
template <class Block> struct ReadRow {
  const Block& b;
  size_t j;
  template <class F> [[gnu::always_inline]] void value(size_t c, F& v) const { v = b.template get<F>(c, j); }
  template <class F> [[gnu::always_inline]] void delta(size_t c, F& v, F) const { value(c, v); }
};

// Where the blocks' bytes live: slabs filled in order, from 64 KiB doubling to 2 MiB, and from there 2 MiB slabs
// on huge pages. A fresh 4 KiB page for every 20 KiB block cost more in page faults than the packing.
class Slabs {
 public:
  uint8_t* take(size_t n) {
    if (n > left_) add(n);
    uint8_t* p = next_;
    next_ += n, left_ -= n;
    return p;
  }
  void clear() { *this = Slabs(); }
  // Keeps `other`'s slabs alive with these (blocks packed into them move here); new bytes still come from ours.
  void adopt(Slabs&& other) {
    for (auto& slab : other.slabs_) slabs_.push_back(std::move(slab));
    reserved_ += other.reserved_;
    other = Slabs();
  }

 private:
  static constexpr size_t kHuge = size_t{2} << 20;
  struct Free {
    void operator()(uint8_t* p) const { ::operator delete(p, std::align_val_t{kHuge}); }
  };
  void add(size_t n) {
    size_t size = std::max(n, std::clamp(reserved_, size_t{64} << 10, kHuge));
    slabs_.emplace_back(static_cast<uint8_t*>(::operator new(size, std::align_val_t{kHuge})));
    if (size >= kHuge) advise_huge(slabs_.back().get(), size);
    next_ = slabs_.back().get(), left_ = size, reserved_ += size;
  }
  std::vector<std::unique_ptr<uint8_t, Free>> slabs_;
  uint8_t* next_ = nullptr;
  size_t left_ = 0, reserved_ = 0;
};

}  // namespace packed_detail

template <class T>
class PackedVector {
  static constexpr size_t kCols = Columns<T>::kCount;
  struct Block;

 public:
  static constexpr size_t kBlockRows = 1024;
  using value_type = T;
  using size_type = size_t;

  // Random access; dereferencing assembles the row, so it yields T by value (like vector<bool>'s iterators).
  class iterator {
   public:
    using iterator_concept = std::random_access_iterator_tag;
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using reference = T;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const PackedVector* v, size_t i) : v_(v), i_(i) {}
    [[gnu::always_inline]] T operator*() const { return (*v_)[i_]; }
    struct Arrow {
      T row;
      const T* operator->() const { return &row; }
    };
    Arrow operator->() const { return {**this}; }
    T operator[](difference_type n) const { return (*v_)[i_ + n]; }
    iterator& operator++() { return ++i_, *this; }
    iterator operator++(int) { return {v_, i_++}; }
    iterator& operator--() { return --i_, *this; }
    iterator operator--(int) { return {v_, i_--}; }
    iterator& operator+=(difference_type n) { return i_ += n, *this; }
    iterator& operator-=(difference_type n) { return i_ -= n, *this; }
    friend iterator operator+(iterator it, difference_type n) { return it += n; }
    friend iterator operator+(difference_type n, iterator it) { return it += n; }
    friend iterator operator-(iterator it, difference_type n) { return it -= n; }
    friend difference_type operator-(const iterator& a, const iterator& b) {
      return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }
    auto operator<=>(const iterator& o) const { return i_ <=> o.i_; }

   private:
    const PackedVector* v_ = nullptr;
    size_t i_ = 0;
  };
  using const_iterator = iterator;

  // Rows packed apart from the vector, on another thread and into that thread's slabs, then appended in order
  // (append(Packed&&)): reading a file packs its chunks on several threads at once.
  class Packed {
   public:
    // Packs one whole block (kBlockRows rows) into bytes from `slabs`.
    void add_block(std::span<const T> rows, packed_detail::Slabs& slabs) {
      blocks_.push_back(Block::pack(rows, slabs));
    }
    // The rows after the last whole block where they end the table: unpacked, as a vector's tail.
    void set_tail(std::span<const T> rows) { tail_.assign(rows.begin(), rows.end()); }
    size_t size() const { return blocks_.size() * kBlockRows + tail_.size(); }

   private:
    friend class PackedVector;
    std::vector<Block> blocks_;
    std::vector<T> tail_;
  };

  PackedVector() = default;
  PackedVector(std::initializer_list<T> rows) { append(std::span<const T>(rows.begin(), rows.size())); }
  PackedVector(const PackedVector& o) : blocks_(o.blocks_), tail_(o.tail_) {
    for (Block& b : blocks_) b.data = static_cast<uint8_t*>(std::memcpy(slabs_.take(b.data_bytes), b.data, b.data_bytes));
  }
  PackedVector& operator=(const PackedVector& o) {
    if (this != &o) *this = PackedVector(o);
    return *this;
  }
  PackedVector(PackedVector&&) noexcept = default;
  PackedVector& operator=(PackedVector&&) noexcept = default;

  size_t size() const { return blocks_.size() * kBlockRows + tail_.size(); }
  bool empty() const { return size() == 0; }
  // Inlined whole, so that reading one field of a row decodes only that column.
  [[gnu::always_inline]] T operator[](size_t i) const {
    size_t b = i / kBlockRows;
    return b < blocks_.size() ? blocks_[b].row(i % kBlockRows) : tail_[i - blocks_.size() * kBlockRows];
  }
  T at(size_t i) const {
    if (i >= size()) throw std::out_of_range("PackedVector::at");
    return (*this)[i];
  }
  // Calls f(i, row) for rows [first, last) in order: cheaper than indexing row by row, since each block's
  // layout is copied where the loop body cannot alias it and so stays in registers.
  template <class F> void for_each(size_t first, size_t last, F f) const {
    size_t i = first;
    for (size_t b = i / kBlockRows; i < last && b < blocks_.size(); ++b) {
      const Block block = blocks_[b];
      for (size_t end = std::min(last, (b + 1) * kBlockRows); i < end; ++i) f(i, block.row(i - b * kBlockRows));
    }
    for (; i < last; ++i) f(i, tail_[i - blocks_.size() * kBlockRows]);
  }
  T front() const { return (*this)[0]; }
  T back() const { return (*this)[size() - 1]; }
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }

  void push_back(const T& row) {
    tail_.push_back(row);
    if (tail_.size() == kBlockRows) seal_tail();
  }
  void append(std::span<const T> rows) {
    while (!rows.empty()) {
      if (tail_.empty() && rows.size() >= kBlockRows) {  // whole blocks straight from the input
        blocks_.push_back(Block::pack(rows.first(kBlockRows), slabs_));
        rows = rows.subspan(kBlockRows);
        continue;
      }
      size_t n = std::min(rows.size(), kBlockRows - tail_.size());
      tail_.insert(tail_.end(), rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(n));
      rows = rows.subspan(n);
      if (tail_.size() == kBlockRows) seal_tail();
    }
  }
  void assign(std::span<const T> rows) {
    clear();
    append(rows);
  }
  // Appends p's rows. On a block boundary its blocks move here as they are; their bytes stay in the slabs they were
  // packed into, which adopt() must hand to this vector. Elsewhere they are unpacked and appended row by row.
  void append(Packed&& p) {
    if (tail_.empty()) {
      blocks_.insert(blocks_.end(), p.blocks_.begin(), p.blocks_.end());
      tail_ = std::move(p.tail_);
      return;
    }
    std::vector<T> rows(kBlockRows);
    for (const Block& b : p.blocks_) {
      for (size_t j = 0; j < kBlockRows; ++j) rows[j] = b.row(j);
      append(rows);
    }
    append(p.tail_);
  }
  void adopt(packed_detail::Slabs&& slabs) { slabs_.adopt(std::move(slabs)); }
  // Rewrites row i; a row in a packed block repacks that block (1024 rows), so this is for rare updates.
  // The block keeps its bytes when it fits in them (closing a scope narrows its end column), else takes new ones.
  void set(size_t i, const T& row) {
    size_t b = i / kBlockRows;
    if (b == blocks_.size()) {
      tail_[i % kBlockRows] = row;
      return;
    }
    std::vector<T> rows(kBlockRows);
    for (size_t j = 0; j < kBlockRows; ++j) rows[j] = blocks_[b].row(j);
    rows[i % kBlockRows] = row;
    Block& old = blocks_[b];
    Block fresh = Block::pack(rows, [&](size_t n) { return n <= old.data_bytes ? old.data : slabs_.take(n); });
    if (fresh.data == old.data) fresh.data_bytes = old.data_bytes;
    old = fresh;
  }
  // set(i, row) with f applied to row i.
  template <class F> void update(size_t i, F f) {
    T row = (*this)[i];
    f(row);
    set(i, row);
  }
  // Keeps the first n rows, or adds default rows up to n.
  void resize(size_t n) {
    if (n >= size()) {
      while (size() < n) push_back(T{});
      return;
    }
    std::vector<T> rest;
    for (size_t i = n / kBlockRows * kBlockRows; i < n; ++i) rest.push_back((*this)[i]);
    blocks_.resize(n / kBlockRows);  // their bytes stay in the slabs until clear()
    tail_ = std::move(rest);
  }
  void reserve(size_t n) { blocks_.reserve(n / kBlockRows + 1); }
  void clear() {
    blocks_.clear();
    tail_.clear();
    slabs_.clear();
  }
  // Bytes the rows take: blocks, their data and the unpacked tail (slab space not yet filled is never touched).
  size_t memory_bytes() const {
    size_t n = blocks_.capacity() * sizeof(Block) + tail_.capacity() * sizeof(T);
    for (const Block& b : blocks_) n += b.data_bytes;
    return n;
  }

  bool operator==(const PackedVector& o) const { return size() == o.size() && std::equal(begin(), end(), o.begin()); }

 private:
  // One column of a block: row j's value is base plus the `width` bytes at data + offset + j * width. Kept
  // together so that reading a field touches one header line besides the data.
  struct Column {
    uint64_t base = 0;
    uint64_t mask = 0;  // the low `width` bytes
    uint32_t offset = 0;
    uint32_t width = 0;
  };
  struct Block {
    uint8_t* data = nullptr;  // in slabs_
    size_t data_bytes = 0;
    std::array<Column, kCols> cols{};

    template <class F> [[gnu::always_inline]] F get(size_t c, size_t j) const {
      uint64_t raw;
      const Column& col = cols[c];
      std::memcpy(&raw, data + col.offset + j * col.width, sizeof raw);  // 8 bytes of padding follow the data
      return packed_detail::from_key<F>(col.base + (raw & col.mask));
    }
    [[gnu::always_inline]] T row(size_t j) const {
      T r{};
      packed_detail::ReadRow<Block> read{*this, j};
      Columns<T>::row(read, r, r);
      return r;
    }
    // Packs rows into bytes from take(n).
    static Block pack(std::span<const T> rows, auto take);
    static Block pack(std::span<const T> rows, packed_detail::Slabs& slabs) {
      return pack(rows, [&](size_t n) { return slabs.take(n); });
    }
  };

  void seal_tail() {
    blocks_.push_back(Block::pack(tail_, slabs_));
    tail_.clear();
  }

  packed_detail::Slabs slabs_;
  std::vector<Block> blocks_;
  std::vector<T> tail_;  // the last rows, fewer than a block, unpacked
};

template <class T>
auto PackedVector<T>::Block::pack(std::span<const T> rows, auto take) -> Block {
  // Column-major keys first, so each column is then written in order: every value is stored as 8 bytes, and
  // the next value overwrites the bytes past its width (the last ones land in the next column or the padding).
  using Keys = std::array<std::array<uint64_t, kBlockRows>, kCols>;
  Keys keys;
  std::array<uint64_t, kCols> lo, hi;
  lo.fill(~uint64_t{0});
  hi.fill(0);
  size_t n = std::min(rows.size(), kBlockRows);
  for (size_t j = 0; j < n; ++j) {
    packed_detail::CollectKeys<Keys, kCols> collect{keys, lo, hi, j};
    Columns<T>::row(collect, rows[j], rows[j]);
  }
  Block b;
  size_t at = 0;
  for (size_t c = 0; c < kCols; ++c) {
    Column& col = b.cols[c];
    col.base = n ? lo[c] : 0;
    col.width = static_cast<uint32_t>(n ? packed_detail::bytes_for(hi[c] - lo[c]) : 0);
    col.mask = packed_detail::kMasks[col.width];
    col.offset = static_cast<uint32_t>(at);
    at += col.width * n;
  }
  b.data_bytes = at + sizeof(uint64_t);
  b.data = take(b.data_bytes);
  for (size_t c = 0; c < kCols; ++c) {
    const Column col = b.cols[c];  // a copy: the stores below could alias the header
    uint8_t* p = b.data + col.offset;
    for (size_t j = 0; j < n; ++j, p += col.width) {
      uint64_t off = keys[c][j] - col.base;
      std::memcpy(p, &off, sizeof off);
    }
  }
  std::memset(b.data + at, 0, sizeof(uint64_t));
  return b;
}

}  // namespace memrec
