// HansKernelNpu.cpp - npu_hans_encode / npu_hans_decode (out= forms): lossless compression of float16 / bfloat16 /
// float32 tensors by the statistics (pdf) of their exponent bytes, on aclnnHansEncode / aclnnHansDecode.
#include <tuple>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr int64_t kHansHeaderBytes = 512;     // fixed's metadata, as upstream documents
constexpr int64_t kHansCoreReserveBytes = 8448;  // upstream's per-vector-core reserve; the software NPU has one core

int64_t bytesOf(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// The documented constraints shared by both directions: `data` is encode's input or decode's out.
void checkHansBuffers(const char* op, const char* what, const at::Tensor& data, const at::Tensor& pdf,
                      const at::Tensor& mantissa, const at::Tensor& fixed, const at::Tensor& var) {
  const at::ScalarType t = data.scalar_type();
  TORCH_CHECK_TYPE(t == at::kHalf || t == at::kFloat || t == at::kBFloat16, op, ": ", what,
                   " must be float16, float32 or bfloat16, got ", t);
  TORCH_CHECK_TYPE(mantissa.scalar_type() == t && fixed.scalar_type() == t && var.scalar_type() == t, op,
                   ": mantissa, fixed and var must have ", what, "'s dtype ", t, ", got ", mantissa.scalar_type(),
                   ", ", fixed.scalar_type(), " and ", var.scalar_type());
  TORCH_CHECK_TYPE(pdf.scalar_type() == at::kInt, op, ": pdf must be int32, got ", pdf.scalar_type());
  TORCH_CHECK_VALUE(pdf.numel() == 256 && (pdf.dim() == 1 || pdf.dim() == 2), op,
                    ": pdf must have shape (1, 256) (or (256,)), got ", pdf.sizes());
  const int64_t n = data.numel();
  TORCH_CHECK_VALUE(n % 64 == 0 && n >= 32768, op, ": ", what,
                    " must have a multiple of 64 elements and at least 32768, got ", n);
  TORCH_CHECK_VALUE(bytesOf(mantissa) == n * (data.element_size() - 1), op, ": mantissa must hold ", what,
                    ".numel() * (element_size - 1) = ", n * (data.element_size() - 1), " bytes, got ",
                    bytesOf(mantissa));
  TORCH_CHECK_VALUE(bytesOf(fixed) >= kHansHeaderBytes, op, ": fixed must hold at least ", kHansHeaderBytes,
                    " bytes, got ", bytesOf(fixed));
}

void checkHansEncode(const at::Tensor& input, bool reshuff, const at::Tensor& pdf, const at::Tensor& mantissa,
                     const at::Tensor& fixed, const at::Tensor& var) {
  const char* op = "npu_hans_encode";
  checkHansBuffers(op, "input", input, pdf, mantissa, fixed, var);
  const int64_t bound = input.numel() + input.numel() / 64 + kHansCoreReserveBytes;
  TORCH_CHECK_VALUE(bytesOf(fixed) + bytesOf(var) >= bound, op,
                    ": fixed and var together must hold at least input.numel() + input.numel() / 64 + 8448 = ", bound,
                    " bytes (the compression bound), got ", bytesOf(fixed) + bytesOf(var));
  TORCH_CHECK_VALUE(!reshuff || bytesOf(fixed) >= bound, op, ": with reshuff=True fixed alone must hold at least ",
                    bound, " bytes (the compression bound), got ", bytesOf(fixed));
}

}  // namespace

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> npu_hans_encode_out(
    const at::Tensor& input, bool statistic, bool reshuff, at::Tensor& pdf, at::Tensor& mantissa, at::Tensor& fixed,
    at::Tensor& var) {
  checkHansEncode(input, reshuff, pdf, mantissa, fixed, var);
  EXEC_NPU_CMD(aclnnHansEncode, input, pdf, statistic, reshuff, mantissa, fixed, var);
  return {pdf, mantissa, fixed, var};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> npu_hans_encode_out_meta(
    const at::Tensor& input, bool statistic, bool reshuff, at::Tensor& pdf, at::Tensor& mantissa, at::Tensor& fixed,
    at::Tensor& var) {
  checkHansEncode(input, reshuff, pdf, mantissa, fixed, var);
  return {pdf, mantissa, fixed, var};
}

at::Tensor& npu_hans_decode_out(const at::Tensor& mantissa, const at::Tensor& fixed, const at::Tensor& var,
                                const at::Tensor& pdf, bool reshuff, at::Tensor& out) {
  checkHansBuffers("npu_hans_decode", "out", out, pdf, mantissa, fixed, var);
  EXEC_NPU_CMD(aclnnHansDecode, mantissa, fixed, var, pdf, reshuff, out);
  return out;
}

at::Tensor& npu_hans_decode_out_meta(const at::Tensor& mantissa, const at::Tensor& fixed, const at::Tensor& var,
                                     const at::Tensor& pdf, bool reshuff, at::Tensor& out) {
  checkHansBuffers("npu_hans_decode", "out", out, pdf, mantissa, fixed, var);
  return out;
}

}  // namespace at_npu::native
