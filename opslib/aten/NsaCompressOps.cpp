// NsaCompressOps.cpp - NSA key/value compression: NsaCompress (weighted sum of each sliding token window, per head)
// and its gradient NsaCompressGrad, over TND inputs split into samples by prefix-sum lengths.
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <string>
#include <vector>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

// Global start token of every window: within each sample, windows start at 0, stride, 2*stride, ... while a whole
// block still fits; samples shorter than one block give none.
std::vector<int64_t> windowStarts(const char* op, const std::vector<int64_t>& prefix_lengths, int64_t tokens,
                                  int64_t block, int64_t stride) {
  std::vector<int64_t> starts;
  int64_t sample_start = 0;
  for (int64_t end : prefix_lengths) {
    TORCH_CHECK(end >= sample_start && end <= tokens, op,
                ": actual_seq_len must be non-decreasing prefix sums within T=", tokens);
    for (int64_t s = 0; s + block <= end - sample_start; s += stride) {
      starts.push_back(sample_start + s);
    }
    sample_start = end;
  }
  return starts;
}

// [W * block] token rows read by the W windows, window-major.
at::Tensor windowRows(const std::vector<int64_t>& starts, int64_t block) {
  const at::Tensor first = at::tensor(starts, at::kLong).unsqueeze(1);
  return (first + at::arange(block, at::kLong).unsqueeze(0)).reshape(-1);
}

void checkCompressArgs(const char* op, const at::Tensor& input, const at::Tensor& weight, const std::string& layout,
                       int64_t block, int64_t stride, int64_t seq_len_type) {
  TORCH_CHECK(layout == "TND", op, ": only layout TND is supported, got ", layout);
  TORCH_CHECK(seq_len_type == 0, op, ": only actual_seq_len type 0 (prefix sums) is supported, got ", seq_len_type);
  TORCH_CHECK(input.dim() == 3, op, ": input must be [T, N, D], got ", input.sizes());
  TORCH_CHECK(block > 0 && stride > 0, op, ": compress_block_size and compress_stride must be positive, got ", block,
              "/", stride);
  TORCH_CHECK(weight.dim() == 2 && weight.size(0) == block && weight.size(1) == input.size(1), op,
              ": weight must be [compress_block_size=", block, ", N=", input.size(1), "], got ", weight.sizes());
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnNsaCompressGetWorkspaceSize(const aclTensor* input, const aclTensor* weight,
                                                                const aclIntArray* actSeqLen, char* layout,
                                                                int64_t compressBlockSize, int64_t compressStride,
                                                                int64_t actSeqLenType, aclTensor* out,
                                                                uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnNsaCompress", workspaceSize, executor, [&] {
    const char* op = "aclnnNsaCompress";
    at::Tensor x = requiredTensor(input, "input"), w = requiredTensor(weight, "weight");
    at::Tensor o = requiredTensor(out, "out");
    const std::string layout_str = layout == nullptr ? "TND" : layout;
    checkCompressArgs(op, x, w, layout_str, compressBlockSize, compressStride, actSeqLenType);
    const std::vector<int64_t> starts =
        windowStarts(op, intArray(actSeqLen), x.size(0), compressBlockSize, compressStride);
    TORCH_CHECK(o.dim() == 3 && o.size(0) == static_cast<int64_t>(starts.size()), op, ": out must hold ",
                starts.size(), " compressed tokens, got ", o.sizes());
    const int64_t block = compressBlockSize;
    return Prepared{{x, w},
                    [=]() mutable {
                      if (starts.empty()) {
                        return;
                      }
                      const int64_t windows = static_cast<int64_t>(starts.size());
                      const at::Tensor rows = windowRows(starts, block);
                      const at::Tensor tokens =
                          x.index_select(0, rows).to(at::kFloat).view({windows, block, x.size(1), x.size(2)});
                      const at::Tensor scale = w.to(at::kFloat).unsqueeze(0).unsqueeze(-1);  // [1, block, N, 1]
                      o.copy_((tokens * scale).sum(1));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(NsaCompress, "input, weight, actSeqLen, layout, compressBlockSize, compressStride, actSeqLenType, out");

// d input[row] = sum over the windows reading row of grad[window] * weight[offset]; d weight[offset, n] = sum over
// windows and D of grad[window, n] * input[window start + offset, n].
extern "C" NOP_API aclnnStatus aclnnNsaCompressGradGetWorkspaceSize(
    const aclTensor* outputGrad, const aclTensor* input, const aclTensor* weight, const aclIntArray* actSeqLen,
    int64_t compressBlockSize, int64_t compressStride, int64_t actSeqLenType, char* layout, aclTensor* inputGrad,
    aclTensor* weightGrad, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnNsaCompressGrad", workspaceSize, executor, [&] {
    const char* op = "aclnnNsaCompressGrad";
    at::Tensor g = requiredTensor(outputGrad, "grad"), x = requiredTensor(input, "input");
    at::Tensor w = requiredTensor(weight, "weight");
    at::Tensor dx = requiredTensor(inputGrad, "input_grad"), dw = requiredTensor(weightGrad, "weight_grad");
    const std::string layout_str = layout == nullptr ? "TND" : layout;
    checkCompressArgs(op, x, w, layout_str, compressBlockSize, compressStride, actSeqLenType);
    const std::vector<int64_t> starts =
        windowStarts(op, intArray(actSeqLen), x.size(0), compressBlockSize, compressStride);
    TORCH_CHECK(g.dim() == 3 && g.size(0) == static_cast<int64_t>(starts.size()) && g.size(1) == x.size(1) &&
                    g.size(2) == x.size(2),
                op, ": grad must be [", starts.size(), ", N, D], got ", g.sizes());
    const int64_t block = compressBlockSize;
    return Prepared{{g, x, w},
                    [=]() mutable {
                      at::Tensor input_grad = at::zeros(x.sizes(), x.options().dtype(at::kFloat));
                      at::Tensor weight_grad = at::zeros(w.sizes(), w.options().dtype(at::kFloat));
                      if (!starts.empty()) {
                        const int64_t windows = static_cast<int64_t>(starts.size());
                        const at::Tensor rows = windowRows(starts, block);
                        const at::Tensor gf = g.to(at::kFloat).unsqueeze(1);  // [W, 1, N, D]
                        const at::Tensor tokens =
                            x.index_select(0, rows).to(at::kFloat).view({windows, block, x.size(1), x.size(2)});
                        const at::Tensor scale = w.to(at::kFloat).unsqueeze(0).unsqueeze(-1);  // [1, block, N, 1]
                        input_grad.index_add_(0, rows, (gf * scale).reshape({windows * block, x.size(1), x.size(2)}));
                        weight_grad = (gf * tokens).sum({0, 3});
                      }
                      dx.copy_(input_grad);
                      dw.copy_(weight_grad);
                    },
                    {dx, dw}};
  });
}
NPU_ATEN_OP(NsaCompressGrad,
            "outputGrad, input, weight, actSeqLen, compressBlockSize, compressStride, actSeqLenType, layout, "
            "inputGrad, weightGrad");
