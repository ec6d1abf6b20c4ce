// Following a recording chunk by chunk (memrec/tail.h, Document::extend): after every increment the document that
// grew equals the document a fresh open of the same file makes: the snapshot, the replay, the timeline, the lanes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "../../bench/synthetic_training.h"
#include "../../viewer/src/document.h"
#include "common/process.h"
#include "memrec/format.h"
#include "memrec/tail.h"

namespace memrec {
namespace {

using viewer::Document;

// A training run written as the recorder writes it: each flush appends the events up to some point, the scopes
// begun by the last of them (open while their end has not come) and the kernels started by then.
class Recording {
 public:
  Recording(const std::string& path, size_t events) : full_(make_training_history(events, 7)) {
    give_distinct_addresses(full_);
    s_ = full_.with_tables();
    writer_.emplace(path);
  }
  size_t events() const { return s_.events.size(); }
  size_t total() const { return full_.events.size(); }
  void flush(size_t more) {
    for (size_t i = s_.events.size(), end = std::min(total(), i + more); i < end; ++i)
      s_.events.push_back(full_.events[i]);
    int64_t t = s_.events.back().time_ns;
    for (size_t k = 1; k < s_.scopes.size(); ++k)
      if (Scope sc = full_.scopes[k]; s_.scopes[k].end_ns == -1 && sc.end_ns != -1 && sc.end_ns <= t)
        s_.scopes.set(k, sc);
    for (size_t k = s_.scopes.size(); k < full_.scopes.size() && full_.scopes[k].start_ns <= t; ++k) {
      Scope sc = full_.scopes[k];
      if (sc.end_ns > t) sc.end_ns = -1;
      s_.scopes.push_back(sc);
    }
    for (size_t k = s_.kernels.size(); k < full_.kernels.size() && full_.kernels[k].start_ns <= t; ++k)
      s_.kernels.push_back(full_.kernels[k]);
    writer_->flush(s_);
  }
  void close() {
    flush(total());
    writer_->close(full_);
  }

 private:
  Snapshot full_, s_;
  std::optional<Writer> writer_;
};

void expect_same_lanes(const std::vector<Lane>& a, const std::vector<Lane>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].title, b[i].title);
    EXPECT_EQ(a[i].ids, b[i].ids) << a[i].title;
    EXPECT_EQ(a[i].open_end, b[i].open_end) << a[i].title;
    EXPECT_EQ(a[i].sampled_starts, b[i].sampled_starts) << a[i].title;
  }
}

void expect_same_replay(const Replay& r, const Replay& f) {
  ASSERT_EQ(r.steps(), f.steps());
  EXPECT_EQ(r.initial(), f.initial());
  using Peaks = std::pair<Peak, Peak>;
  for (const auto& [p, q] :
       {Peaks{r.peak_allocated(), f.peak_allocated()}, Peaks{r.peak_reserved(), f.peak_reserved()}}) {
    EXPECT_EQ(p.bytes, q.bytes);
    EXPECT_EQ(p.step, q.step);
    EXPECT_EQ(p.time_ns, q.time_ns);
  }
  EXPECT_EQ(r.alloc_steps(), f.alloc_steps());
  EXPECT_EQ(r.free_steps(), f.free_steps());
  EXPECT_EQ(r.completed_steps(), f.completed_steps());
  EXPECT_EQ(r.segment_steps(), f.segment_steps());
  EXPECT_EQ(r.unmatched_frees(), f.unmatched_frees());
  for (uint32_t step = 0; step < r.steps(); step += 997) EXPECT_EQ(r.after(step), f.after(step)) << step;
  if (r.steps()) EXPECT_EQ(r.after(r.steps() - 1), f.after(f.steps() - 1));
}

