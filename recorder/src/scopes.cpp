// Scopes: user scopes (phases, modules, steps, annotations) are recorded when opened; aten op scopes are only
// recorded when an allocation happens inside them, so the RecordFunction callbacks stay a push and a pop.
// Module scopes in backward: each backward node runs inside the module scopes of the call whose forward made it
// (module_calls.h), opened and closed by the node callback on the thread that runs it.
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>
#include <unordered_set>

#include "internal.h"
#include "module_calls.h"

namespace memrec::detail {
namespace {

constexpr int kMaxDepth = 128;

struct Entry {
  const char* op_name = nullptr;  // unrecorded op: RecordFunction's name, valid while the op runs
  int64_t start = 0;
  uint32_t id = 0;      // 0 until recorded
  uint32_t parent = 0;  // user scopes: the enclosing scope at open (restores the ambient scope)
  bool user = false;
  bool node = false;       // a module scope opened for the backward node running here
  bool phase = false;
  bool recompute = false;  // the "recompute" phase: a module's forward run again inside backward
  uint32_t backward = 0;   // node scopes: the backward pass they were opened in
  uint64_t call = 0;       // module scopes: their module call (module_calls.h), 0 = none
  uint64_t call_thread = 0;  // node scopes: the forward thread of their call
};

// Per thread, trivially destructible (frees during static destruction may still look at it) and constant-initialized
// (no initialization check on each use).
struct Stack {
  Entry entries[kMaxDepth];
  int depth = 0;         // may exceed kMaxDepth: deeper entries are not kept
  int recorded = 0;      // entries [0, recorded) carry ids of the current generation
  uint32_t generation = 0;
  uint32_t op_calls = 0, scope_calls = 0;  // for HookTimer
};
constinit thread_local Stack t_stack;
thread_local int t_closed_for_program = 0;  // scopes the program opened that the recorder closed (a stopped recompute)

std::atomic<uint32_t> g_generation{0};
// The innermost user scope of whichever thread opened one last: the parent for work on threads with no scope
// of their own (the autograd engine's device threads run backward there).
std::atomic<uint32_t> g_ambient{0};
std::atomic<bool> g_active{false};
std::atomic<bool> g_modules{false};     // module scopes keep their calls and backward nodes open them
std::atomic<uint32_t> g_backward{0};    // "backward" phases opened so far
std::optional<at::CallbackHandle> g_callback;
// With op scopes on chosen steps only: the backward nodes' callback, enabled while op scopes wait for a chosen step,
// and the step rule (RecordFunction's machinery costs every aten op once a callback wants it, about 600 instructions).
std::optional<at::CallbackHandle> g_node_callback;
struct OpSteps {
  std::mutex mu;
  OpStepRule rule;
  OpStepCount count;
  bool on = true;
};
OpSteps g_op_steps;
constexpr int kMaxChain = 32;           // module scopes a backward node opens at most (the innermost ones)

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
    if (e.id != 0) EventBuffer::get().push_scope_close(e.id, stamp());
    return e;
  }
  return std::nullopt;
}

// The innermost kept entry that `accept` takes, or null.
template <class Accept>
const Entry* innermost_kept(const Stack& s, Accept accept) {
  for (int i = std::min(s.depth, kMaxDepth) - 1; i >= 0; --i)
    if (accept(s.entries[i])) return &s.entries[i];
  return nullptr;
}

// The parent of a new user scope: the innermost user scope of this thread, else the ambient one. Not an op: a
// scope opened by a hook inside an op outlives it, and belongs to the scopes the program opened.
uint32_t innermost_user_scope(const Stack& s) {
  const Entry* e = innermost_kept(s, [](const Entry& e) { return e.user && e.id != 0; });
  return e ? e->id : g_ambient.load(std::memory_order_relaxed);
}

void push_user(Stack& s, std::string_view name, ScopeKind kind, Entry e, uint32_t parent) {
  record_pending(s);
  e.start = stamp();
  e.parent = parent;
  e.user = true;
  e.id = EventBuffer::get().push_scope_open(e.start, name, kind, parent);
  push(s, e);
  s.recorded = std::min(s.depth, kMaxDepth);
  if (e.id != 0) g_ambient = e.id;
}

std::optional<Entry> close_user(Stack& s) {
  std::optional<Entry> e = remove_innermost(s, true);
  if (e && e->id != 0) g_ambient = e->parent;
  return e;
}

// Null when deeper entries were not kept: the innermost is unknown.
const Entry* innermost_user(const Stack& s) {
  return s.depth > kMaxDepth ? nullptr : innermost_kept(s, [](const Entry& e) { return e.user; });
}

uint64_t innermost_call(const Stack& s) {
  const Entry* e = innermost_kept(s, [](const Entry& e) { return e.user && !e.node && e.call != 0; });
  return e ? e->call : 0;
}

