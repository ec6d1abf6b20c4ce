#include "compiled_code.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

namespace memrec {
namespace {

struct MappedLine {
  uint32_t first_line = 0;
  uint32_t chain = 0;             // index of its module chain (ModuleChains); 0 = none
  std::vector<uint32_t> frames;  // the model's source, innermost first
};

using Table = std::vector<MappedLine>;  // by first line

// The FX nodes' module paths relative to the compiled module, outermost first, as string ids; chain 0 is empty.
using ModuleChains = std::vector<std::vector<uint32_t>>;

// A row's modules: a list of paths, outermost first, or one path (files recorded before the list).
uint32_t read_chain(Snapshot& s, const nlohmann::json& modules, ModuleChains& chains) {
  std::vector<uint32_t> chain;
  for (const auto& m : modules.is_string() ? nlohmann::json::array({modules}) : modules)
    if (auto path = m.get<std::string>(); !path.empty()) chain.push_back(s.strings.intern(path));
  if (chain.empty()) return 0;
  auto it = std::find(chains.begin(), chains.end(), chain);
  if (it != chains.end()) return static_cast<uint32_t>(it - chains.begin());
  chains.push_back(std::move(chain));
  return static_cast<uint32_t>(chains.size() - 1);
}

// The tables of the generated files the stacks pass through; frames and strings interned into `s`. Throws
// nlohmann's errors on a bad shape.
std::map<std::string, Table> read_tables(Snapshot& s, const nlohmann::json& j, ModuleChains& chains) {
  std::unordered_set<std::string> files;
  for (const Frame& f : s.frames.all()) files.insert(s.strings[f.file]);
  std::map<std::string, Table> tables;
  for (const auto& [path, lines] : j.items()) {
    if (!files.count(path)) continue;
    Table& table = tables[path];
    for (const auto& entry : lines) {
      MappedLine m{.first_line = entry.at(0).get<uint32_t>(), .chain = read_chain(s, entry.at(1), chains), .frames = {}};
      for (const auto& f : entry.at(3))
        m.frames.push_back(s.frames.intern(Frame{.pc = 0,
                                                 .function = s.strings.intern(f.at(2).get<std::string>()),
                                                 .file = s.strings.intern(f.at(0).get<std::string>()),
                                                 .library = 0,
                                                 .line = f.at(1).get<uint32_t>()}));
      table.push_back(std::move(m));
    }
    std::stable_sort(table.begin(), table.end(),
                     [](const MappedLine& a, const MappedLine& b) { return a.first_line < b.first_line; });
  }
  return tables;
}

const MappedLine* lookup(const Table& table, uint32_t line) {
  auto it = std::upper_bound(table.begin(), table.end(), line,
                             [](uint32_t l, const MappedLine& m) { return l < m.first_line; });
  if (it == table.begin() || (it - 1)->frames.empty()) return nullptr;
  return &*(it - 1);
}

// Rewrites the stacks in place (ids kept); returns each stack's module chain (0 = none).
std::vector<uint32_t> resolve_stacks(Snapshot& s, const std::map<std::string, Table>& tables) {
  std::vector<const Table*> table_of(s.frames.size(), nullptr);
  for (uint32_t f = 0; f < s.frames.size(); ++f)
    if (auto it = tables.find(s.strings[s.frames[f].file]); it != tables.end()) table_of[f] = &it->second;
  std::vector<uint32_t> module_of(s.stacks.size(), 0);
  std::vector<uint32_t> offsets{0}, frame_ids;
  bool changed = false;
  for (uint32_t id = 0; id < s.stacks.size(); ++id) {
    std::span<const uint32_t> frames = s.stacks[id];
    auto generated = std::find_if(frames.begin(), frames.end(),
                                  [&](uint32_t f) { return f < table_of.size() && table_of[f]; });
    const MappedLine* m = generated == frames.end() ? nullptr : lookup(*table_of[*generated], s.frames[*generated].line);
    bool resolved = m && generated - frames.begin() >= static_cast<ptrdiff_t>(m->frames.size()) &&
                    std::equal(m->frames.begin(), m->frames.end(), generated - m->frames.size());
    frame_ids.insert(frame_ids.end(), frames.begin(), generated);
    if (m && !resolved) {
      frame_ids.insert(frame_ids.end(), m->frames.begin(), m->frames.end());
      changed = true;
    }
    frame_ids.insert(frame_ids.end(), generated, frames.end());
    offsets.push_back(static_cast<uint32_t>(frame_ids.size()));
    if (m) module_of[id] = m->chain;
  }
  if (changed) s.stacks.assign(std::move(offsets), std::move(frame_ids));
  return module_of;
}

// The module scopes of an event made by compiled code: the FX node's modules, nested as eager calls nest, under the
// module that ran the code (a compiled root module's scope is its class name; a compiled submodule's is its path,
// which prefixes the node's).
class ModuleScopes {
 public:
  explicit ModuleScopes(Snapshot& s) : s_(s) {}

