#include <algorithm>
#include <cstring>

#include "internal.h"

namespace memrec::detail {

void Batch::reserve(size_t records_cap, size_t payload_cap) {
  records.reserve(records_cap);
  payload.reserve(payload_cap);
}

void Waker::request() {
  {
    std::lock_guard lock(mu_);
    requested_ = true;
  }
  cv_.notify_one();
}

bool Waker::wait(std::chrono::milliseconds timeout, bool* requested) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [this] { return requested_ || stopped_; });
  if (requested) *requested = requested_;
  requested_ = false;
  return !stopped_;
}

void Waker::stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  cv_.notify_one();
}

void Waker::reset() {
  std::lock_guard lock(mu_);
  requested_ = stopped_ = false;
}

EventBuffer& EventBuffer::get() {
  static auto* buffer = new EventBuffer;  // never destroyed: hooks may still run during static destruction
  return *buffer;
}

void EventBuffer::enable(size_t records_cap, size_t payload_words, uint64_t max_events) {
  std::lock_guard lock(mu_);
  records_cap_ = records_cap;
  payload_cap_ = payload_words;
  active_ = Batch{};
  active_.reserve(records_cap_, payload_cap_);
  next_scope_ = 1;
  max_events_ = max_events;
  kept_events_ = 0;
  drops_ = {};
  woken_ = false;
  enabled_ = true;
  enabled_flag_ = true;
}

void EventBuffer::disable() {
  std::lock_guard lock(mu_);
  enabled_ = false;
  enabled_flag_ = false;
}

bool EventBuffer::has_room(size_t payload_words) const {
  return active_.records.size() < records_cap_ && active_.payload.size() + payload_words <= payload_cap_;
}

void EventBuffer::note_fill() {
  if (!woken_ && waker_ &&
      (active_.records.size() * 2 >= records_cap_ || active_.payload.size() * 2 >= payload_cap_)) {
    woken_ = true;
    waker_->request();
  }
}

bool EventBuffer::push_event(const Record& r, std::span<const uint64_t> pcs) {
  if (!enabled_flag_) return false;
  std::lock_guard lock(mu_);
  if (!enabled_) return false;
  bool capped = capped_locked();
  if (capped || !has_room(pcs.size())) {
    ++(capped ? drops_.over_cap : drops_.buffer_full);
    ++drops_.by_action[static_cast<size_t>(r.action)];
    return false;
  }
  ++kept_events_;
  Record& out = active_.records.emplace_back(r);
  out.payload = static_cast<uint32_t>(active_.payload.size());
  out.payload_len = static_cast<uint16_t>(pcs.size());
  active_.payload.insert(active_.payload.end(), pcs.begin(), pcs.end());
  note_fill();
  return true;
}

uint32_t EventBuffer::push_scope_open(int64_t start, std::string_view name, ScopeKind kind, uint32_t parent) {
  name = name.substr(0, 255);
  size_t words = (name.size() + 7) / 8;
  if (!enabled_flag_) return 0;
  std::lock_guard lock(mu_);
  if (!enabled_) return 0;
  if (capped_locked() || !has_room(words)) {
    ++drops_.scopes;
    return 0;
  }
  Record& out = active_.records.emplace_back();
  out.kind = RecordKind::scope_open;
  out.time = start;
  out.scope = next_scope_++;
  out.parent = parent;
  out.scope_kind = kind;
  out.payload = static_cast<uint32_t>(active_.payload.size());
  out.payload_len = static_cast<uint16_t>(name.size());
  active_.payload.resize(active_.payload.size() + words);  // within capacity: no allocation
  std::memcpy(active_.payload.data() + out.payload, name.data(), name.size());
  note_fill();
  return out.scope;
}

void EventBuffer::push_scope_close(uint32_t id, int64_t end) {
  if (id == 0 || !enabled_flag_) return;
  std::lock_guard lock(mu_);
  if (!enabled_) return;
  if (!has_room(0)) {  // closes of kept scopes are kept past the cap: they cost no memory in the snapshot
    ++drops_.scopes;
    return;
  }
  Record& out = active_.records.emplace_back();
  out.kind = RecordKind::scope_close;
  out.time = end;
  out.scope = id;
  note_fill();
}

bool EventBuffer::push_owner(const Record& r, std::string_view module, std::string_view name) {
  module = module.substr(0, 255), name = name.substr(0, 255);
  size_t bytes = module.size() + name.size(), words = (bytes + 7) / 8;
  if (!enabled_flag_) return false;
  std::lock_guard lock(mu_);
  if (!enabled_) return false;
  if (capped_locked() || !has_room(words)) {
    ++drops_.owners;
    return false;
  }
  Record& out = active_.records.emplace_back(r);
  out.kind = RecordKind::owner;
  out.parent = static_cast<uint32_t>(module.size());
  out.payload = static_cast<uint32_t>(active_.payload.size());
  out.payload_len = static_cast<uint16_t>(bytes);
  active_.payload.resize(active_.payload.size() + words);  // within capacity: no allocation
  char* at = reinterpret_cast<char*>(active_.payload.data() + out.payload);
  std::memcpy(at, module.data(), module.size());
  std::memcpy(at + module.size(), name.data(), name.size());
  note_fill();
  return true;
}

bool EventBuffer::take(Batch& spare) {
  spare.clear();
  if (spare.records.capacity() < records_cap_ || spare.payload.capacity() < payload_cap_)
    spare.reserve(records_cap_, payload_cap_);
  std::lock_guard lock(mu_);
  std::swap(active_, spare);
  woken_ = false;
  return capped_locked();
}

void EventBuffer::wake() {
  std::lock_guard lock(mu_);
  if (enabled_ && waker_) waker_->request();
}

Drops EventBuffer::drops() const {
  std::lock_guard lock(mu_);
  return drops_;
}


}  // namespace memrec::detail
