// QuantMatmulMoreOps.cpp - device ops for more quantised matmuls: aclnnTransposeQuantBatchMatMul (permuted batched
// int8 / int4 product dequantised per token and per channel), aclnnQuantBatchMatmulInplaceAdd (y += dequantised
// x1 @ x2) and aclnnQuantGroupedMatmulInplaceAdd (y[g] += dequantised x1[:, k_g] @ x2[k_g, :] for the k groups).
//
// Integer products are formed exactly (int64 accumulation) and dequantised in float32, as the cube units
// accumulate; the accumulating forms add in float32 (y is float32). The chip's float8 / hifloat8 / mx operands are
// refused: opslib holds no tensor of those number formats.
#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/zeros.h>

#include <string>
#include <utility>
#include <vector>

#include "AtenOpSupport.h"
#include "QuantPacking.h"

using namespace npu::opslib::aten;

namespace {

bool isQuantInt(const at::Tensor& t) { return t.scalar_type() == at::kChar || t.scalar_type() == at::kInt; }

// int8 operands as they are; int32 operands carry eight int4 values each along the last dimension.
at::Tensor integerValues(const at::Tensor& t) {
  return (t.scalar_type() == at::kInt ? quant::unpackInt4(t) : t).to(at::kLong);
}

// The float32 values of a scale: float32 as it is, int64 (npu_trans_quant_param) from its bits 0-31.
at::Tensor scaleValues(const at::Tensor& s) {
  return s.scalar_type() == at::kLong ? quant::unpackScale(s) : s.to(at::kFloat);
}

// A 1-D scale of one value or `len` values (float32, or int64 where `packed` allows it).
void checkVectorScale(const char* op, const char* what, const at::Tensor& s, int64_t len, bool packed) {
  if (!s.defined()) return;
  TORCH_CHECK(s.scalar_type() == at::kFloat || (packed && s.scalar_type() == at::kLong), op, ": ", what,
              " must be float32", packed ? " (or int64 from npu_trans_quant_param)" : "", ", got ", s.scalar_type());
  TORCH_CHECK(s.dim() == 1 && (s.size(0) == 1 || s.size(0) == len), op, ": ", what, " must have shape (1,) or (",
              len, ",), got ", s.sizes());
}

bool permIs(const std::vector<int64_t>& perm, const std::vector<int64_t>& expected) { return perm == expected; }

// The [start, end) rows of each group of an axis of `axis` rows: cumulative ends (listType 0) or sizes (1).
// Read when the kernel runs: the list is device data an earlier op may still be writing at prepare time.
std::vector<std::pair<int64_t, int64_t>> groupRanges(const char* op, const at::Tensor& groupList, int64_t listType,
                                                     int64_t axis) {
  const at::Tensor values = groupList.to(at::kLong).contiguous();
  const int64_t* v = values.const_data_ptr<int64_t>();
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t start = 0;
  for (int64_t g = 0; g < values.numel(); ++g) {
    TORCH_CHECK(v[g] >= 0, op, ": groupList values must be non-negative, got ", v[g], " at ", g);
    const int64_t end = listType == 0 ? v[g] : start + v[g];
    TORCH_CHECK(end >= start && end <= axis, op, ": groupList must describe non-decreasing group ends within [0, ",
                axis, "] (groupListType ", listType, "), got end ", end, " after ", start, " at group ", g);
    ranges.emplace_back(start, end);
    start = end;
  }
  return ranges;
}

}  // namespace

