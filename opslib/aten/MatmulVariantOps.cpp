// MatmulVariantOps.cpp - matrix-product variants of LLM inference: aclnnTransposeBatchMatMul (a batched product
// with permuted operands and result, optionally int8-quantised by per-column scales or split along N),
// aclnnAddLora (LoRA BGMV: rows of y gain scale * B_i (A_i x) for their adapter i) and aclnnFusedMatmul (a
// product with an add / mul / gelu epilogue).
//
// Float16 / bfloat16 products accumulate in float32 and round once, as NPU cube units do; aclnnAddLora rounds
// each of its stages (A x, B h, the scaling, the sum) to y's dtype, as the chain of ops it fuses would.
#include <ATen/TensorOperators.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/round.h>
#include <ATen/ops/where.h>

#include <string>
#include <vector>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

bool isMatmulFloat(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat; }

// The float32 scales an int64 (npu_trans_quant_param) scale holds in its low 32 bits.
at::Tensor packedScaleValues(const at::Tensor& packed) {
  return packed.bitwise_and(static_cast<int64_t>(0xFFFFFFFF)).to(at::kInt).contiguous().view(at::kFloat);
}

std::vector<int64_t> arrayOr(const aclIntArray* array, std::vector<int64_t> fallback) {
  std::vector<int64_t> values = intArray(array);
  return array == nullptr ? fallback : values;
}

bool permIs(const std::vector<int64_t>& perm, const std::vector<int64_t>& expected) { return perm == expected; }

}  // namespace

// out = (x1^permX1 @ x2^permX2)^permY: x1 (B, M, K) or (M, B, K), x2 (B, K, N) or (B, N, K), out (M, B, N);
// with scale (B * N values), out = int8 (M, 1, B * N) saturate(round(y * scale)); with batchSplitFactor f > 1,
// out = (f, M, B * N / f), the columns of y viewed as (M, B * N) cut into f slices.
extern "C" NOP_API aclnnStatus aclnnTransposeBatchMatMulGetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* bias, const aclTensor* scale, const aclIntArray* permX1,
    const aclIntArray* permX2, const aclIntArray* permY, int8_t cubeMathType, int32_t batchSplitFactor, aclTensor* out,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnTransposeBatchMatMul", workspaceSize, executor, [&] {
    const char* op = "aclnnTransposeBatchMatMul";
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2"), bi = hostTensor(bias);
    at::Tensor s = hostTensor(scale), o = requiredTensor(out, "out");
    const std::vector<int64_t> p1 = arrayOr(permX1, {0, 1, 2}), p2 = arrayOr(permX2, {0, 1, 2});
    const std::vector<int64_t> py = arrayOr(permY, {1, 0, 2});
    TORCH_CHECK(permIs(p1, {0, 1, 2}) || permIs(p1, {1, 0, 2}), op, ": permX1 must be [0, 1, 2] or [1, 0, 2]");
    TORCH_CHECK(permIs(p2, {0, 1, 2}) || permIs(p2, {0, 2, 1}), op, ": permX2 must be [0, 1, 2] or [0, 2, 1]");
    TORCH_CHECK(permIs(py, {1, 0, 2}), op, ": permY must be [1, 0, 2]");
    TORCH_CHECK(!bi.defined(), op, ": bias is not supported");
    TORCH_CHECK(a.dim() == 3 && b.dim() == 3, op, ": x1 and x2 must be 3-D, got ", a.sizes(), " and ", b.sizes());
    TORCH_CHECK(isMatmulFloat(a.scalar_type()) && isMatmulFloat(b.scalar_type()), op,
                ": x1 and x2 must be float16, bfloat16 or float32, got ", a.scalar_type(), " and ", b.scalar_type());
    const at::Tensor lhs = a.permute(p1), rhs = b.permute(p2);  // (B, M, K) and (B, K, N)
    TORCH_CHECK(lhs.size(0) == rhs.size(0) && lhs.size(2) == rhs.size(1), op, ": x1 ", a.sizes(), " and x2 ",
                b.sizes(), " do not multiply (batch or K differs)");
    const int64_t m = lhs.size(1), columns = lhs.size(0) * rhs.size(2);
    const int64_t split = batchSplitFactor;
    TORCH_CHECK(split >= 1 && columns % split == 0, op, ": batchSplitFactor must be >= 1 and divide B * N = ",
                columns, ", got ", split);
    std::vector<int64_t> expected{m, lhs.size(0), rhs.size(2)};
    if (s.defined()) {
      TORCH_CHECK(s.scalar_type() == at::kLong || s.scalar_type() == at::kFloat, op,
                  ": scale must be int64 (npu_trans_quant_param) or float32, got ", s.scalar_type());
      TORCH_CHECK(s.numel() == columns && split == 1, op, ": scale must hold B * N = ", columns,
                  " values and take batchSplitFactor 1, got ", s.sizes(), " and ", split);
      TORCH_CHECK(o.scalar_type() == at::kChar, op, ": a quantised output must be int8, got ", o.scalar_type());
      expected = {m, 1, columns};
    } else if (split > 1) {
      expected = {split, m, columns / split};
    }
    TORCH_CHECK(o.sizes() == at::IntArrayRef(expected), op, ": out must be ", at::IntArrayRef(expected), ", got ",
                o.sizes());
    return Prepared{{a, b, s}, [=]() mutable {
                      at::Tensor y = at::bmm(lhs.to(at::kFloat), rhs.to(at::kFloat)).permute({1, 0, 2});
                      at::Tensor flat = y.reshape({m, columns});
                      if (s.defined()) {
                        at::Tensor sv = s.scalar_type() == at::kLong ? packedScaleValues(s) : s.to(at::kFloat);
                        at::Tensor q = at::clamp(at::round(flat * sv.reshape({columns})), -128, 127);
                        o.copy_(q.to(at::kChar).view({m, 1, columns}));
                      } else if (split > 1) {
                        o.copy_(flat.reshape({m, split, columns / split}).transpose(0, 1));
                      } else {
                        o.copy_(y);
                      }
                    },
                    {o}};
  });
}
NPU_ATEN_OP(TransposeBatchMatMul, "x1, x2, bias, scale, permX1, permX2, permY, cubeMathType, batchSplitFactor, out");

