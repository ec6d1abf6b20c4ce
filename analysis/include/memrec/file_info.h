// `memrec info` as a plain result: what a file holds, and per device its peaks, start state, owners, OOMs and the
// largest blocks live at the allocated peak. report/ (memrec/info.h) prints it as text and JSON.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "memrec/recording_cost.h"
#include "memrec/snapshot.h"

namespace memrec {

// A moment on one device: its step (-1: the state before the first event) and time since the device's first event.
struct Moment {
  int64_t event = -1;
  int64_t time_ns = 0;
};

struct InfoPeak {
  uint64_t bytes = 0;
  Moment at;
};

struct InfoOom {
  Moment at;
  uint64_t requested = 0, device_free = 0, allocated = 0, reserved = 0;
};

// The rows of Snapshot::owners on a device: buffers count as parameters, as their category does.
struct InfoOwners {
  uint64_t rows = 0, parameters = 0, gradients = 0, optimizer_state = 0, unresolved = 0;
};

struct InfoBlock {
  uint64_t bytes = 0, addr = 0;
  bool before_recording = false;  // live before the recording began: no site, no scopes
  std::string site;               // allocation_site
  std::string scopes;             // the scopes it was allocated in, outermost first: "forward > layers.0"
  std::string owner;              // the first owner row's name, "" without
  uint32_t other_owners = 0;      // other names the owner rows give the block
  std::optional<OwnerKind> owner_kind;
};

struct DeviceInfo {
  uint8_t device = 0;
  uint32_t events = 0;
  int64_t duration_ns = 0;
  InfoPeak peak_allocated, peak_reserved;
  uint64_t initial_allocated = 0, initial_reserved = 0;
  uint64_t blocks_before_recording = 0;
  uint64_t unmatched_frees = 0;
  std::optional<InfoOwners> owners;  // unset without owner rows on the device
  std::vector<InfoOom> ooms;
  std::vector<InfoBlock> largest_live;  // at the allocated peak, largest first, at most 10
};

struct FileInfo {
  std::map<std::string, std::string> metadata;
  uint64_t events = 0, kernels = 0, scopes = 0, stacks = 0, frames = 0, dropped_events = 0;
  std::array<uint64_t, kActionCount> actions{};  // events by Action
  bool complete = true;
  std::vector<std::string> warnings;
  std::vector<DeviceInfo> devices;
  std::string kernel_steps;  // kernel_steps_note(s)
  std::optional<RecordingCost> cost;
};

// Where the recorder traced kernels on some steps only: "kernels traced on 5 of 42 steps (first 3, then every
// 10th)"; empty where it traced every step, or none.
std::string kernel_steps_note(const Snapshot& s);

FileInfo file_info(const Snapshot& s);

}  // namespace memrec
