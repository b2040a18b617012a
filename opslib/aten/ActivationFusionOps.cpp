// ActivationFusionOps.cpp - GeluMul (gelu(first half) * second half of the last dimension) and ClippedSwiglu
// (clamped SwiGLU over x folded to [pre, cut * after] at dim, rows past sum(groupIndex) left zero). Float16 /
// bfloat16 compute in float32 and round once, as NPUs do.
#include <ATen/TensorOperators.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <string>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

at::Tensor wide(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }

// The rows ClippedSwiglu processes: all of them, or the first sum(groupIndex) (at most `rows`).
int64_t activeRows(const at::Tensor& group_index, int64_t rows) {
  if (!group_index.defined()) return rows;
  const int64_t total = group_index.to(at::kLong).sum().item<int64_t>();
  return std::clamp<int64_t>(total, 0, rows);
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnGeluMulGetWorkspaceSize(const aclTensor* input, char* approximate,
                                                            aclTensor* out, uint64_t* workspaceSize,
                                                            aclOpExecutor** executor) {
  return prepareOp("aclnnGeluMul", workspaceSize, executor, [&] {
    const char* op = "aclnnGeluMul";
    at::Tensor x = requiredTensor(input, "input"), o = requiredTensor(out, "out");
    const std::string mode = approximate == nullptr ? "none" : approximate;
    TORCH_CHECK(mode == "none" || mode == "tanh", op, ": approximate must be \"none\" or \"tanh\", got \"", mode,
                "\"");
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) % 2 == 0, op, ": the last dimension must be even, got ", x.sizes());
    const int64_t half = x.size(-1) / 2;
    TORCH_CHECK(o.dim() == x.dim() && o.size(-1) == half &&
                    o.sizes().slice(0, o.dim() - 1).equals(x.sizes().slice(0, x.dim() - 1)),
                op, ": out must be input's shape with the last dimension halved, got ", o.sizes());
    return Prepared{{x}, [=]() mutable {
                      const at::Tensor gate = at::gelu(wide(x.narrow(-1, 0, half)), mode);
                      o.copy_(gate * wide(x.narrow(-1, half, half)));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(GeluMul, "input, approximate, out");

// A = x[:, ::2] / B = x[:, 1::2] (interleaved) or the two halves of each folded row; y = A' * sigmoid(alpha A') *
// (B' + bias) with A' = min(A, limit), B' = clamp(B, -limit, limit).
extern "C" NOP_API aclnnStatus aclnnClippedSwigluGetWorkspaceSize(
    const aclTensor* x, const aclTensor* groupIndexOptional, int64_t dim, double alpha, double limit, double bias,
    bool interleaved, aclTensor* yOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnClippedSwiglu", workspaceSize, executor, [&] {
    const char* op = "aclnnClippedSwiglu";
    at::Tensor xt = requiredTensor(x, "x"), groups = hostTensor(groupIndexOptional), y = requiredTensor(yOut, "yOut");
    TORCH_CHECK(dim >= -xt.dim() && dim < xt.dim(), op, ": dim ", dim, " is out of range for ", xt.dim(), "-D x");
    const int64_t d = dim < 0 ? dim + xt.dim() : dim;
    TORCH_CHECK(xt.size(d) % 2 == 0, op, ": dimension ", dim, " of x ", xt.sizes(), " must be even");
    TORCH_CHECK(y.numel() * 2 == xt.numel(), op, ": yOut must hold half of x's values, got ", y.sizes());
    TORCH_CHECK(!groups.defined() || groups.dim() == 1, op, ": groupIndex must be 1-D, got ", groups.sizes());
    int64_t pre = 1;
    for (int64_t k = 0; k < d; ++k) pre *= xt.size(k);
    return Prepared{{xt, groups}, [=]() mutable {
                      const at::Tensor rows = wide(xt).reshape({pre, -1});
                      const int64_t width = rows.size(1), active = activeRows(groups, pre);
                      const at::Tensor used = rows.narrow(0, 0, active);
                      const at::Tensor a = interleaved ? used.slice(1, 0, width, 2) : used.narrow(1, 0, width / 2);
                      const at::Tensor b =
                          interleaved ? used.slice(1, 1, width, 2) : used.narrow(1, width / 2, width / 2);
                      const at::Tensor gate = a.clamp_max(limit);
                      const at::Tensor linear = b.clamp_min(-limit).clamp_max(limit);
                      at::Tensor result = at::zeros({pre, width / 2}, rows.options());
                      result.narrow(0, 0, active).copy_(gate * at::sigmoid(gate * alpha) * (linear + bias));
                      y.copy_(result.reshape(y.sizes()));
                    },
                    {y}};
  });
}
NPU_ATEN_OP(ClippedSwiglu, "x, groupIndexOptional, dim, alpha, limit, bias, interleaved, yOut");
