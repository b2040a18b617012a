// AutocastNpu.cpp - torch.autocast("npu") op policies (dispatch key AutocastPrivateUse1).
//
// The op lists are PyTorch's shared ones (AT_FORALL_* in ATen/autocast_mode.h), so npu casts like
// CUDA does: matmul/conv-like ops run in the autocast dtype, numerically sensitive ops (reductions,
// exp/log/pow, norms, losses) in float32, and ops mixing input dtypes run in the widest one.
// Ops without a policy pass through in whatever dtype their inputs have.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include <ATen/ops/batch_norm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/index_copy.h>
#include <ATen/ops/instance_norm.h>
#include <ATen/ops/stack.h>

namespace at_npu::native {
namespace {

// Same message CUDA gives: binary_cross_entropy on fp16 probabilities is unsafe under autocast.
at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&,
                                       const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast "
              "on npu: the sigmoid before them may produce float16 values that round to 0 or 1.\n"
              "Use torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss "
              "instead (they fuse the sigmoid and are safe to autocast).");
}

}  // namespace

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // Lower precision (the autocast dtype): convolutions, matmuls, linear, prelu, RNN cells, attention.
#define NPU_KERNEL_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(NPU_KERNEL_LOWER_PRECISION)
#undef NPU_KERNEL_LOWER_PRECISION

  // float32: pointwise ops with a wide range (exp, log, pow, ...), norms, losses, upsampling.
#define NPU_KERNEL_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(NPU_KERNEL_FP32)
  // Not in PyTorch's shared list (CUDA relies on cuDNN's mixed-precision batch norm); the seed's O1
  // runs batch norm in float32, and so do we.
  NPU_KERNEL_FP32(batch_norm)
  NPU_KERNEL_FP32(instance_norm)
  NPU_KERNEL_FP32(cross_entropy_loss)
#undef NPU_KERNEL_FP32

  // float32 reductions that take an optional output dtype (softmax, log_softmax, sum, cumsum, ...).
#define NPU_KERNEL_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(NPU_KERNEL_FP32_SET_OPT_DTYPE)
#undef NPU_KERNEL_FP32_SET_OPT_DTYPE

  // norm(): redispatched with an appended dtype=float32 (the shared list names types unqualified).
  using at::IntArrayRef;
  using at::Scalar;
  using at::ScalarType;
  using at::Tensor;
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)

  // Promote: ops combining several inputs run in the widest floating dtype among them.
#define NPU_KERNEL_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(NPU_KERNEL_PROMOTE)
  NPU_KERNEL_PROMOTE(cat)
  NPU_KERNEL_PROMOTE(stack)
  NPU_KERNEL_PROMOTE(index_copy)
#undef NPU_KERNEL_PROMOTE

  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace at_npu::native
