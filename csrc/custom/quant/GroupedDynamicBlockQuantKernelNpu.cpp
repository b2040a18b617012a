// GroupedDynamicBlockQuantKernelNpu.cpp - npu_grouped_dynamic_block_quant: dynamic quantization with one scale per
// row_block_size x col_block_size block, the blocks restarting at each row group of group_list, on
// aclnnGroupedDynamicBlockQuantV2. Targets: float8_e5m2 (upstream's default, 291), float8_e4m3fn, hifloat8 (codes
// in uint8, dst_type_max its range) and int8. Inference op: no gradient upstream.
#include <ATen/ops/empty.h>

#include <string>
#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kGroupedBlockQuantOp = "npu_grouped_dynamic_block_quant";

// y: the target like x; scale: x's shape with M counted in blocks plus one per group (M // row_block_size + G: each
// group's last row block may be partial) and N in (ceil) column blocks, float32.
std::tuple<at::Tensor, at::Tensor> groupedBlockQuantOutputs(const at::Tensor& x, const at::Tensor& group_list,
                                                            double min_scale, c10::string_view round_mode,
                                                            int64_t dst_type, int64_t row_block_size,
                                                            int64_t col_block_size, int64_t group_list_type,
                                                            double dst_type_max) {
  const char* op = kGroupedBlockQuantOp;
  quant::checkFloatInput(op, "x", x);
  TORCH_CHECK_VALUE(x.dim() == 2 || x.dim() == 3, op, ": x must be 2-d [M, N] or 3-d [B, M, N], got ", x.sizes());
  TORCH_CHECK_TYPE(group_list.scalar_type() == at::kInt || group_list.scalar_type() == at::kLong, op,
                   ": group_list must be int32 (or int64), got ", group_list.scalar_type());
  TORCH_CHECK_VALUE(group_list.dim() == 1, op, ": group_list must be 1-d, got ", group_list.sizes());
  const std::optional<at::ScalarType> holder = quant::floatTargetHolder(dst_type);
  TORCH_CHECK_VALUE(holder.has_value() || quant::targetOf(op, "dst_type", dst_type) == quant::Target::kInt8, op,
                    ": dst_type must be torch_npu.float8_e5m2, torch_npu.float8_e4m3fn, torch_npu.hifloat8 or ",
                    "torch.int8, got ", dst_type);
  const bool hifloat8 = holder == at::kByte;
  const char* expected_mode = hifloat8 ? "round" : "rint";
  TORCH_CHECK_VALUE(round_mode == expected_mode, op, ": round_mode must be '", expected_mode, "' for this dst_type (",
                    dst_type, "), got '", std::string(round_mode), "'");
  TORCH_CHECK_VALUE(min_scale >= 0, op, ": min_scale must not be negative, got ", min_scale);
  TORCH_CHECK_VALUE(row_block_size > 0 && col_block_size > 0, op, ": row_block_size and col_block_size must be ",
                    "positive, got ", row_block_size, " and ", col_block_size);
  TORCH_CHECK_VALUE(group_list_type == 0, op, ": group_list_type must be 0 (cumulative row ends), got ",
                    group_list_type);
  TORCH_CHECK_VALUE(dst_type_max == 0.0 || (hifloat8 && dst_type_max > 0), op, ": dst_type_max sets a hifloat8 ",
                    "output's range (positive, or 0.0); other targets take 0.0, got ", dst_type_max);
  std::vector<int64_t> shape = x.sizes().vec();
  shape[shape.size() - 2] = shape[shape.size() - 2] / row_block_size + group_list.size(0);
  shape.back() = (shape.back() + col_block_size - 1) / col_block_size;
  return {at::empty(x.sizes(), x.options().dtype(holder.value_or(at::kChar))),
          at::empty(shape, x.options().dtype(at::kFloat))};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_grouped_dynamic_block_quant(const at::Tensor& x, const at::Tensor& group_list,
                                                                   double min_scale, c10::string_view round_mode,
                                                                   int64_t dst_type, int64_t row_block_size,
                                                                   int64_t col_block_size, int64_t group_list_type,
                                                                   double dst_type_max) {
  auto [y, scale] = groupedBlockQuantOutputs(x, group_list, min_scale, round_mode, dst_type, row_block_size,
                                             col_block_size, group_list_type, dst_type_max);
  const std::string mode(round_mode);
  const AclTensorAs y_out = quant::quantizedOutput(y);
  const int64_t dst_code = y_out.dtype;
  EXEC_NPU_CMD(aclnnGroupedDynamicBlockQuantV2, x, group_list, min_scale, mode, dst_code, row_block_size,
               col_block_size, group_list_type, dst_type_max, y_out, scale);
  return {y, scale};
}

std::tuple<at::Tensor, at::Tensor> npu_grouped_dynamic_block_quant_meta(
    const at::Tensor& x, const at::Tensor& group_list, double min_scale, c10::string_view round_mode,
    int64_t dst_type, int64_t row_block_size, int64_t col_block_size, int64_t group_list_type, double dst_type_max) {
  return groupedBlockQuantOutputs(x, group_list, min_scale, round_mode, dst_type, row_block_size, col_block_size,
                                  group_list_type, dst_type_max);
}

}  // namespace at_npu::native
