// QuantMatmulOps.cpp - quantized inference matmuls: aclnnQuantMatmulV4 (int8 x int8, int32
// accumulation, dequantised by per-tensor / per-channel scales and per-token scales),
// aclnnWeightQuantBatchMatmulV2 (float activations x int8 / int4 weights dequantised per tensor,
// channel or group, optionally requantised to int8) and aclnnTransQuantParamV2 (float32 scales and
// offsets packed into the int64 form both take).
//
// The int64 form, as the device ops read it: bits 0-31 hold the scale's float32 bits truncated to
// FP19 (mask 0xFFFFE000), bit 46 is set, and bits 37-45 hold a 9-bit signed offset in [-256, 255].
// Integer products are exact (int64 accumulation); dequantised weights are formed in the
// activations' dtype and multiplied in float32, as the cube units accumulate.
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/round.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "AtenOpSupport.h"
#include "QuantPacking.h"

using namespace npu::opslib::aten;
using npu::opslib::aten::quant::saturateInt8;
using npu::opslib::aten::quant::unpackInt4;
using npu::opslib::aten::quant::unpackOffset;
using npu::opslib::aten::quant::unpackScale;

namespace {

constexpr int64_t kScaleMask = 0xFFFFE000LL;
constexpr int64_t kPackedFlag = 1LL << 46;

int32_t floatBits(float v) {
  int32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}

// A per-tensor / per-channel parameter of n output columns: shape (1,), (n,), (1, 1) or (1, n).
at::Tensor columnParam(const char* op, const char* what, const at::Tensor& t, int64_t n) {
  TORCH_CHECK(t.dim() >= 1 && t.dim() <= 2 && (t.dim() == 1 || t.size(0) == 1) &&
                  (t.size(-1) == 1 || t.size(-1) == n),
              op, ": ", what, " must have shape (1,), (n,), (1, 1) or (1, n) with n = ", n, ", got ", t.sizes());
  return t.reshape({t.size(-1)});
}

}  // namespace

