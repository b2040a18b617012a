// IntIndexKernelNpu.cpp - int32 class indices where PyTorch's kernels insist on int64, as torch_npu
// takes them (NPU ops index with int32 or int64): one_hot, and nll_loss / cross_entropy targets.
// Registered for AutogradPrivateUse1 in front of PyTorch's composite implementations, which then
// run with int64 indices (so gradients flow as usual).
#include <ATen/ops/_to_copy.h>
#include <ATen/ops/nll_loss_nd_native.h>
#include <ATen/ops/one_hot_native.h>
#include <torch/library.h>

namespace at_npu::native {
namespace {

at::Tensor asInt64(const at::Tensor& indices) {
  return indices.scalar_type() == at::kInt ? at::_to_copy(indices, at::kLong) : indices;
}

// int32 indices give an int32 one-hot tensor, as torch_npu returns it.
at::Tensor oneHot(const at::Tensor& self, int64_t num_classes) {
  at::Tensor out = at::native::one_hot(asInt64(self), num_classes);
  return self.scalar_type() == at::kInt ? at::_to_copy(out, at::kInt) : out;
}

at::Tensor nllLossNd(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                     int64_t reduction, c10::SymInt ignore_index) {
  return at::native::nll_loss_nd_symint(self, asInt64(target), weight, reduction, std::move(ignore_index));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("one_hot", TORCH_FN(oneHot));
  m.impl("nll_loss_nd", TORCH_FN(nllLossNd));
}

}  // namespace at_npu::native
