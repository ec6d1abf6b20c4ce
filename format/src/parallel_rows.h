// Decoding the chunks of a row table (events, kernels) on several threads. A chunk's rows continue the rows of the
// chunk before it, so a thread packs the blocks of PackedVector::kBlockRows rows that start in its chunk, taking the
// rows that complete its last block from the chunks after it. Alone it checks what the chunk's own bytes say
// (varints, enum values, field widths) and notes the largest ids its rows use; the reader then takes the chunks in
// file order, and appends a chunk's blocks when its first row, its ids and its blocks fit what was read before it.
// Any other chunk it reads again the serial way, which appends it or gives the error the serial reader gives.
// Private to the format library.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "chunk.h"
#include "columns.h"
#include "memrec/snapshot.h"
#include "payload.h"

namespace memrec::format_detail {

// The largest ids a chunk's rows refer to.
template <class T> struct RowIds;
template <> struct RowIds<Event> {
  uint32_t stack = 0, scope = 0;
  uint16_t stream = 0;
  void note(const Event& e) {
    stack = std::max(stack, e.stack), scope = std::max(scope, e.scope), stream = std::max(stream, e.stream);
  }
};
template <> struct RowIds<Kernel> {
  uint32_t name = 0;
  uint16_t stream = 0;
  void note(const Kernel& k) { name = std::max(name, k.name), stream = std::max(stream, k.stream); }
};

// One chunk as a thread left it.
template <class T> struct DecodedChunk {
  std::atomic<bool> ready{false};
  bool ok = false;      // decoded whole, and its last block completed from the chunks after it (or the table ends)
  uint64_t first = 0, rows = 0;
  uint64_t start = 0;   // the row (counted from the table's base) its first block starts at
  RowIds<T> ids;        // of its own rows only
  typename PackedVector<T>::Packed packed;
};

// A table's chunks in file order, as zstd frames with their raw sizes, and what the threads made of them.
template <class T> struct RowChunks {
  std::vector<std::string_view> frames;
  std::vector<uint32_t> raw_sizes;
  uint64_t base = 0;  // the first row the chunks hold
  std::vector<DecodedChunk<T>> decoded;
};

class ParallelRows {
 public:
  using Tables = std::tuple<RowChunks<Event>, RowChunks<Kernel>>;
  struct Job {
    uint8_t table;  // index into Tables
    uint32_t chunk;
  };

  // Starts `threads` threads on the jobs, in the order given (file order, so that the reader rarely waits).
  ParallelRows(Tables& tables, std::vector<Job> jobs, unsigned threads) : tables_(tables), jobs_(std::move(jobs)) {
    std::apply([](auto&... t) { ((t.decoded = decltype(t.decoded)(t.frames.size())), ...); }, tables_);
    workers_.resize(threads);
    for (Worker& w : workers_) threads_.emplace_back([this, &w] { run(w); });
  }
  // Stops the threads (after the job each is on) and waits for them.
  ~ParallelRows() {
    stop_ = true;
    threads_.clear();
  }
  ParallelRows(const ParallelRows&) = delete;
  ParallelRows& operator=(const ParallelRows&) = delete;

  template <class T> DecodedChunk<T>& wait(size_t chunk) {
    DecodedChunk<T>& d = std::get<RowChunks<T>>(tables_).decoded[chunk];
    d.ready.wait(false);
    return d;
  }
  // Hands the bytes of every block the threads packed to `v` (call once the reader has appended them all).
  template <class T> void give_slabs(PackedVector<T>& v) {
    threads_.clear();
    for (Worker& w : workers_) v.adopt(std::move(std::get<Slabs<T>>(w.slabs).slabs));
  }

 private:
  template <class T> struct Slabs {
    packed_detail::Slabs slabs;
  };
  struct Worker {
    Decompressor own, next;  // this chunk's payload, and the one it takes rows from
    std::tuple<Slabs<Event>, Slabs<Kernel>> slabs;
  };

  void run(Worker& w) {
    while (!stop_) {
      size_t i = next_job_.fetch_add(1);
      if (i >= jobs_.size()) return;
      const Job& job = jobs_[i];
      if (job.table == 0) decode_job(std::get<0>(tables_), job.chunk, w);
      else decode_job(std::get<1>(tables_), job.chunk, w);
    }
  }

  template <class T> void decode_job(RowChunks<T>& t, size_t j, Worker& w) {
    DecodedChunk<T>& out = t.decoded[j];
    try {
      decode(t, j, w, out);
    } catch (const std::exception&) {  // memrec::Error, or cereal::Exception on a short payload
      out.ok = false;                  // the reader reads it again the serial way for the error
    }
    out.ready = true;
    out.ready.notify_all();
  }

  template <class T> static void note(RowIds<T>& ids, std::span<const T> rows) {
    for (const T& r : rows) ids.note(r);
  }

  template <class T> static void decode(const RowChunks<T>& t, size_t j, Worker& w, DecodedChunk<T>& out) {
    constexpr size_t kBlock = PackedVector<T>::kBlockRows;
    In in(w.own.decompress(t.frames[j], t.raw_sizes[j]));
    RowReader<T> r(in);
    r.open();
    out.first = r.first(), out.rows = r.rows();
    if (r.first() < t.base) return;
    uint64_t at = r.first() - t.base;
    std::array<T, kBlock> buf;
    // The rows before the first block boundary belong to a block that starts in an earlier chunk.
    for (uint64_t head = std::min<uint64_t>(r.rows(), (kBlock - at % kBlock) % kBlock); head > 0;) {
      size_t k = r.next(std::span(buf).first(static_cast<size_t>(std::min<uint64_t>(head, kBlock))));
      note<T>(out.ids, std::span(buf).first(k));
      head -= k, at += k;
    }
    out.start = at;
    auto& slabs = std::get<Slabs<T>>(w.slabs).slabs;
    size_t filled = 0;
    while ((filled = r.next(buf)) == kBlock) {
      note<T>(out.ids, buf);
      out.packed.add_block(buf, slabs);
    }
    note<T>(out.ids, std::span(buf).first(filled));
    r.expect_end();
    if (filled > 0 && !complete_block<T>(t, j, w, out, buf, filled)) return;
    if (filled == kBlock) out.packed.add_block(buf, slabs);
    out.ok = true;
  }

  // Fills buf[filled..] from the chunks after chunk j; false when one of them does not continue its rows (the
  // reader finds out which and why). At the end of the table the rows stay short and go to the tail.
  template <class T>
  static bool complete_block(const RowChunks<T>& t, size_t j, Worker& w, DecodedChunk<T>& out, std::span<T> buf,
                             size_t& filled) {
    uint64_t expect = out.first + out.rows;
    for (size_t m = j + 1; filled < buf.size(); ++m) {
      if (m == t.frames.size()) {
        out.packed.set_tail(buf.first(filled));
        filled = 0;
        return true;
      }
      In in(w.next.decompress(t.frames[m], t.raw_sizes[m]));
      RowReader<T> r(in);
      if (r.first() != expect) return false;
      r.open();
      filled += r.next(buf.subspan(filled));
      expect += r.rows();
    }
    return true;
  }

  Tables& tables_;
  std::vector<Job> jobs_;
  std::atomic<size_t> next_job_{0};
  std::atomic<bool> stop_{false};
  std::vector<Worker> workers_;
  std::vector<std::jthread> threads_;  // last: joined before the rest goes
};

}  // namespace memrec::format_detail