  uint32_t innermost(uint32_t scope, const std::vector<uint32_t>& chain, uint8_t device, int64_t t) {
    std::string prefix = prefix_of(scope);
    for (uint32_t module : chain)
      scope = made(scope, prefix.empty() ? module : s_.strings.intern(prefix + s_.strings[module]), device, t);
    return scope;
  }

  // Whether `scope` is one made for `chain` already (a file written after resolving).
  bool made_for(uint32_t scope, const std::vector<uint32_t>& chain) const {
    if (scope == 0 || scope >= s_.scopes.size() || s_.scopes[scope].kind != ScopeKind::module) return false;
    const std::string& name = s_.strings[s_.scopes[scope].name];
    const std::string& path = s_.strings[chain.back()];
    return name == path || (name.ends_with(path) && name[name.size() - path.size() - 1] == '.');
  }

 private:
  uint32_t made(uint32_t parent, uint32_t name, uint8_t device, int64_t t) {
    auto [it, fresh] = made_.try_emplace(uint64_t{parent} << 32 | name, 0);
    if (!fresh) {
      s_.scopes.update(it->second, [&](Scope& sc) { sc.end_ns = std::max(sc.end_ns, t); });
      return it->second;
    }
    it->second = static_cast<uint32_t>(s_.scopes.size());
    s_.scopes.push_back(Scope{.start_ns = t, .end_ns = t, .name = name, .parent = parent, .kind = ScopeKind::module,
                              .device = device});
    return it->second;
  }

  std::string prefix_of(uint32_t scope) const {
    uint32_t runner = enclosing_module(scope);
    if (runner == 0 || enclosing_module(s_.scopes[runner].parent) == 0) return {};
    return s_.strings[s_.scopes[runner].name] + ".";
  }

  uint32_t enclosing_module(uint32_t scope) const {
    for (int hops = 0; scope != 0 && scope < s_.scopes.size() && hops < 256; ++hops, scope = s_.scopes[scope].parent)
      if (s_.scopes[scope].kind == ScopeKind::module) return scope;
    return 0;
  }

  Snapshot& s_;
  std::unordered_map<uint64_t, uint32_t> made_;  // (parent scope, name) -> scope
};

}  // namespace

void resolve_compiled_code(Snapshot& s) {
  auto it = s.metadata.find("compiled_code");
  if (it == s.metadata.end()) return;
  const std::string unreadable = "the map of compiled code to the model is unreadable, left out: ";
  ModuleChains chains(1);
  std::vector<uint32_t> chain_of;  // by stack
  try {
    nlohmann::json map = nlohmann::json::parse(it->second);
    if (!map.is_object()) {
      s.warnings.push_back(unreadable + "not a JSON object");
      return;
    }
    chain_of = resolve_stacks(s, read_tables(s, map, chains));
  } catch (const nlohmann::json::exception& e) {
    s.warnings.push_back(unreadable + e.what());
    return;
  }
  if (chains.size() == 1) return;
  ModuleScopes scopes(s);
  for (size_t i = 0; i < s.events.size(); ++i) {
    Event e = s.events[i];
    uint32_t chain = e.stack < chain_of.size() ? chain_of[e.stack] : 0;
    if (chain == 0 || scopes.made_for(e.scope, chains[chain])) continue;
    e.scope = scopes.innermost(e.scope, chains[chain], e.device, e.time_ns);
    s.events.set(i, e);
  }
}

}  // namespace memrec
