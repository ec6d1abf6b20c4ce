// PyTorch's memory snapshot pickles (torch.cuda.memory._dump_snapshot) in both directions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec {

// Reads pickle protocols 2-5 with data opcodes only: anything that would import or call code (GLOBAL,
// STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, ...) is rejected with an Error, as are malformed or oversized input.
Snapshot import_pickle(std::span<const uint8_t> bytes);
Snapshot import_pickle_file(const std::string& path);

// Writes protocol 4 with only the opcodes pytorch.org/memory_viz's unpickler knows, memoizing repeated
// frames and strings. Output opens in memory_viz and torch/cuda/_memory_viz.py.
std::vector<uint8_t> export_pickle(const Snapshot& s);
void export_pickle_file(const Snapshot& s, const std::string& path);

}  // namespace memrec