// The node scopes open on this thread, outermost first: the user entries above the innermost one the program
// opened. Writes their positions, returns how many.
int node_scopes(const Stack& s, int* at) {
  int top = std::min(s.depth, kMaxDepth), first = top, n = 0;
  for (int i = top - 1; i >= 0 && (!s.entries[i].user || s.entries[i].node); --i)
    if (s.entries[i].user) first = i;
  for (int i = first; i < top; ++i)
    if (s.entries[i].user) at[n++] = i;
  return n;
}

// Null when deeper entries were not kept, as innermost_user.
const Entry* innermost_program_scope(const Stack& s) {
  return s.depth > kMaxDepth ? nullptr : innermost_kept(s, [](const Entry& e) { return e.user && !e.node; });
}

const Entry* innermost_phase(const Stack& s) {
  return innermost_kept(s, [](const Entry& e) { return e.user && e.phase; });
}

// Closes the innermost scope the program opened, and first the node scopes inside it.
void close_program_scope(Stack& s) {
  for (const Entry* e = innermost_user(s); e && e->node; e = innermost_user(s)) close_user(s);
  std::optional<Entry> e = close_user(s);
  if (e && e->call != 0) module_call_ends(e->call);
}

// A backward node starts while a "recompute" phase is open on this thread: the recompute is over, stopped early
// (torch 2.x checkpoint raises out of the forward once backward has what it needs, skipping the post hooks). It is
// closed here with the scopes inside it, so that what follows is backward's; the program's hooks learn of it from
// take_scopes_closed().
void close_stopped_recompute(Stack& s) {
  const Entry* phase = innermost_phase(s);
  if (!phase || !phase->recompute) return;
  for (bool last = false; !last;) {
    const Entry* e = innermost_program_scope(s);
    if (!e) return;
    last = e->recompute;
    ++t_closed_for_program;
    close_program_scope(s);
  }
}

// A backward node starts on this thread: the node scopes become the module calls holding it, outermost first (those
// open already are kept, the others closed, the missing ones opened). AccumulateGrad (no number) stays in the
// scopes of the node before it, the module that holds the parameter.
void enter_node(const at::RecordFunction& fn) {
  Stack& s = stack();
  close_stopped_recompute(s);
  int64_t seq = fn.seqNr();
  if (seq < 0) return;
  CallRef chain[kMaxChain];
  int n = module_calls_of_node(fn.forwardThreadId(), uint64_t(seq), chain, kMaxChain);
  if (s.depth > kMaxDepth - kMaxChain) return;
  int at[kMaxDepth];
  int open = node_scopes(s, at), same = 0;
  uint32_t backward = g_backward.load(std::memory_order_relaxed);
  // Node scopes inside a phase the program opened here close with it. On autograd's device threads (no phase) they
  // stay open after their backward: those of an earlier backward are closed here.
  if (open && (innermost_phase(s) || s.entries[at[0]].backward == backward))
    while (same < open && same < n && s.entries[at[same]].call == chain[same].call &&
           s.entries[at[same]].call_thread == chain[same].thread)
      ++same;
  for (int i = open; i > same; --i) close_user(s);
  for (int i = same; i < n; ++i) {
    Entry e{};
    e.node = true;
    e.backward = backward;
    e.call = chain[i].call;
    e.call_thread = chain[i].thread;
    push_user(s, *chain[i].name, ScopeKind::module, e, innermost_user_scope(s));
  }
}

void on_node(const at::RecordFunction& fn) {
  if (!g_modules.load(std::memory_order_relaxed) || !g_active.load(std::memory_order_relaxed)) return;
  HookTimer timer(HookKind::scope, t_stack.scope_calls);
  try {
    enter_node(fn);
  } catch (...) {  // a lock that failed: the node keeps the scopes it found
  }
}

// Registered only while recording; pushes unconditionally so that every end callback has its start. Runs on every
// aten op: writes only the fields an op's entry is read for (its name, start, id, sort). A process group's collective
// (c10d::allreduce_, ...) is recorded even when it allocates nothing: ranks on different hosts are put on one clock
// by the collectives they share (analysis/src/ranks.cpp).
std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) on_node(fn);
  Stack& s = stack();
  HookTimer timer(HookKind::op, s.op_calls);
  const char* name = fn.name();
  if (s.depth < kMaxDepth) {
    Entry& e = s.entries[s.depth];
    e.op_name = name;
    e.start = stamp();
    e.id = 0;
    e.user = false;
  }
  ++s.depth;
  if (name[0] == 'c' && std::strncmp(name, "c10d::", 6) == 0) record_pending(s);  // one compare for aten ops
  return nullptr;
}

// The op ending is the innermost entry, unless a user scope opened inside it is still open.
void on_op_end(const at::RecordFunction&, at::ObserverContext*) {
  Stack& s = stack();
  HookTimer timer(HookKind::op, s.op_calls);
  int top = s.depth - 1;
  if (top < 0 || top >= kMaxDepth || s.entries[top].user) {
    remove_innermost(s, false);
    return;
  }
  s.depth = top;
  s.recorded = std::min(s.recorded, top);
  if (s.entries[top].id != 0) EventBuffer::get().push_scope_close(s.entries[top].id, stamp());
}

