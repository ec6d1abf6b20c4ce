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
  uint32_t module = 0;            // string id of the module path relative to the compiled module; 0 = none
  std::vector<uint32_t> frames;  // the model's source, innermost first
};

using Table = std::vector<MappedLine>;  // by first line

// The tables of the generated files the stacks pass through; frames and strings interned into `s`. Throws
// nlohmann's errors on a bad shape.
std::map<std::string, Table> read_tables(Snapshot& s, const nlohmann::json& j) {
  std::unordered_set<std::string> files;
  for (const Frame& f : s.frames.all()) files.insert(s.strings[f.file]);
  std::map<std::string, Table> tables;
  for (const auto& [path, lines] : j.items()) {
    if (!files.count(path)) continue;
    Table& table = tables[path];
    for (const auto& entry : lines) {
      MappedLine m{.first_line = entry.at(0).get<uint32_t>(), .module = 0, .frames = {}};
      if (auto module = entry.at(1).get<std::string>(); !module.empty()) m.module = s.strings.intern(module);
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

// Rewrites the stacks in place (ids kept); returns each stack's module string id (0 = none).
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
    if (m) module_of[id] = m->module;
  }
  if (changed) s.stacks.assign(std::move(offsets), std::move(frame_ids));
  return module_of;
}

// The module scope of an event made by compiled code: the FX node's module, under the module that ran the code
// (a compiled root module's scope is its class name; a compiled submodule's is its path, which prefixes the node's).
class ModuleScopes {
 public:
  explicit ModuleScopes(Snapshot& s) : s_(s) {}

  uint32_t scope(uint32_t parent, uint32_t module, uint8_t device, int64_t t) {
    auto [it, fresh] = made_.try_emplace(uint64_t{parent} << 32 | module, 0);
    if (!fresh) {
      s_.scopes.update(it->second, [&](Scope& sc) { sc.end_ns = std::max(sc.end_ns, t); });
      return it->second;
    }
    it->second = static_cast<uint32_t>(s_.scopes.size());
    s_.scopes.push_back(Scope{.start_ns = t, .end_ns = t, .name = name(parent, module), .parent = parent,
                              .kind = ScopeKind::module, .device = device});
    return it->second;
  }

 private:
  uint32_t name(uint32_t scope, uint32_t module) {
    uint32_t runner = enclosing_module(scope);
    if (runner == 0 || enclosing_module(s_.scopes[runner].parent) == 0) return module;
    return s_.strings.intern(s_.strings[s_.scopes[runner].name] + "." + s_.strings[module]);
  }

  uint32_t enclosing_module(uint32_t scope) const {
    for (int hops = 0; scope != 0 && scope < s_.scopes.size() && hops < 256; ++hops, scope = s_.scopes[scope].parent)
      if (s_.scopes[scope].kind == ScopeKind::module) return scope;
    return 0;
  }

  Snapshot& s_;
  std::unordered_map<uint64_t, uint32_t> made_;  // (parent scope, module) -> scope
};

// Whether the event's scope is the module scope made for `module` already (a file written after resolving).
bool made_for(const Snapshot& s, uint32_t scope, uint32_t module) {
  if (scope == 0 || scope >= s.scopes.size() || s.scopes[scope].kind != ScopeKind::module) return false;
  const std::string& name = s.strings[s.scopes[scope].name];
  const std::string& path = s.strings[module];
  return name == path || (name.ends_with(path) && name[name.size() - path.size() - 1] == '.');
}

}  // namespace

void resolve_compiled_code(Snapshot& s) {
  auto it = s.metadata.find("compiled_code");
  if (it == s.metadata.end()) return;
  const std::string unreadable = "the map of compiled code to the model is unreadable, left out: ";
  std::vector<uint32_t> module_of;
  try {
    nlohmann::json map = nlohmann::json::parse(it->second);
    if (!map.is_object()) {
      s.warnings.push_back(unreadable + "not a JSON object");
      return;
    }
    module_of = resolve_stacks(s, read_tables(s, map));
  } catch (const nlohmann::json::exception& e) {
    s.warnings.push_back(unreadable + e.what());
    return;
  }
  if (std::all_of(module_of.begin(), module_of.end(), [](uint32_t m) { return m == 0; })) return;
  ModuleScopes scopes(s);
  for (size_t i = 0; i < s.events.size(); ++i) {
    Event e = s.events[i];
    uint32_t module = e.stack < module_of.size() ? module_of[e.stack] : 0;
    if (module == 0 || made_for(s, e.scope, module)) continue;
    e.scope = scopes.scope(e.scope, module, e.device, e.time_ns);
    s.events.set(i, e);
  }
}

}  // namespace memrec
