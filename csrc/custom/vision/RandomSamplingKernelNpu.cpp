// RandomSamplingKernelNpu.cpp - torch_npu's seeded detection samplers: npu_random_choice_with_mask (a random
// choice of the true elements' indices, on aclnnRandomChoiceWithMask) and npu_sub_sample (Mask R-CNN's balanced
// positive / negative label sampling, on aclnnSubSample). Seeds are drawn from the npu generator when the launch
// is made, so torch.npu.manual_seed reproduces them however late the stream runs the op.
#include <ATen/ops/empty.h>

#include <tuple>
#include <utility>

#include "csrc/core/NPUGenerator.h"
#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

// (seed, stream offset) of the device op's engine: the npu generator's next draw when the caller gives no seed
// (seed = seed2 = 0, TensorFlow's convention), else the caller's pair, which then fixes the result.
std::pair<int64_t, int64_t> engineInputs(int64_t seed, int64_t seed2, const at::Tensor& like) {
  if (seed == 0 && seed2 == 0) {
    return {static_cast<int64_t>(c10_npu::launchSeedFor(std::nullopt, like.device().index())), 0};
  }
  return {seed, seed2};
}

void checkChoice(const at::Tensor& x, int64_t count) {
  const char* op = "npu_random_choice_with_mask";
  TORCH_CHECK_TYPE(x.scalar_type() == at::kBool, op, ": x must be torch.bool, got ", x.scalar_type());
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.dim() <= 5, op, ": x must have 1 to 5 dims, got ", x.dim());
  TORCH_CHECK_VALUE(count > 0, op, ": count must be positive, got ", count);
}

std::tuple<at::Tensor, at::Tensor> choiceOutputs(const at::Tensor& x, int64_t count) {
  return {at::empty({count, x.dim()}, x.options().dtype(at::kInt)), at::empty({count}, x.options().dtype(at::kBool))};
}

void checkSubSample(const at::Tensor& labels, int64_t per_images, double positive_fraction) {
  const char* op = "npu_sub_sample";
  TORCH_CHECK_TYPE(labels.scalar_type() == at::kInt || labels.scalar_type() == at::kLong, op,
                   ": labels must be int32 (or int64), got ", labels.scalar_type());
  TORCH_CHECK_VALUE(labels.dim() == 1, op, ": labels must be 1-D (N,) of -1 (ignore), 0 (negative) and > 0 "
                    "(positive), got ", labels.sizes());
  TORCH_CHECK_VALUE(per_images >= 0, op, ": per_images must be >= 0, got ", per_images);
  TORCH_CHECK_VALUE(positive_fraction >= 0 && positive_fraction <= 1, op, ": positive_fraction must be in [0, 1], "
                    "got ", positive_fraction);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_random_choice_with_mask(const at::Tensor& x, int64_t count, int64_t seed,
                                                               int64_t seed2) {
  checkChoice(x, count);
  auto [indices, mask] = choiceOutputs(x, count);
  const auto [engine_seed, engine_offset] = engineInputs(seed, seed2, x);
  EXEC_NPU_CMD(aclnnRandomChoiceWithMask, x, count, engine_seed, engine_offset, indices, mask);
  return {indices, mask};
}

std::tuple<at::Tensor, at::Tensor> npu_random_choice_with_mask_meta(const at::Tensor& x, int64_t count, int64_t seed,
                                                                    int64_t seed2) {
  checkChoice(x, count);
  return choiceOutputs(x, count);
}

at::Tensor npu_sub_sample(const at::Tensor& self, int64_t per_images, double positive_fraction) {
  checkSubSample(self, per_images, positive_fraction);
  at::Tensor out = at::empty(self.sizes(), self.options());
  const int64_t seed = static_cast<int64_t>(c10_npu::launchSeedFor(std::nullopt, self.device().index()));
  const int64_t offset = 0;
  EXEC_NPU_CMD(aclnnSubSample, self, per_images, positive_fraction, seed, offset, out);
  return out;
}

at::Tensor npu_sub_sample_meta(const at::Tensor& self, int64_t per_images, double positive_fraction) {
  checkSubSample(self, per_images, positive_fraction);
  return at::empty(self.sizes(), self.options());
}

}  // namespace at_npu::native
