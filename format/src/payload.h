// The payload of a .memrec chunk that holds tables and metadata: a cereal binary archive, written through Out and
// read back through In, which bounds every count, string and enum by what the chunk holds before allocating.
// Private to the format library; one field list per table type serves both directions.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <cereal/archives/binary.hpp>
#include <fmt/format.h>

#include "memrec/snapshot.h"

namespace memrec::format_detail {

// How many values each enum has: the reader refuses any other.
template <class E> inline constexpr uint64_t kEnumCount = 0;
template <> inline constexpr uint64_t kEnumCount<Action> = kActionCount;
template <> inline constexpr uint64_t kEnumCount<ScopeKind> = 5;
template <> inline constexpr uint64_t kEnumCount<KernelKind> = 3;
template <> inline constexpr uint64_t kEnumCount<BlockState> = 3;
template <> inline constexpr uint64_t kEnumCount<MemoryKind> = kMemoryKindCount;
template <> inline constexpr uint64_t kEnumCount<MemoryOp> = kMemoryOpCount;
template <> inline constexpr uint64_t kEnumCount<OwnerKind> = kOwnerKindCount;

// Appends to a string the writer reuses: fresh megabyte buffers for every chunk cost more in page faults
// than the encoding.
class StringSink : public std::streambuf {
 public:
  explicit StringSink(std::string& s) : s_(s) {}

 protected:
  std::streamsize xsputn(const char* p, std::streamsize n) override {
    s_.append(p, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) s_.push_back(traits_type::to_char_type(c));
    return traits_type::not_eof(c);
  }

 private:
  std::string& s_;
};

class Out {
 public:
  explicit Out(std::string& buf) : buf_(buf), sink_(buf), os_(&sink_), ar_(os_) { buf.clear(); }
  template <class... T> void operator()(const T&... v) { ar_(v...); }
  void flag(bool b) { ar_(static_cast<uint8_t>(b)); }
  template <class E> void enumerated(E e) { ar_(static_cast<uint8_t>(e)); }
  void text(const std::string& s) {
    ar_(static_cast<uint64_t>(s.size()));
    blob(s);
  }
  void blob(std::string_view b) { ar_(cereal::binary_data(b.data(), b.size())); }
  template <class T> void list(const std::vector<T>& v);
  size_t size() const { return buf_.size(); }

 private:
  std::string& buf_;
  StringSink sink_;
  std::ostream os_;
  cereal::BinaryOutputArchive ar_;
};

class MemBuf : public std::streambuf {
 public:
  explicit MemBuf(std::string_view b) {
    char* p = const_cast<char*>(b.data());  // read-only: the get area is never written
    setg(p, p, p + b.size());
  }
  size_t remaining() const { return static_cast<size_t>(egptr() - gptr()); }
  const char* take(size_t n) {
    const char* p = gptr();
    setg(eback(), gptr() + n, egptr());
    return p;
  }
};

class In {
 public:
  explicit In(std::string_view payload) : buf_(payload), is_(&buf_), ar_(is_) {}
  template <class... T> void operator()(T&... v) { ar_(v...); }  // cereal throws on short input
  void flag(bool& b) {
    uint8_t v = 0;
    ar_(v);
    if (v > 1) throw Error(fmt::format("flag value {} is not 0 or 1", v));
    b = v != 0;
  }
  template <class E> void enumerated(E& e) {
    uint8_t v = 0;
    ar_(v);
    if (v >= kEnumCount<E>) throw Error(fmt::format("enum value {} out of range", v));
    e = static_cast<E>(v);
  }
  // A count of items that take at least min_bytes each: refused when the payload cannot hold them.
  uint64_t count(size_t min_bytes) {
    uint64_t n = 0;
    ar_(n);
    if (n > remaining() / min_bytes)
      throw Error(fmt::format("count {} exceeds the {} bytes left in the chunk", n, remaining()));
    return n;
  }
  void text(std::string& s) { s = blob(count(1)); }
  std::string_view blob(size_t n) {
    if (n > remaining()) throw Error(fmt::format("{} bytes wanted, {} left in the chunk", n, remaining()));
    return {buf_.take(n), n};
  }
  template <class T> void list(std::vector<T>& v);
  size_t remaining() const { return buf_.remaining(); }
  void expect_end() const {
    if (remaining()) throw Error(fmt::format("{} unexpected bytes at the end of the chunk", remaining()));
  }

