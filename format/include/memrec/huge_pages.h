// Large arrays that are filled once (events, replay totals) spend most of their first touch in 4 KiB page
// faults; asking for transparent huge pages before touching them makes that 512 times rarer.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <vector>

namespace memrec {

// Advises huge pages for the whole 2 MiB pages inside [p, p + n) (no-op when unsupported).
inline void advise_huge(const void* p, size_t n) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  auto begin = reinterpret_cast<uintptr_t>(p), end = begin + n;
  uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1), last = end & ~(kHuge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

// Reserves room for n elements and advises huge pages for the untouched storage.
template <class T>
void reserve_huge(std::vector<T>& v, size_t n) {
  v.reserve(n);
  advise_huge(v.data() + v.size(), (v.capacity() - v.size()) * sizeof(T));
}

}  // namespace memrec