// out = y, then out[t, yOffset : yOffset + ySliceSize] += scale * B_i (A_i x_t) with i = indices[t]
// (A_i = weightA[i, layerIdx] (R, H1), B_i = weightB[i, layerIdx] (H2, R); without weightA, B_i x_t). Tokens whose
// index is outside [0, adapters) (-1 marks "no adapter") keep their row. out may be y itself (the in-place form).
extern "C" NOP_API aclnnStatus aclnnAddLoraGetWorkspaceSize(const aclTensor* y, const aclTensor* x,
                                                           const aclTensor* weightB, const aclTensor* indices,
                                                           const aclTensor* weightAOptional, int64_t layerIdx,
                                                           double scale, int64_t yOffset, int64_t ySliceSize,
                                                           aclTensor* out, uint64_t* workspaceSize,
                                                           aclOpExecutor** executor) {
  return prepareOp("aclnnAddLora", workspaceSize, executor, [&] {
    const char* op = "aclnnAddLora";
    at::Tensor yt = requiredTensor(y, "y"), xt = requiredTensor(x, "x"), wb = requiredTensor(weightB, "weightB");
    at::Tensor ind = requiredTensor(indices, "indices"), wa = hostTensor(weightAOptional);
    at::Tensor o = requiredTensor(out, "out");
    TORCH_CHECK(yt.dim() == 2 && xt.dim() == 2 && wb.dim() == 4 && ind.dim() == 1, op,
                ": y and x must be 2-D, weightB 4-D and indices 1-D, got ", yt.sizes(), ", ", xt.sizes(), ", ",
                wb.sizes(), " and ", ind.sizes());
    const int64_t tokens = yt.size(0);
    TORCH_CHECK(xt.size(0) == tokens && ind.size(0) == tokens, op, ": x and indices must have y's ", tokens, " rows");
    TORCH_CHECK(ind.scalar_type() == at::kInt || ind.scalar_type() == at::kLong, op,
                ": indices must be int32 or int64, got ", ind.scalar_type());
    TORCH_CHECK(isMatmulFloat(yt.scalar_type()) && xt.scalar_type() == yt.scalar_type() &&
                    wb.scalar_type() == yt.scalar_type() && (!wa.defined() || wa.scalar_type() == yt.scalar_type()),
                op, ": y, x and the weights must share one dtype of float16, bfloat16 or float32");
    TORCH_CHECK(layerIdx >= 0 && layerIdx < wb.size(1), op, ": layerIdx must be in [0, ", wb.size(1), "), got ",
                layerIdx);
    TORCH_CHECK(yOffset >= 0 && ySliceSize >= 0 && yOffset + ySliceSize <= yt.size(1) && wb.size(2) == ySliceSize,
                op, ": columns [", yOffset, ", ", yOffset + ySliceSize, ") must lie in y (", yt.size(1),
                " columns) and match weightB's H2 (", wb.size(2), ")");
    const int64_t rank_in = wa.defined() ? wa.size(3) : wb.size(3);
    TORCH_CHECK(rank_in == xt.size(1) && (!wa.defined() || (wa.dim() == 4 && wa.size(0) == wb.size(0) &&
                                                            wa.size(1) == wb.size(1) && wa.size(2) == wb.size(3))),
                op, ": weightA [adapters, layers, R, H1] and weightB [adapters, layers, H2, R] do not fit x (H1 = ",
                xt.size(1), ")");
    TORCH_CHECK(o.sizes() == yt.sizes() && o.scalar_type() == yt.scalar_type(), op, ": out must match y ", yt.sizes());
    return Prepared{{yt, xt, wb, ind, wa}, [=]() mutable {
                      const at::ScalarType dt = yt.scalar_type();
                      const at::Tensor idx = ind.to(at::kLong);
                      const at::Tensor valid = idx.ge(0).logical_and(idx.lt(wb.size(0)));
                      const at::Tensor adapter = idx.masked_fill(valid.logical_not(), 0);
                      at::Tensor h = xt.to(at::kFloat).unsqueeze(-1);  // (T, H1, 1)
                      if (wa.defined()) {
                        const at::Tensor a_rows = wa.select(1, layerIdx).index_select(0, adapter).to(at::kFloat);
                        h = at::bmm(a_rows, h).to(dt).to(at::kFloat);  // (T, R, 1)
                      }
                      const at::Tensor b_rows = wb.select(1, layerIdx).index_select(0, adapter).to(at::kFloat);
                      at::Tensor delta = at::bmm(b_rows, h).squeeze(-1).to(dt);  // (T, H2)
                      delta = (delta.to(at::kFloat) * scale).to(dt);
                      at::Tensor result = yt.clone(at::MemoryFormat::Contiguous);
                      at::Tensor window = result.narrow(1, yOffset, ySliceSize);
                      const at::Tensor updated = (window.to(at::kFloat) + delta.to(at::kFloat)).to(dt);
                      window.copy_(at::where(valid.unsqueeze(1), updated, window));
                      o.copy_(result);
                    },
                    {o}};
  });
}
NPU_ATEN_OP(AddLora, "y, x, weightB, indices, weightAOptional, layerIdx, scale, yOffset, ySliceSize, out");

