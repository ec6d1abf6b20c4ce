// Opening a snapshot whatever its format.
#pragma once

#include <string>

#include "memrec/snapshot.h"

namespace memrec {

// Reads a .memrec file or a PyTorch snapshot pickle, chosen by the file's first bytes.
Snapshot load_snapshot(const std::string& path);

}  // namespace memrec
