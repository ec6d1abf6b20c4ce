#include <pthread.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <new>
#include <thread>

#include "internal.h"

namespace memrec::detail {

// A run of one thread's records and their payload. The thread writes a record, then publishes it by raising
// `published`; the drain reads up to there. Once the thread has moved on (`next` set, so `published` is final) and
// the drain has read everything, the chunk goes back to the pool. The records are raw storage (Record is an
// implicit-lifetime aggregate), so that the pool's chunks are not written until used.
struct Chunk {
  static constexpr uint32_t kRecords = 256, kWords = kRecords * 32;
  std::atomic<uint32_t> published{0};
  std::atomic<Chunk*> next{nullptr};
  uint32_t records_cap = 0, words_cap = 0, words = 0;  // the thread's (the caps: this recording's chunk size)
  uint32_t events_cap = 0;                              // the thread's: 0 in a chunk of the pool's reserve
  uint32_t read = 0, seen = 0;                          // the drain's
  bool seen_all = false;                                // the drain's: `seen` was final
  alignas(Record) std::byte storage[kRecords * sizeof(Record)];
  uint64_t payload[kWords];

  Record* records() { return std::launder(reinterpret_cast<Record*>(storage)); }
};

// One thread's place in the buffer: claimed on the thread's first push, marked exited when the thread ends, free
// again once the drain has read and given back its chunks. Never freed.
struct ProducerSlot {
  enum State : int { owned, exited, free };
  std::atomic<int> state{owned};
  Chunk* current = nullptr;            // the thread's (the drain clears it once the thread is gone)
  std::atomic<Chunk*> first{nullptr};  // the first chunk after a claim, for the drain to start from
  Chunk* head = nullptr;               // the drain's: the oldest chunk not given back
  bool gone = false;                   // the drain's: exited when it last looked
  ProducerSlot* next = nullptr;        // in EventBuffer::slots_
};

namespace {

thread_local ProducerSlot* t_slot = nullptr;  // trivially destructible: hooks run after thread_local destructors

// Runs when a thread that pushed ends, after its thread_local destructors (whose frees it pushed). A push after
// this claims a slot again and sets the key again, which runs this once more.
void on_thread_exit(void* slot) {
  static_cast<ProducerSlot*>(slot)->state.store(ProducerSlot::exited, std::memory_order_release);
  t_slot = nullptr;
}

struct ExitKey {
  pthread_key_t key{};
  bool ok = pthread_key_create(&key, &on_thread_exit) == 0;  // without it, an exited thread's slot stays taken
};

const ExitKey& exit_key() {
  static const ExitKey key;  // never deleted: threads may end at any time
  return key;
}

size_t payload_words(const Record& r) {
  return r.kind == RecordKind::event ? r.payload_len : (r.payload_len + size_t{7}) / 8;
}

// Writes `r` stamped `seq` with the bytes of `a` then `b` as its payload (`payload_len` as Record says), and
// publishes it.
[[gnu::always_inline]] inline void write(Chunk& c, const Record& r, uint64_t seq, size_t payload_len,
                                         std::string_view a = {}, std::string_view b = {}) {
  uint32_t n = c.published.load(std::memory_order_relaxed);
  Record& out = c.records()[n] = r;
  out.seq = static_cast<uint32_t>(seq);
  out.payload = c.words;
  out.payload_len = static_cast<uint16_t>(payload_len);
  if (size_t bytes = a.size() + b.size()) {
    auto* at = reinterpret_cast<char*>(c.payload + c.words);
    std::memcpy(at, a.data(), a.size());
    if (!b.empty()) std::memcpy(at + a.size(), b.data(), b.size());
    c.words += static_cast<uint32_t>((bytes + 7) / 8);
  }
  c.published.store(n + 1, std::memory_order_release);
}

std::string_view bytes_of(std::span<const uint64_t> words) {
  return {reinterpret_cast<const char*>(words.data()), words.size_bytes()};
}

}  // namespace

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

constinit NeverDestroyed<EventBuffer> g_event_buffer;

// Chunks are never freed (a thread that stopped allocating keeps its own), so the pool only grows: a recording
// uses as many as its size needs, of its chunk size.
void EventBuffer::enable(size_t records_cap, size_t payload_words, uint64_t max_events) {
  {
    std::lock_guard lock(pool_mu_);
    // At least 256 chunks once there is room for 256 records: each thread holds one.
    chunk_records_ = static_cast<uint32_t>(std::clamp<size_t>(records_cap / 256, 1, Chunk::kRecords));
    size_t words = records_cap ? payload_words * chunk_records_ / records_cap : 0;
    chunk_words_ = static_cast<uint32_t>(std::min<size_t>(words, Chunk::kWords));
    chunks_limit_ = records_cap / chunk_records_;
    if (chunks_made_ < chunks_limit_) {
      // One block, mapped apart from the program's heap (chunks among its small blocks change how malloc serves
      // them), and not written here: a chunk is made where it is first handed out.
      size_t n = chunks_limit_ - chunks_made_;
      auto* block = static_cast<std::byte*>(::operator new(n * sizeof(Chunk), std::align_val_t{alignof(Chunk)}));
      free_.reserve(chunks_limit_);
      for (size_t i = 0; i < n; ++i) free_.push_back(reinterpret_cast<Chunk*>(block + i * sizeof(Chunk)));
      chunks_made_ = chunks_limit_;
    }
    handed_since_take_ = 0;
    woken_ = false;
  }
  records_cap_ = records_cap;
  payload_cap_ = payload_words;
  for (auto* n : {&drops_.buffer_full, &drops_.over_cap, &drops_.scopes, &drops_.owners}) n->store(0);
  for (auto& n : drops_.by_action) n.store(0);
  max_events_ = max_events;
  kept_events_ = 0;
  {
    std::lock_guard lock(scope_mu_);
    next_scope_ = 1;
    // Records of an earlier recording still in the chunks carry older stamps: the drain skips them.
    next_seq_ = seq_.load() & ~kStopped;
    seq_ = next_seq_;
  }
  enabled_ = true;
}

void EventBuffer::disable() {
  std::lock_guard lock(pool_mu_);  // wakes happen under it, while enabled: none after this
  enabled_ = false;
  uint64_t at = seq_.fetch_or(kStopped);
  if (!(at & kStopped)) stopped_at_ = at;
}

void EventBuffer::set_waker(Waker* w) {
  std::lock_guard lock(pool_mu_);
  waker_ = w;
}

void EventBuffer::wake() {
  std::lock_guard lock(pool_mu_);
  if (enabled() && waker_) waker_->request();
}

ProducerSlot& EventBuffer::claim_slot() {
  ProducerSlot* s = slots_.load(std::memory_order_acquire);
  for (; s; s = s->next) {
    int expected = ProducerSlot::free;
    if (s->state.load(std::memory_order_relaxed) == ProducerSlot::free &&
        s->state.compare_exchange_strong(expected, ProducerSlot::owned, std::memory_order_acquire))
      break;
  }
  if (!s) {
    s = new ProducerSlot;
    s->next = slots_.load(std::memory_order_relaxed);
    while (!slots_.compare_exchange_weak(s->next, s, std::memory_order_release, std::memory_order_relaxed)) {
    }
  }
  if (exit_key().ok) pthread_setspecific(exit_key().key, s);
  t_slot = s;
  return *s;
}

inline Chunk* EventBuffer::room(size_t words, bool event) {
  ProducerSlot* s = t_slot;
  if (!s) s = &claim_slot();
  Chunk* c = s->current;
  if (c && c->published.load(std::memory_order_relaxed) < (event ? c->events_cap : c->records_cap) &&
      c->words + words <= c->words_cap)
    return c;
  return next_chunk(*s, words, event);
}

// Scope opens and closes and owner rows are few, and every event hangs on them: the last eighth of the pool is
// theirs, in chunks that take no event.
__attribute__((noinline)) Chunk* EventBuffer::next_chunk(ProducerSlot& s, size_t words, bool event) {
  Chunk* c = nullptr;
  {
    std::lock_guard lock(pool_mu_);
    bool reserve = chunks_held_ + chunks_limit_ / 8 >= chunks_limit_;
    if (words > chunk_words_ || free_.empty() || chunks_held_ >= chunks_limit_ || (reserve && event)) return nullptr;
    c = new (free_.back()) Chunk;  // starts empty; its records and payload are left as they are
    free_.pop_back();
    ++chunks_held_;
    if (++handed_since_take_ * 2 >= chunks_limit_ && !woken_ && waker_ && enabled()) {
      woken_ = true;
      waker_->request();
    }
    c->records_cap = chunk_records_;
    c->events_cap = reserve ? 0 : chunk_records_;
    c->words_cap = chunk_words_;
  }
  (s.current ? s.current->next : s.first).store(c, std::memory_order_release);
  s.current = c;
  return c;
}

bool EventBuffer::capped() const {
  uint64_t max = max_events_.load(std::memory_order_relaxed);
  return max && kept_events_.load(std::memory_order_relaxed) >= max;
}

bool EventBuffer::count_event() {
  uint64_t max = max_events_.load(std::memory_order_relaxed);
  return !capped() && kept_events_.fetch_add(1, std::memory_order_relaxed) < max;
}

bool EventBuffer::drop_event(Action a, bool over_cap) {
  (over_cap ? drops_.over_cap : drops_.buffer_full).fetch_add(1, std::memory_order_relaxed);
  drops_.by_action[static_cast<size_t>(a)].fetch_add(1, std::memory_order_relaxed);
  return false;
}

// Stamps `r` and writes it, unless the stamp came after disable(): false then.
[[gnu::always_inline]] inline bool EventBuffer::stamp_and_write(Chunk& c, const Record& r, size_t payload_len,
                                                                std::string_view a, std::string_view b) {
  uint64_t seq = seq_.fetch_add(1, std::memory_order_relaxed);
  if (seq & kStopped) return false;
  write(c, r, seq, payload_len, a, b);
  return true;
}

bool EventBuffer::push_event(const Record& r, std::span<const uint64_t> pcs) {
  if (!enabled()) return false;
  Chunk* c = room(pcs.size(), true);
  if (!c) return drop_event(r.action, false);
  if (max_events_.load(std::memory_order_relaxed) && !count_event()) return drop_event(r.action, true);
  return stamp_and_write(*c, r, pcs.size(), bytes_of(pcs));
}

uint32_t EventBuffer::push_scope_open(int64_t start, std::string_view name, ScopeKind kind, uint32_t parent) {
  if (!enabled()) return 0;
  name = name.substr(0, 255);
  Chunk* c = room((name.size() + 7) / 8, false);
  if (!c || capped()) {
    drops_.scopes.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  Record r;
  r.kind = RecordKind::scope_open;
  r.time = start;
  r.parent = parent;
  r.scope_kind = kind;
  uint64_t seq;
  {
    std::lock_guard lock(scope_mu_);
    seq = seq_.fetch_add(1, std::memory_order_relaxed);
    if (seq & kStopped) return 0;
    r.scope = next_scope_++;
  }
  write(*c, r, seq, name.size(), name);
  return r.scope;
}

void EventBuffer::push_scope_close(uint32_t id, int64_t end) {
  if (id == 0 || !enabled()) return;
  Chunk* c = room(0, false);
  if (!c) {  // closes of kept scopes are kept past the cap: they cost no memory in the snapshot
    drops_.scopes.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Record r;
  r.kind = RecordKind::scope_close;
  r.time = end;
  r.scope = id;
  stamp_and_write(*c, r, 0);
}

bool EventBuffer::push_owner(const Record& r, std::string_view module, std::string_view name) {
  if (!enabled()) return false;
  module = module.substr(0, 255), name = name.substr(0, 255);
  Chunk* c = room((module.size() + name.size() + 7) / 8, false);
  if (!c || capped()) {
    drops_.owners.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  Record out = r;
  out.kind = RecordKind::owner;
  out.parent = static_cast<uint32_t>(module.size());
  return stamp_and_write(*c, out, module.size() + name.size(), module, name);
}

// Where a record stamped `seq` (the stamp's low 32 bits) goes among those not taken yet; below 0: stamped before this
// recording began.
int32_t EventBuffer::since_taken(uint32_t seq) const {
  return static_cast<int32_t>(seq - static_cast<uint32_t>(next_seq_));
}

// Notes how far each thread has published, and returns the first stamp at or after next_seq_ that no thread has
// published yet: every record below it can be taken in order.
uint64_t EventBuffer::first_unwritten() {
  size_t total = 0;
  for (ProducerSlot* s = slots_.load(std::memory_order_acquire); s; s = s->next) {
    s->gone = s->state.load(std::memory_order_acquire) == ProducerSlot::exited;  // before reading what it wrote
    if (!s->head) s->head = s->first.exchange(nullptr, std::memory_order_acquire);
    for (Chunk* c = s->head; c;) {
      Chunk* next = c->next.load(std::memory_order_acquire);  // first: once set, `published` is final
      c->seen = c->published.load(std::memory_order_acquire);
      c->seen_all = next != nullptr;
      total += c->seen - c->read;
      c = next;
    }
  }
  seen_.assign((total + 63) / 64, 0);
  for (ProducerSlot* s = slots_.load(std::memory_order_acquire); s; s = s->next)
    for (Chunk* c = s->head; c; c = c->seen_all ? c->next.load(std::memory_order_relaxed) : nullptr)
      for (uint32_t i = c->read; i < c->seen; ++i) {
        int32_t at = since_taken(c->records()[i].seq);
        if (at >= 0 && size_t(at) < total) seen_[at / 64] |= uint64_t(1) << (at % 64);
      }
  size_t word = 0;
  while (word < seen_.size() && seen_[word] == ~uint64_t(0)) ++word;
  size_t first = word * 64 + (word < seen_.size() ? std::countr_one(seen_[word]) : 0);
  return next_seq_ + std::min(first, total);
}

// Moves the records stamped before `end` into `out`, each at its stamp's place, and gives back the chunks read to
// the end and the slots of threads that are gone.
void EventBuffer::move_records(Batch& out, uint64_t end) {
  out.records.resize(end - next_seq_);
  for (ProducerSlot* s = slots_.load(std::memory_order_acquire); s; s = s->next) {
    Chunk* c = s->head;
    for (; c; c = c->next.load(std::memory_order_relaxed)) {
      for (; c->read < c->seen; ++c->read) {
        Record r = c->records()[c->read];
        int32_t at = since_taken(r.seq);
        if (at < 0) continue;  // stamped before this recording began
        if (uint64_t(at) >= end - next_seq_) break;  // after a stamp still being written: the next take's
        const uint64_t* words = c->payload + r.payload;
        r.payload = static_cast<uint32_t>(out.payload.size());
        out.payload.insert(out.payload.end(), words, words + payload_words(r));
        out.records[at] = r;
      }
      if (c->read < c->seen || !c->seen_all) break;
      read_.push_back(c);
    }
    s->head = c;
    if (s->gone && (!c || c->read == c->seen)) {  // its thread ended, and everything it wrote was read
      if (c) read_.push_back(c);
      s->head = s->current = nullptr;
      s->state.store(ProducerSlot::free, std::memory_order_release);
    }
  }
  next_seq_ = end;
}

void EventBuffer::give_back() {
  std::lock_guard lock(pool_mu_);
  free_.insert(free_.end(), read_.begin(), read_.end());
  chunks_held_ -= read_.size();
  handed_since_take_ = 0;
  woken_ = false;
  read_.clear();
}

bool EventBuffer::take(Batch& spare) {
  spare.clear();
  if (spare.records.capacity() < records_cap_ || spare.payload.capacity() < payload_cap_)
    spare.reserve(records_cap_, payload_cap_);
  uint64_t end = first_unwritten();
  // After disable() every stamp below stopped_at_ is being written: wait for a thread caught between its stamp and
  // its write (a few instructions, unless it was preempted there).
  bool stopped = seq_.load() & kStopped;
  for (int i = 0; i < 2000 && stopped && end < stopped_at_.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    end = first_unwritten();
  }
  move_records(spare, end);
  give_back();
  if (stopped && next_seq_ < stopped_at_.load()) {  // a thread that never finished: it and what follows are lost
    drops_.buffer_full.fetch_add(stopped_at_.load() - next_seq_);
    next_seq_ = stopped_at_.load();
  }
  return capped();
}

Drops EventBuffer::drops() const {
  Drops d;
  d.buffer_full = drops_.buffer_full.load();
  d.over_cap = drops_.over_cap.load();
  d.scopes = drops_.scopes.load();
  d.owners = drops_.owners.load();
  for (size_t i = 0; i < kActionCount; ++i) d.by_action[i] = drops_.by_action[i].load();
  return d;
}

}  // namespace memrec::detail
