// The models. The only TU with torch/torch.h: keep it that way (compile time and memory).
#include "memrec/workloads.h"

#include <torch/torch.h>

#include <charconv>
#include <chrono>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <functional>
#include <mutex>
#include <set>

#include "memrec/recorder.h"

namespace memrec::workloads {
namespace {

// Scope for one submodule call: "layers.3.self_attn".
struct ModuleScope {
  ScopeGuard guard;
  explicit ModuleScope(const std::string& path) : guard(path, ScopeKind::module) {}
};

// Sets the default generator of `device` to `state` (when defined) and returns the state it had.
torch::Tensor swap_rng_state(const torch::Device& device, const torch::Tensor& state) {
  at::Generator gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  torch::Tensor old = gen.get_state();
  if (state.defined()) gen.set_state(state);
  return old;
}

// What a checkpointed layer's backward needs to run the layer's forward again.
struct Recompute : torch::CustomClassHolder {
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  torch::Device device = torch::kCPU;
  torch::Tensor rng_state;  // before the first forward: dropout draws the same masks when recomputing
  size_t inputs = 0;        // forward's arguments, which backward returns one gradient each for
};

// Activation checkpointing as torch.utils.checkpoint's reentrant variant does it: the forward runs without a
// graph and keeps only its input; backward runs the forward again with a graph (inside the layer's module
// scopes again) and backpropagates the incoming gradient through it, which accumulates the parameters'
// gradients. The parameters are arguments only so that the output requires grad when x does not (layer 0).
struct Checkpoint : torch::autograd::Function<Checkpoint> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               torch::TensorList params, c10::intrusive_ptr<Recompute> r) {
    r->rng_state = swap_rng_state(r->device, {});
    r->inputs = params.size() + 2;
    ctx->save_for_backward({x});
    ctx->saved_data["recompute"] = c10::IValue::make_capsule(r);
    torch::NoGradGuard no_grad;
    return r->forward(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto r = c10::static_intrusive_pointer_cast<Recompute>(ctx->saved_data["recompute"].toCapsule());
    torch::Tensor saved = ctx->get_saved_variables()[0];
    torch::Tensor x = saved.detach().requires_grad_(saved.requires_grad());
    torch::Tensor out;
    {
      torch::AutoGradMode enable(true);
      torch::Tensor now = swap_rng_state(r->device, r->rng_state);
      out = r->forward(x);
      swap_rng_state(r->device, now);
    }
    torch::autograd::backward({out}, {grads[0]});
    torch::autograd::variable_list result(r->inputs);
    result[0] = x.grad();
    return result;
  }
};

template <class Layer>
torch::Tensor checkpoint(const std::shared_ptr<Layer>& layer, const torch::Tensor& x) {
  auto r = c10::make_intrusive<Recompute>();
  r->forward = [layer](const torch::Tensor& in) { return layer->forward(in); };
  r->device = x.device();
  return Checkpoint::apply(x, torch::TensorList(layer->parameters()), r);
}

// Runs layers[i] on x, checkpointed when i is in `checkpointed`.
template <class Layer>
torch::Tensor run_layers(torch::nn::ModuleList& layers, const std::set<int>& checkpointed, torch::Tensor x) {
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<Layer>(i);
    x = checkpointed.count(static_cast<int>(i)) ? checkpoint(layer, x) : layer->forward(x);
  }
  return x;
}

// torch::nn::TransformerEncoderLayer's structure and names (post-norm, ReLU), with a scope around each submodule
// so recordings carry module paths; libtorch's C++ modules have no forward hooks to do it from outside.
struct EncoderLayerImpl : torch::nn::Module {
  EncoderLayerImpl(const Config& c, std::string path)
      : path_(std::move(path)),
        self_attn(register_module("self_attn", torch::nn::MultiheadAttention(
                                                   torch::nn::MultiheadAttentionOptions(c.d_model, c.heads).dropout(0.1)))),
        linear1(register_module("linear1", torch::nn::Linear(c.d_model, c.ff))),
        dropout(register_module("dropout", torch::nn::Dropout(0.1))),
        linear2(register_module("linear2", torch::nn::Linear(c.ff, c.d_model))),
        norm1(register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})))),
        norm2(register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})))),
        dropout1(register_module("dropout1", torch::nn::Dropout(0.1))),
        dropout2(register_module("dropout2", torch::nn::Dropout(0.1))) {}

  // x: (seq, batch, d_model): libtorch's C++ attention has no batch_first.
  torch::Tensor forward(torch::Tensor x) {
    ModuleScope layer(path_);
    torch::Tensor attn;
    {
      ModuleScope s(path_ + ".self_attn");
      attn = std::get<0>(self_attn->forward(x, x, x, {}, /*need_weights=*/false));
    }
    {
      ModuleScope s(path_ + ".norm1");
      x = norm1->forward(x + dropout1->forward(attn));
    }
    torch::Tensor h;
    {
      ModuleScope s(path_ + ".linear1");
      h = dropout->forward(torch::relu(linear1->forward(x)));
    }
    {
      ModuleScope s(path_ + ".linear2");
      h = linear2->forward(h);
    }
    ModuleScope s(path_ + ".norm2");
    return norm2->forward(x + dropout2->forward(h));
  }

  std::string path_;
  torch::nn::MultiheadAttention self_attn;
  torch::nn::Linear linear1;
  torch::nn::Dropout dropout;
  torch::nn::Linear linear2;
  torch::nn::LayerNorm norm1, norm2;
  torch::nn::Dropout dropout1, dropout2;
};
TORCH_MODULE(EncoderLayer);

