#include "compiled_code.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "memrec/model_names.h"

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

// A row's modules: a list of paths, outermost first.
uint32_t read_chain(Snapshot& s, const nlohmann::json& modules, ModuleChains& chains) {
  std::vector<uint32_t> chain;
  for (const auto& m : modules)
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
      MappedLine m{.first_line = entry.at(0).get<uint32_t>(), .chain = read_chain(s, entry.at(1), chains),
                   .frames = {}};
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

// A stack's mapped line: its module chain (0 = none) and the table of the generated file it ran.
struct StackChain {
  uint32_t chain = 0;
  const Table* table = nullptr;
};

// Rewrites the stacks in place (ids kept); returns each stack's module chain.
std::vector<StackChain> resolve_stacks(Snapshot& s, const std::map<std::string, Table>& tables) {
  std::vector<const Table*> table_of(s.frames.size(), nullptr);
  for (uint32_t f = 0; f < s.frames.size(); ++f)
    if (auto it = tables.find(s.strings[s.frames[f].file]); it != tables.end()) table_of[f] = &it->second;
  std::vector<StackChain> module_of(s.stacks.size());
  std::vector<uint32_t> offsets{0}, frame_ids;
  bool changed = false;
  for (uint32_t id = 0; id < s.stacks.size(); ++id) {
    std::span<const uint32_t> frames = s.stacks[id];
    auto generated = std::find_if(frames.begin(), frames.end(),
                                  [&](uint32_t f) { return f < table_of.size() && table_of[f]; });
    const MappedLine* m =
        generated == frames.end() ? nullptr : lookup(*table_of[*generated], s.frames[*generated].line);
    bool resolved = m && generated - frames.begin() >= static_cast<ptrdiff_t>(m->frames.size()) &&
                    std::equal(m->frames.begin(), m->frames.end(), generated - m->frames.size());
    frame_ids.insert(frame_ids.end(), frames.begin(), generated);
    if (m && !resolved) {
      frame_ids.insert(frame_ids.end(), m->frames.begin(), m->frames.end());
      changed = true;
    }
    frame_ids.insert(frame_ids.end(), generated, frames.end());
    offsets.push_back(static_cast<uint32_t>(frame_ids.size()));
    if (m) module_of[id] = {m->chain, table_of[*generated]};
  }
  if (changed) s.stacks.assign(std::move(offsets), std::move(frame_ids));
  return module_of;
}

// The pieces of split graphs (DDPOptimizer's: metadata "compiled_pieces", {piece's scope name: [module path, ...]},
// the modules of the piece's FX nodes in node order, each once, in the order compiled; written by the Python
// recorder). Pieces whose graphs are alike run one generated file, whose map names the modules of the piece it was
// made for (its maker: the first piece compiled whose modules hold all of the map's). Run by another piece, a node's
// modules are that piece's modules aligned with the maker's (align): pieces alike list alike modules, but not always
// at the same places (a node of the previous block in one and not the other).
class Pieces {
 public:
  using Modules = std::vector<uint32_t>;

  // Throws nlohmann's errors on a bad shape.
  Pieces(Snapshot& s, const nlohmann::ordered_json& j) : s_(s) {
    for (const auto& [name, modules] : j.items()) {
      Modules& m = by_name_[s.strings.intern(name)];
      for (const auto& path : modules) m.push_back(s.strings.intern(path.get<std::string>()));
      modules_.insert(m.begin(), m.end());
      compiled_.push_back(&m);
    }
  }

  // The modules of the piece an event at `scope` ran in (its innermost module scope), or null.
  const Modules* piece_of(uint32_t scope) const {
    uint32_t module = by_name_.empty() ? 0 : enclosing_scope_id(s_, scope, ScopeKind::module);
    auto it = module == 0 ? by_name_.end() : by_name_.find(s_.scopes[module].name);
    return it == by_name_.end() ? nullptr : &it->second;
  }

  // `chain` of `table`'s map, as `piece` ran it.
  uint32_t run_by(uint32_t chain, const Table& table, const Modules& piece, ModuleChains& chains) {
    auto [it, fresh] = translated_.try_emplace({chain, &piece}, chain);
    if (!fresh) return it->second;
    const Modules* maker = maker_of(table, piece, chains);
    if (maker == nullptr || maker == &piece) return chain;
    const std::unordered_map<uint32_t, uint32_t>& own_path = aligned(*maker, piece);
    std::vector<uint32_t> own;
    for (uint32_t path : chains[chain]) {
      auto at = own_path.find(path);
      own.push_back(at == own_path.end() ? path : at->second);
    }
    auto known = std::find(chains.begin(), chains.end(), own);
    if (known == chains.end()) known = chains.insert(chains.end(), std::move(own));
    return it->second = static_cast<uint32_t>(known - chains.begin());
  }

  // Whether a module scope's name is one of the pieces' modules: the scope of a node resolving made before.
  bool names_a_module(uint32_t name) const { return modules_.count(name) != 0; }

 private:
  // `piece` itself when its modules hold every module of `table`'s map, else the first piece compiled that does, or
  // null.
  const Modules* maker_of(const Table& table, const Modules& piece, const ModuleChains& chains) {
    auto [it, fresh] = makers_.try_emplace({&table, &piece}, nullptr);
    if (!fresh) return it->second;
    auto holds_all = [&](const Modules& m) {
      return std::all_of(table.begin(), table.end(), [&](const MappedLine& line) {
        return std::all_of(chains[line.chain].begin(), chains[line.chain].end(),
                           [&](uint32_t path) { return std::find(m.begin(), m.end(), path) != m.end(); });
      });
    };
    if (holds_all(piece)) return it->second = &piece;
    auto maker = std::find_if(compiled_.begin(), compiled_.end(), [&](const Modules* m) { return holds_all(*m); });
    return it->second = maker == compiled_.end() ? nullptr : *maker;
  }

  // The maker's modules -> `piece`'s: the longest run of pairs, in order, of modules alike (paths equal but for
  // their numbers: `transformer.h.0.attn` and `transformer.h.7.attn`).
  const std::unordered_map<uint32_t, uint32_t>& aligned(const Modules& maker, const Modules& piece) {
    auto [it, fresh] = alignments_.try_emplace({&maker, &piece});
    if (!fresh) return it->second;
    auto alike = [&](uint32_t a, uint32_t b) { return shape(a) == shape(b); };
    size_t n = maker.size(), m = piece.size();
    std::vector<std::vector<uint32_t>> longest(n + 1, std::vector<uint32_t>(m + 1, 0));  // of maker[i:], piece[j:]
    for (size_t i = n; i-- > 0;)
      for (size_t j = m; j-- > 0;)
        longest[i][j] = alike(maker[i], piece[j]) ? longest[i + 1][j + 1] + 1
                                                  : std::max(longest[i + 1][j], longest[i][j + 1]);
    for (size_t i = 0, j = 0; i < n && j < m;) {
      if (alike(maker[i], piece[j]) && longest[i][j] == longest[i + 1][j + 1] + 1)
        it->second.emplace(maker[i++], piece[j++]);
      else if (longest[i + 1][j] >= longest[i][j + 1])
        ++i;
      else
        ++j;
    }
    return it->second;
  }

  // A module path with each part that is a number as "#".
  const std::string& shape(uint32_t path) {
    auto [it, fresh] = shapes_.try_emplace(path);
    if (!fresh) return it->second;
    std::string_view name = s_.strings[path];
    for (size_t begin = 0; begin <= name.size();) {
      size_t end = std::min(name.find('.', begin), name.size());
      std::string_view part = name.substr(begin, end - begin);
      bool number = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      it->second.append(number ? std::string_view("#") : part).append(end < name.size() ? "." : "");
      begin = end + 1;
    }
    return it->second;
  }

  const Snapshot& s_;
  std::map<uint32_t, Modules> by_name_;
  std::vector<const Modules*> compiled_;  // in the order compiled
  std::unordered_set<uint32_t> modules_;
  std::map<std::pair<const Table*, const Modules*>, const Modules*> makers_;
  std::map<std::pair<uint32_t, const Modules*>, uint32_t> translated_;
  std::map<std::pair<const Modules*, const Modules*>, std::unordered_map<uint32_t, uint32_t>> alignments_;
  std::unordered_map<uint32_t, std::string> shapes_;
};

// The module scopes of events made by compiled code: the FX node's modules, nested as eager calls nest, under the
// module that ran the code (a compiled root module's scope is its class name; a compiled submodule's is its path,
// which prefixes the node's). Made once per (scope, chain); each made scope ends at its last event's time.
class ModuleScopes {
 public:
  ModuleScopes(Snapshot& s, const Pieces* pieces)
      : s_(s), pieces_(pieces), first_made_(static_cast<uint32_t>(s.scopes.size())) {}

  // The innermost module scope for an event at `scope` whose stack ran `chain` (`scope` itself when it is the one
  // made for it already: a file written after resolving).
  uint32_t innermost(uint32_t scope, uint32_t chain_id, const std::vector<uint32_t>& chain, uint8_t device,
                     int64_t t) {
    auto [it, fresh] = innermost_.try_emplace(Key{scope, chain_id, device}, scope);
    if (fresh && !made_for(scope, chain)) {
      std::string prefix = prefix_of(scope);
      uint32_t at = scope;
      for (uint32_t module : chain)
        at = made(at, prefix.empty() ? module : s_.strings.intern(prefix + s_.strings[module]), device, t);
      it->second = at;
    }
    if (it->second >= first_made_) ends_[it->second - first_made_] = std::max(ends_[it->second - first_made_], t);
    return it->second;
  }

  // Writes each made scope's end: its own events' last time, or a scope nested in it's (parents have lower ids).
  void close() {
    for (size_t k = ends_.size(); k-- > 0;) {
      uint32_t id = first_made_ + static_cast<uint32_t>(k), parent = s_.scopes[id].parent;
      if (parent >= first_made_) ends_[parent - first_made_] = std::max(ends_[parent - first_made_], ends_[k]);
      s_.scopes.update(id, [&](Scope& sc) { sc.end_ns = ends_[k]; });
    }
  }

 private:
  bool made_for(uint32_t scope, const std::vector<uint32_t>& chain) const {
    if (scope == 0 || scope >= s_.scopes.size() || s_.scopes[scope].kind != ScopeKind::module) return false;
    if (pieces_ && pieces_->names_a_module(s_.scopes[scope].name)) return true;  // made for a piece's node
    const std::string& name = s_.strings[s_.scopes[scope].name];
    const std::string& path = s_.strings[chain.back()];
    return name == path || (name.ends_with(path) && name[name.size() - path.size() - 1] == '.');
  }

  uint32_t made(uint32_t parent, uint32_t name, uint8_t device, int64_t t) {
    auto [it, fresh] = made_.try_emplace(Key{parent, name, device}, 0);
    if (fresh) {
      it->second = static_cast<uint32_t>(s_.scopes.size());
      s_.scopes.push_back(Scope{.start_ns = t, .end_ns = t, .name = name, .parent = parent,
                                .kind = ScopeKind::module, .device = device});
      ends_.push_back(t);
    }
    return it->second;
  }

  // The compiled module's path, which prefixes its nodes' ("" at a root, or in a wrapper that shares the root's
  // path: DDP around torch.compile). A piece of a split graph (is_graph_piece: DDP's optimizer runs each piece in
  // one) is not the compiled module: the module around it is.
  std::string prefix_of(uint32_t scope) const {
    uint32_t runner = enclosing_scope_id(s_, scope, ScopeKind::module);
    while (runner != 0 && is_graph_piece(s_, runner))
      runner = enclosing_scope_id(s_, s_.scopes[runner].parent, ScopeKind::module);
    if (runner == 0) return {};
    uint32_t root = runner;
    for (int depth = 0; depth < 256; ++depth) {  // the bound stops a cycle in a bad file
      uint32_t up = enclosing_scope_id(s_, s_.scopes[root].parent, ScopeKind::module);
      if (up == 0 || up == root) break;
      root = up;
    }
    if (s_.scopes[runner].name == s_.scopes[root].name) return {};
    return s_.strings[s_.scopes[runner].name] + ".";
  }

  struct Key {  // a scope (0 on every device: the device tells them apart), and a name or a chain
    uint32_t scope, what;
    uint8_t device;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(uint64_t{k.scope} << 32 | k.what) ^ (size_t{k.device} << 56);
    }
  };

  Snapshot& s_;
  const Pieces* pieces_;                                      // null: no split graph
  const uint32_t first_made_;                                 // the first scope id made here
  std::vector<int64_t> ends_;                                 // by made scope id - first_made_
  std::unordered_map<Key, uint32_t, KeyHash> made_;           // (parent scope, name, device) -> scope
  std::unordered_map<Key, uint32_t, KeyHash> innermost_;      // (event's scope, chain, device) -> innermost scope
};

}  // namespace

