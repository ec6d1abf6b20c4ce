#include "cmd_ranks.h"

#include <fmt/format.h>

namespace memrec::cli {

void print_rank_stats(const std::vector<std::string>& files, const std::string& at, bool kernels,
                      std::optional<uint8_t> device, size_t top, bool as_json) {
  if (at != "peak" || kernels) throw Error("--by rank compares the ranks at their peaks: --at and --kernels take one file");
  RankSet set = load_ranks(files, {.device = device});
  for (const RankRecording& r : set.ranks)
    for (const std::string& w : r.warnings) fmt::print(stderr, "memrec: note: {}\n", w);
  fmt::print("{}", as_json ? ranks_json(set, top).dump(2) + "\n" : ranks_text(set, top));
}

}  // namespace memrec::cli
