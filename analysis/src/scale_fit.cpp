// ScaleFit: the runs' allocations matched by scope path, site and rank, and their bytes fitted as polynomials in the
// size (memrec/scale.h).
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "memrec/scale.h"
#include "memrec/sites.h"

namespace memrec {
namespace {

constexpr uint32_t kUnset = UINT32_MAX;
constexpr uint32_t kRootPath = UINT32_MAX - 1;    // outside every scope
constexpr uint32_t kBeforePath = UINT32_MAX - 2;  // live before the recording began: no scope is known

// Ids that are equal across runs where the names are: each run has its own string, scope and stack ids.
class KeyTable {
 public:
  uint32_t text(const std::string& s) { return texts_.try_emplace(s, static_cast<uint32_t>(texts_.size())).first->second; }
  uint32_t pair(uint32_t a, uint32_t b) {
    return pairs_.try_emplace(uint64_t{a} << 32 | b, static_cast<uint32_t>(pairs_.size())).first->second;
  }

 private:
  std::unordered_map<std::string, uint32_t> texts_;
  std::unordered_map<uint64_t, uint32_t> pairs_;
};

// One run's scope paths as KeyTable ids: a path is its parent's path and its own name.
class PathIds {
 public:
  PathIds(const Snapshot& s, KeyTable& keys) : s_(s), keys_(keys), ids_(s.scopes.size(), kUnset), names_(s.strings.size(), kUnset) {}

  uint32_t of(uint32_t scope) {
    std::vector<uint32_t> chain;  // scopes whose path is not known yet, innermost first
    for (int depth = 0; scope != 0 && scope < ids_.size() && ids_[scope] == kUnset && depth < 256; ++depth) {
      chain.push_back(scope);
      scope = s_.scopes[scope].parent;
    }
    uint32_t path = scope != 0 && scope < ids_.size() ? ids_[scope] : kRootPath;
    if (path == kUnset) path = kRootPath;  // a parent chain deeper than 256 (or a cycle): cut there
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) path = ids_[*it] = keys_.pair(path, name(s_.scopes[*it].name));
    return path;
  }

 private:
  uint32_t name(uint32_t string) {
    if (string >= names_.size()) return keys_.text("");
    if (names_[string] == kUnset) names_[string] = keys_.text(s_.strings[string]);
    return names_[string];
  }

  const Snapshot& s_;
  KeyTable& keys_;
  std::vector<uint32_t> ids_, names_;
};

// Per allocation id: where it happens (its scope path and site) in the high half, and its rank among the run's
// earlier allocations with the same path and site in the low half. The step scope is part of the path, so the rank
// counts within a step.
std::vector<uint64_t> allocation_keys(const Snapshot& s, const Replay& r, KeyTable& keys) {
  PathIds paths(s, keys);
  std::vector<uint32_t> sites(s.stacks.size(), kUnset);
  std::unordered_map<uint32_t, uint32_t> ranks;
  uint32_t n = r.allocations().size();
  std::vector<uint64_t> out(n);
  for (uint32_t id = 0; id < n; ++id) {
    bool before = r.alloc_steps()[id] == kNoEvent;
    uint32_t path = before ? kBeforePath : paths.of(r.field_of<&Allocation::scope, &Event::scope>(id));
    uint32_t stack = std::min<uint32_t>(r.stack_of(id), static_cast<uint32_t>(sites.size() - 1));
    if (sites[stack] == kUnset) sites[stack] = keys.text(allocation_site(s, stack));
    uint32_t key = keys.pair(path, sites[stack]);
    out[id] = uint64_t{key} << 32 | ranks[key]++;
  }
  return out;
}

// Runs that share fewer allocations than this are not taken for one program.
constexpr double kSameProgram = 0.5;

void check_same_program(const ScaleRun& base, const ScaleRun& other, uint64_t matched, uint64_t base_n, uint64_t other_n) {
  uint64_t most = std::max(base_n, other_n);
  if (most == 0 || static_cast<double>(matched) >= kSameProgram * static_cast<double>(most)) return;
  throw Error(fmt::format("{} and {} are not runs of one program: only {:.0f}% of their allocations match by scope, "
                          "site and order (memrec whatif scale compares runs of one program at different sizes)",
                          base.name, other.name, 100.0 * static_cast<double>(matched) / static_cast<double>(most)));
}

// The weights of the polynomial through the points of the runs in `mask`, at x: p(x) = sum of w[j] * bytes[j].
std::array<double, kMaxScaleRuns> lagrange(std::span<const ScaleRun> runs, uint8_t mask, double x) {
  std::array<double, kMaxScaleRuns> w{};
  for (size_t j = 0; j < runs.size(); ++j) {
    if (!(mask >> j & 1)) continue;
    w[j] = 1;
    for (size_t k = 0; k < runs.size(); ++k)
      if (k != j && (mask >> k & 1))
        w[j] *= (x - static_cast<double>(runs[k].size)) / (static_cast<double>(runs[j].size) - static_cast<double>(runs[k].size));
  }
  return w;
}

// Allocation ids without a match, by run, reason and stack.
using Lone = std::map<std::tuple<size_t, UnmatchedAllocations::Reason, uint32_t>, std::vector<uint32_t>>;

// One row per run, reason and site (stacks that differ only below the program's frames read as one site), most
// bytes first.
std::vector<UnmatchedAllocations> unmatched_rows(std::span<const ScaleRun> runs,
                                                 const std::vector<std::unique_ptr<Replay>>& replays, const Lone& lone) {
  std::map<std::tuple<size_t, UnmatchedAllocations::Reason, std::string>, UnmatchedAllocations> rows;
  for (const auto& [where, ids] : lone) {
    auto [run, reason, stack] = where;
    std::string site = allocation_site(*runs[run].snapshot, stack);
    UnmatchedAllocations& row = rows[{run, reason, site}];
    row.run = run, row.reason = reason, row.site = site;
    row.count += ids.size();
    for (uint32_t id : ids) row.bytes += replays[run]->size_of(id);
  }
  std::vector<UnmatchedAllocations> out;
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return out;
}

}  // namespace

