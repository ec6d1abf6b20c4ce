// Training workloads for `memrec run` and the benchmarks, in libtorch's C++ API. No torch headers here.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec::workloads {

// The model's setup or a step ran out of device (or host) memory; what() is the allocator's first line.
struct OutOfMemory : Error {
  using Error::Error;
};

struct Config {
  std::string model = "transformer";  // transformer | mlp
  int layers = 12;
  int d_model = 1024;
  int heads = 16;
  int ff = 4096;
  int seq = 256;
  int batch = 16;
  int steps = 5;
  int warmup = 1;
  std::string dtype = "fp32";       // fp32 | bf16 | fp16
  std::string optimizer = "adam";   // adam | sgd
  std::string device = "cuda";      // cuda | cpu
  std::vector<int> checkpoint;      // layers (blocks) run with activation checkpointing, by index
};

// "all" (every layer) or a comma-separated list of layer indices like "0,3"; throws memrec::Error.
std::vector<int> parse_layer_list(std::string_view spec, int layers);

// Sizes that finish a 12-layer run in seconds on two cores with Debian's libtorch (OpenBLAS).
Config cpu_defaults(Config c);
// Throws memrec::Error for anything invalid (unknown model/dtype/optimizer, sizes, heads not dividing d_model,
// cuda without a GPU, fp16 on CPU, checkpointed layers out of range).
void validate(const Config& c);
bool cuda_available();
std::string describe(const Config& c);

// A built model, optimizer and input. Each step() emits scopes "step N" > forward/backward/optimizer > module
// paths (layers.3.self_attn, ...) through MEMREC_SCOPE, so recordings show where memory went.
class Workload {
 public:
  static std::unique_ptr<Workload> create(const Config& c);
  virtual ~Workload() = default;
  // One forward + backward + optimizer step; waits for the GPU. Returns milliseconds.
  virtual double step(int index) = 0;
  // Forward and backward without the optimizer step: the loss and each parameter's gradient norm, in
  // parameter order. Gradients are cleared again afterwards. For checking that checkpointing changes nothing.
  struct Gradients {
    double loss = 0;
    std::vector<double> norms;
  };
  virtual Gradients gradients() = 0;
  virtual long parameters() const = 0;
};

}  // namespace memrec::workloads
