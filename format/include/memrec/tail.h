// Reading a .memrec file while its writer appends to it (memrec view --follow): each read takes only the chunks
// written since the one before, up to the last whole chunk (a chunk half-written is read the next time), so a read
// costs what was appended, not the file.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "memrec/snapshot.h"

namespace memrec {

namespace format_detail {
class Reader;
}

class Tail {
 public:
  explicit Tail(std::string path);
  ~Tail();
  Tail(const Tail&) = delete;
  Tail& operator=(const Tail&) = delete;

  enum class Read : uint8_t { nothing_new, grew, replaced };
  // Reads the whole chunks written since the last read (the first read: all of them) and decodes them, apart from
  // any snapshot. `replaced`: the file is another one (another inode), shorter than what was read, or grew after its
  // footer: a new Tail must read it from the start. Throws Error where read_file would; the tail is then of no use.
  Read read();
  // Appends what the last read() decoded to `s`, the snapshot the reads before it filled (empty before the first),
  // and gives `s` the warnings load_snapshot gives a file read whole. Not while read() runs.
  void append_to(Snapshot& s);
  // The reads so far found the end state: the writer closed the file (its footer may still be on its way).
  bool closed() const;

 private:
  std::string path_;
  std::unique_ptr<format_detail::Reader> reader_;
  uint64_t offset_ = 0;  // where the chunks not read yet begin
  off_t size_ = -1;      // of the file at the last read
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool footer_ = false;
};

}  // namespace memrec
