// GeluKernelNpu.cpp - npu_gelu (torch_npu.npu_gelu): GELU, exact ("none") or tanh-approximated ("tanh").
// Built from ATen ops, so it runs where they run: the tanh form entirely on named device ops (mul, add,
// tanh), erf through the generic executor. On meta tensors the same code is the Meta kernel.
#include <ATen/ops/erf.h>
#include <ATen/ops/tanh.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/CustomOpUtils.h"

namespace at_npu::native {

at::Tensor npu_gelu(const at::Tensor& self, c10::string_view approximate) {
  TORCH_CHECK_VALUE(approximate == "none" || approximate == "tanh",
                    "npu_gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  if (approximate == "tanh") {
    constexpr double kSqrt2OverPi = 0.7978845608028654;
    at::Tensor inner = (self + self * self * self * 0.044715) * kSqrt2OverPi;
    return self * 0.5 * (at::tanh(inner) + 1);
  }
  constexpr double kSqrtHalf = 0.7071067811865476;
  return self * 0.5 * (at::erf(self * kSqrtHalf) + 1);
}

}  // namespace at_npu::native
