// QuantMiscOps.cpp - device ops for the remaining quantised matmul / conv ops: aclnnGroupedMatmulSwigluQuantWeightNZ
// and aclnnGroupedMatmulSwigluQuantV2 (MoE grouped int8 / int4 matmul, dequantised, SwiGLU, then per-token dynamic
// int8 quantisation).
//
// Integer products are exact (int64) and dequantised in float32, as the cube units accumulate; quantisation rounds
// half to even and saturates to int8. The chip's mx / float8-output forms are refused: opslib holds no tensor of
// those number formats (float8 operands arrive widened to float16 by the adapters, which is exact).
#include <ATen/TensorOperators.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/round.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/zeros.h>

#include <string>
#include <utility>
#include <vector>

#include "AtenOpSupport.h"
#include "QuantizeSupport.h"

using namespace npu::opslib::aten;

namespace {

// The operand forms, told apart by the dtypes of x and weight.
enum class GmmForm {
  kA8W8,   // int8 x, int8 weight
  kA8W4,   // int8 x, int4 weight (eight per int32): (x - 8) @ w * scale + assist (the MSD split of x, recombined)
  kA4W4,   // int4 x and weight (eight per int32)
  kFloat,  // float16 x and weight holding float8 values (widened by the adapter)
};

struct GmmSwigluArgs {
  at::Tensor x, weight, weightScale, xScale, groupList, smoothScale, assist;
  at::Tensor y, scale, offset;  // offset: the first version's scalar output offset (undefined for V2)
  GmmForm form = GmmForm::kA8W8;
  int64_t dequantMode = 0;   // 0: per-channel weight scale (E, N); 1: per k group (E, G, N)
  int64_t dequantDtype = 0;  // GE code of the dequantised value: 0 float32, 1 float16, 27 bfloat16
  int64_t groupListType = 0; // 0: cumulative row ends; 1: row counts
};

// int8 operands as they are; int32 operands carry eight int4 values along the last dimension.
at::Tensor exactValues(const at::Tensor& t) {
  return (t.scalar_type() == at::kInt ? quant::unpackInt4(t) : t).to(at::kLong);
}

// float32 scale values: int64 scales hold float32 bits in bits 0-31 (npu_trans_quant_param's form).
at::Tensor floatScale(const at::Tensor& s) {
  return s.scalar_type() == at::kLong ? quant::unpackScale(s) : s.to(at::kFloat);
}

// [start, end) rows of each group: cumulative ends (listType 0) or counts (1). Read when the kernel runs (the list
// is device data an earlier op may still be writing at prepare time).
std::vector<std::pair<int64_t, int64_t>> rowRanges(const char* op, const at::Tensor& groupList, int64_t listType,
                                                   int64_t rows) {
  const at::Tensor v = groupList.to(at::kLong).contiguous();
  const int64_t* p = v.const_data_ptr<int64_t>();
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t start = 0;
  for (int64_t g = 0; g < v.numel(); ++g) {
    TORCH_CHECK(p[g] >= 0, op, ": groupList values must be non-negative, got ", p[g], " at ", g);
    const int64_t end = listType == 0 ? p[g] : start + p[g];
    TORCH_CHECK(end >= start && end <= rows, op, ": groupList must give non-decreasing row ends within [0, ", rows,
                "] (groupListType ", listType, "), got end ", end, " after ", start, " at group ", g);
    ranges.emplace_back(start, end);
    start = end;
  }
  return ranges;
}

void checkGmmSwiglu(const char* op, GmmSwigluArgs& a) {
  const at::ScalarType xt = a.x.scalar_type(), wt = a.weight.scalar_type();
  if (xt == at::kChar && wt == at::kChar) {
    a.form = GmmForm::kA8W8;
  } else if (xt == at::kChar && wt == at::kInt) {
    a.form = GmmForm::kA8W4;
  } else if (xt == at::kInt && wt == at::kInt) {
    a.form = GmmForm::kA4W4;
  } else if (xt == at::kHalf && wt == at::kHalf) {
    a.form = GmmForm::kFloat;
  } else {
    TORCH_CHECK(false, op, ": x / weight must be int8 / int8 (A8W8), int8 / int32 carrying int4 (A8W4), int32 / ",
                "int32 carrying int4 (A4W4) or float16 / float16 (float8 values), got ", xt, " / ", wt);
  }
  TORCH_CHECK(a.x.dim() == 2 && a.weight.dim() == 3, op, ": x must be (M, K) and weight (E, K, N), got ",
              a.x.sizes(), " and ", a.weight.sizes());
  const int64_t xPack = xt == at::kInt ? 8 : 1, wPack = wt == at::kInt ? 8 : 1;
  const int64_t m = a.x.size(0), k = a.x.size(1) * xPack, e = a.weight.size(0), n = a.weight.size(2) * wPack;
  TORCH_CHECK(a.weight.size(1) == k, op, ": x (", m, ", ", k, ") and weight ", a.weight.sizes(),
              " do not multiply (K differs)");
  TORCH_CHECK(n % 2 == 0 && n > 0, op, ": N (", n, ") must be even: SwiGLU splits it in halves");
  TORCH_CHECK(a.dequantMode == 0 || a.dequantMode == 1, op, ": dequantMode must be 0 (per channel) or 1 (per k ",
              "group); 2 selects mx quantisation, a chip number format the software NPU does not have");
  TORCH_CHECK(a.dequantMode == 0 || a.form == GmmForm::kA8W4, op, ": dequantMode 1 (per k group) applies to A8W4 ",
              "(int8 x, int4 weight) only");
  TORCH_CHECK(a.dequantDtype == 0 || a.dequantDtype == 1 || a.dequantDtype == 27, op,
              ": dequantDtype must be 0 (float32), 1 (float16) or 27 (bfloat16), got ", a.dequantDtype);
  TORCH_CHECK(a.groupListType == 0 || a.groupListType == 1, op, ": groupListType must be 0 (cumulative) or 1 ",
              "(counts), got ", a.groupListType);
  const at::ScalarType st = a.weightScale.scalar_type();
  TORCH_CHECK(st == at::kFloat || st == at::kHalf || st == at::kBFloat16 ||
                  (st == at::kLong && a.form != GmmForm::kFloat),
              op, ": weightScale must be float32, float16, bfloat16 or int64 (float32 bits), got ", st);
  if (a.dequantMode == 0) {
    TORCH_CHECK(a.weightScale.dim() == 2 && a.weightScale.size(0) == e && a.weightScale.size(1) == n, op,
                ": weightScale must be (", e, ", ", n, "), got ", a.weightScale.sizes());
  } else {
    TORCH_CHECK(a.weightScale.dim() == 3 && a.weightScale.size(0) == e && a.weightScale.size(2) == n &&
                    a.weightScale.size(1) > 0 && k % a.weightScale.size(1) == 0,
                op, ": per-group weightScale must be (", e, ", G, ", n, ") with G dividing K = ", k, ", got ",
                a.weightScale.sizes());
  }
  TORCH_CHECK(a.xScale.scalar_type() == at::kFloat && a.xScale.dim() == 1 && a.xScale.size(0) == m, op,
              ": xScale must be float32 (", m, ",), got ", a.xScale.scalar_type(), " ", a.xScale.sizes());
  TORCH_CHECK((a.groupList.scalar_type() == at::kLong || a.groupList.scalar_type() == at::kInt) &&
                  a.groupList.dim() == 1 && a.groupList.size(0) == e,
              op, ": groupList must be a 1-D int64 tensor of ", e, " (weight's experts), got ",
              a.groupList.scalar_type(), " ", a.groupList.sizes());
  if (a.form == GmmForm::kA8W4) {
    TORCH_CHECK(a.assist.defined(), op, ": A8W4 needs the weight assist matrix (E, N) (8 * the column sums of the ",
                "scaled int4 weight, generated offline)");
  }
  if (a.assist.defined()) {
    TORCH_CHECK(a.form == GmmForm::kA8W4, op, ": the weight assist matrix applies to A8W4 only");
    TORCH_CHECK(a.assist.scalar_type() == at::kFloat && a.assist.dim() == 2 && a.assist.size(0) == e &&
                    a.assist.size(1) == n,
                op, ": the weight assist matrix must be float32 (", e, ", ", n, "), got ", a.assist.scalar_type(),
                " ", a.assist.sizes());
  }
  if (a.smoothScale.defined()) {
    TORCH_CHECK(a.smoothScale.scalar_type() == at::kFloat && a.smoothScale.size(0) == e &&
                    (a.smoothScale.dim() == 1 || (a.smoothScale.dim() == 2 && a.smoothScale.size(1) == n / 2)),
                op, ": smoothScale must be float32 (", e, ", ", n / 2, ") or (", e, ",), got ",
                a.smoothScale.scalar_type(), " ", a.smoothScale.sizes());
  }
  TORCH_CHECK(a.y.scalar_type() == at::kChar && a.y.dim() == 2 && a.y.size(0) == m && a.y.size(1) == n / 2, op,
              ": output must be int8 (", m, ", ", n / 2, "), got ", a.y.scalar_type(), " ", a.y.sizes());
  TORCH_CHECK(a.scale.scalar_type() == at::kFloat && a.scale.dim() == 1 && a.scale.size(0) == m, op,
              ": outputScale must be float32 (", m, ",), got ", a.scale.scalar_type(), " ", a.scale.sizes());
  if (a.offset.defined()) {
    TORCH_CHECK(a.offset.scalar_type() == at::kFloat && a.offset.numel() == 1, op,
                ": outputOffset must be a float32 scalar, got ", a.offset.scalar_type(), " ", a.offset.sizes());
  }
}

// The dequantised (rows, N) block of one expert, float32.
at::Tensor dequantGroup(const GmmSwigluArgs& a, const at::Tensor& xRows, int64_t expert, const at::Tensor& xScale) {
  const at::Tensor w = a.weight[expert];
  const at::Tensor ws = floatScale(a.weightScale[expert]);
  at::Tensor c;
  if (a.form == GmmForm::kFloat) {
    c = at::matmul(xRows.to(at::kFloat), w.to(at::kFloat)) * ws.reshape({1, -1});
  } else if (a.form == GmmForm::kA8W4) {
    // MSD: x = 16 * high + low + 8, so high and low products recombine to (x - 8) @ w; the assist matrix supplies
    // the 8 * column sums back. Exact per k group, scaled in float32.
    const at::Tensor xs = exactValues(xRows) - 8, wi = exactValues(w);
    const at::Tensor scales = ws.reshape({-1, ws.size(-1)});  // (G, N)
    const int64_t groups = scales.size(0), step = xs.size(1) / groups;
    c = at::zeros({xs.size(0), wi.size(1)}, at::TensorOptions().dtype(at::kFloat));
    for (int64_t g = 0; g < groups; ++g) {
      const at::Tensor acc = at::matmul(xs.narrow(1, g * step, step), wi.narrow(0, g * step, step));
      c = c + acc.to(at::kFloat) * scales[g].reshape({1, -1});
    }
    c = c + a.assist[expert].to(at::kFloat).reshape({1, -1});
  } else {
    c = at::matmul(exactValues(xRows), exactValues(w)).to(at::kFloat) * ws.reshape({1, -1});
  }
  c = c * xScale.reshape({-1, 1});
  if (a.dequantDtype == 1) c = c.to(at::kHalf).to(at::kFloat);
  if (a.dequantDtype == 27) c = c.to(at::kBFloat16).to(at::kFloat);
  return c;
}

void runGmmSwiglu(const char* op, const GmmSwigluArgs& a) {
  const int64_t m = a.x.size(0);
  const auto ranges = rowRanges(op, a.groupList, a.groupListType, m);
  // Rows past the last group belong to no expert: they stay 0 (upstream leaves them undefined).
  at::Tensor q = at::zeros({m, a.y.size(1)}, at::TensorOptions().dtype(at::kFloat));
  at::Tensor s = at::zeros({m}, at::TensorOptions().dtype(at::kFloat));
  const at::Tensor xScale = a.xScale.to(at::kFloat);
  for (int64_t e = 0; e < static_cast<int64_t>(ranges.size()); ++e) {
    const auto [start, end] = ranges[e];
    if (end == start) continue;
    const at::Tensor c = dequantGroup(a, a.x.narrow(0, start, end - start), e, xScale.narrow(0, start, end - start));
    const int64_t half = c.size(1) / 2;
    const at::Tensor act = c.narrow(1, 0, half), gate = c.narrow(1, half, half);
    at::Tensor v = act * at::sigmoid(act) * gate;  // swish(act) * gate
    if (a.smoothScale.defined()) {
      const at::Tensor sm = a.smoothScale[e].to(at::kFloat);
      v = v * (sm.dim() == 0 ? sm : sm.reshape({1, -1}));
    }
    // Dynamic per-token int8: m = 127 / amax(row), y = rint(v * m), scale = 1 / m.
    const at::Tensor mul = quant::over(127.0, at::amax(v.abs(), {-1}));
    q.narrow(0, start, end - start).copy_(at::round(v * mul.unsqueeze(-1)));
    s.narrow(0, start, end - start).copy_(at::reciprocal(mul));
  }
  at::Tensor y = a.y;
  quant::store(y, q, quant::int8Grid());  // NaN (an all-zero row: 0 * inf) becomes 0
  a.scale.copy_(s);
  if (a.offset.defined()) a.offset.fill_(0);  // symmetric quantisation: no offset
}

std::vector<at::Tensor> gmmSwigluInputs(const GmmSwigluArgs& a) {
  return {a.x, a.weight, a.weightScale, a.xScale, a.groupList, a.smoothScale, a.assist};
}

// A tensor list holding exactly one tensor (the software NPU has no multi-tensor mx form), or none.
at::Tensor singleTensor(const char* op, const char* what, const aclTensorList* list, bool required) {
  const std::vector<at::Tensor> ts = list == nullptr ? std::vector<at::Tensor>() : hostTensors(list);
  TORCH_CHECK(ts.size() == 1 || (!required && ts.empty()), op, ": ", what, " must hold ",
              required ? "exactly one tensor" : "one tensor or none", ", got ", ts.size());
  return ts.empty() ? at::Tensor() : ts[0];
}

}  // namespace

