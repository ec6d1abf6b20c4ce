// A libtorch C++ program that knows nothing of memrec, for `memrec record` tests: allocates N blocks of B bytes
// from libtorch's CPU allocator, frees them, and exits with status 0. With a third argument `fork`, it then forks a
// child that allocates one block of 3 B bytes and exits through exit() (static destructors and all), and waits for it.
#include <c10/core/Allocator.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

int fork_child(size_t bytes) {
  pid_t pid = fork();
  if (pid == 0) {
    c10::DataPtr block = c10::GetAllocator(c10::DeviceType::CPU)->allocate(3 * bytes);
    std::exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 10;
  size_t bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000;
  std::vector<c10::DataPtr> blocks;
  for (int i = 0; i < n; ++i) blocks.push_back(c10::GetAllocator(c10::DeviceType::CPU)->allocate(bytes));
  return argc > 3 && std::string(argv[3]) == "fork" ? fork_child(bytes) : 0;
}
