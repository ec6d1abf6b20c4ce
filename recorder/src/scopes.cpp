// Scopes: user scopes (phases, modules, steps, annotations) are recorded when opened; aten op scopes are only
// recorded when an allocation happens inside them, so the RecordFunction callbacks stay a push and a pop.
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <unordered_set>

#include "internal.h"

namespace memrec::detail {
namespace {

constexpr int kMaxDepth = 128;

struct Entry {
  const char* op_name;  // unrecorded op: RecordFunction's name, valid while the op runs
  int64_t start;
  uint32_t id;          // 0 until recorded
  uint32_t parent;      // user scopes: the enclosing scope at open (restores the ambient scope)
  bool user;
};

// Per thread, trivially destructible (frees during static destruction may still look at it).
struct Stack {
  Entry entries[kMaxDepth];
  int depth = 0;         // may exceed kMaxDepth: deeper entries are not kept
  int recorded = 0;      // entries [0, recorded) carry ids of the current generation
  uint32_t generation = 0;
};
thread_local Stack t_stack;

std::atomic<uint32_t> g_generation{0};
// The innermost user scope of whichever thread opened one last: the parent for work on threads with no scope
// of their own (the autograd engine's device threads run backward there).
std::atomic<uint32_t> g_ambient{0};
std::atomic<bool> g_active{false};
std::optional<at::CallbackHandle> g_op_callback;

Stack& stack() {
  Stack& s = t_stack;
  uint32_t gen = g_generation.load(std::memory_order_relaxed);
  if (s.generation != gen) {  // ids from an earlier recording mean nothing now
    s.generation = gen;
    s.recorded = 0;
    for (int i = 0; i < std::min(s.depth, kMaxDepth); ++i) s.entries[i].id = 0;
  }
  return s;
}

uint32_t parent_at(const Stack& s, int i) {
  return i == 0 ? g_ambient.load(std::memory_order_relaxed) : s.entries[i - 1].id;
}

void record_pending(Stack& s) {
  int top = std::min(s.depth, kMaxDepth);
  for (int i = s.recorded; i < top; ++i) {
    Entry& e = s.entries[i];
    if (e.id == 0 && !e.user)
      e.id = EventBuffer::get().push_scope_open(e.start, e.op_name, ScopeKind::op, parent_at(s, i));
  }
  s.recorded = top;
}

void push(Stack& s, const Entry& e) {
  if (s.depth < kMaxDepth) s.entries[s.depth] = e;
  ++s.depth;
}

// Removes the innermost entry of one sort (user scope or op) and closes its scope when one was recorded. User
// scopes and ops need not nest: a Python hook run inside an autograd op opens a module scope that outlives it.
// Entries past kMaxDepth are not kept: the innermost of those goes, whatever its sort.
std::optional<Entry> remove_innermost(Stack& s, bool user) {
  if (s.depth == 0) return std::nullopt;
  if (s.depth > kMaxDepth) {
    --s.depth;
    return std::nullopt;
  }
  for (int i = s.depth - 1; i >= 0; --i) {
    if (s.entries[i].user != user) continue;
    Entry e = s.entries[i];
    std::copy(s.entries + i + 1, s.entries + s.depth, s.entries + i);
    --s.depth;
    if (s.recorded > i) --s.recorded;
    if (e.id != 0) EventBuffer::get().push_scope_close(e.id, now_ns());
    return e;
  }
  return std::nullopt;
}

// Registered only while recording; pushes unconditionally so that every end callback has its start.
std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  push(stack(), Entry{fn.name(), now_ns(), 0, 0, false});
  return nullptr;
}

void on_op_end(const at::RecordFunction&, at::ObserverContext*) { remove_innermost(stack(), false); }

// The parent of a new user scope: the innermost user scope of this thread, else the ambient one. Not an op: a
// scope opened by a hook inside an op outlives it, and belongs to the scopes the program opened.
uint32_t innermost_user_scope(const Stack& s) {
  for (int i = std::min(s.depth, kMaxDepth) - 1; i >= 0; --i)
    if (s.entries[i].user && s.entries[i].id != 0) return s.entries[i].id;
  return g_ambient.load(std::memory_order_relaxed);
}

}  // namespace

uint32_t current_scope() {
  Stack& s = stack();
  if (s.depth == 0) return g_ambient.load(std::memory_order_relaxed);
  record_pending(s);
  for (int i = std::min(s.depth, kMaxDepth) - 1; i >= 0; --i)
    if (s.entries[i].id != 0) return s.entries[i].id;
  return g_ambient.load(std::memory_order_relaxed);
}

void scopes_begin(bool ops, bool user_ops) {
  g_generation.fetch_add(1);
  g_ambient = 0;
  g_active = true;
  // USER_SCOPE: record_function() blocks, torch.compile's "Torch-Compiled Region: 0/0" among them.
  std::unordered_set<at::RecordScope, std::hash<at::RecordScope>> scopes{at::RecordScope::FUNCTION,
                                                                         at::RecordScope::BACKWARD_FUNCTION};
  if (user_ops) scopes.insert(at::RecordScope::USER_SCOPE);
  if (ops && !g_op_callback)
    g_op_callback = at::addGlobalCallback(at::RecordFunctionCallback(&on_op_start, &on_op_end).scopes(scopes));
}

void scopes_forget() { g_active = false; }

void scopes_end() {
  g_active = false;
  if (g_op_callback) {
    at::removeCallback(*g_op_callback);
    g_op_callback.reset();
  }
  g_ambient = 0;
}

}  // namespace memrec::detail

namespace memrec {

bool open_scope(std::string_view name, ScopeKind kind) {
  using namespace detail;
  if (!g_active.load(std::memory_order_relaxed)) return false;
  if (kind == ScopeKind::step) cupti_step_begins();
  Stack& s = stack();
  record_pending(s);
  int64_t t = now_ns();
  uint32_t parent = innermost_user_scope(s);
  uint32_t id = EventBuffer::get().push_scope_open(t, name, kind, parent);
  push(s, Entry{nullptr, t, id, parent, true});
  s.recorded = std::min(s.depth, kMaxDepth);
  if (id != 0) g_ambient = id;
  return true;
}

void close_scope() {
  using namespace detail;
  std::optional<Entry> e = remove_innermost(stack(), true);
  if (e && e->id != 0) g_ambient = e->parent;
}

ScopeGuard::ScopeGuard(std::string_view name, ScopeKind kind) : pushed_(open_scope(name, kind)) {}

ScopeGuard::~ScopeGuard() {
  if (pushed_) close_scope();
}

}  // namespace memrec
