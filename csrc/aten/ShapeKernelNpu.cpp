// ShapeKernelNpu.cpp - cat (stack reaches it), where and masked_fill_ on device ops.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <c10/core/WrapDimMinimal.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  std::vector<at::Tensor> inputs;
  for (const at::Tensor& t : tensors) inputs.push_back(t);
  // PyTorch skips legacy empty 1-D inputs ([0]) whatever their dim.
  const at::Tensor* reference = nullptr;
  bool supported = !inputs.empty() && deviceOpsSupport({out});
  for (const at::Tensor& t : inputs) {
    supported &= deviceOpsSupport({t}) && t.device() == out.device();
    if (!(t.dim() == 1 && t.numel() == 0) && reference == nullptr) reference = &t;
  }
  if (!supported || reference == nullptr) {
    runGeneric("aten::cat", "out", inputs, dim, out);  // PyTorch's errors and corner cases
    return out;
  }
  at::assert_no_internal_overlap(out);
  for (const at::Tensor& t : inputs) at::assert_no_overlap(out, t);
  const int64_t d = c10::maybe_wrap_dim(dim, reference->dim());
  std::vector<int64_t> shape = reference->sizes().vec();
  shape[static_cast<size_t>(d)] = 0;
  for (const at::Tensor& t : inputs) {
    if (t.dim() == 1 && t.numel() == 0) continue;
    bool same = t.dim() == reference->dim();
    for (int64_t i = 0; same && i < t.dim(); ++i) same = i == d || t.size(i) == reference->size(i);
    if (!same) {
      runGeneric("aten::cat", "out", inputs, dim, out);  // raises PyTorch's size-mismatch error
      return out;
    }
    shape[static_cast<size_t>(d)] += t.size(d);
  }
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, shape);
  if (out.numel() > 0) EXEC_NPU_CMD(aclnnCat, at::TensorList(inputs), d, out);
  return out;
}

at::Tensor& where_self_out(const at::Tensor& condition, const at::Tensor& self,
                           const at::Tensor& other, at::Tensor& out) {
  const auto device = out.device();
  const auto placed = [&](const at::Tensor& t) { return t.device() == device || (t.is_cpu() && t.dim() == 0); };
  const bool supported = deviceOpsSupport({condition, self, other, out}) &&
                         condition.scalar_type() == at::kBool && condition.device() == device &&
                         placed(self) && placed(other) &&
                         at::result_type(self, other) == out.scalar_type();
  if (!supported) {
    runGeneric("aten::where", "self_out", condition, self, other, out);
    return out;
  }
  const auto shape = at::infer_size(at::infer_size(condition.sizes(), self.sizes()), other.sizes());
  c10::DeviceGuard guard(device);
  at::native::resize_output(out, shape);
  EXEC_NPU_CMD(aclnnSWhere, condition, *deviceOperand(self, device, "aten::where"),
               *deviceOperand(other, device, "aten::where"), out);
  return out;
}

at::Tensor where_self(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const at::Device device = condition.device().type() == c10::DeviceType::PrivateUse1
                                ? condition.device()
                                : (self.device().type() == c10::DeviceType::PrivateUse1 ? self.device()
                                                                                        : other.device());
  at::Tensor out = at::empty({0}, self.options().device(device).dtype(at::result_type(self, other)));
  return where_self_out(condition, self, other, out);
}

namespace {
// An in-place fill cannot grow self: the mask must broadcast to self's own shape.
void checkMaskFitsSelf(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(at::infer_size(self.sizes(), mask.sizes()) == self.sizes().vec(),
              "masked_fill_: mask of shape ", mask.sizes(), " does not broadcast to self ",
              self.sizes(), " in place");
}
}  // namespace

at::Tensor& masked_fill_scalar_(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  if (!deviceOpsSupport({self, mask}) || mask.device() != self.device() ||
      mask.scalar_type() != at::kBool || value.isComplex()) {
    runGeneric("aten::masked_fill_", "Scalar", self, mask, value);
    return self;
  }
  checkMaskFitsSelf(self, mask);
  c10::DeviceGuard guard(self.device());
  if (self.numel() > 0) EXEC_NPU_CMD(aclnnMaskedFillScalar, self, mask, value);
  return self;
}

at::Tensor& masked_fill_tensor_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got ",
              "tensor with ", value.dim(), " dimension(s).");
  if (value.is_cpu()) return masked_fill_scalar_(self, mask, value.item());
  if (!deviceOpsSupport({self, mask, value}) || mask.device() != self.device() ||
      value.device() != self.device() || mask.scalar_type() != at::kBool) {
    runGeneric("aten::masked_fill_", "Tensor", self, mask, value);
    return self;
  }
  checkMaskFitsSelf(self, mask);
  c10::DeviceGuard guard(self.device());
  if (self.numel() > 0) EXEC_NPU_CMD(aclnnMaskedFillTensor, self, mask, value);
  return self;
}

}  // namespace at_npu::native
