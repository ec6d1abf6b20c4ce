// Which device a command shows, and what a stream is called: one answer for every command, view and export.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "memrec/snapshot.h"

namespace memrec {

// The device a command analyzes. Unset: the first device with events (else the first with segments, else 0), so
// a pickle whose device 0 trace is empty opens on the device that ran. Set: that device, or Error when the
// recording has nothing on it.
uint8_t choose_device(const Snapshot& s, std::optional<uint8_t> requested);

// The one name a stream has in every view and export: its id in the file, "stream 0 (default)" for the default
// stream (raw handle 0), "stream 3" otherwise. The raw handle is a process address: shown beside the name where
// there is room, never as the name.
std::string stream_name(const Snapshot& s, uint16_t stream);

}  // namespace memrec
