#include "memrec/snapshot.h"

#include <array>
#include <functional>

namespace memrec {
namespace {

constexpr std::array<std::string_view, kActionCount> kActionNames = {
    "alloc",         "free_requested", "free_completed", "segment_alloc", "segment_free",
    "segment_map",   "segment_unmap",  "oom",            "snapshot",      "user_defined",
    "annotate",
};

uint64_t mix(uint64_t h, uint64_t v) {
  return (h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2))) * 0xff51afd7ed558ccdULL;
}

uint64_t hash_frame(const Frame& f) {
  return mix(mix(mix(mix(mix(0, f.pc), f.function), f.file), f.library), f.line);
}

uint64_t hash_ids(std::span<const uint32_t> ids) {
  uint64_t h = ids.size();
  for (uint32_t id : ids) h = mix(h, id);
  return h;
}

}  // namespace

std::string_view to_string(Action a) { return kActionNames.at(static_cast<size_t>(a)); }

std::optional<Action> action_from_string(std::string_view s) {
  for (size_t i = 0; i < kActionNames.size(); ++i)
    if (kActionNames[i] == s) return static_cast<Action>(i);
  return std::nullopt;
}

std::string_view to_string(ScopeKind k) {
  static constexpr std::array<std::string_view, 5> names = {"phase", "module", "op", "step",
                                                            "annotation"};
  return names.at(static_cast<size_t>(k));
}

uint32_t enclosing_scope_id(const Snapshot& s, uint32_t scope, ScopeKind kind) {
  for (int depth = 0; scope != 0 && scope < s.scopes.size() && depth < 256; ++depth) {  // the bound stops a cycle
    if (s.scopes[scope].kind == kind) return scope;
    scope = s.scopes[scope].parent;
  }
  return 0;
}

std::string_view to_string(KernelKind k) {
  static constexpr std::array<std::string_view, 3> names = {"kernel", "memcpy", "memset"};
  return names.at(static_cast<size_t>(k));
}

std::string_view to_string(MemoryKind k) {
  static constexpr std::array<std::string_view, kMemoryKindCount> names = {
      "unknown", "pageable", "pinned", "device", "array", "managed", "device_static", "managed_static"};
  return names.at(static_cast<size_t>(k));
}

std::string_view to_string(OwnerKind k) {
  static constexpr std::array<std::string_view, kOwnerKindCount> names = {"parameter", "buffer", "gradient",
                                                                          "optimizer_state"};
  return names.at(static_cast<size_t>(k));
}

std::string_view to_string(MemoryOp op) {
  static constexpr std::array<std::string_view, kMemoryOpCount> names = {
      "allocation", "release", "vmm_create", "vmm_release", "vmm_map", "vmm_unmap"};
  return names.at(static_cast<size_t>(op));
}

static constexpr std::array<std::string_view, 3> kBlockStateNames = {
    "active_allocated", "active_pending_free", "inactive"};

std::string_view to_string(BlockState s) { return kBlockStateNames.at(static_cast<size_t>(s)); }

std::optional<BlockState> block_state_from_string(std::string_view s) {
  for (size_t i = 0; i < kBlockStateNames.size(); ++i)
    if (kBlockStateNames[i] == s) return static_cast<BlockState>(i);
  return std::nullopt;
}

StringTable::StringTable() { assign({""}); }

uint32_t StringTable::intern(std::string_view s) {
  auto it = index_.find(std::string(s));
  if (it != index_.end()) return it->second;
  auto id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(s);
  index_.emplace(strings_.back(), id);
  return id;
}

void StringTable::assign(std::vector<std::string> strings) {
  if (strings.empty() || !strings[0].empty()) throw Error("string table must start with \"\"");
  strings_ = std::move(strings);
  index_.clear();
  index_.reserve(strings_.size());
  for (uint32_t i = 0; i < strings_.size(); ++i) index_.emplace(strings_[i], i);
}

void StringTable::add(std::string s) {
  strings_.push_back(std::move(s));
  index_.emplace(strings_.back(), static_cast<uint32_t>(strings_.size() - 1));
}

uint32_t FrameTable::intern(const Frame& f) {
  auto& ids = index_[hash_frame(f)];
  for (uint32_t id : ids)
    if (frames_[id] == f) return id;
  auto id = static_cast<uint32_t>(frames_.size());
  frames_.push_back(f);
  ids.push_back(id);
  return id;
}

void FrameTable::assign(std::vector<Frame> frames) {
  frames_ = std::move(frames);
  index_.clear();
  for (uint32_t i = 0; i < frames_.size(); ++i) index_[hash_frame(frames_[i])].push_back(i);
}

void FrameTable::add(const Frame& f) {
  index_[hash_frame(f)].push_back(static_cast<uint32_t>(frames_.size()));
  frames_.push_back(f);
}

StackTable::StackTable() : offsets_{0, 0} { index_[hash_ids({})].push_back(0); }

std::span<const uint32_t> StackTable::operator[](uint32_t id) const {
  if (id + 1 >= offsets_.size()) throw Error("stack id out of range");
  return std::span<const uint32_t>(frames_).subspan(offsets_[id], offsets_[id + 1] - offsets_[id]);
}

uint32_t StackTable::intern(std::span<const uint32_t> frames) {
  auto& ids = index_[hash_ids(frames)];
  for (uint32_t id : ids) {
    auto s = (*this)[id];
    if (std::equal(s.begin(), s.end(), frames.begin(), frames.end())) return id;
  }
  auto id = static_cast<uint32_t>(size());
  frames_.insert(frames_.end(), frames.begin(), frames.end());
  offsets_.push_back(static_cast<uint32_t>(frames_.size()));
  ids.push_back(id);
  return id;
}

void StackTable::assign(std::vector<uint32_t> offsets, std::vector<uint32_t> frame_ids) {
  if (offsets.size() < 2 || offsets[0] != 0 || offsets[1] != 0)
    throw Error("stack table must start with the empty stack");
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1]) throw Error("stack table offsets are not increasing");
  if (offsets.back() != frame_ids.size()) throw Error("stack table offsets do not match its frames");
  offsets_ = std::move(offsets);
  frames_ = std::move(frame_ids);
  index_.clear();
  for (uint32_t i = 0; i < size(); ++i) index_[hash_ids((*this)[i])].push_back(i);
}

void StackTable::add(std::span<const uint32_t> frames) {
  index_[hash_ids(frames)].push_back(static_cast<uint32_t>(size()));
  frames_.insert(frames_.end(), frames.begin(), frames.end());
  offsets_.push_back(static_cast<uint32_t>(frames_.size()));
}

Snapshot Snapshot::with_tables() const {
  Snapshot t;
  t.metadata = metadata, t.strings = strings, t.frames = frames, t.stacks = stacks, t.streams = streams;
  return t;
}

uint16_t Snapshot::intern_stream(uint64_t raw) {
  for (size_t i = 0; i < streams.size(); ++i)
    if (streams[i] == raw) return static_cast<uint16_t>(i);
  if (streams.size() > UINT16_MAX) throw Error("more than 65535 distinct streams");
  streams.push_back(raw);
  return static_cast<uint16_t>(streams.size() - 1);
}

}  // namespace memrec