// The timeline at 61 times across the run and one past it: the step there, the envelope of the stretch before it and
// the blocks live.
void expect_same_timeline(const Timeline& a, const Timeline& b) {
  ASSERT_EQ(a.begin_ns(), b.begin_ns());
  ASSERT_EQ(a.end_ns(), b.end_ns());
  int64_t span = a.end_ns() - a.begin_ns() + 1;
  std::vector<uint32_t> live_a, live_b;
  for (int i = 0; i <= 60; ++i) {
    int64_t t = a.begin_ns() + span * i / 60, t0 = t - span / 7;
    ASSERT_EQ(a.step_at(t), b.step_at(t)) << i;
    Envelope ea = a.envelope(t0, t + 1), eb = b.envelope(t0, t + 1);
    EXPECT_EQ(ea.allocated_max, eb.allocated_max) << i;
    EXPECT_EQ(ea.peak_step, eb.peak_step) << i;
    EXPECT_EQ(ea.reserved_min, eb.reserved_min) << i;
    EXPECT_EQ(ea.reserved_max, eb.reserved_max) << i;
    a.live_at(a.step_at(t), live_a);
    b.live_at(b.step_at(t), live_b);
    EXPECT_EQ(live_a, live_b) << i;
  }
}

void expect_same(const Document& grown, const std::string& path) {
  std::unique_ptr<Document> fresh = Document::open(path, std::nullopt, std::nullopt, nullptr);
  const Snapshot &a = grown.snapshot, &b = fresh->snapshot;
  ASSERT_EQ(a.events.size(), b.events.size());
  EXPECT_TRUE(a.events == b.events);
  EXPECT_TRUE(a.scopes == b.scopes);
  EXPECT_TRUE(a.kernels == b.kernels);
  EXPECT_TRUE(a.strings == b.strings && a.frames == b.frames && a.stacks == b.stacks && a.streams == b.streams);
  EXPECT_EQ(a.metadata, b.metadata);
  EXPECT_EQ(a.warnings, b.warnings);
  EXPECT_EQ(a.complete, b.complete);
  EXPECT_EQ(grown.devices, fresh->devices);
  expect_same_replay(*grown.replay, *fresh->replay);
  expect_same_timeline(*grown.timeline, *fresh->timeline);
  expect_same_lanes(grown.kernel_lanes, fresh->kernel_lanes);
  expect_same_lanes(grown.scope_lanes, fresh->scope_lanes);
}

// The document of a tail's first read.
std::unique_ptr<Document> first_document(Tail& tail, const std::string& path) {
  EXPECT_EQ(tail.read(), Tail::Read::grew);
  Snapshot s;
  tail.append_to(s);
  return Document::of(path, std::move(s), std::nullopt);
}

TEST(FollowGrowth, EachFlushExtendsTheDocumentToWhatAFreshOpenMakes) {
  test::TempDir dir;
  std::string path = dir / "run.memrec";
  Recording run(path, 240000);
  run.flush(3000);
  Tail tail(path);
  std::unique_ptr<Document> doc = first_document(tail, path);
  expect_same(*doc, path);
  // Flushes of uneven sizes, so chunks and packed blocks of 1024 rows end anywhere.
  const size_t sizes[] = {1500, 7001, 33000, 2048, 12345, 640};
  int increments = 0;
  for (int i = 0; run.events() < run.total(); ++i, ++increments) {
    run.flush(sizes[i % std::size(sizes)]);
    ASSERT_EQ(tail.read(), Tail::Read::grew);
    EXPECT_EQ(tail.read(), Tail::Read::nothing_new);
    uint64_t id = doc->id;
    tail.append_to(doc->snapshot);
    ASSERT_TRUE(doc->extend()) << run.events();
    EXPECT_NE(doc->id, id);  // views repaint
    ASSERT_NO_FATAL_FAILURE(expect_same(*doc, path)) << run.events();
  }
  EXPECT_GT(increments, 20);
  // The end state brings the start state, which the replay takes from its first step: the document is made again.
  uint32_t steps = doc->replay->steps();
  std::vector<uint32_t> alloc_steps = doc->replay->alloc_steps();
  run.close();
  ASSERT_EQ(tail.read(), Tail::Read::grew);
  EXPECT_TRUE(tail.closed());
  tail.append_to(doc->snapshot);
  EXPECT_TRUE(doc->snapshot.complete);
  EXPECT_FALSE(doc->extend());
  EXPECT_EQ(doc->replay->steps(), steps);  // as it was
  EXPECT_EQ(doc->replay->alloc_steps(), alloc_steps);
  Tail again(path);
  expect_same(*first_document(again, path), path);
}

