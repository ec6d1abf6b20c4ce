// Opening a snapshot whatever its format.
#pragma once

#include <cstdio>
#include <string>

#include "memrec/snapshot.h"

namespace memrec {

// Reads a .memrec file or a PyTorch snapshot pickle, chosen by the file's first bytes. With `notes` (stderr for
// a command), says there what the user must know about the input: "memrec: note: run.memrec was cut short: ...".
Snapshot load_snapshot(const std::string& path, std::FILE* notes = nullptr);

}  // namespace memrec
