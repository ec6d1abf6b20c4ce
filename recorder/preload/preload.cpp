// LD_PRELOADed by `memrec record`. When main() starts in a process that has libtorch loaded (a libtorch C++
// program: libc10 is among its libraries), loads memrec's recorder library (MEMREC_RECORD_LIBRARY), which records
// the process until it exits. No torch here: every other process (shells, Python, which records through its own
// bootstrap once it imports torch) only pays one walk over its loaded libraries.
#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using Main = int (*)(int, char**, char**);
using StartMain = int (*)(Main, int, char**, void (*)(), void (*)(), void (*)(), void*);
Main g_main = nullptr;

// Whether a library whose file name starts with `prefix` ("libc10.so") is loaded in this process.
bool loaded(const char* prefix) {
  return dl_iterate_phdr(
             [](dl_phdr_info* info, size_t, void* wanted) {
               const char* slash = info->dlpi_name ? std::strrchr(info->dlpi_name, '/') : nullptr;
               const char* base = slash ? slash + 1 : info->dlpi_name;
               const char* prefix = static_cast<const char*>(wanted);
               return base && std::strncmp(base, prefix, std::strlen(prefix)) == 0 ? 1 : 0;
             },
             const_cast<char*>(prefix)) != 0;
}

int main_with_recorder(int argc, char** argv, char** envp) {
  const char* library = std::getenv("MEMREC_RECORD_LIBRARY");
  if (library && *library && loaded("libc10.so")) {
    // A program without libc10_cuda allocates on the CPU only: the recorder (which links CUDA's libtorch where
    // there is one) must then record the CPU allocator, and not start a CUDA context the program never asked for.
    if (!loaded("libc10_cuda.so")) setenv("MEMREC_RECORD_CUDA", "0", 1);
    if (!dlopen(library, RTLD_NOW | RTLD_GLOBAL))
      std::fprintf(stderr, "memrec: not recording this process: %s\n", dlerror());
  }
  return g_main(argc, argv, envp);
}

}  // namespace

// glibc calls main through this: all constructors (libtorch's static registrations included) have run by the
// time main_with_recorder does, and the recorder's exit handlers run before libtorch's.
extern "C" int __libc_start_main(Main main, int argc, char** argv, void (*init)(), void (*fini)(),
                                 void (*rtld_fini)(), void* stack_end) {
  auto real = reinterpret_cast<StartMain>(dlsym(RTLD_NEXT, "__libc_start_main"));
  g_main = main;
  return real(main_with_recorder, argc, argv, init, fini, rtld_fini, stack_end);
}
