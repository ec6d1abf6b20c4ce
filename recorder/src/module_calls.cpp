// Module calls by forward thread, each thread's in the order they began (so by their first node's number). Calls
// begin and end on their thread's forward; backward nodes look them up from whichever thread runs them (autograd's
// device threads for CUDA), hence a mutex per forward thread, which only a backward reading that thread's calls at
// the same time contends for. A call's number is its index among its thread's calls: finding it is no search.
#include "module_calls.h"

#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace memrec::detail {
namespace {

// Calls kept over all threads, besides those of outermost calls still running (at most this many a thread): a later
// backward through an older forward (retain_graph, a loss summed over many forwards) finds its calls while fewer
// than this were made since.
constexpr size_t kKeep = size_t(1) << 16;
constexpr uint64_t kOpen = UINT64_MAX;

struct Call {
  uint64_t begin, end;  // the nodes [begin, end) of the call's thread; end is kOpen while it runs
  uint64_t parent;      // the enclosing call's number, 0 = outermost
  const std::string* name;
};

// One forward thread's calls: numbers [first, first + calls.size()), in the order they began.
struct Thread {
  std::mutex mu;
  std::deque<Call> calls;
  uint64_t first = 1;

  Call* find(uint64_t number) {
    return number >= first && number - first < calls.size() ? &calls[number - first] : nullptr;
  }
  void pop_front() {
    calls.pop_front();
    ++first;
  }
};

struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

struct State {
  std::mutex mu;  // guards threads, names and ended
  // By forward thread: one for each thread that made a module call, never freed (threads keep pointers to them).
  std::unordered_map<uint64_t, Thread*> threads;
  std::unordered_set<std::string, NameHash, std::equal_to<>> names;  // never shrinks: calls point into it
  std::deque<Thread*> ended;  // the thread of each finished outermost call kept, oldest first
  std::atomic<size_t> kept{0};
};

State& state() {
  static State* s = new State;  // never destroyed: a thread may end a call while the process exits
  return *s;
}

uint64_t forward_thread() { return at::RecordFunction::currentThreadId(); }

Thread* thread_of(State& st, uint64_t thread, bool add) {
  std::lock_guard lock(st.mu);
  auto it = st.threads.find(thread);
  if (it != st.threads.end()) return it->second;
  return add ? st.threads.emplace(thread, new Thread).first->second : nullptr;
}

Thread& own_thread(State& st) {
  thread_local Thread* own = nullptr;
  if (!own) own = thread_of(st, forward_thread(), true);
  return *own;
}

// The calls of `thread`, looked up once per thread it reads from in a row (backward reads one forward's nodes).
Thread* calls_of(State& st, uint64_t thread) {
  thread_local uint64_t last_id = 0;
  thread_local Thread* last = nullptr;
  if (thread != last_id || !last) {
    last = thread_of(st, thread, false);
    last_id = thread;
  }
  return last;
}

// Forgets the oldest finished outermost calls, with the calls inside each, while more than kKeep are kept.
void trim(State& st) {
  while (st.kept > kKeep && !st.ended.empty()) {
    Thread* t = st.ended.front();
    st.ended.pop_front();
    std::lock_guard lock(t->mu);  // its front is its oldest outermost call: outermost calls end in order
    while (!t->calls.empty()) {
      t->pop_front();
      --st.kept;
      if (!t->calls.empty() && t->calls.front().parent == 0) break;
    }
  }
}

// Returns whether the call was an outermost one, kept.
bool ends(Thread& t, uint64_t number, uint64_t seq) {
  std::lock_guard lock(t.mu);
  Call* c = t.find(number);
  if (!c) return false;
  if (c->begin == seq && c == &t.calls.back()) {  // no node, nor any inside it: nothing to look up
    t.calls.pop_back();
    --state().kept;
    return false;
  }
  c->end = seq;
  return c->parent == 0;
}

}  // namespace

const std::string* intern_name(std::string_view name) {
  State& st = state();
  std::lock_guard lock(st.mu);
  auto n = st.names.find(name);
  if (n == st.names.end()) n = st.names.emplace(name).first;
  return &*n;
}

uint64_t module_call_begins(const std::string* name, uint64_t parent) {
  uint64_t seq = at::sequence_number::peek();
  State& st = state();
  try {
    Thread& t = own_thread(st);
    std::lock_guard lock(t.mu);
    t.calls.push_back(Call{seq, kOpen, parent, name});
    ++st.kept;
    if (t.calls.size() > kKeep) {  // an outermost call running that long (a training loop inside a module's forward)
      t.pop_front();               // keeps the bound too: its oldest calls go
      --st.kept;
    }
    return t.first + t.calls.size() - 1;
  } catch (...) {  // out of memory: the call's nodes go to its enclosing call
    return 0;
  }
}

void module_call_ends(uint64_t call) {
  uint64_t seq = at::sequence_number::peek();
  State& st = state();
  try {
    if (!ends(own_thread(st), call, seq)) return;
    std::lock_guard lock(st.mu);
    st.ended.push_back(&own_thread(st));
    trim(st);
  } catch (...) {
  }
}

int module_calls_of_node(uint64_t thread, uint64_t seq, CallRef* out, int max) {
  State& st = state();
  Thread* t = calls_of(st, thread);
  if (!t) return 0;
  std::lock_guard lock(t->mu);
  auto& calls = t->calls;
  // The last call begun at or before the node, then out through its enclosing calls to the first that holds it.
  auto it = std::upper_bound(calls.begin(), calls.end(), seq, [](uint64_t s, const Call& c) { return s < c.begin; });
  if (it == calls.begin()) return 0;
  uint64_t number = t->first + uint64_t(it - calls.begin()) - 1;
  const Call* c = t->find(number);
  while (c && seq >= c->end) c = t->find(number = c->parent);
  int n = 0;
  for (; c && n < max; c = t->find(number = c->parent)) out[n++] = CallRef{thread, number, c->name};
  std::reverse(out, out + n);
  return n;
}

}  // namespace memrec::detail