// First version (weight given in the chip's NZ storage upstream; the software NPU reads it in its logical shape):
// output[rows of group e] = int8 per-token quantisation of swish(C[:, :N/2]) * C[:, N/2:],
// C = (x @ weight[e]) * weightScale[e] * xScale[rows]; groupList holds cumulative row ends. With an int4 weight
// (A8W4), bias is the weight assist matrix: C = ((x - 8) @ weight[e] * weightScale[e] + bias[e]) * xScale.
extern "C" NOP_API aclnnStatus aclnnGroupedMatmulSwigluQuantWeightNZGetWorkspaceSize(
    const aclTensor* x, const aclTensor* weight, const aclTensor* bias, const aclTensor* offset,
    const aclTensor* weightScale, const aclTensor* xScale, const aclTensor* groupList, aclTensor* output,
    aclTensor* outputScale, aclTensor* outputOffset, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnGroupedMatmulSwigluQuantWeightNZ", workspaceSize, executor, [&] {
    const char* op = "aclnnGroupedMatmulSwigluQuantWeightNZ";
    GmmSwigluArgs a;
    a.x = requiredTensor(x, "x");
    a.weight = requiredTensor(weight, "weight");
    a.weightScale = requiredTensor(weightScale, "weightScale");
    a.xScale = requiredTensor(xScale, "xScale");
    a.groupList = requiredTensor(groupList, "groupList");
    a.y = requiredTensor(output, "output");
    a.scale = requiredTensor(outputScale, "outputScale");
    a.offset = requiredTensor(outputOffset, "outputOffset");
    const at::Tensor b = hostTensor(bias);
    TORCH_CHECK(!hostTensor(offset).defined(), op, ": offset (an asymmetric weight offset) is not supported; pass "
                "NULL");
    TORCH_CHECK(a.x.scalar_type() == at::kChar, op, ": x must be int8, got ", a.x.scalar_type());
    TORCH_CHECK(!b.defined() || a.weight.scalar_type() == at::kInt, op, ": bias is the A8W4 weight assist matrix; ",
                "an int8 weight takes none");
    a.assist = b;
    a.dequantMode = a.weightScale.dim() == 3 ? 1 : 0;
    checkGmmSwiglu(op, a);
    return Prepared{gmmSwigluInputs(a), [=]() { runGmmSwiglu(op, a); }, {a.y, a.scale, a.offset}};
  });
}
NPU_ATEN_OP(GroupedMatmulSwigluQuantWeightNZ,
            "x, weight, bias, offset, weightScale, xScale, groupList, output, outputScale, outputOffset");

