// MxQuantVariantOps.cpp - two more MX quantisers: aclnnDynamicMxQuantWithDualAxisV2 (the same input quantised
// along its last and along its second-to-last dimension) and aclnnDynamicDualLevelMxQuant (a float32 scale per 512
// elements, then float4_e2m1 MX blocks of 32 of what it leaves), both built on MxQuantSupport.h.
#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>

#include <vector>

#include "AtenOpSupport.h"
#include "MxQuantSupport.h"

using namespace npu::opslib::aten;
using namespace npu::opslib::aten::mx;

// y1 / mxscale1: MX blocks of 32 along the last dimension; y2 / mxscale2: along the second-to-last one.
extern "C" NOP_API aclnnStatus aclnnDynamicMxQuantWithDualAxisV2GetWorkspaceSize(
    const aclTensor* x, char* roundMode, int64_t dstType, int64_t scaleAlg, double dstTypeMax, aclTensor* y1Out,
    aclTensor* mxscale1Out, aclTensor* y2Out, aclTensor* mxscale2Out, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnDynamicMxQuantWithDualAxisV2", workspaceSize, executor, [&] {
    const char* op = "aclnnDynamicMxQuantWithDualAxisV2";
    at::Tensor xt = requiredTensor(x, "x");
    at::Tensor y1 = requiredTensor(y1Out, "y1Out"), s1 = requiredTensor(mxscale1Out, "mxscale1Out");
    at::Tensor y2 = requiredTensor(y2Out, "y2Out"), s2 = requiredTensor(mxscale2Out, "mxscale2Out");
    checkHalfInput(op, xt);
    TORCH_CHECK(xt.dim() >= 2 && xt.dim() <= 7, op, ": x must have 2 to 7 dimensions, got ", xt.sizes());
    const Quantiser q = quantiserOf(op, dstType, roundMode, scaleAlg, dstTypeMax);
    checkMxOutput(op, *q.format, y1, xt.sizes());
    checkMxOutput(op, *q.format, y2, xt.sizes());
    const int64_t d = xt.dim();
    checkScaleOut(op, "mxscale1Out", mxscale1Out, s1, pairedScaleShape(xt.sizes(), d - 1, 32));
    checkScaleOut(op, "mxscale2Out", mxscale2Out, s2, pairedScaleShape(xt.sizes(), d - 2, 32));
    return Prepared{{xt}, [=]() mutable {
                      quantiseInto(xt, d - 1, 32, q, y1, s1);
                      quantiseInto(xt, d - 2, 32, q, y2, s2);
                    },
                    {y1, s1, y2, s2}};
  });
}
NPU_ATEN_OP(DynamicMxQuantWithDualAxisV2, "x, roundMode, dstType, scaleAlg, dstTypeMax, y1Out, mxscale1Out, y2Out, mxscale2Out");

// Along the last dimension: level0Scale = max |x| / 6 per block of level0BlockSize (float32; a zero block scales
// to 0 and its values stay 0), t = x / level0Scale held in x's dtype, then y = float4_e2m1 MX blocks of
// level1BlockSize over t (OCP scales, level1ScaleOut e8m0 pairs) in roundMode. smoothScale is not taken.
extern "C" NOP_API aclnnStatus aclnnDynamicDualLevelMxQuantGetWorkspaceSize(
    const aclTensor* x, const aclTensor* smoothScaleOptional, char* roundMode, int64_t level0BlockSize,
    int64_t level1BlockSize, aclTensor* yOut, aclTensor* level0ScaleOut, aclTensor* level1ScaleOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnDynamicDualLevelMxQuant", workspaceSize, executor, [&] {
    const char* op = "aclnnDynamicDualLevelMxQuant";
    at::Tensor xt = requiredTensor(x, "x"), y = requiredTensor(yOut, "yOut");
    at::Tensor l0 = requiredTensor(level0ScaleOut, "level0ScaleOut");
    at::Tensor l1 = requiredTensor(level1ScaleOut, "level1ScaleOut");
    TORCH_CHECK(smoothScaleOptional == nullptr, op, ": smoothScale is not taken; pass NULL");
    TORCH_CHECK(xt.scalar_type() == at::kHalf || xt.scalar_type() == at::kBFloat16, op,
                ": x must be float16 or bfloat16, got ", xt.scalar_type());
    TORCH_CHECK(xt.dim() >= 1 && xt.dim() <= 7, op, ": x must have 1 to 7 dimensions, got ", xt.sizes());
    TORCH_CHECK(level0BlockSize == 512 && level1BlockSize == 32, op, ": the block sizes are 512 and 32, got ",
                level0BlockSize, " and ", level1BlockSize);
    const Quantiser q = quantiserOf(op, kAclFloat4E2M1, roundMode, 0, 0.0);
    checkMxOutput(op, *q.format, y, xt.sizes());
    const int64_t n = xt.size(-1), blocks0 = (n + 511) / 512;
    std::vector<int64_t> l0_shape = xt.sizes().vec();
    l0_shape.back() = blocks0;
    TORCH_CHECK(l0.scalar_type() == at::kFloat && l0.sizes().equals(l0_shape), op, ": level0ScaleOut must be float32 ",
                at::IntArrayRef(l0_shape), ", got ", l0.scalar_type(), " ", l0.sizes());
    checkScaleOut(op, "level1ScaleOut", level1ScaleOut, l1, pairedScaleShape(xt.sizes(), xt.dim() - 1, 32));
    return Prepared{{xt}, [=]() mutable {
                      const at::Tensor xf = xt.to(at::kFloat);
                      std::vector<int64_t> blocked = xf.sizes().vec();
                      blocked.back() = blocks0;
                      blocked.push_back(512);
                      const at::Tensor padded = at::constant_pad_nd(xf, {0, blocks0 * 512 - n}, 0).reshape(blocked);
                      const at::Tensor s0 = at::amax(padded.abs(), {-1}, /*keepdim=*/true) / 6.0f;
                      const at::Tensor t = at::where(s0 == 0, at::zeros_like(padded), padded / s0);
                      std::vector<int64_t> flat = xf.sizes().vec();
                      flat.back() = blocks0 * 512;
                      const at::Tensor held = t.reshape(flat).narrow(-1, 0, n).to(xt.scalar_type());
                      l0.copy_(s0.squeeze(-1));
                      quantiseInto(held, xt.dim() - 1, 32, q, y, l1);
                    },
                    {y, l0, l1}};
  });
}
NPU_ATEN_OP(DynamicDualLevelMxQuant, "x, smoothScaleOptional, roundMode, level0BlockSize, level1BlockSize, yOut, level0ScaleOut, level1ScaleOut");