// out = ((x1^permX1 @ x2^permX2) * x2Scale[n] * x1Scale[m])^permY, x1 (M, B, K), x2 (B, K, N) or (B, N, K),
// out (M, B, N) in dtype (an aclDataType code); with batchSplitFactor f > 1, out = (f, M, B * N / f), the columns
// of the result viewed as (M, B * N) cut into f slices.
extern "C" NOP_API aclnnStatus aclnnTransposeQuantBatchMatMulGetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* bias, const aclTensor* x1Scale,
    const aclTensor* x2Scale, int64_t dtype, int64_t groupSize, const aclIntArray* permX1, const aclIntArray* permX2,
    const aclIntArray* permY, int64_t batchSplitFactor, aclTensor* out, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnTransposeQuantBatchMatMul", workspaceSize, executor, [&] {
    const char* op = "aclnnTransposeQuantBatchMatMul";
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2"), bi = hostTensor(bias);
    at::Tensor s1 = hostTensor(x1Scale), s2 = hostTensor(x2Scale), o = requiredTensor(out, "out");
    const std::vector<int64_t> p1 = permX1 == nullptr ? std::vector<int64_t>{1, 0, 2} : intArray(permX1);
    const std::vector<int64_t> p2 = permX2 == nullptr ? std::vector<int64_t>{0, 1, 2} : intArray(permX2);
    const std::vector<int64_t> py = permY == nullptr ? std::vector<int64_t>{1, 0, 2} : intArray(permY);
    TORCH_CHECK(permIs(p1, {1, 0, 2}), op, ": permX1 must be [1, 0, 2]");
    TORCH_CHECK(permIs(p2, {0, 1, 2}) || permIs(p2, {0, 2, 1}), op, ": permX2 must be [0, 1, 2] or [0, 2, 1]");
    TORCH_CHECK(permIs(py, {1, 0, 2}), op, ": permY must be [1, 0, 2]");
    TORCH_CHECK(!bi.defined(), op, ": bias is not supported; pass NULL");
    TORCH_CHECK(groupSize == 0, op, ": groupSize ", groupSize, " selects mx block quantisation, a chip number format "
                "the software NPU does not have; pass 0");
    // float16 operands are float8 values widened by the adapter (exact); products then accumulate in float32.
    TORCH_CHECK((isQuantInt(a) || a.scalar_type() == at::kHalf) && b.scalar_type() == a.scalar_type(), op,
                ": x1 and x2 must both be int8, int32 carrying int4, or float16 holding float8 values, got ",
                a.scalar_type(), " and ", b.scalar_type());
    TORCH_CHECK(a.dim() == 3 && b.dim() == 3, op, ": x1 and x2 must be 3-D, got ", a.sizes(), " and ", b.sizes());
    const int64_t pack = a.scalar_type() == at::kInt ? 8 : 1;
    const bool nk = permIs(p2, {0, 2, 1});
    const int64_t m = a.size(0), batch = a.size(1), k = a.size(2) * pack;
    const int64_t bk = nk ? b.size(2) * pack : b.size(1), n = nk ? b.size(1) : b.size(2) * pack;
    TORCH_CHECK(b.size(0) == batch && bk == k, op, ": x1 ", a.sizes(), " and x2 ", b.sizes(),
                " do not multiply (batch or K differs)");
    checkVectorScale(op, "x1Scale", s1, m, true);
    checkVectorScale(op, "x2Scale", s2, n, true);
    TORCH_CHECK(batchSplitFactor >= 1 && (batch * n) % batchSplitFactor == 0, op,
                ": batchSplitFactor must be >= 1 and divide B * N = ", batch * n, ", got ", batchSplitFactor);
    TORCH_CHECK((o.scalar_type() == at::kHalf || o.scalar_type() == at::kBFloat16) &&
                    static_cast<int64_t>(AclDataTypeOf(o.scalar_type())) == dtype,
                op, ": dtype must be 1 (float16) or 27 (bfloat16) and name out's dtype, got ", dtype, " and ",
                o.scalar_type());
    const int64_t split = batchSplitFactor, columns = batch * n;
    const std::vector<int64_t> expected =
        split > 1 ? std::vector<int64_t>{split, m, columns / split} : std::vector<int64_t>{m, batch, n};
    TORCH_CHECK(o.sizes().equals(expected), op, ": out must be ", at::IntArrayRef(expected), ", got ", o.sizes());
    return Prepared{{a, b, s1, s2}, [=]() mutable {
                      // (B, M, K) @ (B, K, N), exactly in int64 (float32 for float8 values).
                      const bool fp = a.scalar_type() == at::kHalf;
                      const at::Tensor lhs = (fp ? a.to(at::kFloat) : integerValues(a)).permute({1, 0, 2});
                      at::Tensor rhs = fp ? b.to(at::kFloat) : integerValues(b);
                      if (nk) rhs = rhs.transpose(1, 2);
                      const at::Tensor acc = at::matmul(lhs, rhs);
                      at::Tensor v = acc.to(at::kFloat);
                      if (s2.defined()) v = v * scaleValues(s2).reshape({1, 1, -1});
                      if (s1.defined()) v = v * scaleValues(s1).reshape({1, -1, 1});
                      const at::Tensor y = v.permute({1, 0, 2});  // (M, B, N)
                      if (split > 1) {
                        o.copy_(y.reshape({m, split, columns / split}).transpose(0, 1).to(o.scalar_type()));
                      } else {
                        o.copy_(y.to(o.scalar_type()));
                      }
                    },
                    {o}};
  });
}
NPU_ATEN_OP(TransposeQuantBatchMatMul, "x1, x2, bias, x1Scale, x2Scale, dtype, groupSize, permX1, permX2, permY, batchSplitFactor, out");

