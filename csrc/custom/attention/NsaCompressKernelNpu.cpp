// NsaCompressKernelNpu.cpp - npu_nsa_compress (NSA sliding-window token compression, TND) and its gradient
// npu_nsa_compress_grad, with Meta kernels, on aclnnNsaCompress / aclnnNsaCompressGrad.
#include <ATen/ops/empty.h>

#include <string>
#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

namespace {

// Number of compressed tokens: per sample (prefix-sum lengths), (len - block) / stride + 1 windows when len >= block.
int64_t compressedTokens(const char* op, const at::Tensor& input, const at::Tensor& weight, int64_t block,
                         int64_t stride, at::OptionalIntArrayRef actual_seq_len) {
  TORCH_CHECK_VALUE(actual_seq_len.has_value(), op, ": actual_seq_len (prefix sums of the TND samples) is required");
  TORCH_CHECK_VALUE(input.dim() == 3, op, ": input must be TND [T, N, D], got ", input.sizes());
  TORCH_CHECK_VALUE(block > 0 && stride > 0, op, ": compress_block_size and compress_stride must be positive, got ",
                    block, "/", stride);
  TORCH_CHECK_VALUE(weight.dim() == 2 && weight.size(0) == block && weight.size(1) == input.size(1), op,
                    ": weight must be [compress_block_size=", block, ", N=", input.size(1), "], got ", weight.sizes());
  TORCH_CHECK_TYPE(input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16 ||
                       input.scalar_type() == at::kFloat,
                   op, ": input must be float16, bfloat16 or float32, got ", input.scalar_type());
  TORCH_CHECK_TYPE(weight.scalar_type() == input.scalar_type(), op, ": weight dtype (", weight.scalar_type(),
                   ") must equal input dtype (", input.scalar_type(), ")");
  int64_t windows = 0, previous = 0;
  for (int64_t end : *actual_seq_len) {
    TORCH_CHECK_VALUE(end >= previous && end <= input.size(0), op,
                      ": actual_seq_len must be non-decreasing prefix sums within T=", input.size(0));
    const int64_t length = end - previous;
    if (length >= block) {
      windows += (length - block) / stride + 1;
    }
    previous = end;
  }
  return windows;
}

}  // namespace

at::Tensor npu_nsa_compress(const at::Tensor& input, const at::Tensor& weight, int64_t compress_block_size,
                            int64_t compress_stride, at::OptionalIntArrayRef actual_seq_len) {
  const int64_t windows =
      compressedTokens("npu_nsa_compress", input, weight, compress_block_size, compress_stride, actual_seq_len);
  at::Tensor out = at::empty({windows, input.size(1), input.size(2)}, input.options());
  const std::string layout = "TND";
  const int64_t seq_len_type = 0;  // prefix sums
  EXEC_NPU_CMD(aclnnNsaCompress, input, weight, actual_seq_len, layout, compress_block_size, compress_stride,
               seq_len_type, out);
  return out;
}

at::Tensor npu_nsa_compress_meta(const at::Tensor& input, const at::Tensor& weight, int64_t compress_block_size,
                                 int64_t compress_stride, at::OptionalIntArrayRef actual_seq_len) {
  const int64_t windows =
      compressedTokens("npu_nsa_compress", input, weight, compress_block_size, compress_stride, actual_seq_len);
  return at::empty({windows, input.size(1), input.size(2)}, input.options());
}

std::tuple<at::Tensor, at::Tensor> npu_nsa_compress_grad(const at::Tensor& grad, const at::Tensor& input,
                                                         const at::Tensor& weight, int64_t compress_block_size,
                                                         int64_t compress_stride,
                                                         at::OptionalIntArrayRef actual_seq_len) {
  const char* op = "npu_nsa_compress_grad";
  const int64_t windows = compressedTokens(op, input, weight, compress_block_size, compress_stride, actual_seq_len);
  TORCH_CHECK_VALUE(grad.dim() == 3 && grad.size(0) == windows && grad.size(1) == input.size(1) &&
                        grad.size(2) == input.size(2),
                    op, ": grad must be [", windows, ", N, D] like the forward output, got ", grad.sizes());
  at::Tensor input_grad = at::empty(input.sizes(), input.options());
  at::Tensor weight_grad = at::empty(weight.sizes(), weight.options());
  const std::string layout = "TND";
  const int64_t seq_len_type = 0;
  EXEC_NPU_CMD(aclnnNsaCompressGrad, grad, input, weight, actual_seq_len, compress_block_size, compress_stride,
               seq_len_type, layout, input_grad, weight_grad);
  return std::make_tuple(input_grad, weight_grad);
}

std::tuple<at::Tensor, at::Tensor> npu_nsa_compress_grad_meta(const at::Tensor& grad, const at::Tensor& input,
                                                              const at::Tensor& weight, int64_t compress_block_size,
                                                              int64_t compress_stride,
                                                              at::OptionalIntArrayRef actual_seq_len) {
  compressedTokens("npu_nsa_compress_grad", input, weight, compress_block_size, compress_stride, actual_seq_len);
  return std::make_tuple(at::empty(input.sizes(), input.options()), at::empty(weight.sizes(), weight.options()));
}

}  // namespace at_npu::native
