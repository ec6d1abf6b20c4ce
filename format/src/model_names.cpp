#include "memrec/model_names.h"

#include <algorithm>
#include <array>
#include <span>
#include <unordered_map>
#include <vector>

namespace memrec {
namespace {

constexpr std::array<std::string_view, 3> kWrapperParts = {"_orig_mod", "_fsdp_wrapped_module",
                                                           "_checkpoint_wrapped_module"};
constexpr std::array<std::string_view, 3> kGraphRoots = {"WrapperModule", "GraphModule", "L['self']"};
constexpr std::array<std::string_view, 3> kDataParallel = {"DistributedDataParallel", "DataParallel",
                                                           "FullyShardedDataParallel"};
constexpr std::array<std::string_view, 2> kGraphPieces = {"WrapperModule", "GraphModule"};

bool one_of(std::string_view part, std::span<const std::string_view> set) {
  return std::find(set.begin(), set.end(), part) != set.end();
}

bool is_data_parallel(std::string_view root) { return one_of(root, kDataParallel); }

// `submod_3`, `compiled_submod_3`: the attribute names of a split graph's pieces.
bool is_submod(std::string_view name) {
  constexpr std::string_view compiled = "compiled_", submod = "submod_";
  if (name.starts_with(compiled)) name.remove_prefix(compiled.size());
  if (!name.starts_with(submod) || name.size() == submod.size()) return false;
  return std::all_of(name.begin() + submod.size(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string model_path(std::string_view name, bool data_parallel) {
  std::string out;
  bool leading = true;
  for (size_t begin = 0; begin <= name.size();) {
    size_t end = std::min(name.find('.', begin), name.size());
    std::string_view part = name.substr(begin, end - begin);
    begin = end + 1;
    bool wrapper = one_of(part, kWrapperParts) ||
                   (leading && (one_of(part, kGraphRoots) || (data_parallel && part == "module")));
    if (wrapper) continue;
    leading = false;
    if (!out.empty()) out += '.';
    out += part;
  }
  return out;
}

bool is_graph_piece(const Snapshot& s, uint32_t id) {
  std::string_view name = s.strings[s.scopes[id].name];
  if (one_of(name, kGraphPieces)) return true;
  uint32_t parent = s.scopes[id].parent < id ? enclosing_scope_id(s, s.scopes[id].parent, ScopeKind::module) : 0;
  return is_submod(name) && parent != 0 && s.strings[s.scopes[parent].name] == "GraphModule";
}

void name_modules_by_model_path(Snapshot& s) {
  std::unordered_map<uint64_t, uint32_t> renamed;  // (name id, under data parallel) -> the model path's id
  auto path_of = [&](uint32_t raw, bool data_parallel) {
    auto [it, fresh] = renamed.try_emplace(uint64_t{raw} << 1 | data_parallel, 0);
    if (fresh) it->second = s.strings.intern(model_path(std::string(s.strings[raw]), data_parallel));
    return it->second;
  };
  // Per module scope, in id order (a parent's id is lower): its new name id and its outermost module scope's id.
  std::vector<uint32_t> name(s.scopes.size(), 0), root(s.scopes.size(), 0);
  std::vector<bool> piece(s.scopes.size(), false);  // told before any renaming: a piece is known by its parent's name
  for (uint32_t id = 1; id < s.scopes.size(); ++id)
    piece[id] = s.scopes[id].kind == ScopeKind::module && is_graph_piece(s, id);
  bool data_parallel = false;
  for (uint32_t id = 1; id < s.scopes.size(); ++id) {
    Scope sc = s.scopes[id];
    if (sc.kind != ScopeKind::module) continue;
    uint32_t parent = sc.parent < id ? enclosing_scope_id(s, sc.parent, ScopeKind::module) : 0;
    if (parent == 0) {  // a root: its class name, or the wrapper's around the whole model
      name[id] = sc.name, root[id] = id;
      data_parallel |= is_data_parallel(s.strings[sc.name]);
      continue;
    }
    root[id] = root[parent];
    uint32_t path = piece[id] ? 0 : path_of(sc.name, is_data_parallel(s.strings[s.scopes[root[id]].name]));
    name[id] = path != 0 ? path : piece[id] ? name[parent] : name[root[id]];  // id 0: the empty string
    if (name[id] != sc.name) s.scopes.update(id, [&](Scope& x) { x.name = name[id]; });
  }
  for (size_t i = 0; i < s.owners.size(); ++i) {
    Owner o = s.owners[i], renamed = o;
    renamed.name = path_of(o.name, data_parallel);
    if (o.module) renamed.module = path_of(o.module, data_parallel);
    if (!(renamed == o)) s.owners.set(i, renamed);
  }
}

}  // namespace memrec
