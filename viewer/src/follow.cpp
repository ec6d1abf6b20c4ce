#include "follow.h"

#include <filesystem>

#include <fmt/format.h>

#include "memrec/format.h"

namespace memrec::viewer {
namespace {

constexpr auto kCheckPeriod = std::chrono::milliseconds(250);

bool ready(const std::future<std::unique_ptr<Document>>& f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

Follower::Follower(std::string path, std::optional<uint8_t> device) : path_(std::move(path)), device_(device) {}

Follower::~Follower() {
  if (reading_.valid()) reading_.wait();
}

// On the reading thread: the chunks appended (a null document), or the whole file.
std::unique_ptr<Document> Follower::read() {
  if (tail_) {
    read_ = tail_->read();
    // The end state brings the start state, from which the replay starts: the document is made again.
    if (read_ == Tail::Read::nothing_new || (read_ == Tail::Read::grew && !tail_->closed())) return nullptr;
  }
  return read_whole();
}

// Notes are left to the status bar: printing them at every read would repeat them on the terminal.
std::unique_ptr<Document> Follower::read_whole() {
  tail_.reset();
  if (!is_memrec_file(path_)) return Document::open(path_, device_, std::nullopt, nullptr);
  auto tail = std::make_unique<Tail>(path_);
  tail->read();
  Snapshot s;
  tail->append_to(s);
  // Compiled code is mapped over the whole recording (load_snapshot), so such a file is read whole each time.
  if (s.metadata.contains("compiled_code")) return Document::open(path_, device_, std::nullopt, nullptr);
  tail_ = std::move(tail);
  return Document::of(path_, std::move(s), device_);
}

void Follower::start() { reading_ = std::async(std::launch::async, &Follower::read, this); }

std::unique_ptr<Document> Follower::finish() {
  try {
    std::unique_ptr<Document> doc = reading_.get();
    error_.clear();
    grew_ = !doc && read_ == Tail::Read::grew;
    return doc;
  } catch (const std::exception& e) {  // Error, or bad_alloc on a file too big for this machine's memory
    tail_.reset();
    error_ = e.what();
    return nullptr;
  }
}

std::unique_ptr<Document> Follower::poll() {
  if (reading_.valid()) return ready(reading_) ? finish() : nullptr;
  if (grew_) return nullptr;  // waits for extend()
  auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return nullptr;
  next_check_ = now + kCheckPeriod;
  FileStamp stamp = file_stamp(path_);
  if (stamp_ && stamp == *stamp_) return nullptr;
  stamp_ = stamp;
  if (stamp.size < 0) {
    error_ = "it does not exist yet";
    return nullptr;
  }
  start();
  return nullptr;
}

bool Follower::extend(Document& shown) {
  grew_ = false;
  tail_->append_to(shown.snapshot);
  if (shown.extend()) return true;
  tail_.reset();
  start();
  return false;
}

std::string Follower::line(const Document* shown) const {
  std::string name = std::filesystem::path(path_).filename().string();
  if (!shown) return fmt::format("waiting for {}: {}", name, error_.empty() ? "reading it" : error_);
  std::string what = fmt::format("following {}: {} events, {}", name, shown->snapshot.events.size(),
                                 shown->snapshot.complete ? "complete (its writer closed it)" : "still being written");
  if (!error_.empty()) what += fmt::format(" | the last read failed, this is the one before: {}", error_);
  return what;
}

}  // namespace memrec::viewer