struct TransformerImpl : torch::nn::Module {
  explicit TransformerImpl(const Config& c) : checkpointed(c.checkpoint.begin(), c.checkpoint.end()) {
    for (int i = 0; i < c.layers; ++i) layers->push_back(EncoderLayer(c, fmt::format("layers.{}", i)));
  }
  torch::Tensor forward(torch::Tensor x) { return run_layers<EncoderLayerImpl>(layers, checkpointed, x); }
  std::set<int> checkpointed;
  torch::nn::ModuleList layers = register_module("layers", torch::nn::ModuleList());
};
TORCH_MODULE(Transformer);

// The second workload: a stack of residual MLP blocks (fc1 -> GELU -> fc2), inputs (batch * seq, d_model).
struct MlpBlockImpl : torch::nn::Module {
  MlpBlockImpl(const Config& c, std::string path)
      : path_(std::move(path)),
        norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})))),
        fc1(register_module("fc1", torch::nn::Linear(c.d_model, c.ff))),
        fc2(register_module("fc2", torch::nn::Linear(c.ff, c.d_model))) {}

  torch::Tensor forward(torch::Tensor x) {
    ModuleScope block(path_);
    torch::Tensor h;
    {
      ModuleScope s(path_ + ".fc1");
      h = torch::gelu(fc1->forward(norm->forward(x)));
    }
    ModuleScope s(path_ + ".fc2");
    return x + fc2->forward(h);
  }

  std::string path_;
  torch::nn::LayerNorm norm;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(MlpBlock);

struct MlpImpl : torch::nn::Module {
  explicit MlpImpl(const Config& c) : checkpointed(c.checkpoint.begin(), c.checkpoint.end()) {
    for (int i = 0; i < c.layers; ++i) blocks->push_back(MlpBlock(c, fmt::format("blocks.{}", i)));
  }
  torch::Tensor forward(torch::Tensor x) { return run_layers<MlpBlockImpl>(blocks, checkpointed, x); }
  std::set<int> checkpointed;
  torch::nn::ModuleList blocks = register_module("blocks", torch::nn::ModuleList());
};
TORCH_MODULE(Mlp);

torch::Dtype dtype_of(const std::string& s) {
  if (s == "bf16") return torch::kBFloat16;
  if (s == "fp16") return torch::kHalf;
  return torch::kFloat32;
}

// libtorch's errors become memrec's, without the C++ backtrace c10 appends. Allocator failures become
// OutOfMemory: CUDA's OutOfMemoryError, and the CPU allocator's, a plain c10::Error in libtorch 1.13.
template <class F>
auto torch_errors_as_memrec(F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    auto says = [&](const char* text) { return what.find(text) != what.npos; };
    if (dynamic_cast<const c10::OutOfMemoryError*>(&e) || says("out of memory") || says("can't allocate memory") ||
        says("not enough memory"))
      throw OutOfMemory(what.substr(0, what.find('\n')));
    throw Error("libtorch: " + what);
  }
}

void synchronize(const torch::Device& device) {
#if TORCH_VERSION_MAJOR >= 2
  if (device.is_cuda()) torch::cuda::synchronize();
#else
  (void)device;
#endif
}

template <class Model>
class Training final : public Workload {
 public:
  Training(const Config& c, Model model, torch::Tensor input)
      : device_(c.device == "cuda" ? torch::kCUDA : torch::kCPU), model_(std::move(model)) {
    model_->to(device_, dtype_of(c.dtype));
    input_ = input.to(device_, dtype_of(c.dtype));
    if (c.optimizer == "adam")
      optimizer_ = std::make_unique<torch::optim::Adam>(model_->parameters(), torch::optim::AdamOptions(1e-4));
    else
      optimizer_ = std::make_unique<torch::optim::SGD>(model_->parameters(), torch::optim::SGDOptions(1e-3));
  }

