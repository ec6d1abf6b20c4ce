#include "memrec/replay.h"

#include "memrec/huge_pages.h"

#include <algorithm>
#include <array>
#include <numeric>

#include "memrec/threads.h"

namespace memrec {

uint32_t Allocations::size() const { return static_cast<uint32_t>(r_->alloc_steps().size()); }
Allocation Allocations::operator[](uint32_t id) const { return r_->allocation(id); }
Allocation Allocations::iterator::operator*() const { return r_->allocation(id_); }

// The pass is in replay_pass.cpp.
Replay::Replay(const Snapshot& s, uint8_t device, unsigned threads) : s_(s), device_(device) {
  index_events(threads);
  pass(threads);
}

// Counts the device's events in even parts of the events, side by side, then (unless they are all the device's)
// each part fills its place in event_index_.
void Replay::index_events(unsigned threads) {
  size_t n = s_.events.size();
  unsigned parts = parts_for(n, threads, kStepsPerThread);
  std::vector<uint32_t> first(parts + 1);
  auto each_mine = [&](unsigned part, auto f) {
    auto [begin, end] = slice(n, part, parts);  // for_each decodes the device column alone
    s_.events.for_each(begin, end, [&](size_t i, const Event& e) __attribute__((always_inline)) {
      if (e.device == device_) f(static_cast<uint32_t>(i));
    });
  };
  on_threads(parts, [&](unsigned part) {
    uint32_t mine = 0;
    each_mine(part, [&](uint32_t) { ++mine; });
    first[part + 1] = mine;
  });
  std::partial_sum(first.begin(), first.end(), first.begin());
  steps_ = first[parts];
  if (steps_ == n) return;  // steps are event indices
  reserve_huge(event_index_, steps_);
  event_index_.resize(steps_);
  on_threads(parts, [&](unsigned part) {
    each_mine(part, [&, at = first[part]](uint32_t i) mutable { event_index_[at++] = i; });
  });
}

uint32_t Replay::owner_of(uint32_t id) const {
  auto it = std::lower_bound(owned_.begin(), owned_.end(), id, [](const Owned& o, uint32_t v) { return o.id < v; });
  return it != owned_.end() && it->id == id ? it->row : kNoOwner;
}

uint32_t Replay::owner_names(uint32_t id) const {
  auto it = std::lower_bound(owned_.begin(), owned_.end(), id, [](const Owned& o, uint32_t v) { return o.id < v; });
  return it != owned_.end() && it->id == id ? it->names : 0;
}

const Replay::Correction* Replay::first_correction(uint32_t step) const {
  auto it = std::lower_bound(corrections_.begin(), corrections_.end(), step,
                             [](const Correction& c, uint32_t s) { return c.step < s; });
  return corrections_.data() + (it - corrections_.begin());
}

uint32_t Replay::first_step_at(int64_t t) const {
  uint32_t lo = 0, hi = steps_;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    (time_of(mid) < t ? lo = mid + 1 : hi = mid);
  }
  return lo;
}

Totals Replay::after(uint32_t step) const {
  if (step == kNoEvent) return initial_;
  if (step >= steps_) throw std::out_of_range("Replay::after: no such step");
  Totals t;
  for_each_after(step, step + 1, [&](uint32_t, const Totals& at) { t = at; });
  return t;
}

Allocation Replay::allocation(uint32_t id) const {
  if (id < pre_existing_.size()) {
    Allocation a = pre_existing_[id];
    a.free_step = free_step_[id], a.completed_step = completed_step_[id];
    return a;
  }
  uint32_t ev = event_of(alloc_step_[id]);
  const Event& e = s_.events[ev];
  return Allocation{.addr = e.addr, .size = e.size, .alloc_step = alloc_step_[id], .free_step = free_step_[id],
                    .completed_step = completed_step_[id], .stack = e.stack, .scope = e.scope, .event = ev,
                    .stream = e.stream};
}

std::vector<uint32_t> Replay::live_after(uint32_t step) const {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < alloc_step_.size(); ++i)
    if (live_after_step(alloc_step_[i], free_step_[i], step)) ids.push_back(i);
  return ids;
}

namespace {

std::vector<uint8_t> seen_devices(const std::array<bool, 256>& seen) {
  std::vector<uint8_t> devices;
  for (int d = 0; d < 256; ++d)
    if (seen[d]) devices.push_back(static_cast<uint8_t>(d));
  return devices;
}

}  // namespace

std::vector<uint8_t> devices_with_events(const Snapshot& s) {
  std::array<bool, 256> seen{};
  for (const Event& e : s.events) seen[e.device] = true;
  return seen_devices(seen);
}

std::vector<uint8_t> devices_of(const Snapshot& s, const std::vector<uint8_t>& with_events) {
  std::array<bool, 256> seen{};
  for (uint8_t d : with_events) seen[d] = true;
  for (const Segment& seg : s.segments_end) seen[seg.device] = true;
  for (const Segment& seg : s.segments_start) seen[seg.device] = true;
  return seen_devices(seen);
}

std::vector<uint8_t> devices_of(const Snapshot& s) { return devices_of(s, devices_with_events(s)); }

}  // namespace memrec