// yRef (M, N) float32 += ((x1 @ x2) * x2Scale[n or 1] * x1Scale[m or 1]), x1 (M, K) and x2 (K, N) int8 (given
// transposed with transposeX1 / transposeX2); the product exact in int64, scaled and added in float32.
extern "C" NOP_API aclnnStatus aclnnQuantBatchMatmulInplaceAddGetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* x1ScaleOptional, const aclTensor* x2Scale,
    aclTensor* yRef, bool transposeX1, bool transposeX2, int64_t groupSize, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnQuantBatchMatmulInplaceAdd", workspaceSize, executor, [&] {
    const char* op = "aclnnQuantBatchMatmulInplaceAdd";
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2");
    at::Tensor s1 = hostTensor(x1ScaleOptional), s2 = requiredTensor(x2Scale, "x2Scale");
    at::Tensor y = requiredTensor(yRef, "yRef");
    TORCH_CHECK(groupSize == 0, op, ": groupSize ", groupSize, " selects mx block quantisation, a chip number format "
                "the software NPU does not have; pass 0");
    TORCH_CHECK(a.scalar_type() == at::kChar && b.scalar_type() == at::kChar, op, ": x1 and x2 must be int8, got ",
                a.scalar_type(), " and ", b.scalar_type());
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2, op, ": x1 and x2 must be 2-D, got ", a.sizes(), " and ", b.sizes());
    if (transposeX1) a = a.t();
    if (transposeX2) b = b.t();
    const int64_t m = a.size(0), n = b.size(1);
    TORCH_CHECK(a.size(1) == b.size(0), op, ": x1 ", a.sizes(), " and x2 ", b.sizes(), " do not multiply (K differs)");
    TORCH_CHECK(y.scalar_type() == at::kFloat && y.dim() == 2 && y.size(0) == m && y.size(1) == n, op,
                ": yRef must be float32 (", m, ", ", n, "), got ", y.scalar_type(), " ", y.sizes());
    checkVectorScale(op, "x1Scale", s1, m, false);
    checkVectorScale(op, "x2Scale", s2, n, false);
    return Prepared{{a, b, s1, s2, y}, [=]() mutable {
                      at::Tensor v = at::matmul(a.to(at::kLong), b.to(at::kLong)).to(at::kFloat);
                      v = v * s2.to(at::kFloat).reshape({1, -1});
                      if (s1.defined()) v = v * s1.to(at::kFloat).reshape({-1, 1});
                      y.copy_(y + v);
                    },
                    {y}};
  });
}
NPU_ATEN_OP(QuantBatchMatmulInplaceAdd, "x1, x2, x1ScaleOptional, x2Scale, yRef, transposeX1, transposeX2, groupSize");

