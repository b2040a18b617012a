// DropoutKernelNpu.cpp - native_dropout drawing its mask from the npu generator (the op has no
// Generator argument, so the generic CPU fallback would use the CPU default generator).
#include "csrc/aten/NpuNativeFunctions.h"

#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones_like.h>

#include "csrc/core/NPUGenerator.h"

namespace at_npu::native {

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  at::Tensor host = input.cpu();
  at::Tensor out, mask;
  if (input.numel() > 0 && train.value_or(true)) {
    const double keep = 1.0 - p;
    const double scale = keep == 0 ? 0.0 : 1.0 / keep;
    at::Tensor draw = at::empty_like(host);
    draw.bernoulli_(keep, c10_npu::hostEngineFor(std::nullopt, input.device().index()));
    out = host.mul(draw).mul_(scale);
    mask = draw.to(at::kBool);
  } else {
    out = host.clone();
    mask = at::ones_like(host, host.options().dtype(at::kBool));
  }
  return {out.to(input.device()), mask.to(input.device())};
}

}  // namespace at_npu::native
