// memrec whatif scale on real recordings. tests/data/scale_*.memrec: examples/train.py (explicit softmax(QK^T)
// attention, 1 layer) on the CPU, libtorch 1.13, at batch 2, 4, 8 (sequence 64) and sequence 32, 128, 256 (batch 2;
// batch 2 is also sequence 64), recorded by tests/scripts/scale_fixtures.sh. The CUDA path runs on the H100
// recordings tests/data/alloc_*.memrec.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/fixtures.h"
#include "memrec/allocator_whatif.h"
#include "memrec/analysis.h"
#include "memrec/load.h"
#include "memrec/scale.h"
#include "memrec/sites.h"

namespace memrec {
namespace {

const Snapshot& recording(const std::string& name) {
  static std::map<std::string, Snapshot> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end()) it = loaded.emplace(name, load_snapshot(test::data(name))).first;
  return it->second;
}

ScaleRun run(const std::string& name, uint64_t size) { return {name, &recording(name), 0, size}; }
ScaleRun run(const Snapshot& s, uint64_t size) { return {fmt::format("run at {}", size), &s, 0, size}; }

uint64_t measured_peak(const std::string& name) { return Replay(recording(name), 0).peak_allocated().bytes; }

double error(uint64_t predicted, uint64_t measured) {
  return (static_cast<double>(predicted) - static_cast<double>(measured)) / static_cast<double>(measured);
}

std::vector<ScaleRun> batches() { return {run("scale_batch2.memrec", 2), run("scale_batch4.memrec", 4)}; }
std::vector<ScaleRun> sequences() {
  return {run("scale_seq32.memrec", 32), run("scale_batch2.memrec", 64), run("scale_seq128.memrec", 128)};
}

TEST(Scale, BatchTwoAndFourPredictBatchEightWithin5Percent) {
  ScaleWhatif w = scale_whatif(batches(), {.predict = {8}});
  ASSERT_EQ(w.predictions.size(), 1u);
  const ScalePrediction& p = w.predictions[0];
  uint64_t measured = measured_peak("scale_batch8.memrec");
  fmt::print("batch 8: predicted {} measured {} ({:+.2f}%)\n", p.peak_allocated, measured, 100 * error(p.peak_allocated, measured));
  EXPECT_LT(std::abs(error(p.peak_allocated, measured)), 0.05);
  EXPECT_EQ(w.base, 1u);  // the largest run is rewritten
  for (const ScaleWhatif::Run& r : w.runs) EXPECT_EQ(r.matched, r.allocations) << r.name;  // one program, every allocation
  EXPECT_TRUE(w.unmatched.empty());

  // The peak falls where the measured run's does, and the activations that grow are named by their sites.
  const Snapshot& b8 = recording("scale_batch8.memrec");
  Replay r8(b8, 0);
  uint32_t step = scope_at(b8, ScopeKind::step, 0, r8.peak_allocated().time_ns);
  EXPECT_EQ(p.step, b8.strings[b8.scopes[step].name]);
  EXPECT_EQ(p.phase, "backward");
  ASSERT_FALSE(p.growth.empty());
  EXPECT_GT(p.growth[0].growth(), 0);
  EXPECT_NE(p.growth[0].key.find("train.py"), std::string::npos) << p.growth[0].key;
}

TEST(Scale, ARecordedSizeRepeatsItsRecordedPeak) {
  ScaleWhatif w = scale_whatif(batches(), {.predict = {2, 4}});
  EXPECT_EQ(w.predictions[0].peak_allocated, measured_peak("scale_batch2.memrec"));
  EXPECT_EQ(w.predictions[1].peak_allocated, measured_peak("scale_batch4.memrec"));
}

// Attention's scores grow with the square of the sequence: three runs fit them, two cannot.
TEST(Scale, SequenceLengthFromThreeRunsFitsTheQuadraticAttention) {
  uint64_t measured = measured_peak("scale_seq256.memrec");
  std::vector<ScaleRun> three = sequences(), two(three.begin() + 1, three.end());
  uint64_t quadratic = scale_whatif(three, {.predict = {256}}).predictions[0].peak_allocated;
  uint64_t linear = scale_whatif(two, {.predict = {256}}).predictions[0].peak_allocated;
  fmt::print("sequence 256: measured {}, from 32/64/128 {} ({:+.2f}%), from 64/128 {} ({:+.2f}%)\n", measured,
             quadratic, 100 * error(quadratic, measured), linear, 100 * error(linear, measured));
  EXPECT_LT(std::abs(error(quadratic, measured)), 0.05);
  EXPECT_GT(std::abs(error(linear, measured)), 0.05);
}

TEST(Scale, RunsOfDifferentProgramsAreRefused) {
  std::vector<ScaleRun> runs = {run("scale_batch2.memrec", 2), run("mlp_sequential_cpu.memrec", 4)};
  try {
    scale_whatif(runs, {.predict = {8}});
    FAIL() << "accepted runs of two programs";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("are not runs of one program"), std::string::npos) << e.what();
  }
}

