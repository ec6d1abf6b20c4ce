#include "top_document.h"

#include "memrec/devices.h"
#include "memrec/load.h"

namespace memrec::terminal {

TopDocument load_document(const std::string& path, std::optional<uint8_t> device) {
  TopDocument doc;
  doc.snapshot = std::make_unique<Snapshot>(load_snapshot(path));  // notes would garble the screen: the header says
  doc.replay = std::make_unique<Replay>(*doc.snapshot, choose_device(*doc.snapshot, device));
  doc.duration_ns = duration_of(*doc.replay);
  return doc;
}

}  // namespace memrec::terminal
