#include <algorithm>
#include <array>
#include <set>
#include <string_view>
#include <vector>

#include "memrec/model_names.h"

namespace memrec {
namespace {

// A function of PyTorch's whose allocations hold its own buffers, not the model's: a C++ function by its qualified
// name, a Python one by its last name part and the end of its file's path.
struct FrameworkSite {
  std::string_view function, file, owner;
  OwnerKind kind;
};

constexpr std::array<FrameworkSite, 9> kFrameworkSites = {{
    // cuBLAS's workspaces, made by the first matmul on a stream and kept for the process
    {"at::cuda::setWorkspaceForHandle", "", "cublas workspace", OwnerKind::buffer},
    {"at::cuda::getCUDABlasLtWorkspace", "", "cublas workspace", OwnerKind::buffer},
    // DDP's flat gradient buckets, built at construction and rebuilt after the first backward
    {"c10d::Reducer::initialize_buckets", "", "ddp bucket", OwnerKind::gradient},
    // FSDP2: the all-gather's output and the unsharded parameters copied out of it (PyTorch 2.11 makes their
    // storages at init and gives them back their bytes with alloc_storage before each unshard); the
    // reduce-scatter's buffers
    {"foreach_all_gather", "_fsdp_collectives.py", "fsdp all-gather", OwnerKind::parameter},
    {"FSDPParam.init_all_gather_outputs", "_fsdp_param.py", "fsdp all-gather", OwnerKind::parameter},
    {"alloc_storage", "_fsdp_param.py", "fsdp all-gather", OwnerKind::parameter},
    {"foreach_all_gather_copy_out", "_fsdp_collectives.py", "fsdp all-gather", OwnerKind::parameter},
    {"foreach_reduce", "_fsdp_collectives.py", "fsdp reduce-scatter", OwnerKind::gradient},
    // FSDP: the padded unsharded flat parameter its all-gather fills
    {"_alloc_padded_unsharded_flat_param", "fsdp/_flat_param.py", "fsdp all-gather", OwnerKind::parameter},
}};

// `name` is `function` (a C++ name as the recorder demangled it: with its arguments) or `Class.function` (Python).
bool names(std::string_view name, std::string_view function) {
  if (!name.ends_with(function)) return name.starts_with(function) && name.substr(function.size()).starts_with('(');
  return name.size() == function.size() || name[name.size() - function.size() - 1] == '.';
}

const FrameworkSite* site_of(std::string_view function, std::string_view file) {
  for (const FrameworkSite& w : kFrameworkSites)
    if (names(function, w.function) && file.ends_with(w.file)) return &w;
  return nullptr;
}

// The framework site of each stack (its innermost frame that is one), or null.
std::vector<const FrameworkSite*> stack_sites(const Snapshot& s) {
  std::vector<const FrameworkSite*> by_frame(s.frames.size(), nullptr);
  for (uint32_t f = 0; f < s.frames.size(); ++f)
    by_frame[f] = site_of(s.strings[s.frames[f].function], s.strings[s.frames[f].file]);
  std::vector<const FrameworkSite*> out(s.stacks.size(), nullptr);
  for (uint32_t id = 1; id < s.stacks.size(); ++id)
    for (uint32_t f : s.stacks[id])
      if (f < by_frame.size() && by_frame[f]) {
        out[id] = by_frame[f];
        break;
      }
  return out;
}

}  // namespace

void own_framework_blocks(Snapshot& s) {
  std::vector<const FrameworkSite*> sites = stack_sites(s);
  if (std::none_of(sites.begin(), sites.end(), [](const FrameworkSite* w) { return w != nullptr; })) return;
  std::set<std::pair<uint64_t, uint64_t>> owned;  // (event, addr) of the rows there are: a file read twice
  for (const Owner& o : s.owners) owned.emplace(o.event, o.addr);
  std::vector<Owner> added;
  for (size_t i = 0; i < s.events.size(); ++i) {
    Event e = s.events[i];
    const FrameworkSite* w = e.action == Action::alloc && e.stack < sites.size() ? sites[e.stack] : nullptr;
    if (!w || owned.count({i + 1, e.addr})) continue;
    uint32_t name = s.strings.intern(std::string(w->owner));
    added.push_back(Owner{.time_ns = e.time_ns, .event = i + 1, .addr = e.addr, .size = e.size, .name = name,
                          .module = name, .kind = w->kind, .device = e.device});
  }
  if (added.empty()) return;
  std::vector<Owner> rows(s.owners.begin(), s.owners.end()), merged;
  merged.reserve(rows.size() + added.size());
  std::merge(added.begin(), added.end(), rows.begin(), rows.end(), std::back_inserter(merged),
             [](const Owner& a, const Owner& b) { return a.event < b.event; });
  s.owners.assign(merged);
}

}  // namespace memrec
