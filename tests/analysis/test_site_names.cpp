// Function names as sites print them (short_function), on demangled names taken from real PyTorch stacks.
#include <gtest/gtest.h>

#include <string>

#include "memrec/attribution.h"
#include "memrec/pickle.h"
#include "memrec/sites.h"
#include "memrec/frames.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

TEST(SiteNames, CloneSuffixesAreDropped) {
  // From tests/data/torch_2layer_all.pickle.
  EXPECT_EQ(short_function("at::TensorBase::contiguous(c10::MemoryFormat) const [clone .constprop.0]"),
            "at::TensorBase::contiguous");
  EXPECT_EQ(short_function("at::empty(c10::ArrayRef<long>, c10::TensorOptions, std::optional<c10::MemoryFormat>) "
                           "[clone .constprop.0]"),
            "at::empty");
  EXPECT_EQ(short_function("c10::TensorImpl::~TensorImpl() [clone .localalias]"), "c10::TensorImpl::~TensorImpl");
  EXPECT_EQ(short_function("at::native::structured_sum_out::impl(at::Tensor const&, c10::OptionalArrayRef<long>, bool, "
                           "std::optional<c10::ScalarType>, at::Tensor const&) [clone .isra.0]"),
            "at::native::structured_sum_out::impl");
  EXPECT_EQ(short_function("void at::native::foo<float>(at::Tensor&) [clone .constprop.0] [clone .cold]"),
            "at::native::foo");
  // Symbols the demangler leaves alone (C functions) keep GCC's suffix in the name itself.
  EXPECT_EQ(short_function("_PyEval_EvalFrameDefault.cold"), "_PyEval_EvalFrameDefault");
  EXPECT_EQ(short_function("gemm_kernel.isra.0"), "gemm_kernel");
  EXPECT_EQ(short_function("copy_impl.constprop.0.isra.0"), "copy_impl");
  EXPECT_EQ(short_function("torch.nn.functional.linear"), "torch.nn.functional.linear");
}

TEST(SiteNames, LambdasNameTheirEnclosingFunction) {
  EXPECT_EQ(short_function("at::native::(anonymous namespace)::add_kernel(at::TensorIteratorBase&, c10::Scalar const&)::"
                           "{lambda(at::TensorIterator&)#1}::operator()(at::TensorIterator&) const"),
            "at::native::add_kernel::{lambda#1}");
  // From tests/data/torch_2layer_all.pickle: auto return type, templated operator() of a generic lambda, a clone.
  EXPECT_EQ(short_function(
                "auto at::native::_efficient_attention_forward(at::Tensor const&, at::Tensor const&, at::Tensor const&, "
                "std::optional<at::Tensor> const&, std::optional<long>, double, long, bool)::{lambda(auto:1, auto:2)#1}"
                "::operator()<PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80, true, 64, 64, 64, true, "
                "true>, void (*)(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80, true, 64, 64, 64, "
                "true, true>::Params)>(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80, true, 64, 64, "
                "64, true, true>, void (*)(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80, true, 64, "
                "64, 64, true, true>::Params)) const [clone .constprop.0]"),
            "at::native::_efficient_attention_forward::{lambda#1}");
  EXPECT_EQ(short_function("void dispatch_cutlassB<float, at::native::_efficient_attention_backward(at::Tensor const&, "
                           "long)::{lambda(auto:1, auto:2)#1}>(at::native::_efficient_attention_backward(at::Tensor "
                           "const&, long)::{lambda(auto:1, auto:2)#1}, int)"),
            "dispatch_cutlassB");
  EXPECT_EQ(short_function("foo()::{unnamed type#1}::bar(int)"), "foo::{unnamed type#1}::bar");
}

TEST(SiteNames, OperatorsStayWhole) {
  EXPECT_EQ(short_function("torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
            "torch::autograd::Node::operator()");
  EXPECT_EQ(short_function("std::ostream& c10::operator<<(std::ostream&, c10::Device const&)"), "c10::operator<<");
  EXPECT_EQ(short_function("at::Tensor at::operator-(at::Tensor const&, at::Tensor const&)"), "at::operator-");
  EXPECT_EQ(short_function("bool c10::operator<(c10::Device const&, c10::Device const&)"), "c10::operator<");
  EXPECT_EQ(short_function("at::Tensor::operator[](long) const"), "at::Tensor::operator[]");
  EXPECT_EQ(short_function("c10::intrusive_ptr<c10::TensorImpl>::operator->() const"),
            "c10::intrusive_ptr::operator->");
  EXPECT_EQ(short_function("operator new(unsigned long)"), "operator new");
  EXPECT_EQ(short_function("bool c10::operator< <c10::Device>(c10::Device const&, c10::Device const&)"), "c10::operator<");
  EXPECT_EQ(short_function("<lambda>"), "<lambda>");  // a Python lambda
  EXPECT_EQ(short_function("c10::Scalar::operator bool() const"), "c10::Scalar::operator bool");
  EXPECT_EQ(short_function("std::vector<at::Tensor, std::allocator<at::Tensor> > at::native::foreach_unary_op<float, "
                           "at::native::Sqrt>(c10::ArrayRef<at::Tensor>)"),
            "at::native::foreach_unary_op");
}

// Every site of a real CUDA recording, as stats, info and report print them, and every frame as the viewer's
// tree, hover and inspector label it: no clone suffix, no lone "operator", nothing cut inside brackets.
TEST(SiteNames, RealSitesAreWholeNames) {
  Snapshot s = import_pickle_file(test::data("torch_2layer_all.pickle"));
  auto expect_clean = [](const std::string& text) {
    for (const char* bad : {"[clone", ".isra", ".constprop", ".cold", "]", "operator <", "(anonymous"})
      EXPECT_EQ(text.find(bad), std::string::npos) << text;
    EXPECT_FALSE(text.starts_with('.')) << text;
    EXPECT_FALSE(text.ends_with("operator")) << text;
  };
  size_t lambdas = 0;
  for (uint32_t stack = 1; stack < s.stacks.size(); ++stack) expect_clean(allocation_site(s, stack));
  for (uint32_t frame = 0; frame < s.frames.size(); ++frame) {
    std::string label = frame_label(s, frame);
    expect_clean(label);
    lambdas += label.find("{lambda#1}") != std::string::npos;
  }
  EXPECT_GT(lambdas, 0u);
}

}  // namespace
}  // namespace memrec