 private:
  MemBuf buf_;
  std::istream is_;
  cereal::BinaryInputArchive ar_;
};

// One field list per table type, shared by writing (IO = Out) and reading (IO = In).
template <class IO, class T>
  requires std::is_arithmetic_v<T>
void fields(IO& io, T& v) { io(v); }

template <class IO> void fields(IO& io, Frame& f) { io(f.pc, f.function, f.file, f.library, f.line); }

template <class IO> void fields(IO& io, Block& b) {
  io(b.addr, b.size, b.requested_size, b.stack);
  io.enumerated(b.state);
}

template <class IO> void fields(IO& io, Segment& s) {
  io(s.addr, s.total_size, s.allocated_size, s.active_size, s.requested_size, s.pool_id[0], s.pool_id[1],
     s.stack, s.stream, s.device);
  io.flag(s.is_large);
  io.flag(s.is_expandable);
  io.list(s.blocks);
}

template <class IO> void fields(IO& io, EventContext& c) { io(c.event, c.compile_context, c.user_metadata, c.extra); }

struct ScopeEnd {
  uint32_t id = 0;
  int64_t end_ns = 0;
};
template <class IO> void fields(IO& io, ScopeEnd& e) { io(e.id, e.end_ns); }

struct Totals {
  uint64_t strings = 0, frames = 0, stacks = 0, streams = 0, scopes = 0, events = 0, kernels = 0;
  bool operator==(const Totals&) const = default;
};
template <class IO> void fields(IO& io, Totals& t) {
  io(t.strings, t.frames, t.stacks, t.streams, t.scopes, t.events, t.kernels);
}

// The index (docs/format.md, The index). An index chunk lists the chunks written since the index chunk before it;
// row chunks with the rows they hold and the least and greatest time of those rows (events, device memory and
// samples: time_ns; kernels and scopes: start_ns; owners: their event, the place among the events).
struct IndexEntry {
  uint64_t offset = 0;
  uint32_t type = 0;
  uint64_t first = 0, rows = 0;
  int64_t min_ns = 0, max_ns = 0;
};
template <class IO> void fields(IO& io, IndexEntry& e) { io(e.offset, e.type, e.first, e.rows, e.min_ns, e.max_ns); }

// A scope row with its id: the index's step scopes, a live state's open scopes.
struct ScopeRow {
  uint32_t id = 0;
  Scope scope;
};
template <class IO> void fields(IO& io, ScopeRow& r) {
  io(r.id, r.scope.start_ns, r.scope.end_ns, r.scope.name, r.scope.parent);
  io.enumerated(r.scope.kind);
  io(r.scope.device);
}

// The index's step scopes: scopes of kind step named "step N", with their number N.
struct StepRow {
  uint32_t id = 0;
  uint64_t number = 0;
  int64_t start_ns = 0, end_ns = -1;
};
template <class IO> void fields(IO& io, StepRow& r) { io(r.id, r.number, r.start_ns, r.end_ns); }

// N of a step scope named "step N", as Python's hooks and the workloads name them.
inline std::optional<uint64_t> step_number(std::string_view name) {
  constexpr std::string_view kPrefix = "step ";
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size() || name.size() > kPrefix.size() + 18) return {};
  uint64_t n = 0;
  for (char c : name.substr(kPrefix.size())) {
    if (c < '0' || c > '9') return {};
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

template <class IO> void fields(IO& io, Owner& o) {
  io(o.time_ns, o.event, o.addr, o.size, o.name, o.module);
  io.enumerated(o.kind);
  io(o.device);
}

template <class T> void Out::list(const std::vector<T>& v) {
  ar_(static_cast<uint64_t>(v.size()));
  for (const T& x : v) fields(*this, const_cast<T&>(x));  // Out only reads through the reference
}

// The encoded size of a default T: the least any T takes, which bounds a count before allocating.
template <class T> size_t min_encoded_size() {
  static const size_t n = [] {
    std::string buf;
    Out o(buf);
    T t{};
    fields(o, t);
    return o.size();
  }();
  return n;
}

template <class T> void In::list(std::vector<T>& v) {
  v.resize(count(min_encoded_size<T>()));
  for (T& x : v) fields(*this, x);
}

// Chunks of a table hold its rows in order: each must start where the chunks before it ended.
inline void check_first(uint64_t first, uint64_t have, std::string_view table) {
  if (first != have) throw Error(fmt::format("{} chunk starts at row {}, expected {}", table, first, have));
}

// Reads the index of a chunk's first row, which must be `have`, and returns it.
inline uint64_t read_first(In& in, uint64_t have, std::string_view table) {
  uint64_t first = 0;
  in(first);
  check_first(first, have, table);
  return first;
}

}  // namespace memrec::format_detail
