#include "memrec/devices.h"

#include <algorithm>

#include "memrec/replay.h"

namespace memrec {

uint8_t choose_device(const Snapshot& s, std::optional<uint8_t> requested) {
  std::vector<uint8_t> with_events = devices_with_events(s);
  std::vector<uint8_t> known = devices_of(s, with_events);
  if (!requested) return !with_events.empty() ? with_events.front() : known.empty() ? 0 : known.front();
  if (known.empty() && *requested == 0) return 0;  // an empty recording: device 0 shows that it is empty
  if (std::find(known.begin(), known.end(), *requested) != known.end()) return *requested;
  std::string have;
  for (uint8_t d : known) have += (have.empty() ? "" : ", ") + std::to_string(d);
  std::string n = std::to_string(*requested);
  throw Error("--device " + n + ": the recording has nothing on device " + n +
              (known.empty() ? " (it is empty)" : " (it has device " + have + ")"));
}

std::string stream_name(const Snapshot& s, uint16_t stream) {
  bool is_default = stream < s.streams.size() && s.streams[stream] == 0;
  return "stream " + std::to_string(stream) + (is_default ? " (default)" : "");
}

}  // namespace memrec
