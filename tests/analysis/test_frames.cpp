// Frame naming and allocation sites: what every report prints.
#include <gtest/gtest.h>

#include "memrec/sites.h"
#include "memrec/frames.h"

namespace memrec {
namespace {

TEST(Summary, ShortFunctionDropsArgumentsTemplatesAndReturnTypes) {
  EXPECT_EQ(short_function("at::native::empty_like(at::Tensor const&, std::optional<c10::ScalarType>)"),
            "at::native::empty_like");
  EXPECT_EQ(short_function("std::vector<at::Tensor, std::allocator<at::Tensor> > at::native::foreach_unary_op<float, "
                           "at::native::Sqrt>(c10::ArrayRef<at::Tensor>)"),
            "at::native::foreach_unary_op");
  EXPECT_EQ(short_function("torch::autograd::VariableType::(anonymous namespace)::mm(c10::DispatchKeySet)"),
            "torch::autograd::VariableType::mm");
  EXPECT_EQ(short_function("_init_group"), "_init_group");
  EXPECT_EQ(short_function("at::Tensor::to(c10::TensorOptions, bool, bool) const"), "at::Tensor::to");
}

TEST(Summary, AnOpsEntryPointNamesTheOpAsItsOpScopeDoes) {
  EXPECT_EQ(frame_op("at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>)"),
            "aten::empty");
  EXPECT_EQ(frame_op("at::_ops::sum_dim_IntList::redispatch(c10::DispatchKeySet, at::Tensor const&)"), "aten::sum");
  EXPECT_EQ(frame_op("at::_ops::to_dtype_layout::call(at::Tensor const&)"), "aten::to");
  EXPECT_EQ(frame_op("at::_ops::div_Tensor_mode::call(at::Tensor const&)"), "aten::div");
  EXPECT_EQ(frame_op("at::_ops::add__Tensor::call(at::Tensor&, at::Tensor const&)"), "aten::add_");
  EXPECT_EQ(frame_op("at::Tensor at::_ops::mm::call(at::Tensor const&, at::Tensor const&)"), "aten::mm");
  EXPECT_EQ(frame_op("at::_ops::native_layer_norm_backward::redispatch(c10::DispatchKeySet)"),
            "aten::native_layer_norm_backward");
  EXPECT_EQ(frame_op("at::_ops::_log_softmax::call(at::Tensor const&, long, bool)"), "aten::_log_softmax");
  EXPECT_EQ(frame_op("at::native::mm(at::Tensor const&, at::Tensor const&)"), "");
  EXPECT_EQ(frame_op("c10::impl::wrap_kernel_functor_unboxed_<at::_ops::mm::call>::call()"), "");
}

TEST(Summary, SiteWithoutUserCodeIsTheOpAndTorchsFunction) {
  Snapshot s;
  auto frame = [&](const char* fn, const char* file, uint32_t line) {
    return s.frames.intern(Frame{.function = s.strings.intern(fn), .file = s.strings.intern(file), .line = line});
  };
  std::vector<uint32_t> frames = {
      frame("torch::unwind::unwind()", "??", 0),
      frame("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long)", "", 0),
      frame("at::detail::empty_strided_generic(c10::ArrayRef<long>)", "??", 0),
      frame("at::native::zeros_like(at::Tensor const&)", "??", 0),
      frame("torch::autograd::THPVariable_zeros_like(_object*)", "python_torch_functions_0.cpp", 0),
      frame("_init_group", "/venv/lib/python3.12/site-packages/torch/optim/adam.py", 182),
      frame("step", "/venv/lib/python3.12/site-packages/torch/optim/adam.py", 238)};
  uint32_t stack = s.stacks.intern(frames);
  EXPECT_EQ(allocation_site(s, stack), "at::native::zeros_like in _init_group (adam.py:182)");
  EXPECT_EQ(allocation_site(s, 0), "<no stack>");
  EXPECT_EQ(format_frame(s, frames[3]), "at::native::zeros_like(at::Tensor const&)");
  EXPECT_EQ(format_frame(s, frames[5]), "_init_group (/venv/lib/python3.12/site-packages/torch/optim/adam.py:182)");
}

}  // namespace
}  // namespace memrec
