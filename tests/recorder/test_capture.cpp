// The libunwind stack capture against libgcc's _Unwind_Backtrace (the reference): the same return addresses on
// every shape of stack the recorder meets, and C++ exceptions still served by libgcc_s while it is in use.
#include <gtest/gtest.h>

#include <alloca.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <torch/version.h>

#include "memrec/recorder.h"

#if TORCH_VERSION_MAJOR >= 2  // c10::Allocator::allocate lost its const, and copy_data came
#define MEMREC_ALLOCATE_CONST
#define MEMREC_COPY_DATA \
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
#else
#define MEMREC_ALLOCATE_CONST const
#define MEMREC_COPY_DATA
#endif

namespace memrec {
namespace {

struct Captured {
  std::vector<uint64_t> reference, fast;
  uint64_t caller = 0;  // capture_both's return address: where the two stacks must start to agree
};

__attribute__((noinline)) Captured capture_both() {
  Captured c;
  uint64_t pcs[256];
  c.reference.assign(pcs, pcs + capture_stack(StackCapture::unwind_backtrace, pcs, 256));
  c.fast.assign(pcs, pcs + capture_stack(StackCapture::libunwind, pcs, 256));
  c.caller = reinterpret_cast<uint64_t>(__builtin_return_address(0));
  return c;
}

// The frames from capture_both's caller outwards; above it each method has its own capture function.
std::vector<uint64_t> from_caller(const std::vector<uint64_t>& pcs, uint64_t caller) {
  auto it = std::find(pcs.begin(), pcs.end(), caller);
  EXPECT_LT(it - pcs.begin(), 4) << "the caller is not among the first frames";
  return {it, pcs.end()};
}

void expect_same_frames(const Captured& c, size_t min_frames) {
  std::vector<uint64_t> reference = from_caller(c.reference, c.caller), fast = from_caller(c.fast, c.caller);
  EXPECT_GE(reference.size(), min_frames);
  EXPECT_EQ(fast, reference);
}

class Capture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!stack_capture_available(StackCapture::libunwind)) GTEST_SKIP() << "built without libunwind";
  }
};

__attribute__((noinline)) Captured recurse(int depth) {
  if (depth == 0) return capture_both();
  Captured c = recurse(depth - 1);
  asm volatile("" ::: "memory");  // a real call per level, not a jump
  return c;
}

TEST_F(Capture, DeepRecursion) { expect_same_frames(recurse(150), 150); }

// alloca of a run-time size: the frame's CFA is computed from rbp, not rsp.
__attribute__((noinline)) Captured with_alloca(size_t bytes) {
  auto* scratch = static_cast<volatile char*>(alloca(bytes));
  scratch[0] = 1;
  scratch[bytes - 1] = 2;
  Captured c = capture_both();
  c.caller += scratch[0] + scratch[bytes - 1] - 3;  // keeps the alloca alive across the call
  return c;
}

__attribute__((noinline)) Captured below_alloca(size_t bytes) {
  Captured c = with_alloca(bytes);
  asm volatile("" ::: "memory");
  return c;
}

TEST_F(Capture, AllocaFrame) {
  volatile size_t bytes = 200;  // known at run time only
  expect_same_frames(below_alloca(bytes), 4);
}

TEST_F(Capture, FunctionAndLambdaChain) {
  std::function<Captured()> inner = [] { return capture_both(); };
  std::function<Captured(int)> chain = [&](int n) {
    Captured c = n == 0 ? inner() : chain(n - 1);
    asm volatile("" ::: "memory");
    return c;
  };
  expect_same_frames(chain(10), 20);
}

TEST_F(Capture, AnotherThread) {
  Captured c;
  std::thread([&] { c = recurse(30); }).join();
  expect_same_frames(c, 30);
}

// A c10 CPU allocator that captures both stacks inside each allocation libtorch asks of it.
class CapturingAllocator final : public c10::Allocator {
 public:
  explicit CapturingAllocator(c10::Allocator* base) : base_(base) {}
  c10::DataPtr allocate(size_t n) MEMREC_ALLOCATE_CONST override {
    captured_ = capture_both();
    return base_->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter(); }
  MEMREC_COPY_DATA
  const Captured& captured() const { return captured_; }

 private:
  c10::Allocator* base_;
  mutable Captured captured_;
};

