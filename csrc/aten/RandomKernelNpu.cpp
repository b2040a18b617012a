// RandomKernelNpu.cpp - uniform_, normal_, bernoulli_(p) and arange on device ops. Random fills take
// one seed per launch from the npu generator (or the given one), so they are reproducible under
// torch.npu.manual_seed however late the stream runs them.
#include <ATen/native/Resize.h>

#include <cmath>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/core/NPUGenerator.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool floatingOnDevice(const at::Tensor& self) {
  return deviceOpsSupport({self}) && at::isFloatingType(self.scalar_type());
}

int64_t seedFor(const std::optional<at::Generator>& gen, const at::Tensor& self) {
  return static_cast<int64_t>(c10_npu::launchSeedFor(gen, self.device().index()));
}

}  // namespace

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  if (!floatingOnDevice(self)) {
    runGeneric("aten::uniform_", "", self, from, to, gen);
    return self;
  }
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  if (self.numel() == 0) return self;
  c10::DeviceGuard guard(self.device());
  EXEC_NPU_CMD(aclnnInplaceUniform, self, from, to, seedFor(gen, self), int64_t{0});
  return self;
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  if (!floatingOnDevice(self)) {
    runGeneric("aten::normal_", "", self, mean, std, gen);
    return self;
  }
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.numel() == 0) return self;
  c10::DeviceGuard guard(self.device());
  EXEC_NPU_CMD(aclnnInplaceNormal, self, mean, std, seedFor(gen, self), int64_t{0});
  return self;
}

at::Tensor& bernoulli_float_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  if (!deviceOpsSupport({self})) {
    runGeneric("aten::bernoulli_", "float", self, p, gen);
    return self;
  }
  TORCH_CHECK(p >= 0 && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if (self.numel() == 0) return self;
  c10::DeviceGuard guard(self.device());
  EXEC_NPU_CMD(aclnnInplaceBernoulli, self, p, seedFor(gen, self), int64_t{0});
  return self;
}

at::Tensor& arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step,
                       at::Tensor& out) {
  const bool integral_out = at::isIntegralType(out.scalar_type(), /*includeBool=*/false);
  const bool integral_args = !start.isFloatingPoint() && !end.isFloatingPoint() &&
                             !step.isFloatingPoint();
  const bool supported = deviceOpsSupport({out}) && out.scalar_type() != at::kBool &&
                         !start.isComplex() && !end.isComplex() && !step.isComplex() &&
                         (!integral_out || integral_args);
  if (!supported) {
    runGeneric("aten::arange", "start_out", start, end, step, out);
    return out;
  }
  int64_t size = 0;
  if (integral_out) {
    const int64_t s = start.toLong(), e = end.toLong(), st = step.toLong();
    TORCH_CHECK(st != 0, "step must be nonzero");
    TORCH_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
                "upper bound and lower bound inconsistent with step sign");
    const int64_t sign = st > 0 ? 1 : -1;
    size = (e - s + st - sign) / st;
  } else {
    const double s = start.toDouble(), e = end.toDouble(), st = step.toDouble();
    TORCH_CHECK(st != 0, "step must be nonzero");
    TORCH_CHECK(std::isfinite(s) && std::isfinite(e), "unsupported range: ", s, " -> ", e);
    TORCH_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
                "upper bound and lower bound inconsistent with step sign");
    size = static_cast<int64_t>(std::ceil((e - s) / st));
  }
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, {size});
  if (size > 0) EXEC_NPU_CMD(aclnnArange, start, end, step, out);
  return out;
}

}  // namespace at_npu::native
