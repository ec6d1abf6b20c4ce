// Replay::extend: the events a recording gained while it is followed are replayed from where the pass stopped, to
// the state the pass over the whole recording reaches.
#include <algorithm>
#include <numeric>

#include "address_map.h"
#include "memrec/replay.h"

namespace memrec {

// The pass's state at its end, in final allocation ids and absolute totals.
struct Replay::Resume {
  format_detail::AddressMap<LiveBlock> live;
  Totals totals;  // after the last step
};

// What extend() found before it changed anything, put back when it cannot go on.
struct Replay::Undo {
  uint32_t steps = 0;
  size_t allocations = 0, stored = 0, corrections = 0, segment_steps = 0, event_index = 0;
  Peak peak_allocated, peak_reserved;
  uint64_t unmatched_frees = 0;
  Resume resume;
  std::vector<std::pair<uint32_t, uint32_t>> freed, completed;  // an earlier block's id and its step before
};

// The address map as the pass left it, from the blocks' steps: the pass put a block older than the recording at
// its first free and a recorded one at its alloc, each replacing what the address held; a block whose free
// completed left the map then, before the next put at its address (that free would have found the later block).
std::shared_ptr<Replay::Resume> Replay::resume() const {
  auto r = std::make_shared<Resume>();
  r->totals = steps_ ? after(steps_ - 1) : initial_;
  auto put = [&](uint32_t id, uint64_t addr, uint64_t size) {
    r->live.put(addr, {id, size});
    if (completed_step_[id] != kNoEvent) r->live.erase(addr);
  };
  std::vector<std::pair<uint32_t, uint32_t>> older;  // (step of the first free, id)
  for (uint32_t id = 0; id < pre_existing_.size(); ++id) {
    uint32_t found = free_step_[id] == kBeforeStart ? completed_step_[id] : free_step_[id];
    if (found != kNoEvent) older.emplace_back(found, id);
  }
  std::sort(older.begin(), older.end());
  auto next = older.begin();
  for (uint32_t id = static_cast<uint32_t>(pre_existing_.size()); id < alloc_step_.size(); ++id) {
    for (; next != older.end() && next->first < alloc_step_[id]; ++next)
      put(next->second, pre_existing_[next->second].addr, pre_existing_[next->second].size);
    put(id, field_of<&Allocation::addr, &Event::addr>(id), size_of(id));
  }
  for (; next != older.end(); ++next)
    put(next->second, pre_existing_[next->second].addr, pre_existing_[next->second].size);
  return r;
}

bool Replay::extend() {
  if (s_.complete != complete_) return false;
  for (uint64_t row = owners_seen_; row < s_.owners.size(); ++row)
    if (s_.owners[row].device == device_) return false;
  uint64_t events = s_.events.size();
  if (events == events_replayed_) return owners_seen_ = s_.owners.size(), true;
  if (!resume_) resume_ = resume();
  Undo undo{steps_,         alloc_step_.size(), stored_.size(), corrections_.size(), segment_steps_.size(),
            event_index_.size(), peak_allocated_, peak_reserved_, unmatched_frees_, *resume_, {}, {}};
  std::vector<uint32_t> mine;
  s_.events.for_each(events_replayed_, events, [&](size_t i, const Event& e) __attribute__((always_inline)) {
    if (e.device == device_) mine.push_back(static_cast<uint32_t>(i));
  });
  uint32_t from = steps_;
  if (event_index_.empty() && mine.size() == events - events_replayed_) {
    steps_ += static_cast<uint32_t>(mine.size());  // steps are still event indices
  } else {
    if (event_index_.empty()) event_index_.resize(steps_), std::iota(event_index_.begin(), event_index_.end(), 0);
    event_index_.insert(event_index_.end(), mine.begin(), mine.end());
    steps_ = static_cast<uint32_t>(event_index_.size());
  }
  if (!extend_steps(from, *resume_, undo)) {
    this->undo(undo);
    return false;
  }
  events_replayed_ = events, owners_seen_ = s_.owners.size();
  return true;
}

// Replays steps [from, steps_) as the pass does, in final ids and absolute totals; false where it cannot.
bool Replay::extend_steps(uint32_t from, Resume& at, Undo& undo) {
  bool ok = true;
  Totals& t = at.totals;
  for_each_step(from, steps_, [&](uint32_t step, const Event& e) __attribute__((always_inline)) {
    if (!ok) return;
    if (step % kStride == 0) stored_.push_back(t);
    Totals was = t;
    if (e.action == Action::alloc) {
      if (at.live.put(e.addr, {static_cast<uint32_t>(alloc_step_.size()), e.size})) ++unmatched_frees_;
      alloc_step_.push_back(step), free_step_.push_back(kNoEvent), completed_step_.push_back(kNoEvent);
      t.allocated += e.size, t.active += e.size;
    } else if (e.action == Action::free_requested || e.action == Action::free_completed) {
      LiveBlock* block = at.live.find(e.addr);
      if (!block) {  // older than the recording: it takes an id before every recorded block
        ok = false;
        return;
      }
      uint32_t id = block->id;
      uint64_t size = block->size;
      if (free_step_[id] == kNoEvent) undo.freed.emplace_back(id, kNoEvent), free_step_[id] = step, t.allocated -= size;
      if (e.action == Action::free_completed) {
        undo.completed.emplace_back(id, completed_step_[id]);
        completed_step_[id] = step, t.active -= size;
        at.live.erase(e.addr);
      }
    } else if (is_segment_grow(e.action) || is_segment_shrink(e.action)) {
      t.reserved += is_segment_grow(e.action) ? e.size : -e.size;
      // Below the initial state, which a recording without a start state takes from its lowest point.
      if (static_cast<int64_t>(t.reserved) < 0) ok = false;
      segment_steps_.push_back(step);
    }
    Totals d = default_delta(e);
    if (t.allocated - was.allocated != d.allocated || t.active - was.active != d.active)
      corrections_.push_back(Correction{step, static_cast<int64_t>(t.allocated - was.allocated),
                                        static_cast<int64_t>(t.active - was.active)});
    if (static_cast<int64_t>(t.allocated) > static_cast<int64_t>(peak_allocated_.bytes))
      peak_allocated_ = Peak{t.allocated, step, e.time_ns};
    if (static_cast<int64_t>(t.reserved) > static_cast<int64_t>(peak_reserved_.bytes))
      peak_reserved_ = Peak{t.reserved, step, e.time_ns};
  });
  return ok;
}

void Replay::undo(const Undo& u) {
  for (auto it = u.completed.rbegin(); it != u.completed.rend(); ++it) completed_step_[it->first] = it->second;
  for (auto it = u.freed.rbegin(); it != u.freed.rend(); ++it) free_step_[it->first] = it->second;
  steps_ = u.steps;
  for (auto* v : {&alloc_step_, &free_step_, &completed_step_}) v->resize(u.allocations);
  stored_.resize(u.stored), corrections_.resize(u.corrections), segment_steps_.resize(u.segment_steps);
  event_index_.resize(u.event_index);
  peak_allocated_ = u.peak_allocated, peak_reserved_ = u.peak_reserved;
  unmatched_frees_ = u.unmatched_frees;
  *resume_ = u.resume;
}

}  // namespace memrec
