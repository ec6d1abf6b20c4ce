// A libtorch C++ program that knows nothing of memrec, for `memrec record` tests: allocates N blocks of B bytes
// from libtorch's CPU allocator, frees them, and exits with status 0.
#include <c10/core/Allocator.h>

#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 10;
  size_t bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000;
  std::vector<c10::DataPtr> blocks;
  for (int i = 0; i < n; ++i) blocks.push_back(c10::GetAllocator(c10::DeviceType::CPU)->allocate(bytes));
  return 0;
}
