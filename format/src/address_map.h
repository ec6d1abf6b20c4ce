// Address -> value, for the passes that follow every live block through a history (the replay, the writer's live
// state). Open addressing with linear probing and backward-shift deletion: such a pass does one lookup per event, and
// std::unordered_map's node allocations dominated it. Private to the format library.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace memrec::format_detail {

template <class V> class AddressMap {
 public:
  AddressMap() { rehash(1024); }

  V* find(uint64_t key) {
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (!used_[i]) return nullptr;
      if (keys_[i] == key) return &values_[i];
    }
  }

  // True when the key was there already (its value is replaced).
  bool put(uint64_t key, V value) {
    if (2 * (size_ + 1) > keys_.size()) rehash(keys_.size() * 2);
    size_t i = slot(key);
    for (; used_[i]; i = (i + 1) & mask_)
      if (keys_[i] == key) return values_[i] = value, true;
    keys_[i] = key, values_[i] = value, used_[i] = 1, ++size_;
    return false;
  }

  void erase(uint64_t key) {
    size_t i = slot(key);
    while (used_[i] && keys_[i] != key) i = (i + 1) & mask_;
    if (!used_[i]) return;
    // Shift later members of the probe run back so lookups never cross a hole.
    for (size_t j = (i + 1) & mask_; used_[j]; j = (j + 1) & mask_) {
      size_t home = slot(keys_[j]);
      bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) keys_[i] = keys_[j], values_[i] = values_[j], i = j;
    }
    used_[i] = 0;
    --size_;
  }

  size_t size() const { return size_; }

  template <class F> void for_each(F f) const {
    for (size_t i = 0; i < keys_.size(); ++i)
      if (used_[i]) f(keys_[i], values_[i]);
  }

 private:
  size_t slot(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ULL) >> shift_; }

  void rehash(size_t capacity) {
    std::vector<uint64_t> keys = std::move(keys_);
    std::vector<V> values = std::move(values_);
    std::vector<uint8_t> used = std::move(used_);
    keys_.assign(capacity, 0), values_.assign(capacity, V{}), used_.assign(capacity, 0);
    mask_ = capacity - 1;
    shift_ = 64 - std::countr_zero(capacity);
    size_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (used[i]) put(keys[i], values[i]);
  }

  std::vector<uint64_t> keys_;
  std::vector<V> values_;
  std::vector<uint8_t> used_;
  size_t mask_ = 0, size_ = 0;
  int shift_ = 0;
};

}  // namespace memrec::format_detail
