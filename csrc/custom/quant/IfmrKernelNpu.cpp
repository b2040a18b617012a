// IfmrKernelNpu.cpp - npu_ifmr: searches the int8 quantisation scale / offset of `data` that minimise the
// reconstruction error, starting from histogram percentiles, on the aclnnIfmr device op.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_ifmr";

void checkIfmr(const at::Tensor& data, const at::Tensor& data_min, const at::Tensor& data_max,
               const at::Tensor& cumsum, double min_percentile, double max_percentile, double search_start,
               double search_end, double search_step) {
  TORCH_CHECK_TYPE(data.scalar_type() == at::kFloat || data.scalar_type() == at::kHalf, kOp,
                   ": data must be float32 or float16, got ", data.scalar_type());
  TORCH_CHECK_TYPE(data_min.scalar_type() == data.scalar_type() && data_max.scalar_type() == data.scalar_type(), kOp,
                   ": data_min and data_max must have data's dtype ", data.scalar_type());
  TORCH_CHECK_TYPE(cumsum.scalar_type() == at::kInt, kOp, ": cumsum must be int32, got ", cumsum.scalar_type());
  TORCH_CHECK_VALUE(data.numel() > 0 && data_min.numel() == 1 && data_max.numel() == 1, kOp,
                    ": data must be non-empty and data_min / data_max hold one value each, got ", data_min.sizes(),
                    " and ", data_max.sizes());
  TORCH_CHECK_VALUE(cumsum.dim() == 1 && cumsum.numel() > 0, kOp, ": cumsum must be a non-empty 1-D histogram ",
                    "cumulative count, got ", cumsum.sizes());
  TORCH_CHECK_VALUE(min_percentile > 0 && min_percentile <= 1 && max_percentile > 0 && max_percentile <= 1, kOp,
                    ": min_percentile and max_percentile must be in (0, 1], got ", min_percentile, " and ",
                    max_percentile);
  TORCH_CHECK_VALUE(search_step > 0 && search_start > 0 && search_end > search_start, kOp,
                    ": need 0 < search_start < search_end and search_step > 0, got ", search_start, ", ", search_end,
                    ", ", search_step);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_ifmr(const at::Tensor& data, const at::Tensor& data_min,
                                            const at::Tensor& data_max, const at::Tensor& cumsum,
                                            double min_percentile, double max_percentile, double search_start,
                                            double search_end, double search_step, bool with_offset) {
  checkIfmr(data, data_min, data_max, cumsum, min_percentile, max_percentile, search_start, search_end, search_step);
  at::Tensor scale = at::empty(data_min.sizes(), data_min.options());
  at::Tensor offset = at::empty(data_min.sizes(), data_min.options());
  EXEC_NPU_CMD(aclnnIfmr, data, data_min, data_max, cumsum, min_percentile, max_percentile, search_start, search_end,
               search_step, with_offset, scale, offset);
  return {scale, offset};
}

std::tuple<at::Tensor, at::Tensor> npu_ifmr_meta(const at::Tensor& data, const at::Tensor& data_min,
                                                 const at::Tensor& data_max, const at::Tensor& cumsum,
                                                 double min_percentile, double max_percentile, double search_start,
                                                 double search_end, double search_step, bool with_offset) {
  checkIfmr(data, data_min, data_max, cumsum, min_percentile, max_percentile, search_start, search_end, search_step);
  return {at::empty(data_min.sizes(), data_min.options()), at::empty(data_min.sizes(), data_min.options())};
}

}  // namespace at_npu::native