TEST(Scale, SizesMustBeDifferentAndInOrder) {
  for (const std::vector<uint64_t>& sizes : {std::vector<uint64_t>{2, 8, 4}, {4, 4}}) {
    std::vector<ScaleRun> runs;
    for (size_t i = 0; i < sizes.size(); ++i) runs.push_back(run(sequences()[i].name, sizes[i]));
    EXPECT_THROW(scale_whatif(runs, {.predict = {8}}), Error) << sizes[0];
  }
  EXPECT_THROW(scale_whatif(std::vector<ScaleRun>{batches()[0]}, {.predict = {8}}), Error);
  // Falling sizes are the same runs in the other order.
  std::vector<ScaleRun> falling = {batches()[1], batches()[0]};
  EXPECT_EQ(scale_whatif(falling, {.predict = {8}}).predictions[0].peak_allocated,
            scale_whatif(batches(), {.predict = {8}}).predictions[0].peak_allocated);
}

TEST(Scale, CpuRunsPredictNoReservedPeakAndNeedTheMemoryForFit) {
  ScaleWhatif w = scale_whatif(batches(), {.predict = {8}});
  EXPECT_FALSE(w.predictions[0].peak_reserved);
  EXPECT_FALSE(w.predictions[0].oom);
  EXPECT_FALSE(w.memory.bytes);
  EXPECT_FALSE(w.settings);
  EXPECT_NE(std::find(w.notes.begin(), w.notes.end(), ScaleNote::cpu), w.notes.end());
  EXPECT_NE(std::find(w.notes.begin(), w.notes.end(), ScaleNote::memory_unknown), w.notes.end());
  try {
    scale_whatif(batches(), {.fit = true});
    FAIL() << "--fit without the device's memory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--device-memory"), std::string::npos) << e.what();
  }
}

// The fit against every size predicted one by one.
TEST(Scale, FitIsTheLargestSizeWhosePredictionFits) {
  std::vector<uint64_t> sizes;
  for (uint64_t n = 1; n <= 40; ++n) sizes.push_back(n);
  std::vector<ScalePrediction> each = scale_whatif(batches(), {.predict = sizes}).predictions;
  for (uint64_t memory : {each[7].peak_allocated, each[7].peak_allocated - 1, each[30].peak_allocated + 4096,
                          each[0].peak_allocated - 1}) {
    uint64_t want = 0;
    while (want < each.size() && each[want].peak_allocated <= memory) ++want;
    ScaleWhatif w = scale_whatif(batches(), {.fit = true, .device_memory = memory});
    ASSERT_TRUE(w.fit) << memory;
    EXPECT_EQ(w.fit->largest, want) << memory;
    EXPECT_EQ(w.fit->device_memory, memory);
    uint64_t peak = each[std::max<uint64_t>(want, 1) - 1].peak_allocated;
    EXPECT_EQ(w.fit->margin, static_cast<int64_t>(memory) - static_cast<int64_t>(peak));
    for (const ScalePrediction& p : w.predictions) EXPECT_EQ(*p.oom, p.size > want) << p.size;
  }
  // The measured batch 8 peak as the memory: batch 8 fits, with nothing to spare.
  ScaleWhatif at8 = scale_whatif(batches(), {.fit = true, .device_memory = measured_peak("scale_batch8.memrec")});
  EXPECT_EQ(at8.fit->largest, 8u);
}

// A run whose sizes do not change predicts the same peaks at every size: the allocator model's under the run's
// settings, as whatif allocator predicts them.
TEST(Scale, CudaRunsPredictTheReservedPeakThroughTheAllocatorModel) {
  for (const char* name : {"alloc_default.memrec", "alloc_run2_expandable.memrec"}) {
    std::vector<ScaleRun> same = {run(name, 1), run(name, 2)};
    ScaleWhatif w = scale_whatif(same, {.predict = {4}});
    AllocatorWhatif a = allocator_whatif(recording(name), 0, {});
    const ScalePrediction& p = w.predictions[0];
    EXPECT_EQ(p.peak_reserved, a.prediction.reserved_peak) << name;
    EXPECT_EQ(p.peak_allocated, measured_peak(name)) << name;
    EXPECT_EQ(p.oom, false) << name;
    EXPECT_EQ(w.source, SettingsSource::recorded);
    EXPECT_EQ(w.settings, a.prediction.settings) << name;
    EXPECT_EQ(w.memory.total, 85017493504u);  // the H100's, recorded
    EXPECT_EQ(w.memory.bytes, w.memory.total);  // no NVML samples: the whole device
    EXPECT_NE(std::find(w.notes.begin(), w.notes.end(), ScaleNote::outside_unmeasured), w.notes.end());
  }
}