void resolve_compiled_code(Snapshot& s) {
  auto it = s.metadata.find("compiled_code");
  if (it == s.metadata.end()) return;
  const std::string unreadable = "the map of compiled code to the model is unreadable, left out: ";
  ModuleChains chains(1);
  std::map<std::string, Table> tables;
  std::vector<StackChain> chain_of;  // by stack
  std::optional<Pieces> pieces;
  try {
    nlohmann::json map = nlohmann::json::parse(it->second);
    if (!map.is_object()) {
      s.warnings.push_back(unreadable + "not a JSON object");
      return;
    }
    tables = read_tables(s, map, chains);
    chain_of = resolve_stacks(s, tables);
    if (auto p = s.metadata.find("compiled_pieces"); p != s.metadata.end())
      pieces.emplace(s, nlohmann::ordered_json::parse(p->second));  // in the order compiled
  } catch (const nlohmann::json::exception& e) {
    s.warnings.push_back(unreadable + e.what());
    return;
  }
  if (chains.size() == 1) return;
  ModuleScopes scopes(s, pieces ? &*pieces : nullptr);
  for (size_t i = 0; i < s.events.size(); ++i) {
    Event e = s.events[i];
    StackChain run = e.stack < chain_of.size() ? chain_of[e.stack] : StackChain{};
    if (run.chain == 0) continue;
    if (const Pieces::Modules* piece = pieces ? pieces->piece_of(e.scope) : nullptr)
      run.chain = pieces->run_by(run.chain, *run.table, *piece, chains);
    uint32_t scope = scopes.innermost(e.scope, run.chain, chains[run.chain], e.device, e.time_ns);
    if (scope == e.scope) continue;
    e.scope = scope;
    s.events.set(i, e);
  }
  scopes.close();
}

}  // namespace memrec