// out = scale packed as above; with offset, the offsets too (1-d inputs broadcast to the longer one).
extern "C" NOP_API aclnnStatus aclnnTransQuantParamV2GetWorkspaceSize(const aclTensor* scale, const aclTensor* offset,
                                                                     int64_t roundMode, aclTensor* out,
                                                                     uint64_t* workspaceSize,
                                                                     aclOpExecutor** executor) {
  return prepareOp("aclnnTransQuantParamV2", workspaceSize, executor, [&] {
    const char* op = "aclnnTransQuantParamV2";
    at::Tensor s = requiredTensor(scale, "scale"), off = hostTensor(offset), o = requiredTensor(out, "out");
    TORCH_CHECK(s.scalar_type() == at::kFloat && (!off.defined() || off.scalar_type() == at::kFloat), op,
                ": scale and offset must be float32");
    TORCH_CHECK(roundMode == 0 || roundMode == 1, op, ": round_mode must be 0 (truncate) or 1 (round), got ",
                roundMode);
    return Prepared{{s, off}, [=]() mutable {
                      at::Tensor sc = s, of = off;
                      if (of.defined() && sc.dim() == 1 && of.dim() == 1) {
                        const int64_t n = std::max(sc.numel(), of.numel());
                        sc = sc.expand({n});
                        of = of.expand({n});
                      }
                      sc = sc.contiguous();
                      at::Tensor result = at::empty(o.sizes(), o.options().dtype(at::kLong));
                      const float* sp = sc.const_data_ptr<float>();
                      int64_t* rp = result.mutable_data_ptr<int64_t>();
                      at::Tensor ofc = of.defined() ? of.expand(sc.sizes()).contiguous() : of;
                      const float* op_ = ofc.defined() ? ofc.const_data_ptr<float>() : nullptr;
                      for (int64_t i = 0; i < sc.numel(); ++i) {
                        uint32_t bits = static_cast<uint32_t>(floatBits(sp[i]));
                        if (roundMode == 1) bits += 0x0FFFu + ((bits >> 13) & 1u);  // nearest-even at FP19
                        int64_t v = (static_cast<int64_t>(bits) & kScaleMask) | kPackedFlag;
                        if (op_ != nullptr) {
                          const int64_t q = std::max<int64_t>(-256, std::min<int64_t>(255, std::llrint(op_[i])));
                          v = (v & 0x4000FFFFFFFFLL) | ((q & 0x1FF) << 37);
                        }
                        rp[i] = v;
                      }
                      o.copy_(result.view(o.sizes()));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(TransQuantParamV2, "scale, offset, roundMode, out");

// out = (x1 @ x2 [+ bias if int32]) * scale [* pertokenScale] [+ bias if float] [+ offset if int8]
extern "C" NOP_API aclnnStatus aclnnQuantMatmulV4GetWorkspaceSize(const aclTensor* x1, const aclTensor* x2,
                                                                 const aclTensor* scale, const aclTensor* offset,
                                                                 const aclTensor* pertokenScale,
                                                                 const aclTensor* bias, bool transposeX1,
                                                                 bool transposeX2, aclTensor* out,
                                                                 uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnQuantMatmulV4", workspaceSize, executor, [&] {
    const char* op = "aclnnQuantMatmulV4";
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2"), s = requiredTensor(scale, "scale");
    at::Tensor off = hostTensor(offset), pt = hostTensor(pertokenScale), bi = hostTensor(bias);
    at::Tensor o = requiredTensor(out, "out");
    if (transposeX1) a = a.transpose(-1, -2);
    if (transposeX2) b = b.transpose(-1, -2);
    TORCH_CHECK(a.scalar_type() == b.scalar_type() && (a.scalar_type() == at::kChar || a.scalar_type() == at::kInt),
                op, ": x1 and x2 must both be int8 (or int32 carrying int4), got ", a.scalar_type(), " and ",
                b.scalar_type());
    TORCH_CHECK(a.size(-1) * (a.scalar_type() == at::kInt ? 8 : 1) == b.size(-2), op, ": x1 ", a.sizes(),
                " and x2 ", b.sizes(), " do not multiply (k differs)");
    const int64_t n = b.size(-1) * (b.scalar_type() == at::kInt ? 8 : 1);
    const at::ScalarType out_type = o.scalar_type();
    TORCH_CHECK(out_type == at::kChar || out_type == at::kHalf || out_type == at::kBFloat16 || out_type == at::kInt, op,
                ": the output must be int8, float16, bfloat16 or int32, got ", out_type);
    TORCH_CHECK(s.scalar_type() == at::kFloat || s.scalar_type() == at::kBFloat16 || s.scalar_type() == at::kLong, op,
                ": scale must be float32, bfloat16 or int64 (npu_trans_quant_param), got ", s.scalar_type());
    at::Tensor sc = columnParam(op, "scale", s, n);
    TORCH_CHECK(!off.defined() || out_type == at::kChar, op, ": offset is only taken with an int8 output");
    at::Tensor of = off.defined() ? columnParam(op, "offset", off, n).to(at::kFloat) : off;
    const int64_t m = a.size(-2);
    TORCH_CHECK(!pt.defined() || (pt.dim() == 1 && pt.size(0) == m), op, ": pertoken_scale must have shape (m,) = (",
                m, ",), got ", pt.sizes());
    TORCH_CHECK(!pt.defined() || out_type == at::kHalf || out_type == at::kBFloat16, op,
                ": pertoken_scale is only taken with a float16 or bfloat16 output");
    TORCH_CHECK(!bi.defined() || bi.scalar_type() == at::kInt || bi.scalar_type() == at::kFloat ||
                    bi.scalar_type() == at::kBFloat16 || bi.scalar_type() == at::kHalf,
                op, ": bias must be int32, float32, bfloat16 or float16, got ", bi.scalar_type());
    TORCH_CHECK(!bi.defined() || bi.size(-1) == n, op, ": bias must end in n = ", n, ", got ", bi.sizes());
    TORCH_CHECK(out_type != at::kInt || (!pt.defined() && (!bi.defined() || bi.scalar_type() == at::kInt)), op,
                ": an int32 output takes no pertoken_scale and only an int32 bias");
    return Prepared{{a, b, s, off, pt, bi}, [=]() mutable {
                      at::Tensor lhs = a.scalar_type() == at::kInt ? unpackInt4(a) : a;
                      at::Tensor rhs = b.scalar_type() == at::kInt ? unpackInt4(b) : b;
                      at::Tensor acc = at::matmul(lhs.to(at::kLong), rhs.to(at::kLong));
                      const bool int_bias = bi.defined() && bi.scalar_type() == at::kInt;
                      if (int_bias) acc = acc + bi.to(at::kLong);
                      at::Tensor result;
                      if (out_type == at::kInt) {
                        result = acc.to(at::kInt);
                      } else {
                        at::Tensor scale_f = sc.scalar_type() == at::kLong ? unpackScale(sc) : sc.to(at::kFloat);
                        at::Tensor v = acc.to(at::kDouble) * scale_f.to(at::kDouble);
                        if (pt.defined()) v = v * pt.to(at::kDouble).unsqueeze(-1);
                        if (bi.defined() && !int_bias) v = v + bi.to(at::kDouble);
                        if (out_type == at::kChar) {
                          if (of.defined()) {
                            v = v + of.to(at::kDouble);
                          } else if (sc.scalar_type() == at::kLong) {
                            v = v + unpackOffset(sc).to(at::kDouble);
                          }
                          result = saturateInt8(v);
                        } else {
                          result = v.to(at::kFloat).to(out_type);
                        }
                      }
                      o.copy_(result.expand(o.sizes()));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(QuantMatmulV4, "x1, x2, scale, offset, pertokenScale, bias, transposeX1, transposeX2, out");

// y = x @ ((weight + antiquantOffset) * antiquantScale) + bias, then, with quantScale,
// y = round(y * quantScale + quantOffset) as int8.
extern "C" NOP_API aclnnStatus aclnnWeightQuantBatchMatmulV2GetWorkspaceSize(
    const aclTensor* x, const aclTensor* weight, const aclTensor* antiquantScale, const aclTensor* antiquantOffset,
    const aclTensor* quantScale, const aclTensor* quantOffset, const aclTensor* bias, int64_t antiquantGroupSize,
    int64_t innerPrecise, aclTensor* y, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnWeightQuantBatchMatmulV2", workspaceSize, executor, [&] {
    const char* op = "aclnnWeightQuantBatchMatmulV2";
    at::Tensor xt = requiredTensor(x, "x"), w = requiredTensor(weight, "weight");
    at::Tensor as = requiredTensor(antiquantScale, "antiquant_scale"), ao = hostTensor(antiquantOffset);
    at::Tensor qs = hostTensor(quantScale), qo = hostTensor(quantOffset), bi = hostTensor(bias);
    at::Tensor out = requiredTensor(y, "y");
    TORCH_CHECK(xt.scalar_type() == at::kHalf || xt.scalar_type() == at::kBFloat16 || xt.scalar_type() == at::kFloat,
                op, ": x must be float16, bfloat16 or float32, got ", xt.scalar_type());
    TORCH_CHECK(w.scalar_type() == at::kChar || w.scalar_type() == at::kInt, op,
                ": weight must be int8 (or int32 carrying 8 int4 values each), got ", w.scalar_type());
    TORCH_CHECK(xt.dim() >= 2 && w.dim() == 2, op, ": x must be (..., M, K) and weight (K, N), got ", xt.sizes(),
                " and ", w.sizes());
    const int64_t k = xt.size(-1), n = w.size(1) * (w.scalar_type() == at::kInt ? 8 : 1);
    TORCH_CHECK(w.size(0) == k, op, ": x ", xt.sizes(), " and weight ", w.sizes(), " do not multiply (k differs)");
    TORCH_CHECK(innerPrecise == 0 || innerPrecise == 1, op, ": inner_precise must be 0 or 1, got ", innerPrecise);
    const bool packed = as.scalar_type() == at::kLong;
    TORCH_CHECK(packed || as.scalar_type() == xt.scalar_type(), op, ": antiquant_scale must have x's dtype (",
                xt.scalar_type(), ") or be int64 (npu_trans_quant_param), got ", as.scalar_type());
    TORCH_CHECK(!ao.defined() || ao.sizes() == as.sizes(), op, ": antiquant_offset ", ao.sizes(),
                " must have antiquant_scale's shape ", as.sizes());
    TORCH_CHECK(!ao.defined() || (packed ? ao.scalar_type() == at::kInt : ao.scalar_type() == as.scalar_type()), op,
                ": antiquant_offset must be ", packed ? "int32 with an int64 antiquant_scale" : "antiquant_scale's dtype",
                ", got ", ao.scalar_type());
    const int64_t groups = antiquantGroupSize > 0 ? (k + antiquantGroupSize - 1) / antiquantGroupSize : 0;
    if (antiquantGroupSize > 0) {
      TORCH_CHECK(antiquantGroupSize % 32 == 0 && antiquantGroupSize < k, op,
                  ": antiquant_group_size must be a multiple of 32 in [32, K-1] with K = ", k, ", got ",
                  antiquantGroupSize);
      TORCH_CHECK(!packed && as.dim() == 2 && as.size(0) == groups && as.size(1) == n, op,
                  ": per-group antiquant_scale must have shape (ceil(K / group), N) = (", groups, ", ", n, "), got ",
                  as.sizes());
    } else {
      TORCH_CHECK(antiquantGroupSize == 0, op, ": antiquant_group_size must be 0 or a positive group size, got ",
                  antiquantGroupSize);
      columnParam(op, "antiquant_scale", as, n);
    }
    TORCH_CHECK(!qo.defined() || qs.defined(), op, ": quant_offset needs quant_scale");
    TORCH_CHECK(!qs.defined() || qs.scalar_type() == at::kFloat || qs.scalar_type() == at::kLong, op,
                ": quant_scale must be float32 or int64 (npu_trans_quant_param), got ", qs.scalar_type());
    TORCH_CHECK(!qs.defined() || !packed, op, ": quant_scale cannot be combined with an int64 antiquant_scale");
    if (qs.defined()) columnParam(op, "quant_scale", qs, n);
    if (qo.defined()) columnParam(op, "quant_offset", qo, n);
    TORCH_CHECK(!bi.defined() || bi.size(-1) == n, op, ": bias must end in n = ", n, ", got ", bi.sizes());
    return Prepared{{xt, w, as, ao, qs, qo, bi}, [=]() mutable {
                      const at::ScalarType compute = xt.scalar_type();
                      at::Tensor wq = (w.scalar_type() == at::kInt ? unpackInt4(w) : w).to(compute);
                      at::Tensor scale = packed ? unpackScale(as).to(compute) : as;
                      at::Tensor offset = ao.defined() ? ao.to(compute) : ao;
                      if (antiquantGroupSize > 0) {  // row k uses group k / size
                        at::Tensor rows = at::floor_divide(at::arange(k, at::TensorOptions().dtype(at::kLong)), antiquantGroupSize);
                        scale = scale.index_select(0, rows);
                        if (offset.defined()) offset = offset.index_select(0, rows);
                      } else {
                        scale = columnParam(op, "antiquant_scale", scale, n);
                        if (offset.defined()) offset = columnParam(op, "antiquant_offset", offset, n);
                      }
                      at::Tensor wd = (offset.defined() ? wq + offset : wq) * scale;  // in x's dtype
                      at::Tensor v = at::matmul(xt.to(at::kFloat), wd.to(at::kFloat));
                      if (bi.defined()) v = v + bi.to(at::kFloat);
                      at::Tensor result;
                      if (qs.defined()) {
                        at::Tensor q = columnParam(op, "quant_scale", qs, n);
                        at::Tensor qscale = q.scalar_type() == at::kLong ? unpackScale(q) : q;
                        at::Tensor shift = qo.defined() ? columnParam(op, "quant_offset", qo, n)
                                           : q.scalar_type() == at::kLong ? unpackOffset(q)
                                                                          : at::Tensor();
                        at::Tensor r = v * qscale;
                        result = saturateInt8(shift.defined() ? r + shift : r);
                      } else {
                        result = v.to(compute);
                      }
                      out.copy_(result);
                    },
                    {out}};
  });
}
NPU_ATEN_OP(WeightQuantBatchMatmulV2, "x, weight, antiquantScale, antiquantOffset, quantScale, quantOffset, bias, antiquantGroupSize, innerPrecise, y");
