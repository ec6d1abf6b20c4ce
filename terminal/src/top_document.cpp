#include "top_document.h"

#include "memrec/devices.h"
#include "memrec/growth_output.h"
#include "memrec/load.h"

namespace memrec::terminal {

TopDocument load_document(const std::string& path, std::optional<uint8_t> device, bool growth) {
  TopDocument doc;
  doc.snapshot = std::make_unique<Snapshot>(load_snapshot(path));  // notes would garble the screen: the header says
  doc.replay = std::make_unique<Replay>(*doc.snapshot, choose_device(*doc.snapshot, device));
  doc.duration_ns = duration_of(*doc.replay);
  if (growth) {
    GrowthResult g = memrec::growth(*doc.snapshot, {.device = doc.replay->device(), .device_memory = std::nullopt,
                                                    .first_step = std::nullopt, .last_step = std::nullopt});
    if (g.verdict != GrowthVerdict::too_few_steps) doc.growth = growth_summary(g);
  }
  return doc;
}

}  // namespace memrec::terminal
