// SimExponentialKernelNpu.cpp - npu_sim_exponential_: fills a tensor with exponential samples of rate
// `lambd` on the aclnnSimThreadExponential device op, seeded from the npu generator at launch (so
// torch.npu.manual_seed reproduces it however late the stream runs it).
#include <cmath>

#include "csrc/core/NPUGenerator.h"
#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

at::Tensor& npu_sim_exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> generator) {
  TORCH_CHECK_VALUE(lambd > 0.0, "npu_sim_exponential_ expects lambd > 0.0, but found lambd=", lambd);
  TORCH_CHECK_TYPE(at::isFloatingType(self.scalar_type()), "npu_sim_exponential_: self must be floating point, got ",
                   self.scalar_type());
  if (self.numel() == 0) return self;
  const int64_t count = self.numel();
  const int64_t seed = static_cast<int64_t>(c10_npu::launchSeedFor(generator, self.device().index()));
  const int64_t offset = 0;
  EXEC_NPU_CMD(aclnnSimThreadExponential, self, count, lambd, seed, offset);
  return self;
}

at::Tensor& npu_sim_exponential__meta(at::Tensor& self, double lambd, std::optional<at::Generator> generator) {
  TORCH_CHECK_VALUE(lambd > 0.0, "npu_sim_exponential_ expects lambd > 0.0, but found lambd=", lambd);
  return self;
}

}  // namespace at_npu::native