TEST(Scale, DefaultMemoryIsTheDeviceLessTheMostNvmlSawOutsideTheAllocator) {
  Snapshot s = recording("alloc_default.memrec");
  Replay r(s, 0);
  auto reserved_at = [&](int64_t t) {  // after the last segment event at or before t
    uint64_t reserved = r.initial().reserved;
    for (uint32_t step : r.segment_steps())
      if (r.time_of(step) <= t) reserved = r.after(step).reserved;
    return reserved;
  };
  const uint64_t GiB = uint64_t{1} << 30, total = 85017493504;
  std::vector<DeviceMemorySample> samples;
  for (auto [step, outside] : {std::pair(r.steps() / 4, GiB), {r.steps() / 2, 3 * GiB / 2}, {r.steps() - 1, 5 * GiB / 4}}) {
    int64_t t = r.time_of(step);
    samples.push_back({.time_ns = t, .used = reserved_at(t) + outside, .total = total, .device = 0});
  }
  s.memory_samples.assign(samples);
  ScaleWhatif w = scale_whatif(std::vector<ScaleRun>{run(s, 1), run(s, 2)}, {.predict = {1}});
  EXPECT_EQ(w.memory.outside, 3 * GiB / 2);
  EXPECT_EQ(w.memory.bytes, total - 3 * GiB / 2);
  EXPECT_FALSE(w.memory.given);
  EXPECT_EQ(std::find(w.notes.begin(), w.notes.end(), ScaleNote::outside_unmeasured), w.notes.end());
  // --device-memory wins.
  ScaleWhatif given = scale_whatif(std::vector<ScaleRun>{run(s, 1), run(s, 2)}, {.predict = {1}, .device_memory = 40 * GiB});
  EXPECT_EQ(given.memory.bytes, 40 * GiB);
  EXPECT_TRUE(given.memory.given);
}

// The recording with every allocation of some stacks `factor` times its size (rounded to 512 bytes): a run of the
// same program at another size.
Snapshot scaled(const Snapshot& s, double factor, uint32_t every = 2) {
  Snapshot out = s;
  std::vector<Event> events(s.events.begin(), s.events.end());
  for (Event& e : events)
    if (e.stack % every == 0 && !is_segment_grow(e.action) && !is_segment_shrink(e.action))
      e.size = static_cast<uint64_t>(std::llround(static_cast<double>(e.size) * factor / 512.0)) * 512;
  out.events.assign(events);
  return out;
}

TEST(Scale, CudaFitIsTheLargestSizeTheAllocatorModelServes) {
  const Snapshot& one = recording("alloc_run12.memrec");
  Snapshot two = scaled(one, 2.0);
  std::vector<ScaleRun> runs = {run(one, 1), run(two, 2)};
  ScaleWhatif w = scale_whatif(runs, {.fit = true});  // the H100's 79 GiB, recorded
  ASSERT_TRUE(w.fit);
  ASSERT_GT(w.fit->largest, 2u);
  std::vector<uint64_t> sizes;
  for (uint64_t n = 1; n <= w.fit->largest + 2; ++n) sizes.push_back(n);
  for (const ScalePrediction& p : scale_whatif(runs, {.predict = sizes}).predictions) {
    EXPECT_EQ(*p.oom, p.size > w.fit->largest) << p.size;
    if (p.size == w.fit->largest) EXPECT_EQ(w.fit->margin, static_cast<int64_t>(w.fit->device_memory - *p.peak_reserved));
  }
}

// The recording without the allocations (and their frees) at `site`.
Snapshot without_site(const Snapshot& s, const std::string& site) {
  Replay r(s, 0);
  std::vector<bool> dropped(s.events.size());
  for (uint32_t id = 0; id < r.allocations().size(); ++id) {
    if (allocation_site(s, r.stack_of(id)) != site) continue;
    for (uint32_t step : {r.alloc_steps()[id], r.free_steps()[id], r.completed_steps()[id]})
      if (step < r.steps()) dropped[r.event_of(step)] = true;
  }
  std::vector<Event> kept;
  for (size_t i = 0; i < s.events.size(); ++i)
    if (!dropped[i]) kept.push_back(s.events[i]);
  Snapshot out = s;
  out.events.assign(kept);
  return out;
}

