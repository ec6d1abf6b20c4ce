#include "follow.h"

#include <filesystem>

#include <fmt/format.h>

namespace memrec::viewer {
namespace {

constexpr auto kCheckPeriod = std::chrono::milliseconds(250);

bool ready(const std::future<std::unique_ptr<Document>>& f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

Follower::Follower(std::string path, std::optional<uint8_t> device) : path_(std::move(path)), device_(device) {}

Follower::~Follower() {
  if (loading_.valid()) loading_.wait();
}

std::unique_ptr<Document> Follower::finish() {
  try {
    std::unique_ptr<Document> doc = loading_.get();
    error_.clear();
    return doc;
  } catch (const std::exception& e) {  // Error, or bad_alloc on a file too big for this machine's memory
    error_ = e.what();
    return nullptr;
  }
}

std::unique_ptr<Document> Follower::poll() {
  if (loading_.valid()) return ready(loading_) ? finish() : nullptr;
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
  // Notes are left to the status bar: printing them at every load would repeat them on the terminal.
  loading_ = std::async(std::launch::async, Document::open, path_, device_, std::nullopt, nullptr);
  return nullptr;
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
