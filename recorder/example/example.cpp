// Recording your own libtorch program with memrec (docs/library.md).
#include <torch/torch.h>

#include <cstdio>

#include <memrec/recorder.h>

int main(int argc, char** argv) {
  const char* out = argc > 1 ? argv[1] : "example.memrec";
  auto device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  memrec::RecorderOptions options;
  options.output = out;  // streamed while the program runs; complete after stop()
  memrec::Recorder recorder(options);
  recorder.start();

  torch::nn::Sequential model(torch::nn::Linear(512, 2048), torch::nn::ReLU(), torch::nn::Linear(2048, 512));
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  for (int step = 0; step < 3; ++step) {
    MEMREC_SCOPE("train step", memrec::ScopeKind::step);
    torch::Tensor loss;
    {
      MEMREC_SCOPE("forward", memrec::ScopeKind::phase);
      loss = model->forward(torch::randn({64, 512}, device)).square().mean();
    }
    {
      MEMREC_SCOPE("backward", memrec::ScopeKind::phase);
      loss.backward();
    }
    MEMREC_SCOPE("optimizer", memrec::ScopeKind::phase);
    optimizer.step();
    optimizer.zero_grad();
  }

  recorder.stop();
  auto stats = recorder.stats();
  std::printf("recorded %llu events, %llu kernels, %llu dropped into %s\n", (unsigned long long)stats.events,
              (unsigned long long)stats.kernels, (unsigned long long)stats.dropped, out);
  return stats.events > 0 && stats.dropped == 0 ? 0 : 1;
}