TEST(Scale, UnmatchedAllocationsAreReportedWithTheirBytes) {
  // Batch 2 without the allocations at the site of batch 4's largest: those of batch 4 match nothing.
  const Snapshot& b4 = recording("scale_batch4.memrec");
  Replay r4(b4, 0);
  uint32_t largest = 0;
  for (uint32_t id = 0; id < r4.allocations().size(); ++id)
    if (r4.size_of(id) > r4.size_of(largest)) largest = id;
  std::string site = allocation_site(b4, r4.stack_of(largest));
  uint64_t count = 0, bytes = 0;
  for (uint32_t id = 0; id < r4.allocations().size(); ++id)
    if (allocation_site(b4, r4.stack_of(id)) == site) ++count, bytes += r4.size_of(id);
  Snapshot b2 = without_site(recording("scale_batch2.memrec"), site);
  ScaleWhatif w = scale_whatif(std::vector<ScaleRun>{run(b2, 2), batches()[1]}, {.predict = {8}});
  ASSERT_EQ(w.unmatched.size(), 1u) << site;
  const UnmatchedAllocations& u = w.unmatched[0];
  EXPECT_EQ(u.reason, UnmatchedAllocations::Reason::base_only);
  EXPECT_EQ(u.run, 1u);
  EXPECT_EQ(u.site, site);
  EXPECT_EQ(u.count, count);
  EXPECT_EQ(u.bytes, bytes);
  EXPECT_EQ(w.runs[1].allocations - w.runs[1].matched, count);
}

TEST(Scale, AllocationsFittedBelowZeroAreReported) {
  const Snapshot& one = recording("alloc_run2_expandable.memrec");
  Snapshot two = scaled(one, 0.4, 7);  // the allocations of every 7th stack shrink with the size
  ScaleWhatif w = scale_whatif(std::vector<ScaleRun>{run(one, 1), run(two, 2)}, {.predict = {2, 3, 4}});
  uint64_t below = 0;
  for (const UnmatchedAllocations& u : w.unmatched) {
    EXPECT_EQ(u.reason, UnmatchedAllocations::Reason::below_zero);
    EXPECT_EQ(u.at_size, 3u);  // 40% at 2, below zero from 3 on
    below += u.count;
  }
  EXPECT_GT(below, 0u);
}

// The curve drawn over a run (report and view --scale-with) is the prediction's replay step by step: its peaks are
// the prediction's, and at the base run's own size it is that run's recorded history.
TEST(ScaleCurve, AtTheBaseRunsSizeItIsTheRecordedHistory) {
  ScaleWhatif w = scale_whatif(batches(), {.predict = {4, 8}, .curve_run = 1});
  Replay b4(recording("scale_batch4.memrec"), 0);
  const ScaleCurve& at4 = *w.predictions[0].curve;
  ASSERT_EQ(at4.time_ns.size(), b4.steps());
  b4.for_each_after(0, b4.steps(), [&](uint32_t step, const Totals& t) {
    ASSERT_EQ(at4.allocated[step], t.allocated) << step;
    ASSERT_EQ(at4.time_ns[step], b4.time_of(step) - b4.time_of(0)) << step;
  });
  const ScalePrediction& p = w.predictions[1];
  const ScaleCurve& c = *p.curve;
  EXPECT_EQ(*std::max_element(c.allocated.begin(), c.allocated.end()), p.peak_allocated);
  EXPECT_EQ(c.allocated[c.peak], p.peak_allocated);
  EXPECT_EQ(c.time_ns[c.peak], p.peak_ns);  // the base run's clock is its own
  EXPECT_TRUE(c.reserved.empty());          // a CPU run
  EXPECT_FALSE(c.oom);
  EXPECT_FALSE(scale_whatif(batches(), {.predict = {8}}).predictions[0].curve);  // only when asked for
}

