// NormalizeBatchKernelNpu.cpp - npu_normalize_batch: per-utterance normalization of (N, C, T) speech features over
// each utterance's first seq_len frames (Jasper / QuartzNet's normalize_batch), on aclnnNormalizeBatch.
#include <ATen/ops/empty.h>

#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

// The epsilon torch_npu adds to the standard deviation.
constexpr double kNormalizeEpsilon = 1e-5;

// normalize_type 0: per feature (mean / std over time for every channel), 1: over all features of an utterance.
std::string normalizeTypeName(const at::Tensor& self, const at::Tensor& seq_len, int64_t normalize_type) {
  const char* op = "npu_normalize_batch";
  TORCH_CHECK_TYPE(self.scalar_type() == at::kFloat || self.scalar_type() == at::kHalf ||
                       self.scalar_type() == at::kBFloat16,
                   op, ": self must be float32, float16 or bfloat16, got ", self.scalar_type());
  TORCH_CHECK_VALUE(self.dim() == 3, op, ": self must be (N, C, T) features, got ", self.sizes());
  TORCH_CHECK_TYPE(at::isIntegralType(seq_len.scalar_type(), /*includeBool=*/false), op,
                   ": seq_len must be integers, got ", seq_len.scalar_type());
  TORCH_CHECK_VALUE(seq_len.dim() == 1 && seq_len.size(0) == self.size(0), op,
                    ": seq_len must be 1-D with one length per utterance (", self.size(0), "), got ", seq_len.sizes());
  TORCH_CHECK_VALUE(normalize_type == 0 || normalize_type == 1, op,
                    ": normalize_type must be 0 (per feature) or 1 (all features), got ", normalize_type);
  return normalize_type == 0 ? "per_feature" : "all_features";
}

}  // namespace

at::Tensor npu_normalize_batch(const at::Tensor& self, const at::Tensor& seq_len, int64_t normalize_type) {
  const std::string type = normalizeTypeName(self, seq_len, normalize_type);
  at::Tensor out = at::empty(self.sizes(), self.options());
  EXEC_NPU_CMD(aclnnNormalizeBatch, self, seq_len, type, kNormalizeEpsilon, out);
  return out;
}

at::Tensor npu_normalize_batch_meta(const at::Tensor& self, const at::Tensor& seq_len, int64_t normalize_type) {
  normalizeTypeName(self, seq_len, normalize_type);
  return at::empty(self.sizes(), self.options());
}

}  // namespace at_npu::native
