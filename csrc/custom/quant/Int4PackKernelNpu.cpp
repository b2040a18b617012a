// Int4PackKernelNpu.cpp - npu_convert_weight_to_int4pack: int32 weights holding int4 values packed eight to an
// int32 (lowest nibble first), the form npu_weight_quant_batchmatmul takes, on aclnnConvertWeightToInt4Pack.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

std::vector<int64_t> int4PackShape(const at::Tensor& weight) {
  const char* op = "npu_convert_weight_to_int4pack";
  TORCH_CHECK_VALUE(weight.scalar_type() != at::kFloat, op, ": float32 weights are packed as float4_e2m1 values ",
                    "(Ascend 950), a chip number format the software NPU does not have; pass int32 weights holding ",
                    "int4 values");
  TORCH_CHECK_TYPE(weight.scalar_type() == at::kInt, op, ": weight must be int32 (one int4 value in [-8, 7] each), ",
                   "got ", weight.scalar_type());
  TORCH_CHECK_VALUE(weight.dim() == 2 || weight.dim() == 3, op, ": weight must be 2-d (k, n) or 3-d, got ",
                    weight.sizes());
  for (const int64_t size : weight.sizes()) {
    TORCH_CHECK_VALUE(size > 0, op, ": weight must not be empty, got ", weight.sizes());
  }
  return quant::packedShape(op, "weight", weight.sizes(), 8);
}

}  // namespace

at::Tensor npu_convert_weight_to_int4pack(const at::Tensor& weight, int64_t inner_k_tiles) {
  // inner_k_tiles is reserved upstream ("预留参数，暂未使用").
  at::Tensor out = at::empty(int4PackShape(weight), weight.options().dtype(at::kInt));
  EXEC_NPU_CMD(aclnnConvertWeightToInt4Pack, weight, out);
  return out;
}

at::Tensor npu_convert_weight_to_int4pack_meta(const at::Tensor& weight, int64_t inner_k_tiles) {
  return at::empty(int4PackShape(weight), weight.options().dtype(at::kInt));
}

}  // namespace at_npu::native