  double step(int index) override {
    auto t0 = std::chrono::steady_clock::now();
    torch_errors_as_memrec([&] {
      {
        ScopeGuard step(fmt::format("step {}", index), ScopeKind::step);
        forward_backward();
        MEMREC_SCOPE("optimizer", ScopeKind::phase);
        optimizer_->step();
        optimizer_->zero_grad();
      }
      synchronize(device_);
    });
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  Gradients gradients() override {
    Gradients g;
    g.loss = forward_backward().item().toDouble();
    for (const auto& p : model_->parameters())
      g.norms.push_back(p.grad().defined() ? p.grad().norm().item().toDouble() : 0);
    optimizer_->zero_grad();
    return g;
  }

  long parameters() const override {
    long n = 0;
    for (const auto& p : model_->parameters()) n += p.numel();
    return n;
  }

 private:
  // Returns the loss (detached).
  torch::Tensor forward_backward() {
    torch::Tensor loss;
    {
      MEMREC_SCOPE("forward", ScopeKind::phase);
      loss = model_->forward(input_).to(torch::kFloat32).square().mean();
    }
    MEMREC_SCOPE("backward", ScopeKind::phase);
    loss.backward();
    return loss.detach();
  }

  torch::Device device_;
  Model model_;
  torch::Tensor input_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace

Config cpu_defaults(Config c) {
  c.device = "cpu";
  c.d_model = 256;
  c.heads = 4;
  c.ff = 1024;
  c.seq = 64;
  c.batch = 8;
  c.steps = 3;
  return c;
}

bool cuda_available() { return torch::cuda::is_available(); }

void validate(const Config& c) {
  if (c.model != "transformer" && c.model != "mlp")
    throw Error(fmt::format("unknown workload '{}' (expected transformer or mlp)", c.model));
  if (c.dtype != "fp32" && c.dtype != "bf16" && c.dtype != "fp16")
    throw Error(fmt::format("unknown dtype '{}' (expected fp32, bf16 or fp16)", c.dtype));
  if (c.optimizer != "adam" && c.optimizer != "sgd")
    throw Error(fmt::format("unknown optimizer '{}' (expected adam or sgd)", c.optimizer));
  if (c.device != "cuda" && c.device != "cpu")
    throw Error(fmt::format("unknown device '{}' (expected cuda or cpu)", c.device));
  for (auto [name, v] : {std::pair{"layers", c.layers}, {"d-model", c.d_model}, {"heads", c.heads}, {"ff", c.ff},
                         {"seq", c.seq}, {"batch", c.batch}, {"steps", c.steps}})
    if (v < 1) throw Error(fmt::format("--{} must be at least 1 (got {})", name, v));
  if (c.warmup < 0) throw Error(fmt::format("--warmup must not be negative (got {})", c.warmup));
  if (c.model == "transformer" && c.d_model % c.heads != 0)
    throw Error(fmt::format("--d-model {} is not divisible by --heads {}", c.d_model, c.heads));
  if (c.device == "cuda" && !cuda_available())
    throw Error("--device cuda: no CUDA device (or this libtorch has no CUDA); use --device cpu");
  if (c.device == "cpu" && c.dtype == "fp16")
    throw Error("--dtype fp16 needs --device cuda (libtorch's CPU kernels lack half-precision matmul)");
  for (int i : c.checkpoint)
    if (i < 0 || i >= c.layers) throw Error(fmt::format("--checkpoint {}: the model has layers 0..{}", i, c.layers - 1));
}

std::vector<int> parse_layer_list(std::string_view spec, int layers) {
  std::vector<int> out;
  if (spec == "all") {
    for (int i = 0; i < layers; ++i) out.push_back(i);
    return out;
  }
  std::set<int> seen;
  for (std::string_view rest = spec;;) {
    std::string_view item = rest.substr(0, rest.find(','));
    int i = -1;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), i);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || i < 0 || i >= layers)
      throw Error(fmt::format("--checkpoint '{}': expected all or layer indices 0..{} like 0,3", spec, layers - 1));
    if (seen.insert(i).second) out.push_back(i);
    if (item.size() == rest.size()) return out;
    rest.remove_prefix(item.size() + 1);
  }
}

std::string describe(const Config& c) {
  std::string text = fmt::format("{} layers={} d_model={} heads={} ff={} seq={} batch={} dtype={} optimizer={} device={}",
                                 c.model, c.layers, c.d_model, c.heads, c.ff, c.seq, c.batch, c.dtype, c.optimizer,
                                 c.device);
  if (!c.checkpoint.empty()) text += fmt::format(" checkpoint={}", fmt::join(c.checkpoint, ","));
  return text;
}

std::unique_ptr<Workload> Workload::create(const Config& c) {
  validate(c);
  torch::manual_seed(0);
  return torch_errors_as_memrec([&]() -> std::unique_ptr<Workload> {
    if (c.model == "mlp")
      return std::make_unique<Training<Mlp>>(c, Mlp(c), torch::randn({c.seq * c.batch, c.d_model}));
    return std::make_unique<Training<Transformer>>(c, Transformer(c), torch::randn({c.seq, c.batch, c.d_model}));
  });
}

}  // namespace memrec::workloads
