// Following a recording while it is written (memrec view --follow): the file's size and modification time are
// checked four times a second and, when they changed, the chunks appended since the last read are read on a thread
// of their own (memrec/tail.h), so frames keep drawing meanwhile; between two frames the app appends them to its
// document, whose replay, timeline and lanes go on from where they stopped. The file is read whole at first, when it
// was replaced or cut, when the new chunks change what came before (Document::extend), and for a pickle snapshot.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "document.h"
#include "memrec/load.h"
#include "memrec/tail.h"

namespace memrec::viewer {

class Follower {
 public:
  Follower(std::string path, std::optional<uint8_t> device);
  ~Follower();  // waits for a read in flight
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  // Called once a frame: starts a read when the file changed and none runs. Returns the document a whole read made;
  // after a read of the appended chunks, returns nothing and grew() holds. A read that fails returns nothing and
  // keeps its reason for line().
  std::unique_ptr<Document> poll();
  bool grew() const { return grew_; }
  // Appends the chunks the last read found to `shown` (the document poll returned last) and extends it. False where
  // that cannot be done (Document::extend): the file is then read whole, for a later poll to return.
  bool extend(Document& shown);
  // What the window says about the file: that it is followed and whether it is complete, what it waits for, or
  // why the last read failed.
  std::string line(const Document* shown) const;
  const std::string& path() const { return path_; }

 private:
  std::unique_ptr<Document> read();
  std::unique_ptr<Document> read_whole();
  void start();
  std::unique_ptr<Document> finish();

  std::string path_;
  std::optional<uint8_t> device_;
  std::unique_ptr<Tail> tail_;  // none: the next read is whole
  std::future<std::unique_ptr<Document>> reading_;
  Tail::Read read_ = Tail::Read::nothing_new;  // what the reading thread's last read of the tail found
  bool grew_ = false;                           // read_ once the window's thread took the read's result
  std::optional<FileStamp> stamp_;  // of the file when the last read started
  std::chrono::steady_clock::time_point next_check_{};
  std::string error_;  // why the last read failed; empty after one that worked
};

}  // namespace memrec::viewer