// y = OP(x1 @ x2 + bias, x3), OP by fusedOpType: "" none, "add" / "mul" with x3, "gelu_erf" / "gelu_tanh",
// "16cast32" none (a float32 y of float16 / bfloat16 operands). Computed in float32, rounded once to y's dtype.
extern "C" NOP_API aclnnStatus aclnnFusedMatmulGetWorkspaceSize(const aclTensor* x1, const aclTensor* x2,
                                                               const aclTensor* bias, const aclTensor* x3,
                                                               char* fusedOpType, int8_t cubeMathType, aclTensor* y,
                                                               uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnFusedMatmul", workspaceSize, executor, [&] {
    const char* op = "aclnnFusedMatmul";
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2"), bi = hostTensor(bias);
    at::Tensor e = hostTensor(x3), o = requiredTensor(y, "y");
    const std::string type = fusedOpType == nullptr ? "" : fusedOpType;
    TORCH_CHECK(type.empty() || type == "add" || type == "mul" || type == "gelu_erf" || type == "gelu_tanh" ||
                    type == "16cast32",
                op, ": fusedOpType must be '', 'add', 'mul', 'gelu_erf', 'gelu_tanh' or '16cast32', got '", type,
                "'");
    TORCH_CHECK(a.dim() >= 2 && b.dim() >= 2 && a.size(-1) == b.size(-2), op, ": x1 ", a.sizes(), " and x2 ",
                b.sizes(), " do not multiply");
    TORCH_CHECK(isMatmulFloat(a.scalar_type()) && b.scalar_type() == a.scalar_type(), op,
                ": x1 and x2 must share one dtype of float16, bfloat16 or float32");
    TORCH_CHECK(e.defined() == (type == "add" || type == "mul"), op, ": x3 is required by 'add' / 'mul' and taken by "
                "no other fusedOpType");
    TORCH_CHECK(!bi.defined() || bi.numel() == b.size(-1), op, ": bias must hold n = ", b.size(-1), " values");
    TORCH_CHECK(o.scalar_type() == (type == "16cast32" ? at::kFloat : a.scalar_type()), op,
                ": y has the wrong dtype ", o.scalar_type());
    return Prepared{{a, b, bi, e}, [=]() mutable {
                      at::Tensor r = at::matmul(a.to(at::kFloat), b.to(at::kFloat));
                      if (bi.defined()) r = r + bi.to(at::kFloat).reshape({-1});
                      if (type == "add") {
                        r = r + e.to(at::kFloat);
                      } else if (type == "mul") {
                        r = r * e.to(at::kFloat);
                      } else if (type == "gelu_erf") {
                        r = at::gelu(r, "none");
                      } else if (type == "gelu_tanh") {
                        r = at::gelu(r, "tanh");
                      }
                      o.copy_(r);
                    },
                    {o}};
  });
}
NPU_ATEN_OP(FusedMatmul, "x1, x2, bias, x3, fusedOpType, cubeMathType, y");
