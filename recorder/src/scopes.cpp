// Scopes: user scopes (phases, modules, steps, annotations) are recorded when opened; aten op scopes are only
// recorded when an allocation happens inside them, so the RecordFunction callbacks stay a push and a pop.
#include <ATen/record_function.h>

#include <atomic>

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

// Pops the top entry; returns it (or nullptr past kMaxDepth) and closes its scope when one was recorded.
const Entry* pop(Stack& s) {
  if (s.depth == 0) return nullptr;
  --s.depth;
  if (s.recorded > s.depth) s.recorded = s.depth;
  if (s.depth >= kMaxDepth) return nullptr;
  const Entry& e = s.entries[s.depth];
  if (e.id != 0) EventBuffer::get().push_scope_close(e.id, now_ns());
  return &e;
}

// Registered only while recording; pushes unconditionally so that every end callback has its start.
std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  push(stack(), Entry{fn.name(), now_ns(), 0, 0, false});
  return nullptr;
}

void on_op_end(const at::RecordFunction&, at::ObserverContext*) {
  Stack& s = stack();
  if (s.depth > 0) pop(s);
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

void scopes_begin(bool ops) {
  g_generation.fetch_add(1);
  g_ambient = 0;
  g_active = true;
  if (ops && !g_op_callback)
    g_op_callback = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_op_start, &on_op_end)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

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

ScopeGuard::ScopeGuard(std::string_view name, ScopeKind kind) {
  using namespace detail;
  if (!g_active.load(std::memory_order_relaxed)) return;
  Stack& s = stack();
  record_pending(s);
  int64_t t = now_ns();
  uint32_t parent = current_scope();
  uint32_t id = EventBuffer::get().push_scope_open(t, name, kind, parent);
  push(s, Entry{nullptr, t, id, parent, true});
  s.recorded = std::min(s.depth, kMaxDepth);
  if (id != 0) g_ambient = id;
  pushed_ = true;
}

ScopeGuard::~ScopeGuard() {
  using namespace detail;
  if (!pushed_) return;
  Stack& s = stack();
  // Ops that started inside this scope and never ended (an exception unwound past them) go first.
  while (s.depth > 0) {
    int top = s.depth - 1;
    bool user = top < kMaxDepth && s.entries[top].user;
    const Entry* e = pop(s);
    if (user) {
      if (e && e->id != 0) g_ambient = e->parent;
      break;
    }
  }
}

}  // namespace memrec