ScaleFit::ScaleFit(std::span<const ScaleRun> runs) : runs_(runs.begin(), runs.end()) {
  for (size_t j = 0; j < runs.size(); ++j) {
    replays_.push_back(std::make_unique<Replay>(*runs[j].snapshot, runs[j].device));
    if (runs[j].size > runs[base_].size) base_ = j;
  }
  match();
}

ScaleFit::~ScaleFit() = default;

void ScaleFit::match() {
  std::span<const ScaleRun> runs = runs_;
  KeyTable keys;
  std::vector<std::vector<uint64_t>> key_of;
  for (size_t j = 0; j < runs.size(); ++j) key_of.push_back(allocation_keys(*runs[j].snapshot, *replays_[j], keys));
  const Replay& base = *replays_[base_];
  std::unordered_map<uint64_t, uint32_t> base_id(key_of[base_].size());
  points_.resize(key_of[base_].size());
  for (uint32_t id = 0; id < key_of[base_].size(); ++id) {
    base_id.emplace(key_of[base_][id], id);
    points_[id].runs = static_cast<uint8_t>(1 << base_);
    points_[id].bytes[base_] = base.size_of(id);
  }
  Lone lone;
  for (size_t j = 0; j < runs.size(); ++j) {
    if (j == base_) continue;
    counterparts_[j].assign(key_of[base_].size(), kNoEvent);
    for (uint32_t id = 0; id < key_of[j].size(); ++id) {
      auto it = base_id.find(key_of[j][id]);
      if (it == base_id.end()) {
        lone[{j, UnmatchedAllocations::Reason::not_in_base, replays_[j]->stack_of(id)}].push_back(id);
        continue;
      }
      points_[it->second].runs |= static_cast<uint8_t>(1 << j);
      points_[it->second].bytes[j] = replays_[j]->size_of(id);
      counterparts_[j][it->second] = id;
      ++matched_[j];
    }
    check_same_program(runs[base_], runs[j], matched_[j], key_of[base_].size(), key_of[j].size());
  }
  for (uint32_t id = 0; id < points_.size(); ++id) {
    if (points_[id].runs != 1 << base_) ++matched_[base_];
    else lone[{base_, UnmatchedAllocations::Reason::base_only, base.stack_of(id)}].push_back(id);
  }
  unmatched_ = unmatched_rows(runs_, replays_, lone);
}

std::vector<uint64_t> ScaleFit::bytes_at(uint64_t size, std::vector<uint32_t>* below) const {
  std::array<std::array<double, kMaxScaleRuns>, 1 << kMaxScaleRuns> weights;
  for (uint32_t mask = 0; mask < weights.size(); ++mask)
    weights[mask] = lagrange(runs_, static_cast<uint8_t>(mask), static_cast<double>(size));
  std::vector<uint64_t> out(points_.size());
  for (uint32_t id = 0; id < points_.size(); ++id) {
    const Points& p = points_[id];
    const auto& w = weights[p.runs];
    double bytes = 0;
    for (size_t j = 0; j < runs_.size(); ++j) bytes += w[j] * static_cast<double>(p.bytes[j]);
    bytes = std::round(bytes);
    if (bytes < 0 && below) below->push_back(id);
    out[id] = bytes < 0 ? 0 : static_cast<uint64_t>(std::min(bytes, 0x1p62));  // far past any device, yet summable
  }
  return out;
}

}  // namespace memrec