// Without op scopes: backward nodes only, for their module scopes.
std::unique_ptr<at::ObserverContext> on_node_start(const at::RecordFunction& fn) {
  on_node(fn);
  return nullptr;
}

}  // namespace

uint32_t current_scope() {
  if (t_stack.depth == 0) return g_ambient.load(std::memory_order_relaxed);  // no entry: the generation is moot
  Stack& s = stack();
  record_pending(s);
  for (int i = std::min(s.depth, kMaxDepth) - 1; i >= 0; --i)
    if (s.entries[i].id != 0) return s.entries[i].id;
  return g_ambient.load(std::memory_order_relaxed);
}

void scopes_begin(bool ops, bool user_ops, bool modules, OpStepRule op_steps) {
  g_generation.fetch_add(1);
  g_ambient = 0;
  g_active = true;
  g_modules = modules;
  {
    std::lock_guard lock(g_op_steps.mu);
    g_op_steps.rule = ops ? op_steps : OpStepRule{};
    g_op_steps.count = {};
    g_op_steps.on = true;
  }
  if (g_callback || g_node_callback) return;
  // USER_SCOPE: record_function() blocks, torch.compile's "Torch-Compiled Region: 0/0" among them.
  std::unordered_set<at::RecordScope, std::hash<at::RecordScope>> scopes{at::RecordScope::FUNCTION,
                                                                         at::RecordScope::BACKWARD_FUNCTION};
  if (user_ops) scopes.insert(at::RecordScope::USER_SCOPE);
  if (ops)
    g_callback = at::addGlobalCallback(at::RecordFunctionCallback(&on_op_start, &on_op_end).scopes(scopes));
  if (modules && (!ops || op_steps.chosen)) {
    g_node_callback = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_node_start).scopes({at::RecordScope::BACKWARD_FUNCTION}));
    if (ops) at::disableCallback(*g_node_callback);  // the op callback opens the nodes' scopes while it runs
  }
}

// A step begins: op scopes on it or not, as the rule says; while they are off, the node callback keeps backward's
// module scopes.
void op_step_begins() {
  std::lock_guard lock(g_op_steps.mu);
  OpSteps& o = g_op_steps;
  if (!o.rule.chosen || !g_callback) return;
  uint32_t n = ++o.count.begun;
  bool want = n <= o.rule.first || o.rule.every <= 1 || n % o.rule.every == 0;
  o.count.traced += want;
  if (want == o.on) return;
  want ? at::reenableCallback(*g_callback) : at::disableCallback(*g_callback);
  if (g_node_callback) want ? at::disableCallback(*g_node_callback) : at::reenableCallback(*g_node_callback);
  o.on = want;
}

OpStepCount op_steps() {
  std::lock_guard lock(g_op_steps.mu);
  return g_op_steps.count;
}

void scopes_forget() {
  g_active = false;
  g_modules = false;
}

void scopes_end() {
  scopes_forget();
  for (auto* handle : {&g_callback, &g_node_callback}) {
    if (!*handle) continue;
    at::removeCallback(**handle);
    handle->reset();
  }
  g_ambient = 0;
}

}  // namespace memrec::detail

namespace memrec {

namespace {

// A module scope keeps its call when the recording asked for module scopes in backward (`interned`: its name kept
// for the process, or null). The phases are named by memrec's Python hooks: "backward" starts a backward pass,
// "recompute" a forward run again inside backward.
bool open(std::string_view name, const std::string* interned, ScopeKind kind) {
  using namespace detail;
  if (!g_active.load(std::memory_order_relaxed)) return false;
  HookTimer timer(HookKind::scope, t_stack.scope_calls);
  if (kind == ScopeKind::step) cupti_step_begins(), op_step_begins();
  Stack& s = stack();
  Entry e{};
  e.phase = kind == ScopeKind::phase;
  e.recompute = e.phase && name == "recompute";
  if (e.phase && name == "backward") g_backward.fetch_add(1, std::memory_order_relaxed);
  if (kind == ScopeKind::module && g_modules.load(std::memory_order_relaxed) && s.depth < kMaxDepth)
    e.call = module_call_begins(interned ? interned : intern_name(name), innermost_call(s));
  push_user(s, name, kind, e, innermost_user_scope(s));
  return true;
}

}  // namespace

bool open_scope(std::string_view name, ScopeKind kind) { return open(name, nullptr, kind); }

ScopeName intern_scope_name(std::string_view name) { return ScopeName{detail::intern_name(name)}; }

bool open_scope(ScopeName name, ScopeKind kind) { return open(*name.text, name.text, kind); }

void close_scope() {
  detail::Stack& s = detail::stack();
  detail::HookTimer timer(detail::HookKind::scope, s.scope_calls);
  detail::close_program_scope(s);
}

int take_scopes_closed() { return std::exchange(detail::t_closed_for_program, 0); }

ScopeGuard::ScopeGuard(std::string_view name, ScopeKind kind) : pushed_(open_scope(name, kind)) {}

ScopeGuard::~ScopeGuard() {
  if (pushed_) close_scope();
}

}  // namespace memrec
