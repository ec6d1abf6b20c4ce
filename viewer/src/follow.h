// Following a recording while it is written (memrec view --follow): the file's size and modification time are
// checked four times a second and, when they changed, the file is loaded again on a thread of its own, so frames
// keep drawing meanwhile; the app swaps the new document in.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "document.h"
#include "memrec/load.h"

namespace memrec::viewer {

class Follower {
 public:
  Follower(std::string path, std::optional<uint8_t> device);
  ~Follower();  // waits for a load in flight
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  // Called once a frame: starts a load when the file changed and none runs; returns the document a finished
  // load made. A load that fails returns nothing and keeps its reason for line().
  std::unique_ptr<Document> poll();
  // What the window says about the file: that it is followed and whether it is complete, what it waits for, or
  // why the last load failed.
  std::string line(const Document* shown) const;
  const std::string& path() const { return path_; }

 private:
  std::unique_ptr<Document> finish();

  std::string path_;
  std::optional<uint8_t> device_;
  std::future<std::unique_ptr<Document>> loading_;
  std::optional<FileStamp> stamp_;  // of the file when the last load started
  std::chrono::steady_clock::time_point next_check_{};
  std::string error_;  // why the last load failed; empty after one that worked
};

}  // namespace memrec::viewer
