// DropoutKernelNpu.cpp - torch_npu's bit-mask dropout: npu_dropout_gen_mask (the mask bits, drawn from
// the npu generator), npu_dropout_do_mask / npu_dropout_backward (x * bit / (1 - p)) and _npu_dropout
// (both), on aclnnDropoutGenMaskV2 and aclnnDropoutDoMask. A mask holds one bit per element (1 =
// kept), element i in bit i % 8 of byte i / 8, padded to a multiple of 128 elements.
#include <ATen/ops/empty.h>

#include "csrc/core/NPUGenerator.h"
#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/dropout/DropoutMask.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

std::pair<int64_t, int64_t> nextDropoutSeed(c10::DeviceIndex device) {
  auto* gen = c10_npu::getDefaultNPUGenerator(device).get<c10_npu::NPUGeneratorImpl>();
  const auto [seed, offset] = gen->philoxEngineInputs(10);
  return {static_cast<int64_t>(seed & 0x7fffffffffffffffULL), static_cast<int64_t>(offset)};
}

at::Tensor dropoutMaskBits(int64_t numel, double drop_prob, int64_t seed, int64_t offset,
                           const at::TensorOptions& options, at::ScalarType prob_dtype) {
  at::Tensor mask = at::empty({dropoutMaskBytes(numel)}, options.dtype(at::kByte));
  std::vector<int64_t> shape{numel};
  const int64_t dtype = static_cast<int64_t>(prob_dtype);
  EXEC_NPU_CMD(aclnnDropoutGenMaskV2, at::IntArrayRef(shape), drop_prob, seed, offset, dtype, mask);
  return mask;
}

namespace {

void checkProbability(const char* op, double p) {
  TORCH_CHECK_VALUE(p >= 0 && p <= 1, op, ": dropout probability has to be between 0 and 1, but got ", p);
}

void checkMask(const char* op, const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK_VALUE(at::isFloatingType(self.scalar_type()), op, ": dropout only supports floating-point dtypes, got ",
                    self.scalar_type());
  TORCH_CHECK_TYPE(mask.scalar_type() == at::kByte, op, ": mask should be torch.uint8 dtype, got ", mask.scalar_type());
  TORCH_CHECK_VALUE(mask.numel() * 8 >= self.numel(), op, ": the mask holds ", mask.numel() * 8, " bits, too few for ",
                    self.numel(), " elements (make it with npu_dropout_gen_mask(", self.sizes(), ", p))");
}

// Mask bits of `numel` elements drawn from the npu generator of the options' device.
at::Tensor genMask(int64_t numel, double p, const at::TensorOptions& options) {
  const auto [seed, offset] = nextDropoutSeed(options.device().index());
  return dropoutMaskBits(numel, p, seed, offset, options, at::kFloat);
}

at::Tensor doMask(const at::Tensor& self, const at::Tensor& mask, double p) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  EXEC_NPU_CMD(aclnnDropoutDoMask, self, mask, p, out);
  return out;
}

}  // namespace

at::Tensor npu_dropout_gen_mask(at::IntArrayRef size, double p, std::optional<at::ScalarType> dtype,
                                std::optional<at::Layout> layout, std::optional<at::Device> device,
                                std::optional<bool> pin_memory) {
  checkProbability("npu_dropout_gen_mask", p);
  const at::TensorOptions options =
      at::TensorOptions().layout(layout).device(device.value_or(at::Device(c10::DeviceType::PrivateUse1)));
  return genMask(c10::multiply_integers(size), p, options);
}

at::Tensor npu_dropout_gen_mask_meta(at::IntArrayRef size, double p, std::optional<at::ScalarType> dtype,
                                     std::optional<at::Layout> layout, std::optional<at::Device> device,
                                     std::optional<bool> pin_memory) {
  checkProbability("npu_dropout_gen_mask", p);
  return at::empty({dropoutMaskBytes(c10::multiply_integers(size))}, at::TensorOptions().dtype(at::kByte).device(at::kMeta));
}

std::tuple<at::Tensor, at::Tensor> npu_dropout_do_mask(const at::Tensor& self, const at::Tensor& mask, double p) {
  checkProbability("npu_dropout_do_mask", p);
  checkMask("npu_dropout_do_mask", self, mask);
  return {doMask(self, mask, p), mask};
}

std::tuple<at::Tensor, at::Tensor> npu_dropout_do_mask_meta(const at::Tensor& self, const at::Tensor& mask,
                                                            double p) {
  checkProbability("npu_dropout_do_mask", p);
  checkMask("npu_dropout_do_mask", self, mask);
  return {at::empty(self.sizes(), self.options()), mask};
}

at::Tensor npu_dropout_backward(const at::Tensor& grad_output, const at::Tensor& mask, double p) {
  checkProbability("npu_dropout_backward", p);
  checkMask("npu_dropout_backward", grad_output, mask);
  return doMask(grad_output, mask, p);
}

at::Tensor npu_dropout_backward_meta(const at::Tensor& grad_output, const at::Tensor& mask, double p) {
  checkMask("npu_dropout_backward", grad_output, mask);
  return at::empty(grad_output.sizes(), grad_output.options());
}

std::tuple<at::Tensor, at::Tensor> _npu_dropout(const at::Tensor& self, double p) {
  checkProbability("_npu_dropout", p);
  TORCH_CHECK_VALUE(at::isFloatingType(self.scalar_type()), "_npu_dropout: dropout only supports floating-point ",
                    "dtypes, got ", self.scalar_type());
  at::Tensor mask = genMask(self.numel(), p, self.options());
  return {doMask(self, mask, p), mask};
}

std::tuple<at::Tensor, at::Tensor> _npu_dropout_meta(const at::Tensor& self, double p) {
  checkProbability("_npu_dropout", p);
  return {at::empty(self.sizes(), self.options()),
          at::empty({dropoutMaskBytes(self.numel())}, self.options().dtype(at::kByte))};
}

}  // namespace at_npu::native
