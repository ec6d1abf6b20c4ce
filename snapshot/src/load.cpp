#include "memrec/load.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "memrec/format.h"
#include "memrec/pickle.h"

namespace memrec {
namespace {

constexpr unsigned char kPickleProto = 0x80;

int first_byte(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path + ": " + std::strerror(errno));
  return in.get();
}

}  // namespace

Snapshot load_snapshot(const std::string& path, std::FILE* notes) {
  if (!is_memrec_file(path)) {
    if (first_byte(path) == kPickleProto) return import_pickle_file(path);
    throw Error(path + " is neither a .memrec file nor a pickle snapshot");
  }
  Snapshot s = read_file(path);
  if (notes && !s.cut_short_note.empty()) std::fprintf(notes, "memrec: note: %s\n", s.cut_short_note.c_str());
  return s;
}

}  // namespace memrec