// Second version: the same computation on one-tensor lists, with the dequant mode (0 per channel, 1 per k group for
// A8W4), the dequantised value's dtype, A4W4's smoothScale (E, N/2) or (E,) multiplied in after SwiGLU, and group
// lists of cumulative ends or counts. quantMode 0 (per token) only: the others are mx or float8 outputs.
extern "C" NOP_API aclnnStatus aclnnGroupedMatmulSwigluQuantV2GetWorkspaceSize(
    const aclTensor* x, const aclTensorList* weight, const aclTensorList* weightScale,
    const aclTensorList* weightAssistMatrix, const aclTensor* bias, const aclTensor* xScale,
    const aclTensor* smoothScale, const aclTensor* groupList, int64_t dequantMode, int64_t dequantDtype,
    int64_t quantMode, int64_t groupListType, const aclIntArray* tuningConfig, aclTensor* output,
    aclTensor* outputScale, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnGroupedMatmulSwigluQuantV2", workspaceSize, executor, [&] {
    const char* op = "aclnnGroupedMatmulSwigluQuantV2";
    GmmSwigluArgs a;
    a.x = requiredTensor(x, "x");
    a.weight = singleTensor(op, "weight", weight, true);
    a.weightScale = singleTensor(op, "weightScale", weightScale, true);
    a.assist = singleTensor(op, "weightAssistMatrix", weightAssistMatrix, false);
    a.xScale = requiredTensor(xScale, "xScale");
    a.smoothScale = hostTensor(smoothScale);
    a.groupList = requiredTensor(groupList, "groupList");
    a.y = requiredTensor(output, "output");
    a.scale = requiredTensor(outputScale, "outputScale");
    TORCH_CHECK(!hostTensor(bias).defined(), op, ": bias is not supported (as documented); pass NULL");
    TORCH_CHECK(quantMode == 0, op, ": quantMode must be 0 (per token); ", quantMode,
                " selects per-group or mx quantisation of a chip number format the software NPU does not have");
    for (int64_t v : intArray(tuningConfig)) {  // a tiling hint: nothing to tile here
      TORCH_CHECK(v >= 0, op, ": tuningConfig values must not be negative, got ", v);
    }
    a.dequantMode = dequantMode;
    a.dequantDtype = dequantDtype;
    a.groupListType = groupListType;
    checkGmmSwiglu(op, a);
    return Prepared{gmmSwigluInputs(a), [=]() { runGmmSwiglu(op, a); }, {a.y, a.scale}};
  });
}
NPU_ATEN_OP(GroupedMatmulSwigluQuantV2,
            "x, weight, weightScale, weightAssistMatrix, bias, xScale, smoothScale, groupList, dequantMode, "
            "dequantDtype, quantMode, groupListType, tuningConfig, output, outputScale");
