// A libtorch C++ program that knows nothing of memrec, for `memrec record` on CUDA (scripts/gpu-check.sh): allocates
// small, large and over-10-MiB tensors on the GPU (new small and large segments), computes with them, frees them all,
// and prints its caching allocator's counters as one line `memory_stats {json}` with the keys examples/train.py prints.
// Elementwise ops only: cuBLAS would keep a workspace that libtorch may free at exit, after the line is printed.
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <cinttypes>
#include <cstdio>
#include <vector>

namespace {

at::Tensor floats(int64_t n) { return at::empty({n}, at::TensorOptions().device(at::kCUDA).dtype(at::kFloat)); }

void compute() {
  std::vector<at::Tensor> kept;
  for (int64_t n : {256, 1000, 128 * 1024, 1 << 20, 6 << 20}) {  // 1 KiB ... 24 MiB
    at::Tensor a = floats(n).fill_(1), b = floats(n).fill_(2);
    kept.push_back(at::add(a, b).mul_(3));  // a and b are freed at the end of the turn
  }
  at::Tensor all = at::cat(kept);
  kept.erase(kept.begin() + 1, kept.begin() + 3);  // free some from the middle first
  (void)all.sum().item<float>();
}

}  // namespace

int main() {
  compute();
  c10::cuda::device_synchronize();
  const auto stats = c10::cuda::CUDACachingAllocator::get()->getDeviceStats(0);
  constexpr size_t all = 0;  // StatType::AGGREGATE (its namespace moved between libtorch versions)
  std::printf("memory_stats {\"allocation.all.allocated\": %" PRId64 ", \"allocation.all.freed\": %" PRId64
              ", \"segment.all.allocated\": %" PRId64 ", \"segment.all.freed\": %" PRId64
              ", \"allocated_bytes.all.peak\": %" PRId64 ", \"requested_bytes.all.peak\": %" PRId64
              ", \"reserved_bytes.all.peak\": %" PRId64 "}\n",
              stats.allocation[all].allocated, stats.allocation[all].freed, stats.segment[all].allocated,
              stats.segment[all].freed, stats.allocated_bytes[all].peak, stats.requested_bytes[all].peak,
              stats.reserved_bytes[all].peak);
  std::fflush(stdout);  // before the recorder's exit handler writes its file
  return 0;
}