// The bytes of a finished recording copied in pieces that cut chunks anywhere, as a reader racing the writer sees
// them: each read takes the whole chunks so far, and the cut one the next time.
TEST(FollowGrowth, AChunkCutShortIsReadWhenItIsWhole) {
  test::TempDir dir;
  std::string whole = dir / "whole.memrec", path = dir / "run.memrec";
  size_t written = 0;  // the first piece: the first flushes
  {
    Recording run(whole, 120000);
    for (int i = 0; run.events() < run.total(); ++i) {
      run.flush(4000 + 1000 * (i % 5));
      if (i == 3) written = std::filesystem::file_size(whole);
    }
    run.close();
  }
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(written));
  Tail tail(path);
  std::unique_ptr<Document> doc = first_document(tail, path);
  ASSERT_NO_FATAL_FAILURE(expect_same(*doc, path));
  int grew = 0, waited = 0;
  while (written < bytes.size()) {
    size_t piece = std::min<size_t>(bytes.size() - written, 3331 + written % 17000);
    std::ofstream(path, std::ios::binary | std::ios::app)
        .write(bytes.data() + written, static_cast<std::streamsize>(piece));
    written += piece;
    Tail::Read r = tail.read();
    if (r == Tail::Read::nothing_new) {
      ++waited;  // the piece ended inside the chunk it began
      continue;
    }
    ASSERT_EQ(r, Tail::Read::grew);
    if (tail.closed()) break;
    tail.append_to(doc->snapshot);
    ++grew;
    ASSERT_TRUE(doc->extend()) << written;
    ASSERT_NO_FATAL_FAILURE(expect_same(*doc, path)) << written;
  }
  EXPECT_TRUE(tail.closed());
  EXPECT_GT(grew, 10);
  EXPECT_GT(waited, 0);
}

TEST(FollowGrowth, AFileCutOrReplacedIsReadAgain) {
  test::TempDir dir;
  std::string path = dir / "run.memrec";
  {
    Recording run(path, 30000);
    run.flush(30000);
  }
  Tail tail(path);
  EXPECT_EQ(tail.read(), Tail::Read::grew);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  EXPECT_EQ(tail.read(), Tail::Read::replaced);

  Tail other(path);
  EXPECT_EQ(other.read(), Tail::Read::grew);
  std::string next = dir / "next.memrec";
  {
    Recording run(next, 30000);
    run.flush(30000);
  }
  std::filesystem::rename(next, path);  // same size or not: another file
  EXPECT_EQ(other.read(), Tail::Read::replaced);
}

// A free of a block the part read so far never allocated: the block was live before the recording began and takes
// an id before the others, so the document cannot grow in place and is left as it was.
TEST(FollowGrowth, ABlockOlderThanTheRecordingNeedsANewDocument) {
  test::TempDir dir;
  std::string path = dir / "run.memrec";
  Snapshot s = make_training_history(20000, 3);
  Snapshot part = s.with_tables();
  part.scopes = s.scopes;
  for (size_t i = 0; i < 10000; ++i) part.events.push_back(s.events[i]);
  Writer writer(path);
  writer.flush(part);
  Tail tail(path);
  std::unique_ptr<Document> doc = first_document(tail, path);
  Totals end = doc->replay->after(doc->replay->steps() - 1);
  Event older = part.events.back();
  older.action = Action::free_requested, older.addr = 0x1234500, older.time_ns += 10;
  part.events.push_back(older);
  writer.flush(part);
  ASSERT_EQ(tail.read(), Tail::Read::grew);
  tail.append_to(doc->snapshot);
  EXPECT_FALSE(doc->extend());
  EXPECT_EQ(doc->replay->steps(), 10000u);
  EXPECT_EQ(doc->replay->after(9999), end);
  EXPECT_EQ(doc->timeline->steps(), 10000u);
  std::unique_ptr<Document> fresh = Document::open(path, std::nullopt, std::nullopt, nullptr);
  EXPECT_EQ(fresh->replay->allocations().size(), doc->replay->allocations().size() + 1);  // the older block
}

}  // namespace
}  // namespace memrec
