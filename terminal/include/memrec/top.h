// `memrec top`: a recording in the terminal, for a GPU node reached over SSH where no window can open.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace memrec::terminal {

struct TopOptions {
  std::string file;
  bool follow = false;             // re-read the file as it grows, at least once a second
  std::optional<uint8_t> device;   // unset: choose_device's default
};

// Runs the view until the user quits. Throws memrec::Error when stdin or stdout is not a terminal, or when the file
// cannot be read (with `follow`, a file not readable yet is waited for instead).
void run_top(const TopOptions& options);

}  // namespace memrec::terminal
