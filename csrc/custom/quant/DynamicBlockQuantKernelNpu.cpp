// DynamicBlockQuantKernelNpu.cpp - npu_dynamic_block_quant: dynamic int8 quantization with one scale per block of
// row_block_size x col_block_size elements of the last two dimensions, on aclnnDynamicBlockQuantV2. Inference op:
// no gradient upstream.
#include <ATen/ops/empty.h>

#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

// The scale's shape: x's, with the last two dimensions counted in blocks (edge blocks may be partial).
std::vector<int64_t> blockScaleShape(const at::Tensor& x, double min_scale, c10::string_view round_mode,
                                     int64_t dst_type, int64_t row_block_size, int64_t col_block_size,
                                     double dst_type_max) {
  const char* op = "npu_dynamic_block_quant";
  quant::checkFloatInput(op, "x", x);
  TORCH_CHECK_VALUE(x.dim() == 2 || x.dim() == 3, op, ": x must be 2-d [M, N] or 3-d [B, M, N], got ", x.sizes());
  TORCH_CHECK_VALUE(quant::targetOf(op, "dst_type", dst_type) == quant::Target::kInt8, op,
                    ": dst_type must be 1 (torch.int8), got ", dst_type);
  TORCH_CHECK_VALUE(round_mode == "rint", op, ": round_mode must be 'rint' for int8, got '", std::string(round_mode),
                    "'");
  TORCH_CHECK_VALUE(min_scale >= 0, op, ": min_scale must not be negative, got ", min_scale);
  TORCH_CHECK_VALUE(row_block_size > 0 && col_block_size > 0, op, ": row_block_size and col_block_size must be ",
                    "positive, got ", row_block_size, " and ", col_block_size);
  TORCH_CHECK_VALUE(dst_type_max == 0.0, op, ": dst_type_max sets a hifloat8 output's range; an int8 output takes ",
                    "0.0, got ", dst_type_max);
  std::vector<int64_t> shape = x.sizes().vec();
  shape[shape.size() - 2] = (shape[shape.size() - 2] + row_block_size - 1) / row_block_size;
  shape.back() = (shape.back() + col_block_size - 1) / col_block_size;
  return shape;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_dynamic_block_quant(const at::Tensor& x, double min_scale,
                                                           c10::string_view round_mode, int64_t dst_type,
                                                           int64_t row_block_size, int64_t col_block_size,
                                                           double dst_type_max) {
  at::Tensor scale = at::empty(
      blockScaleShape(x, min_scale, round_mode, dst_type, row_block_size, col_block_size, dst_type_max),
      x.options().dtype(at::kFloat));
  at::Tensor y = at::empty(x.sizes(), x.options().dtype(at::kChar));
  const std::string mode(round_mode);
  const int64_t dst_code = quant::aclCode(at::kChar);
  EXEC_NPU_CMD(aclnnDynamicBlockQuantV2, x, min_scale, mode, dst_code, row_block_size, col_block_size, dst_type_max,
               y, scale);
  return {y, scale};
}

std::tuple<at::Tensor, at::Tensor> npu_dynamic_block_quant_meta(const at::Tensor& x, double min_scale,
                                                                c10::string_view round_mode, int64_t dst_type,
                                                                int64_t row_block_size, int64_t col_block_size,
                                                                double dst_type_max) {
  return {at::empty(x.sizes(), x.options().dtype(at::kChar)),
          at::empty(blockScaleShape(x, min_scale, round_mode, dst_type, row_block_size, col_block_size, dst_type_max),
                    x.options().dtype(at::kFloat))};
}

}  // namespace at_npu::native
