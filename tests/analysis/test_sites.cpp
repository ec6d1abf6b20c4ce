// The site rule (memrec/sites.h, docs/attribution.md): the first frame of the user's code, on stacks made of each
// kind of internal frame and on PyTorch 2.11's own snapshots and a recorded libtorch workload.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "memrec/load.h"
#include "memrec/pickle.h"
#include "memrec/sites.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

using FrameSpec = std::tuple<const char*, const char*, uint32_t>;  // function, file, line

uint32_t stack_of(Snapshot& s, std::initializer_list<FrameSpec> frames) {
  std::vector<uint32_t> ids;
  for (const auto& [fn, file, line] : frames)
    ids.push_back(s.frames.intern(Frame{.function = s.strings.intern(fn), .file = s.strings.intern(file), .line = line}));
  return s.stacks.intern(ids);
}

std::string site_of(std::initializer_list<FrameSpec> frames) {
  Snapshot s;
  return allocation_site(s, stack_of(s, frames));
}

// A CUDA allocation from a Python program with stacks="all", shortened from torch_2layer_all.pickle: the
// unwinder, the allocator, the tensor factory, the dispatcher, the Python binding, CPython, torch's module code.
TEST(Sites, PythonProgramLeadsWithTheUsersLine) {
  EXPECT_EQ(site_of({{"torch::unwind::unwind()", "??", 0},
                     {"torch::CapturedTraceback::gather(bool, bool, bool)", "??", 0},
                     {"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long)", "", 0},
                     {"at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)", "??", 0},
                     {"at::(anonymous namespace)::wrapper_CUDA_add_Tensor(at::Tensor const&)", "RegisterCUDA_0.cpp", 0},
                     {"c10::impl::wrap_kernel_functor_unboxed_<F, at::Tensor>::call(c10::OperatorKernel*)", "", 0},
                     {"at::_ops::add_Tensor::redispatch(c10::DispatchKeySet, at::Tensor const&)", "??", 0},
                     {"torch::autograd::VariableType::(anonymous namespace)::add_Tensor(c10::DispatchKeySet)", "", 0},
                     {"at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&)", "??", 0},
                     {"_object* torch::autograd::TypeError_to_NotImplemented_<&THPVariable_add>(_object*)", "", 0},
                     {"PyNumber_Add", "??", 0},
                     {"forward", "/opt/venv/lib/python3.12/site-packages/torch/nn/modules/transformer.py", 953},
                     {"_PyEval_EvalFrameDefault", "??", 0},
                     {"_call_impl", "/opt/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", 1790},
                     {"forward", "/usr/lib/python3/dist-packages/torch/nn/modules/container.py", 217},
                     {"step", "/home/user/train.py", 12},
                     {"_run_module_as_main", "/usr/lib/python3.11/runpy.py", 198},
                     {"Py_BytesMain", "??", 0},
                     {"__libc_start_main", "??", 0},
                     {"_start", "??", 0}}),
            "step (train.py:12) via aten::add_Tensor");
}

// A libtorch C++ program (memrec run's transformer): torch's inline headers, std:: thunks and libtorch's
// unsymbolized frames are passed over; the program's own namespace is user code, memrec's recorder is not.
TEST(Sites, CppProgramLeadsWithItsOwnFunction) {
  EXPECT_EQ(site_of({{"memrec::detail::CpuAllocator::allocate(unsigned long) const", "../recorder/src/cpu_allocator.cpp", 80},
                     {"at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*)", "", 0},
                     {"libtorch_cpu.so.1.13+0x1e09877", "", 0},
                     {"at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>)", "", 0},
                     {"at::native::randn(c10::ArrayRef<long>)", "", 0},
                     {"at::_ops::randn::call(c10::ArrayRef<c10::SymInt>)", "", 0},
                     {"at::randn(c10::ArrayRef<long>, c10::TensorOptions)", "/usr/include/ATen/ops/randn.h", 27},
                     {"ModuleHolder<const Config&>", "/usr/include/torch/csrc/api/include/torch/nn/pimpl.h", 65},
                     {"std::function<void ()>::operator()() const", "/usr/include/c++/12/bits/std_function.h", 591},
                     {"memrec::workloads::Workload::create(memrec::workloads::Config const&)", "../workloads/src/workloads.cpp", 353},
                     {"main", "../cli/run_main.cpp", 10}}),
            "memrec::workloads::Workload::create (workloads.cpp:353) via aten::randn");
}

