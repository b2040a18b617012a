// QuantScatterKernelNpu.cpp - npu_quant_scatter / npu_quant_scatter_: updates quantized to int8 per channel, then
// scattered into an int8 tensor (a quantized KV cache) along an axis, on aclnnInplaceQuantScatterV2; the functional
// form works on a copy. Inference ops: no gradient upstream.
#include <ATen/ops/empty_like.h>

#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

// The round mode the device op takes; checks what the op accepts.
std::string checkQuantScatter(const char* op, const at::Tensor& self, c10::string_view reduce,
                              std::optional<int64_t> dst_type, std::optional<c10::string_view> round_mode) {
  quant::refuseChipFormat(op, "self's dtype", static_cast<int64_t>(self.scalar_type()));
  TORCH_CHECK_TYPE(self.scalar_type() == at::kChar, op, ": self must be int8 (the quantized tensor), got ",
                   self.scalar_type());
  TORCH_CHECK_VALUE(reduce == "update", op, ": reduce must be 'update', got '", std::string(reduce), "'");
  if (dst_type.has_value()) {
    TORCH_CHECK_VALUE(quant::targetOf(op, "dst_type", *dst_type) == quant::Target::kInt8, op,
                      ": dst_type must be torch.int8 (self's dtype), got ", *dst_type);
  }
  const std::string mode = round_mode.has_value() ? std::string(*round_mode) : "rint";
  TORCH_CHECK_VALUE(mode == "rint", op, ": round_mode must be 'rint' for int8 ('round' and 'hybrid' are hifloat8's), ",
                    "got '", mode, "'");
  return mode;
}

void quantScatterInto(at::Tensor& target, const at::Tensor& indices, const at::Tensor& updates,
                      const at::Tensor& quant_scales, const std::optional<at::Tensor>& quant_zero_points, int64_t axis,
                      int64_t quant_axis, const std::string& round_mode) {
  const int64_t reduction = 1;  // update
  EXEC_NPU_CMD(aclnnInplaceQuantScatterV2, target, indices, updates, quant_scales, quant_zero_points, axis, quant_axis,
               reduction, round_mode);
}

}  // namespace

at::Tensor npu_quant_scatter(const at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates,
                             const at::Tensor& quant_scales, const std::optional<at::Tensor>& quant_zero_points,
                             int64_t axis, int64_t quant_axis, c10::string_view reduce, std::optional<int64_t> dst_type,
                             std::optional<c10::string_view> round_mode) {
  const std::string mode = checkQuantScatter("npu_quant_scatter", self, reduce, dst_type, round_mode);
  at::Tensor result = self.clone(at::MemoryFormat::Contiguous);
  quantScatterInto(result, indices, updates, quant_scales, quant_zero_points, axis, quant_axis, mode);
  return result;
}

at::Tensor npu_quant_scatter_meta(const at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates,
                                  const at::Tensor& quant_scales, const std::optional<at::Tensor>& quant_zero_points,
                                  int64_t axis, int64_t quant_axis, c10::string_view reduce,
                                  std::optional<int64_t> dst_type, std::optional<c10::string_view> round_mode) {
  checkQuantScatter("npu_quant_scatter", self, reduce, dst_type, round_mode);
  return at::empty_like(self, at::MemoryFormat::Contiguous);
}

at::Tensor& npu_quant_scatter_(at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates,
                               const at::Tensor& quant_scales, const std::optional<at::Tensor>& quant_zero_points,
                               int64_t axis, int64_t quant_axis, c10::string_view reduce,
                               std::optional<int64_t> dst_type, std::optional<c10::string_view> round_mode) {
  const std::string mode = checkQuantScatter("npu_quant_scatter_", self, reduce, dst_type, round_mode);
  quantScatterInto(self, indices, updates, quant_scales, quant_zero_points, axis, quant_axis, mode);
  return self;
}

at::Tensor& npu_quant_scatter__meta(at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates,
                                    const at::Tensor& quant_scales,
                                    const std::optional<at::Tensor>& quant_zero_points, int64_t axis,
                                    int64_t quant_axis, c10::string_view reduce, std::optional<int64_t> dst_type,
                                    std::optional<c10::string_view> round_mode) {
  checkQuantScatter("npu_quant_scatter_", self, reduce, dst_type, round_mode);
  return self;
}

}  // namespace at_npu::native
