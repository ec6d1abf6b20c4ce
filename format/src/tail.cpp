#include "memrec/tail.h"

#include <sys/stat.h>
#include <unistd.h>

#include <memory>

#include "memrec/huge_pages.h"
#include "memrec/load.h"
#include "reader.h"

namespace memrec {

using namespace format_detail;

Tail::Tail(std::string path) : path_(std::move(path)) {}
Tail::~Tail() = default;

Tail::Read Tail::read() {
  auto [f, st] = open_for_reading(path_);
  if (reader_ && (st.st_dev != dev_ || st.st_ino != ino_ || st.st_size < size_ || (footer_ && st.st_size > size_)))
    return Read::replaced;
  if (reader_ && st.st_size == size_) return Read::nothing_new;
  if (!reader_) reader_ = std::make_unique<Reader>(path_, std::span<const uint8_t>{}, ReadOptions{});
  dev_ = st.st_dev, ino_ = st.st_ino, size_ = st.st_size;
  // Bytes appended after the stat are left for the next read; on huge pages as read_file's.
  auto size = static_cast<size_t>(st.st_size) - offset_;
  auto bytes = std::make_unique_for_overwrite<uint8_t[]>(size);
  advise_huge(bytes.get(), size);
  if (pread(fileno(f.get()), bytes.get(), size, static_cast<off_t>(offset_)) != static_cast<ssize_t>(size))
    read_failed(path_);
  uint64_t end = reader_->read_more({bytes.get(), size}, offset_);
  bool grew = end > offset_ || offset_ == 0;
  offset_ = end;
  footer_ = reader_->footer_seen();
  return grew ? Read::grew : Read::nothing_new;
}

bool Tail::closed() const { return reader_ && reader_->end_state_seen(); }

void Tail::append_to(Snapshot& s) {
  reader_->append_to(s);
  s.warnings.clear();
  if (!s.complete) s.warnings.push_back(cut_short_warning(path_, s.events.size()));
  add_notes(s);
}

}  // namespace memrec
