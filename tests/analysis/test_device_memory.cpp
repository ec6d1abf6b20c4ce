// Device memory outside the caching allocator: the device_memory and memory_samples chunks (docs/format.md) and
// the accounting used = reserved + other allocations + context (memrec/device_memory.h), on a synthetic recording
// written through the real writer: one caching-allocator segment, NCCL's buffer, a raw cudaMalloc, pinned host
// memory, and NVML samples of a device whose context takes 500 MiB.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <random>

#include <nlohmann/json.hpp>

#include "common/chunks.h"
#include "common/process.h"
#include "memrec/device_memory.h"
#include "memrec/format.h"

namespace memrec {
namespace {

using test::quote;
using test::run_command;
using test::TempDir;

constexpr uint64_t MiB = 1 << 20;
constexpr int64_t ms = 1'000'000;
constexpr int64_t T0 = 1'700'000'000'000'000'000;
constexpr uint64_t kSegment = 0x7f0000000000, kNccl = 0x7e0000000000, kRaw = 0x7d0000000000;
constexpr uint64_t kContext = 500 * MiB;

Event event(int64_t t, Action a, uint64_t addr, uint64_t size) {
  return {.time_ns = T0 + t, .addr = addr, .size = size, .action = a};
}

DeviceMemoryRecord record(int64_t t, uint64_t addr, uint64_t bytes, uint32_t source, MemoryKind kind,
                          bool release = false) {
  return {.time_ns = T0 + t, .addr = addr, .bytes = bytes, .source = source, .kind = kind,
          .op = release ? MemoryOp::release : MemoryOp::allocation};
}

// What the device holds besides the context, by the construction below.
uint64_t reserved_at(int64_t t) { return t >= 10 * ms && t < 500 * ms ? 20 * MiB : 0; }
uint64_t other_at(int64_t t) { return (t >= 100 * ms ? 8 * MiB : 0) + (t >= 200 * ms && t < 300 * ms ? 64 * MiB : 0); }

Snapshot recording() {
  Snapshot s;
  s.metadata["recorder.nvml"] = "on";
  s.metadata["recorder.device_memory"] = "on";
  for (Event e : {event(10 * ms, Action::segment_alloc, kSegment, 20 * MiB), event(11 * ms, Action::alloc, kSegment, MiB),
                  event(250 * ms, Action::alloc, kSegment + MiB, MiB), event(260 * ms, Action::free_requested, kSegment + MiB, MiB),
                  event(261 * ms, Action::free_completed, kSegment + MiB, MiB),
                  event(400 * ms, Action::free_requested, kSegment, MiB), event(401 * ms, Action::free_completed, kSegment, MiB),
                  event(500 * ms, Action::segment_free, kSegment, 20 * MiB)})
    s.events.push_back(e);
  uint32_t cudart = s.strings.intern("/usr/local/cuda/lib64/libcudart.so.13");
  uint32_t nccl = s.strings.intern("/usr/lib/x86_64-linux-gnu/libnccl.so.2");
  uint32_t program = s.strings.intern("/tmp/raw_malloc");
  uint32_t frame = s.frames.intern({.pc = 0x401234, .function = s.strings.intern("allocate_outside"),
                                    .file = s.strings.intern("/tmp/raw_malloc.cpp"), .line = 12});
  uint32_t stack = s.stacks.intern(std::vector<uint32_t>{frame});
  // CUPTI hands buffers over out of time order: the reader's interpretation sorts them.
  for (DeviceMemoryRecord r : {record(200 * ms, kRaw, 64 * MiB, program, MemoryKind::device),
                               record(10 * ms - 5000, kSegment, 20 * MiB, cudart, MemoryKind::device),  // the allocator's
                               record(100 * ms, kNccl, 8 * MiB, nccl, MemoryKind::device),
                               record(120 * ms, 0x7c0000000000, 2 * MiB, nccl, MemoryKind::device, true),  // from before
                               record(150 * ms, 0x500000000, MiB, program, MemoryKind::pinned),
                               record(300 * ms, kRaw, 64 * MiB, program, MemoryKind::device, true),
                               record(500 * ms - 2000, kSegment, 20 * MiB, cudart, MemoryKind::device, true)})
    s.device_memory.push_back(r);
  s.device_memory.update(0, [&](DeviceMemoryRecord& r) { r.stack = stack; });  // the raw cudaMalloc's call
  for (int64_t t = 0; t <= 600 * ms; t += 50 * ms)
    s.memory_samples.push_back({T0 + t, kContext + reserved_at(t) + other_at(t), 80ull << 30, 0});
  return s;
}

TEST(DeviceMemory, ReadsBackEqual) {
  TempDir tmp;
  Snapshot s = recording();
  write_file(s, tmp / "d.memrec");
  Snapshot back = read_file(tmp / "d.memrec");
  EXPECT_EQ(back.device_memory.size(), 7u);
  EXPECT_EQ(back.memory_samples.size(), 13u);
  EXPECT_TRUE(back == s);
}

TEST(DeviceMemory, FilesWithoutTheChunksReadWithNone) {
  TempDir tmp;
  Snapshot s = recording();
  s.device_memory = {};
  s.memory_samples = {};
  write_file(s, tmp / "plain.memrec");
  Snapshot back = read_file(tmp / "plain.memrec");
  EXPECT_TRUE(back.device_memory.empty());
  EXPECT_TRUE(back.memory_samples.empty());
  EXPECT_TRUE(back == s);
}

TEST(DeviceMemory, BadRowsAreRefusedWithOneSentence) {
  struct Case {
    const char* expect;
    void (*spoil)(Snapshot&);
  };
  const Case cases[] = {
      {"device memory source string id 100000 out of range",
       [](Snapshot& s) { s.device_memory.update(0, [](DeviceMemoryRecord& r) { r.source = 100000; }); }},
      {"device memory stack id 7 out of range",
       [](Snapshot& s) { s.device_memory.update(3, [](DeviceMemoryRecord& r) { r.stack = 7; }); }},
      {"memory sample uses",
       [](Snapshot& s) { s.memory_samples.update(2, [](DeviceMemorySample& m) { m.used = m.total + 1; }); }},
  };
  TempDir tmp;
  for (const Case& c : cases) {
    Snapshot s = recording();
    c.spoil(s);
    write_file(s, tmp / "bad.memrec");
    try {
      read_file(tmp / "bad.memrec");
      ADD_FAILURE() << "read a file with: " << c.expect;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
    }
  }
}

// Every cut of the file reads without a crash: either as a file cut short, or (inside a chunk's bytes, which
// zstd's checksum covers) as complete up to the last whole chunk.
TEST(DeviceMemory, CutFilesReadUpToTheirLastWholeChunk) {
  TempDir tmp;
  write_file(recording(), tmp / "d.memrec");
  std::string bytes = test::read_bytes(tmp / "d.memrec");
  size_t seen_records = 0;
  for (size_t n = 16; n < bytes.size(); n += 7) {
    std::string cut = bytes.substr(0, n);
    Snapshot s = read_buffer({reinterpret_cast<const uint8_t*>(cut.data()), cut.size()});
    EXPECT_FALSE(s.complete);
    EXPECT_TRUE(s.device_memory.empty() || s.device_memory.size() == 7u);
    seen_records = std::max<size_t>(seen_records, s.device_memory.size());
  }
  EXPECT_EQ(seen_records, 7u) << "some cut keeps the device memory chunk";
}

// Damage behind a valid checksum reaches the decoders: the device_memory and memory_samples chunks' payloads are
// mutated and recompressed. Every read ends in an Error or in rows whose ids hold, which the accounting then takes.
TEST(DeviceMemory, DamagedChunksAreRefusedOrHarmless) {
  TempDir tmp;
  write_file(recording(), tmp / "d.memrec");
  const std::string bytes = test::read_bytes(tmp / "d.memrec");
  std::mt19937 rng(13);
  size_t reads = 0, refused = 0;
  for (const test::Chunk& c : test::chunks_of(bytes)) {
    if (c.type != 13 && c.type != 14) continue;
    std::string raw = test::payload_of(bytes, c);
    ASSERT_EQ(raw.size(), c.raw);
    for (int i = 0; i < 200; ++i) {
      std::string damaged = raw;
      for (int k = 0; k < 1 + i % 3; ++k) damaged[rng() % damaged.size()] = static_cast<char>(i % 2 ? 0xff : rng());
      std::string file = test::with_payload(bytes, c, damaged);
      ++reads;
      try {
        Snapshot s = read_buffer({reinterpret_cast<const uint8_t*>(file.data()), file.size()});
        for (const DeviceMemoryRecord& r : s.device_memory) {
          EXPECT_LT(r.source, s.strings.size());
          EXPECT_LT(r.stack, s.stacks.size());
        }
        for (const DeviceMemorySample& m : s.memory_samples) EXPECT_LE(m.used, m.total);
        Replay replay(s, 0);
        device_memory(s, replay);
      } catch (const Error&) {
        ++refused;
      }
    }
  }
  EXPECT_EQ(reads, 400u) << "both chunks were damaged";
  EXPECT_GT(refused, reads / 4);
}

TEST(DeviceMemory, UsedIsReservedPlusOtherAllocationsPlusAConstantContext) {
  Snapshot s = recording();
  Replay r(s, 0);
  DeviceMemory d = device_memory(s, r);
  EXPECT_EQ(d.allocator_allocations, 1u) << "the allocator's own cudaMalloc is told apart by address and size";
  EXPECT_EQ(d.unmatched_releases, 1u);
  ASSERT_EQ(d.other.size(), 3u);  // NCCL's, the raw cudaMalloc, the pinned host buffer
  ASSERT_EQ(d.points.size(), 13u);
  for (const DeviceMemoryPoint& p : d.points) {
    int64_t t = p.time_ns - T0;
    EXPECT_EQ(p.reserved, reserved_at(t)) << t;
    EXPECT_EQ(p.other, other_at(t)) << t << ": pinned host memory is not device memory";
    EXPECT_EQ(p.context, static_cast<int64_t>(kContext)) << t;
  }
  EXPECT_EQ(d.other_at(T0 + 250 * ms), 72 * MiB);
  EXPECT_EQ(d.other_at(T0 + 300 * ms), 8 * MiB) << "released at 300 ms";
}

TEST(DeviceMemory, ARangeOfAnExpandableSegmentIsTheAllocators) {
  Snapshot s;
  s.events.push_back(event(10 * ms, Action::segment_map, kSegment, 40 * MiB));
  s.device_memory.push_back(record(10 * ms - 3000, kSegment + 20 * MiB, 20 * MiB, 0, MemoryKind::device));
  s.device_memory.push_back(record(20 * ms, kSegment + 40 * MiB, 20 * MiB, 0, MemoryKind::device));  // past the range
  Replay r(s, 0);
  DeviceMemory d = device_memory(s, r);
  EXPECT_EQ(d.allocator_allocations, 1u);
  ASSERT_EQ(d.other.size(), 1u);
  EXPECT_EQ(d.other[0].addr, kSegment + 40 * MiB);
}

// The virtual memory API (NCCL's cuMem buffers, expandable segments) is recorded from the calls: allocations paired
// by handle, the allocator's told apart by where they were mapped, and a CUPTI record of the same call dropped.
TEST(DeviceMemory, VirtualMemoryAllocationsArePairedByHandleAndCountedOnce) {
  constexpr uint64_t kNcclHandle = 0x51, kPageHandle = 0x52, kNcclRange = 0x7a0000000000;
  Snapshot s;
  s.events.push_back(event(10 * ms, Action::segment_map, kSegment, 40 * MiB));  // an expandable segment grows
  uint32_t cuda = s.strings.intern("/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  uint32_t nccl = s.strings.intern("/usr/lib/x86_64-linux-gnu/libnccl.so.2");
  uint32_t in_cuda = s.frames.intern({.pc = 0x10, .library = cuda});
  uint32_t in_nccl = s.frames.intern({.pc = 0x20, .function = s.strings.intern("ncclCommInitRank"), .library = nccl});
  uint32_t stack = s.stacks.intern(std::vector<uint32_t>{in_cuda, in_nccl});
  auto vmm = [&](int64_t t, MemoryOp op, uint64_t addr, uint64_t bytes, uint64_t handle, uint32_t correlation) {
    s.device_memory.push_back({.time_ns = T0 + t, .addr = addr, .bytes = bytes, .handle = handle,
                               .correlation = correlation, .kind = MemoryKind::device, .op = op});
  };
  vmm(9 * ms, MemoryOp::vmm_create, kPageHandle, 20 * MiB, 0, 1);
  vmm(9 * ms + 10, MemoryOp::vmm_map, kSegment + 20 * MiB, 20 * MiB, kPageHandle, 2);
  vmm(100 * ms, MemoryOp::vmm_create, kNcclHandle, 32 * MiB, 0, 3);
  s.device_memory.update(2, [&](DeviceMemoryRecord& r) { r.stack = stack; });
  // CUPTI's record of the same cuMemCreate call, at another address: left out.
  s.device_memory.push_back(record(100 * ms, 0xdead0000, 32 * MiB, 0, MemoryKind::device));
  s.device_memory.update(3, [](DeviceMemoryRecord& r) { r.correlation = 3; });
  vmm(100 * ms + 10, MemoryOp::vmm_map, kNcclRange, 32 * MiB, kNcclHandle, 4);
  // CUPTI's records of the map (at the mapped range, as CUDA 13 writes them for NCCL) and of the unmap: left out.
  s.device_memory.push_back(record(100 * ms + 10, kNcclRange, 32 * MiB, 0, MemoryKind::device));
  s.device_memory.update(5, [](DeviceMemoryRecord& r) { r.correlation = 4; });
  s.device_memory.push_back(record(400 * ms, kNcclRange, 32 * MiB, 0, MemoryKind::device, true));
  s.device_memory.update(6, [](DeviceMemoryRecord& r) { r.correlation = 5; });
  vmm(400 * ms, MemoryOp::vmm_unmap, kNcclRange, 32 * MiB, 0, 5);
  vmm(400 * ms + 10, MemoryOp::vmm_release, kNcclHandle, 0, 0, 6);
  Replay r(s, 0);
  DeviceMemory d = device_memory(s, r);
  EXPECT_EQ(d.allocator_allocations, 1u) << "the page mapped inside the allocator's segment";
  EXPECT_EQ(d.duplicates, 3u);
  ASSERT_EQ(d.other.size(), 1u);
  EXPECT_TRUE(d.other[0].vmm);
  EXPECT_EQ(d.other_at(T0 + 200 * ms), 32 * MiB);
  EXPECT_EQ(d.other_at(T0 + 400 * ms + 10), 0u) << "released";
  EXPECT_EQ(library_of(s, d.other[0]), "libnccl.so.2") << "the first frame outside CUDA's libraries";
}

TEST(DeviceMemory, AnAddressReusedAfterTheSegmentWasFreedIsNotTheAllocators) {
  Snapshot s = recording();
  // After the allocator freed its segment at 500 ms, another library gets the same address and size.
  s.device_memory.push_back(record(550 * ms, kSegment, 20 * MiB, 0, MemoryKind::device));
  Replay r(s, 0);
  DeviceMemory d = device_memory(s, r);
  EXPECT_EQ(d.allocator_allocations, 1u);
  EXPECT_EQ(d.other_at(T0 + 560 * ms), 28 * MiB);
}

nlohmann::json stats_json_of(const std::string& path, const std::string& args) {
  auto r = run_command(quote(MEMREC_BINARY) + " stats " + quote(path) + " " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

TEST(DeviceMemory, StatsShowsTheAccountingAtAnInstantAndOverTheRun) {
  TempDir tmp;
  write_file(recording(), tmp / "d.memrec");
  // 240 ms after the first event (at 10 ms): the alloc at 250 ms, when the raw cudaMalloc and NCCL's buffer are live.
  auto j = stats_json_of(tmp / "d.memrec", "--at 240ms")["device_memory"];
  EXPECT_EQ(j["nvml"], "on");
  EXPECT_EQ(j["samples"], 13);
  EXPECT_EQ(j["records"], 7);
  EXPECT_EQ(j["allocator_allocations"], 1);
  EXPECT_EQ(j["other_allocations"], 72 * MiB);
  const auto& at = j["at"];
  EXPECT_EQ(at["sample_time_ns"], 240 * ms);
  EXPECT_EQ(at["device_used"], kContext + 20 * MiB + 72 * MiB);
  EXPECT_EQ(at["reserved"], 20 * MiB);
  EXPECT_EQ(at["other_allocations"], 72 * MiB);
  EXPECT_EQ(at["context"], kContext);
  EXPECT_EQ(j["over_run"]["context_min"], kContext);
  EXPECT_EQ(j["over_run"]["context_max"], kContext);
  EXPECT_EQ(j["over_run"]["other_allocations_max"], 72 * MiB);
  ASSERT_EQ(j["live"].size(), 3u);
  EXPECT_EQ(j["live"][0]["key"], "raw_malloc");
  EXPECT_EQ(j["live"][0]["bytes"], 64 * MiB);
  EXPECT_EQ(j["live"][1]["key"], "libnccl.so.2");
  EXPECT_EQ(j["live"][1]["kind"], "device");
  EXPECT_EQ(j["live"][2]["kind"], "pinned");
  EXPECT_EQ(j["live"][2]["on_device"], false);
  EXPECT_EQ(j["first_event_ns"], T0 + 10 * ms);
  const auto& raw = j["largest"][0];
  EXPECT_EQ(raw["addr"], kRaw);
  EXPECT_EQ(raw["bytes"], 64 * MiB);
  EXPECT_EQ(raw["start_ns"], 190 * ms);
  EXPECT_EQ(raw["end_ns"], 290 * ms);
  EXPECT_EQ(raw["site"], "allocate_outside (raw_malloc.cpp:12)");
  EXPECT_TRUE(j["largest"][1]["end_ns"].is_null()) << "NCCL's buffer lives to the end";
}

// The section's wording, pinned once: the numbers are checked above through --json.
TEST(DeviceMemory, StatsTextSaysEveryPartSo) {
  TempDir tmp;
  write_file(recording(), tmp / "d.memrec");
  auto text = run_command(quote(MEMREC_BINARY) + " stats " + quote(tmp / "d.memrec") + " --at 240ms").output;
  size_t section = text.find("\ndevice memory");
  ASSERT_NE(section, std::string::npos) << text;
  EXPECT_EQ(text.substr(section), R"(
device memory (NVML used = reserved + other allocations + context and driver):
  at +240.0 ms (NVML sample at +240.0 ms):
    used                   592.00 MiB  of 80.00 GiB
    reserved                20.00 MiB
    other allocations       72.00 MiB
    context and driver     500.00 MiB
  over the run (13 samples): context and driver 500.00 MiB .. 500.00 MiB (spread 0 B), used up to 592.00 MiB, other allocations up to 72.00 MiB
  other allocations live at +240.0 ms: 72.00 MiB
     64.00 MiB      1x  raw_malloc (device)
      8.00 MiB      1x  libnccl.so.2 (device)
      1.00 MiB      1x  raw_malloc (pinned, not device memory)
  other allocations over the run, by library:
     64.00 MiB      1x  raw_malloc (device)
      8.00 MiB      1x  libnccl.so.2 (device)
      1.00 MiB      1x  raw_malloc (pinned, not device memory)
  largest other allocations:
     64.00 MiB  raw_malloc (device) at +190.0 ms, freed at +290.0 ms  allocate_outside (raw_malloc.cpp:12)
      8.00 MiB  libnccl.so.2 (device) at +90.0 ms
      1.00 MiB  raw_malloc (pinned) at +140.0 ms
  7 records, 1 allocations of them the caching allocator's segments, 1 releases with no allocation recorded (made before the recording, or a handle released again after cuMemRetainAllocationHandle, as NCCL frees), 0 CUPTI records of virtual memory calls also recorded from the calls (virtual memory calls: not recorded)
)");
}

TEST(DeviceMemory, StatsSaysWhenNvmlWasAbsent) {
  TempDir tmp;
  Snapshot s = recording();
  s.memory_samples = {};
  s.metadata["recorder.nvml"] = "absent: libnvidia-ml.so.1: cannot open shared object file";
  write_file(s, tmp / "d.memrec");
  auto j = stats_json_of(tmp / "d.memrec", "");
  EXPECT_TRUE(j["device_memory"]["at"].is_null());
  EXPECT_EQ(j["device_memory"]["nvml"], s.metadata["recorder.nvml"]);
  auto text = run_command(quote(MEMREC_BINARY) + " stats " + quote(tmp / "d.memrec")).output;
  EXPECT_NE(text.find(s.metadata["recorder.nvml"]), std::string::npos) << text;
}

TEST(DeviceMemory, RecordingsWithoutDeviceMemoryHaveNoSection) {
  TempDir tmp;
  Snapshot s = recording();
  s.device_memory = {};
  s.memory_samples = {};
  s.metadata.clear();
  write_file(s, tmp / "d.memrec");
  EXPECT_TRUE(stats_json_of(tmp / "d.memrec", "")["device_memory"].is_null());
  auto text = run_command(quote(MEMREC_BINARY) + " stats " + quote(tmp / "d.memrec")).output;
  EXPECT_EQ(text.find("device memory"), std::string::npos) << text;
}

TEST(DeviceMemory, ReportHasTheSection) {
  TempDir tmp;
  write_file(recording(), tmp / "d.memrec");
  auto r = run_command(quote(MEMREC_BINARY) + " report " + quote(tmp / "d.memrec") + " -o " + quote(tmp / "r.html"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string html = test::read_bytes(tmp / "r.html");
  EXPECT_NE(html.find("<section id=\"device-memory\">"), std::string::npos);
  EXPECT_NE(html.find("libnccl.so.2 (device)"), std::string::npos);
}

}  // namespace
}  // namespace memrec
