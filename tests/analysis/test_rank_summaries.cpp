// Rank summaries (docs/ranks.md): in each file and beside it as JSON, read instead of the file; 1,024 generated
// ranks on 128 hosts whose clocks are seconds apart (bench/rank_job.h): the two different ranks named, the clocks
// aligned on the collectives to within the generator's jitter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <fmt/core.h>

#include "../../bench/rank_job.h"
#include "common/process.h"
#include "common/rank_runs.h"
#include "memrec/format.h"
#include "memrec/load.h"
#include "memrec/range.h"
#include "memrec/ranks.h"
#include "memrec/ranks_output.h"

namespace memrec {
namespace {

namespace fs = std::filesystem;

std::string written(const test::TempDir& dir, const std::string& name, const Snapshot& s) {
  std::string path = dir / name;
  write_file(s, path);
  write_summary(s, path);
  return path;
}

// A recording's threads merge in stamp order, whose times may step back a little: the last event can be timed
// before events it follows, and an early one before the recording's start. The curve keeps them in its buckets.
// A recording of a few microseconds can even end, by the last event's time, before its first event.
TEST(RankSummaries, EventsWhoseTimesStepBackStayInTheCurve) {
  const Snapshot made = bench::make_rank(bench::RankJob{.ranks = 2, .events = 200}, 0);
  for (bool ends_before_start : {false, true}) {
    SCOPED_TRACE(ends_before_start ? "the last event before the first" : "events before the start and in the middle");
    std::vector<Event> events(made.events.begin(), made.events.end());
    ASSERT_GT(events.size(), 10u);
    if (ends_before_start) {
      events.back().time_ns = events[0].time_ns - 1'000;
    } else {
      events.back().time_ns = events[events.size() / 2].time_ns;
      events[1].time_ns = events[0].time_ns - 1'000'000;
    }
    Snapshot s = made;
    s.events.clear();
    s.events.append(events);
    RankRecording r = summarize_recording(s, "run.rank0.memrec", {.curve = true});
    ASSERT_EQ(r.allocated_max.size(), kSummaryCurve);
    EXPECT_EQ(*std::max_element(r.allocated_max.begin(), r.allocated_max.end()), r.peak_allocated.bytes);
  }
}

TEST(RankSummaries, ReadBackAsTheWholeFileGivesThem) {
  test::TempDir dir;
  bench::RankJob job{.ranks = 16, .events = 200};
  Snapshot s = bench::make_rank(job, 5);
  std::string path = written(dir, "run.rank5.memrec", s);
  std::optional<std::string> chunk = read_summary(path);
  ASSERT_TRUE(chunk);
  EXPECT_LT(chunk->size(), 64u << 10) << "a small chunk";
  nlohmann::json whole = rank_summary_json(summarize_recording(read_file(path), path, {.curve = true}));
  EXPECT_EQ(nlohmann::json::parse(*chunk), whole);
  std::ifstream beside(path + ".summary.json");
  EXPECT_EQ(nlohmann::json::parse(beside), whole);
  EXPECT_EQ(whole["peak_allocated"]["bytes"], (64 << 20) + 8 * (8 << 20));
  EXPECT_EQ(whole["peak_allocated"]["training_step"], "step 0");
  EXPECT_EQ(whole["collectives"].size(), 2 * job.steps());
  EXPECT_EQ(whole["steps"][1]["allocated"], 64 << 20) << "each step starts with the parameters only";
  std::vector<uint64_t> curve = whole["curve"]["allocated"];
  ASSERT_EQ(curve.size(), kSummaryCurve);
  EXPECT_EQ(*std::max_element(curve.begin(), curve.end()), whole["peak_allocated"]["bytes"]) << "the curve keeps the peak";

  // The file reads whole and by range as before, and a summary put twice is replaced, not added.
  Snapshot again = read_file(path);
  EXPECT_TRUE(again.complete);
  EXPECT_EQ(again.events.size(), s.events.size());
  uint64_t size = fs::file_size(path);
  attach_summary(path, *chunk);
  EXPECT_EQ(fs::file_size(path), size);
  std::string plain = dir / "plain.rank5.memrec";
  write_file(s, plain);
  RangeRead part = read_range(path, *parse_range("", "1..1")), without = read_range(plain, *parse_range("", "1..1"));
  EXPECT_EQ(part.chunks_total, without.chunks_total + 1) << "the summary chunk";
  EXPECT_EQ(part.chunks_read, without.chunks_read) << "the index serves range reads as before";
  EXPECT_EQ(part.snapshot.events.size(), without.snapshot.events.size());
  EXPECT_EQ(part.snapshot.warnings.size(), without.snapshot.warnings.size());

  RankSet from_file = load_ranks({path}, {}), from_json = load_ranks({path + ".summary.json"}, {});
  EXPECT_EQ(from_file.ranks[0].read_from, "file summary");
  EXPECT_EQ(from_json.ranks[0].read_from, "summary JSON");
  EXPECT_EQ(rank_summary_json(from_json.ranks[0]), whole);
}

TEST(RankSummaries, FilesWithoutOneAreReadWholeAndSaySo) {
  std::string older = std::string(MEMREC_TEST_DATA) + "/transformer_2layer_cpu.memrec";
  EXPECT_EQ(read_summary(older), std::nullopt) << "a file written before summaries";
  EXPECT_EQ(load_ranks({older}, {}).ranks[0].read_from, "whole file");
  test::RankFiles run;
  run.add("r.rank0.memrec", test::rank_run(0, 1'000, "h"));
  run.add("r.rank1.memrec", test::rank_run(0, 1'020, "h"));
  write_summary(read_file(run.paths[1]), run.paths[1]);
  RankSet set = load_ranks(run.paths, {});
  EXPECT_EQ(set.read_whole, 1u);
  EXPECT_EQ(set.ranks[1].read_from, "file summary");
  EXPECT_NE(ranks_text(set, 5).find("1 of them read whole: their files hold no summary"), std::string::npos);

  // A file cut short has no footer to put a summary before.
  std::string cut = run.dir / "cut.memrec";
  fs::copy_file(run.paths[0], cut);
  fs::resize_file(cut, fs::file_size(cut) - 20);
  EXPECT_THROW(attach_summary(cut, "{}"), Error);
  EXPECT_EQ(read_summary(cut), std::nullopt);
  std::ofstream(run.dir / "bad.summary.json") << "{\"memrec_summary\": 1}";
  EXPECT_THROW(load_ranks({run.dir / "bad.summary.json"}, {}), Error);
}

// The viewer's curves come from the summaries; a summary without one (written before summaries kept it) is read
// whole for a curve, and only for a curve.
TEST(RankSummaries, CurvesComeFromTheSummaryElseTheWholeFile) {
  test::TempDir dir;
  bench::RankJob job{.ranks = 4, .events = 300};
  std::vector<std::string> paths = {written(dir, "run.rank0.memrec", bench::make_rank(job, 0)),
                                    written(dir, "run.rank1.memrec", bench::make_rank(job, 1))};
  RankSet set = load_ranks(paths, {.curve = true});
  EXPECT_EQ(set.read_whole, 0u);
  RankRecording whole = summarize_recording(read_file(paths[1]), paths[1], {.curve = true});
  EXPECT_EQ(set.ranks[1].allocated_max, whole.allocated_max);
  EXPECT_EQ(set.ranks[1].reserved_max, whole.reserved_max);
  EXPECT_EQ(set.ranks[1].bucket_ns, whole.bucket_ns);

  nlohmann::json older = nlohmann::json::parse(*read_summary(paths[1]));
  older.erase("curve");
  attach_summary(paths[1], older.dump());
  std::ofstream(paths[1] + ".summary.json") << older.dump();
  EXPECT_EQ(load_ranks(paths, {}).read_whole, 0u) << "stats needs no curve";
  set = load_ranks(paths, {.curve = true});
  EXPECT_EQ(set.read_whole, 1u);
  EXPECT_EQ(set.ranks[1].read_from, "whole file");
  EXPECT_EQ(set.ranks[1].allocated_max, whole.allocated_max);
  EXPECT_THROW(load_ranks({paths[0], paths[1] + ".summary.json"}, {.curve = true}), Error) << "no file to read whole";
}

// The CI check of the thousand ranks; bench_ranks times the same job at 100k and 1M events a rank.
TEST(RankSummaries, AThousandRanksOnManyHosts) {
  test::TempDir dir;
  bench::RankJob job{.ranks = 1024, .events = 72};
  std::vector<std::string> paths;
  for (int r = 0; r < job.ranks; ++r) {
    std::string path = written(dir, "job.rank" + std::to_string(r) + ".memrec", bench::make_rank(job, r));
    paths.push_back(r % 2 ? path + ".summary.json" : path);  // gathered summaries and files alike
  }
  RankSet set = load_ranks(paths, {});
  ASSERT_EQ(set.ranks.size(), 1024u);
  EXPECT_EQ(set.read_whole, 0u);
  EXPECT_EQ(set.hosts.size(), 128u);
  EXPECT_EQ(set.aligned_on, "collectives");
  EXPECT_TRUE(set.unaligned.empty());
  int64_t worst = 0;
  for (const RankRecording& r : set.ranks) {
    int64_t truth = job.clock_offset_ns(job.host_of(0)) - job.clock_offset_ns(job.host_of(r.rank));
    worst = std::max(worst, std::abs(r.offset_ns - truth));
  }
  EXPECT_LT(worst, job.jitter_ns) << "aligned to within the jitter";
  EXPECT_LE(set.uncertainty_ns, 2 * job.jitter_ns);
  EXPECT_GT(set.uncertainty_ns, 0);
  fmt::print("alignment error {} ns, uncertainty printed {} ns, jitter {} ns\n", worst, set.uncertainty_ns, job.jitter_ns);

  ASSERT_GE(set.outliers.size(), 2u);
  EXPECT_EQ(set.ranks[set.outliers[0].index].rank, job.early_rank);
  EXPECT_EQ(set.ranks[set.outliers[1].index].rank, job.wide_rank);
  EXPECT_EQ(set.ranks[*set.furthest].rank, job.early_rank);
  const PeakAgainstCollective& against = *set.outliers[0].against;
  EXPECT_EQ(against.collective.name, "c10d::allreduce_");
  EXPECT_EQ(against.collective.seq, 3u) << "step 1's all-reduce";
  EXPECT_LT(against.peak_to_collective_ns, 0) << "it peaked after";
  EXPECT_EQ(against.others_with_it, 1023u);
  EXPECT_EQ(against.others_after, 0u) << "every other rank peaked in step 0";
  EXPECT_EQ(std::accumulate(set.histogram.counts.begin(), set.histogram.counts.end(), size_t{0}), 1024u);
  EXPECT_EQ(set.histogram.counts.front(), 1022u);
  auto layer1 = std::find_if(set.spreads.begin(), set.spreads.end(),
                             [](const GroupSpread& g) { return g.by == GroupBy::layer && g.key == "layers.1"; });
  ASSERT_NE(layer1, set.spreads.end());
  EXPECT_EQ(layer1->max_rank, job.wide_rank);
  EXPECT_EQ(layer1->max_bytes - layer1->median_bytes, job.wide_extra);
  std::string text = ranks_text(set, 5);
  EXPECT_NE(text.find("rank 517 peaked"), std::string::npos) << text;
  EXPECT_NE(text.find("(1018 other ranks: --json lists every rank)"), std::string::npos) << "the median and 5 outliers shown";
}

}  // namespace
}  // namespace memrec