// For the k groups g of groupList: yRef[g] (M, N) float32 += (x1[:, k_g] @ x2[k_g, :]) * x2Scale[g][n or 1]
// * x1Scale[g]; x1 (M, K) and x2 (K, N) int8. K rows past the last group take part in none.
extern "C" NOP_API aclnnStatus aclnnQuantGroupedMatmulInplaceAddGetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* x1ScaleOptional, const aclTensor* x2Scale,
    const aclTensor* groupList, aclTensor* yRef, int64_t groupListType, int64_t groupSize, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnQuantGroupedMatmulInplaceAdd", workspaceSize, executor, [&] {
    const char* op = "aclnnQuantGroupedMatmulInplaceAdd";
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2");
    at::Tensor s1 = hostTensor(x1ScaleOptional), s2 = requiredTensor(x2Scale, "x2Scale");
    at::Tensor gl = requiredTensor(groupList, "groupList"), y = requiredTensor(yRef, "yRef");
    TORCH_CHECK(groupSize == 0, op, ": groupSize ", groupSize, " selects mx block quantisation, a chip number format "
                "the software NPU does not have; pass 0");
    TORCH_CHECK(groupListType == 0 || groupListType == 1, op, ": groupListType must be 0 (cumulative ends) or 1 "
                "(sizes), got ", groupListType);
    TORCH_CHECK(a.scalar_type() == at::kChar && b.scalar_type() == at::kChar, op, ": x1 and x2 must be int8, got ",
                a.scalar_type(), " and ", b.scalar_type());
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2, op, ": x1 (M, K) and x2 (K, N) must be 2-D, got ", a.sizes(), " and ",
                b.sizes());
    TORCH_CHECK(a.size(1) == b.size(0), op, ": x1 ", a.sizes(), " and x2 ", b.sizes(), " split different K");
    TORCH_CHECK((gl.scalar_type() == at::kLong || gl.scalar_type() == at::kInt) && gl.dim() == 1 && gl.numel() > 0,
                op, ": groupList must be a non-empty 1-D int64 tensor, got ", gl.scalar_type(), " ", gl.sizes());
    const int64_t groups = gl.size(0), m = a.size(0), k = a.size(1), n = b.size(1);
    TORCH_CHECK(y.scalar_type() == at::kFloat && y.dim() >= 2 && y.size(-1) == n && y.numel() == groups * m * n, op,
                ": yRef must be float32 holding ", groups, " groups of (", m, ", ", n, "), got ", y.scalar_type(), " ",
                y.sizes());
    TORCH_CHECK(s2.scalar_type() == at::kFloat && s2.dim() >= 1 && s2.size(0) == groups &&
                    ((s2.dim() == 2 && (s2.size(1) == n || s2.size(1) == 1)) || s2.dim() == 1),
                op, ": x2Scale must be float32 (", groups, ", ", n, "), (", groups, ", 1) or (", groups, ",), got ",
                s2.scalar_type(), " ", s2.sizes());
    TORCH_CHECK(!s1.defined() || (s1.scalar_type() == at::kFloat && s1.dim() == 1 && s1.size(0) == groups), op,
                ": x1Scale must be float32 (", groups, ",), got ", s1.sizes());
    return Prepared{{a, b, s1, s2, gl, y}, [=]() mutable {
                      const auto ranges = groupRanges(op, gl, groupListType, k);
                      const at::Tensor lhs = a.to(at::kLong), rhs = b.to(at::kLong);
                      const at::Tensor col_scale = s2.to(at::kFloat).reshape({groups, -1});
                      at::Tensor acc = at::zeros({groups, m, n}, at::TensorOptions().dtype(at::kFloat));
                      for (int64_t g = 0; g < groups; ++g) {
                        const auto [start, end] = ranges[g];
                        if (end == start) continue;
                        at::Tensor v = at::matmul(lhs.narrow(1, start, end - start), rhs.narrow(0, start, end - start))
                                           .to(at::kFloat);
                        v = v * col_scale[g].reshape({1, -1});
                        if (s1.defined()) v = v * s1[g].to(at::kFloat);
                        acc[g].copy_(v);
                      }
                      y.copy_(y + acc.reshape(y.sizes()));
                    },
                    {y}};
  });
}
NPU_ATEN_OP(QuantGroupedMatmulInplaceAdd, "x1, x2, x1ScaleOptional, x2Scale, groupList, yRef, groupListType, groupSize");
