// `--record wait=W,warmup=N,active=A`: torch.profiler's schedule without repeat, for `run` and `record`.
#pragma once

#include <string>

namespace memrec::cli {

struct Schedule {
  int wait = 0, warmup = 0, active = 0;
  // The steps recorded, counted from 0: warmup steps are skipped like wait steps, since memrec's recorder has
  // no start-up cost on the training thread for them to absorb.
  int first() const { return wait + warmup; }
  int last() const { return wait + warmup + active - 1; }
};

// Throws memrec::Error naming `spec` for anything but each key at most once, non-negative numbers, active >= 1.
Schedule parse_schedule(const std::string& spec);

}  // namespace memrec::cli