// A device allocation outside the caching allocator, its stack taken in CUPTI's callback (unsymbolized libraries, as
// the GPU machine's are): CUPTI, the driver, ctypes' libffi and the interpreter executable are passed over, and the
// callback's own frame names nothing.
TEST(Sites, DeviceAllocationStacksPassOverCuptiAndTheFfi) {
  EXPECT_EQ(site_of({{"libcupti.so.13+0x7d163", "", 0},
                     {"libcuda.so.1+0x2b1f05", "", 0},
                     {"libffi.so.8+0x7b16", "", 0},
                     {"python3.12+0x1a2b3c", "", 0},
                     {"raw_alloc", "/home/user/ext.py", 31},
                     {"python3.12+0x4d5e6f", "", 0}}),
            "raw_alloc (ext.py:31) via libcuda.so.1+0x2b1f05");
  EXPECT_EQ(site_of({{"libcupti.so.13+0x7d163", "", 0}, {"libnccl.so.2+0x9a0c1", "", 0}}), "libnccl.so.2+0x9a0c1")
      << "no user frame: the first frame past the callback";
}

// Backward run by the calling thread (libtorch on CPU): the user's backward() call, the op and its autograd node.
TEST(Sites, BackwardOnTheCallingThreadNamesTheNode) {
  EXPECT_EQ(site_of({{"at::detail::empty_cpu(c10::ArrayRef<long>)", "", 0},
                     {"at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", "", 0},
                     {"torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)", "", 0},
                     {"torch::autograd::Engine::execute(std::vector<torch::autograd::Edge> const&)", "", 0},
                     {"at::Tensor::backward(at::Tensor const&) const", "/usr/include/ATen/core/TensorBody.h", 436},
                     {"memrec::workloads::Training::forward_backward()", "../workloads/src/workloads.cpp", 271}}),
            "memrec::workloads::Training::forward_backward (workloads.cpp:271) via aten::mm in MmBackward0");
}

// Autograd's thread has no frame of the user's: the site is the op, never the allocator or the unwinder. The
// thread's entry in libstdc++ is named as Ubuntu's symbols name it, or as Debian's (misnamed) do.
TEST(Sites, AutogradThreadFallsBackToTheOp) {
  Snapshot s;
  uint32_t stack = 0;
  for (const char* entry : {"execute_native_thread_routine", "std::error_code::default_error_condition() const"}) {
    stack = stack_of(s, {{"torch::unwind::unwind()", "??", 0},
                         {"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long)", "", 0},
                         {"at::detail::empty_cuda(c10::ArrayRef<long>)", "??", 0},
                         {"at::meta::structured_mm::meta(at::Tensor const&, at::Tensor const&)", "??", 0},
                         {"at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", "??", 0},
                         {"torch::autograd::generated::AddmmBackward0::apply(std::vector<at::Tensor>&&)", "??", 0},
                         {"torch::autograd::Engine::thread_main(std::shared_ptr<GraphTask> const&)", "??", 0},
                         {entry, "??", 0},
                         {"start_thread", "??", 0},
                         {"__clone", "??", 0}});
    EXPECT_EQ(site_label(s, stack), "aten::mm") << entry;
    EXPECT_EQ(allocation_site(s, stack), "aten::mm in AddmmBackward0") << entry;
  }
  EXPECT_EQ(site_frame(s, stack), s.stacks[stack][4]);
  EXPECT_EQ(site_label(s, 0), "<no stack>");
  EXPECT_EQ(site_frame(s, 0), kNoFrame);
}

// Stacks with only Python frames (stacks="python"): torch's files and the standard library are internal, other
// installed packages are the user's (a model library's code is where its memory goes).
TEST(Sites, PythonOnlyStacks) {
  EXPECT_EQ(site_of({{"linear", "/venv/lib/python3.12/site-packages/torch/nn/functional.py", 100},
                     {"forward", "/venv/lib/python3.12/site-packages/transformers/models/gpt2/modeling_gpt2.py", 240},
                     {"_call_impl", "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", 1790},
                     {"main", "/home/me/train.py", 40}}),
            "forward (modeling_gpt2.py:240) via linear");
  EXPECT_EQ(site_of({{"__init__", "/usr/lib/python3.11/threading.py", 900},
                     {"<module>", "<frozen runpy>", 88},
                     {"<module>", "/home/me/train.py", 3}}),
            "<module> (train.py:3) via __init__");
  EXPECT_EQ(site_of({{"step", "/home/me/train.py", 12}}), "step (train.py:12)");
}