// Over the smaller run, each event is placed where its allocation's counterpart had it: the predicted peak falls in
// the step and phase the prediction names, on that run's clock, and the curve ends within the run.
TEST(ScaleCurve, OverAnotherRunItFollowsThatRunsSteps) {
  ScaleWhatif w = scale_whatif(batches(), {.predict = {8}, .curve_run = 0});
  const ScalePrediction& p = w.predictions[0];
  const ScaleCurve& c = *p.curve;
  const Snapshot& b2 = recording("scale_batch2.memrec");
  Replay r2(b2, 0);
  EXPECT_TRUE(std::is_sorted(c.time_ns.begin(), c.time_ns.end()));
  EXPECT_LE(c.time_ns.back(), r2.time_of(r2.steps() - 1) - r2.time_of(0));
  EXPECT_EQ(c.allocated[c.peak], p.peak_allocated);
  int64_t at = r2.time_of(0) + c.time_ns[c.peak];
  EXPECT_EQ(b2.strings[b2.scopes[scope_at(b2, ScopeKind::step, 0, at)].name], p.step);
  PhaseIndex phases(b2, 0);
  EXPECT_EQ(to_string(phases.kind(phases.at(at))), p.phase);
  // The batch 8 peak is where batch 2's own peak is: the same allocation.
  EXPECT_EQ(c.time_ns[c.peak], r2.peak_allocated().time_ns - r2.time_of(0));
}

TEST(ScaleCurve, OnCudaTheReservedCurveIsTheAllocatorModels) {
  const char* name = "alloc_default.memrec";
  std::vector<ScaleRun> same = {run(name, 1), run(name, 2)};
  ScaleWhatif w = scale_whatif(same, {.predict = {4}, .curve_run = 0});
  const ScalePrediction& p = w.predictions[0];
  const ScaleCurve& c = *p.curve;
  ASSERT_EQ(c.reserved.size(), c.allocated.size());
  EXPECT_EQ(*std::max_element(c.reserved.begin(), c.reserved.end()), *p.peak_reserved);
  EXPECT_EQ(*p.peak_reserved, allocator_whatif(recording(name), 0, {}).prediction.reserved_peak);
  for (size_t i = 0; i < c.allocated.size(); ++i) ASSERT_LE(c.allocated[i], c.reserved[i]) << i;
  // A device too small for it: the curve marks the first request the model could not serve, which it then serves
  // beyond the memory (the recorded program went on), so that reserved crosses the memory there.
  uint64_t memory = *p.peak_reserved / 2;
  ScaleWhatif small = scale_whatif(same, {.predict = {4}, .device_memory = memory, .curve_run = 0});
  const ScaleCurve& s = *small.predictions[0].curve;
  ASSERT_TRUE(s.oom);
  EXPECT_EQ(small.predictions[0].oom, true);
  EXPECT_GT(s.reserved[*s.oom], memory);
  for (size_t i = 0; i < *s.oom; ++i) ASSERT_LE(s.reserved[i], memory) << i;
}

TEST(ScaleCurve, OnTheCpuItRunsOutWhereAllocatedFirstPassesTheMemory) {
  uint64_t memory = measured_peak("scale_batch4.memrec") * 3 / 2;
  ScaleWhatif w = scale_whatif(batches(), {.predict = {8}, .device_memory = memory, .curve_run = 1});
  const ScaleCurve& c = *w.predictions[0].curve;
  ASSERT_TRUE(c.oom);
  EXPECT_GT(c.allocated[*c.oom], memory);
  for (size_t i = 0; i < *c.oom; ++i) ASSERT_LE(c.allocated[i], memory) << i;
}

// Spans hold the highest value in force over them, checked against a scan of every point.
TEST(ScaleCurve, SpansHoldTheHighestValueInForce) {
  ScaleWhatif w = scale_whatif(batches(), {.predict = {8}, .curve_run = 0});
  const ScaleCurve& c = *w.predictions[0].curve;
  double dt = static_cast<double>(c.time_ns.back()) / 300;
  std::vector<ScaleSpan> spans = curve_spans(c, -10, dt, 330);
  uint64_t highest = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    auto t0 = static_cast<int64_t>(std::floor((static_cast<double>(i) - 10) * dt));
    auto t1 = static_cast<int64_t>(std::floor((static_cast<double>(i) - 9) * dt));
    std::optional<uint64_t> want;
    for (size_t k = 0; k < c.time_ns.size(); ++k) {
      bool last_before = c.time_ns[k] <= t0 && (k + 1 == c.time_ns.size() || c.time_ns[k + 1] > t0);
      bool in_force = last_before && t0 <= c.time_ns.back();
      if (in_force || (c.time_ns[k] > t0 && c.time_ns[k] < t1)) want = std::max(want.value_or(0), c.allocated[k]);
    }
    EXPECT_EQ(spans[i].shown, want.has_value()) << i;
    EXPECT_EQ(spans[i].allocated, want.value_or(0)) << i;
    highest = std::max(highest, spans[i].allocated);
  }
  EXPECT_EQ(highest, w.predictions[0].peak_allocated);
}

}  // namespace
}  // namespace memrec