// The file of the library or program holding `pc`, "" when none does.
std::string library_of(uint64_t pc) {
  Dl_info info{};
  return dladdr(reinterpret_cast<void*>(pc), &info) && info.dli_fname ? info.dli_fname : "";
}

bool in_libtorch(uint64_t pc) {
  std::string library = library_of(pc);
  return library.find("libtorch") != std::string::npos || library.find("libc10") != std::string::npos;
}

TEST_F(Capture, InsideLibtorchAllocation) {
  c10::Allocator* base = c10::GetAllocator(c10::DeviceType::CPU);
  CapturingAllocator capturing(base);
  c10::SetAllocator(c10::DeviceType::CPU, &capturing, 255);
  at::Tensor t = at::empty({1024}, at::TensorOptions().device(at::kCPU));
  c10::SetAllocator(c10::DeviceType::CPU, base, 255);
  const Captured& c = capturing.captured();
  ASSERT_FALSE(c.reference.empty());
  expect_same_frames(c, 8);
  EXPECT_TRUE(std::any_of(c.fast.begin(), c.fast.end(), in_libtorch)) << "no frame in libtorch";
}

TEST_F(Capture, LibraryLoadedAfterTheFirstCapture) {
  expect_same_frames(recurse(5), 5);  // warms libunwind's caches before the library exists in the process
  void* lib = dlopen(MEMREC_LATE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto call_through = reinterpret_cast<void (*)(void (*)(void*), void*)>(dlsym(lib, "memrec_call_through"));
  ASSERT_NE(call_through, nullptr);
  Captured c;
  call_through([](void* out) { *static_cast<Captured*>(out) = recurse(3); }, &c);
  expect_same_frames(c, 6);
  auto in_lib = [](uint64_t pc) { return library_of(pc) == MEMREC_LATE_LIBRARY; };
  EXPECT_TRUE(std::any_of(c.fast.begin(), c.fast.end(), in_lib)) << "no frame in the late library";
  dlclose(lib);
}

TEST_F(Capture, StopsAtMax) {
  std::vector<std::vector<uint64_t>> stacks;
  for (int max : {256, 5, 0}) {  // one call site: the same frames each time
    uint64_t pcs[256];
    stacks.emplace_back(pcs, pcs + capture_stack(StackCapture::libunwind, pcs, max));
  }
  ASSERT_GT(stacks[0].size(), 5u);
  EXPECT_EQ(stacks[1], std::vector<uint64_t>(stacks[0].begin(), stacks[0].begin() + 5));
  EXPECT_TRUE(stacks[2].empty());
}

// Loading libunwind leaves the exception ABI to libgcc_s: a throw through libtorch and through the recorder's
// allocation hook while recording reaches its catch.
class ThrowingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t) MEMREC_ALLOCATE_CONST override { throw std::bad_alloc(); }
  c10::DeleterFnPtr raw_deleter() const override { return [](void*) {}; }
  MEMREC_COPY_DATA
};

TEST_F(Capture, ExceptionsStayWithLibgcc) {
  Dl_info info{};
  ASSERT_TRUE(dladdr(dlsym(RTLD_DEFAULT, "_Unwind_RaiseException"), &info));  // libgcc_s's (or ASan's wrapper)
  EXPECT_EQ(std::string(info.dli_fname).find("libunwind"), std::string::npos) << info.dli_fname;

  RecorderOptions o;
  o.cuda = false;
  o.capture = StackCapture::libunwind;
  c10::Allocator* base = c10::GetAllocator(c10::DeviceType::CPU);
  ThrowingAllocator throwing;
  c10::SetAllocator(c10::DeviceType::CPU, &throwing, 255);
  Recorder rec(o);
  rec.start();  // wraps the throwing allocator
  EXPECT_THROW(at::empty({-1}), c10::Error);  // thrown inside libtorch
  EXPECT_THROW(at::empty({1024}), std::bad_alloc);  // thrown below libtorch and the recorder's hook
  rec.stop();
  c10::SetAllocator(c10::DeviceType::CPU, base, 255);
  const Snapshot& s = rec.snapshot();
  auto oom = std::find_if(s.events.begin(), s.events.end(), [](const Event& e) { return e.action == Action::oom; });
  ASSERT_NE(oom, s.events.end()) << "the refused allocation was not recorded";
  EXPECT_NE(oom->stack, 0u) << "the refused allocation has no stack";
}

}  // namespace
}  // namespace memrec
