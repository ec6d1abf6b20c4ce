// Module calls by forward thread, each thread's in the order they began (so by their first node's number). Calls
// begin and end on their thread's forward (under the interpreter's lock for Python); backward nodes look them up
// from whichever thread runs them (autograd's device threads for CUDA), hence the one mutex.
#include "module_calls.h"

#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>

#include <algorithm>
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
  uint64_t number;      // unique in the process, rising
  uint64_t begin, end;  // the nodes [begin, end) of the call's thread; end is kOpen while it runs
  uint64_t parent;      // the enclosing call's number, 0 = outermost
  const std::string* name;
};
using Calls = std::deque<Call>;  // one thread's, by number (so by begin)

struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

struct State {
  std::mutex mu;
  std::unordered_map<uint64_t, Calls> threads;  // by forward thread; a thread with no call kept has no entry
  std::unordered_set<std::string, NameHash, std::equal_to<>> names;  // never shrinks: calls point into it
  std::deque<uint64_t> ended;  // the thread of each finished outermost call kept, oldest first
  size_t kept = 0;
  uint64_t last = 0;  // the last call number given
};

State& state() {
  static State* s = new State;  // never destroyed: a thread may end a call while the process exits
  return *s;
}

Calls::iterator find(Calls& calls, uint64_t number) {
  auto it = std::lower_bound(calls.begin(), calls.end(), number,
                             [](const Call& c, uint64_t n) { return c.number < n; });
  return it != calls.end() && it->number == number ? it : calls.end();
}

// Forgets the oldest finished outermost calls, with the calls inside each, while more than kKeep are kept.
void trim(State& st) {
  while (st.kept > kKeep && !st.ended.empty()) {
    auto it = st.threads.find(st.ended.front());
    st.ended.pop_front();
    if (it == st.threads.end()) continue;
    Calls& calls = it->second;  // its front is its oldest outermost call: outermost calls end in order
    do {
      calls.pop_front();
      --st.kept;
    } while (!calls.empty() && calls.front().parent != 0);
    if (calls.empty()) st.threads.erase(it);
  }
}

void ends(State& st, uint64_t thread, uint64_t number, uint64_t seq) {
  auto t = st.threads.find(thread);
  if (t == st.threads.end()) return;
  Calls& calls = t->second;
  auto it = find(calls, number);
  if (it == calls.end()) return;
  if (it->begin == seq && std::next(it) == calls.end()) {  // no node, nor any inside it: nothing to look up
    calls.pop_back();
    --st.kept;
    if (calls.empty()) st.threads.erase(t);
    return;
  }
  it->end = seq;
  if (it->parent == 0) {
    st.ended.push_back(thread);
    trim(st);
  }
}

}  // namespace

uint64_t forward_thread() { return at::RecordFunction::currentThreadId(); }

uint64_t module_call_begins(std::string_view name, uint64_t parent) {
  uint64_t seq = at::sequence_number::peek();
  uint64_t thread = forward_thread();
  State& st = state();
  try {
    std::lock_guard lock(st.mu);
    auto n = st.names.find(name);
    if (n == st.names.end()) n = st.names.emplace(name).first;
    Calls& calls = st.threads[thread];
    calls.push_back(Call{++st.last, seq, kOpen, parent, &*n});
    ++st.kept;
    if (calls.size() > kKeep) {  // an outermost call running that long (a training loop inside a module's forward)
      calls.pop_front();         // keeps the bound too: its oldest calls go
      --st.kept;
    }
    return st.last;
  } catch (...) {  // out of memory: the call's nodes go to its enclosing call
    return 0;
  }
}

void module_call_ends(uint64_t call) {
  uint64_t seq = at::sequence_number::peek();
  uint64_t thread = forward_thread();
  State& st = state();
  try {
    std::lock_guard lock(st.mu);
    ends(st, thread, call, seq);
  } catch (...) {
  }
}

int module_calls_of_node(uint64_t thread, uint64_t seq, CallRef* out, int max) {
  State& st = state();
  std::lock_guard lock(st.mu);
  auto t = st.threads.find(thread);
  if (t == st.threads.end()) return 0;
  Calls& calls = t->second;
  // The last call begun at or before the node, then out through its enclosing calls to the first that holds it.
  auto it = std::upper_bound(calls.begin(), calls.end(), seq, [](uint64_t s, const Call& c) { return s < c.begin; });
  if (it == calls.begin()) return 0;
  --it;
  while (it != calls.end() && seq >= it->end) it = it->parent ? find(calls, it->parent) : calls.end();
  int n = 0;
  for (; it != calls.end() && n < max; it = it->parent ? find(calls, it->parent) : calls.end())
    out[n++] = CallRef{it->number, it->name};
  std::reverse(out, out + n);
  return n;
}

}  // namespace memrec::detail