// A name that only looks like an internal one stays the user's: prefixes need their namespace or their shape.
TEST(Sites, LookAlikesAreUserCode) {
  Snapshot s;
  for (const char* name : {"clone_model()", "_start_training(int)", "PyTorchTrainer::run()", "Python"}) {
    uint32_t stack = stack_of(s, {{name, "/home/me/app.cpp", 7}});
    EXPECT_TRUE(is_user_frame(s, s.stacks[stack][0])) << name;
  }
}

TEST(Sites, UserPatternsAddToTheInternalList) {
  Snapshot s;
  uint32_t stack = stack_of(s, {{"at::_ops::mm::call(at::Tensor const&)", "", 0},
                                {"zz_sites_test::Pool::grab(unsigned long)", "/home/me/pool.cpp", 3},
                                {"forward", "/venv/lib/python3.12/site-packages/zz_sites_lib/layer.py", 9},
                                {"step", "/home/me/train.py", 12}});
  EXPECT_EQ(site_label(s, stack), "zz_sites_test::Pool::grab (pool.cpp:3)");
  add_internal_patterns(std::vector<std::string>{"zz_sites_test::", "zz_sites_lib/"});
  EXPECT_EQ(site_label(s, stack), "step (train.py:12)");
  auto marked = marked_frames(s, stack);
  ASSERT_EQ(marked.size(), 4u);
  EXPECT_FALSE(marked[1].user);
  EXPECT_FALSE(marked[2].user);
  EXPECT_TRUE(marked[3].user && marked[3].site);
}

bool is_allocator_frame(const Snapshot& s, uint32_t f) {
  const std::string& name = s.strings[s.frames[f].function];
  return name.find("CachingAllocator") != std::string::npos || name.find("unwind") != std::string::npos ||
         name.find("CapturedTraceback") != std::string::npos || name.find("empty_") != std::string::npos;
}

// Every allocation of PyTorch's snapshot of a 2-layer training loop: where the stack holds a frame of the
// program (the only file outside torch and CPython is the example script), the site is the first of them;
// where it holds none (autograd's thread), an aten op and never the allocator.
void check_pickle_sites(const std::string& name) {
  Snapshot s = load_snapshot(test::data(name), nullptr);
  size_t user_sites = 0, op_sites = 0;
  for (const Event& e : s.events) {
    if (e.action != Action::alloc || !e.stack) continue;
    auto frames = s.stacks[e.stack];
    auto script = std::find_if(frames.begin(), frames.end(), [&](uint32_t f) {
      return s.strings[s.frames[f].file].starts_with("/home/user/examples/");
    });
    uint32_t site = site_frame(s, e.stack);
    if (script != frames.end()) {
      EXPECT_EQ(site, *script) << allocation_site(s, e.stack);
      ++user_sites;
    } else {
      ASSERT_NE(site, kNoFrame);
      EXPECT_FALSE(is_allocator_frame(s, site)) << allocation_site(s, e.stack);
      EXPECT_TRUE(site_label(s, e.stack).starts_with("aten::")) << allocation_site(s, e.stack);
      ++op_sites;
    }
  }
  EXPECT_GT(user_sites, 100u);
  if (name == "torch_2layer_all.pickle") EXPECT_GT(op_sites, 50u);  // the backward pass
}

TEST(Sites, PyTorchSnapshotStacksAll) { check_pickle_sites("torch_2layer_all.pickle"); }
TEST(Sites, PyTorchSnapshotStacksPython) { check_pickle_sites("torch_2layer_python.pickle"); }

// `memrec run transformer --layers 2 --device cpu` (libtorch 1.13): every allocation made under the workload's
// own code has a site in workloads.cpp; none is a libtorch address, a torch header or the recorder.
TEST(Sites, RecordedWorkload) {
  Snapshot s = load_snapshot(test::data("transformer_2layer_cpu.memrec"), nullptr);
  size_t in_workload = 0;
  for (const Event& e : s.events) {
    if (e.action != Action::alloc || !e.stack) continue;
    auto frames = s.stacks[e.stack];
    bool has_workload = std::any_of(frames.begin(), frames.end(), [&](uint32_t f) {
      return s.strings[s.frames[f].file].ends_with("workloads.cpp");
    });
    if (!has_workload) continue;
    ++in_workload;
    uint32_t site = site_frame(s, e.stack);
    ASSERT_NE(site, kNoFrame);
    EXPECT_TRUE(s.strings[s.frames[site].file].ends_with("workloads.cpp")) << allocation_site(s, e.stack);
  }
  EXPECT_GT(in_workload, 1000u);
}

}  // namespace
}  // namespace memrec
