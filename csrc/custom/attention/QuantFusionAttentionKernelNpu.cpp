// QuantFusionAttentionKernelNpu.cpp - npu_quant_fusion_attention: flash attention on block-quantised float8
// query / key / value (torch's float8_e4m3fn / float8_e5m2, one float32 dequantisation scale per block of rows),
// on the aclnnQuantFlashAttentionScore device op; float16 result. hifloat8 inputs are a chip number format the
// software NPU does not have. Inference only (torch_npu registers no derivative for it).
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_quant_fusion_attention";
using QuantFaResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, int64_t>;

// What the outputs' shapes need: the upper-cased layout, batch, query heads and query rows.
struct QuantFaDims {
  std::string layout;
  int64_t batch = 0;
  int64_t q_rows = 0;
};

QuantFaDims checkInputs(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
                        c10::string_view input_layout, std::optional<int64_t> query_dtype) {
  if (query_dtype.has_value()) {
    const int64_t code = *query_dtype;
    const bool names_input = code == static_cast<int64_t>(query.scalar_type());
    TORCH_CHECK_VALUE(names_input, kOp, ": query_dtype ", code,
                      (quant::chipFormatName(code) != nullptr
                           ? std::string(" selects ") + quant::chipFormatName(code) +
                                 ", a chip number format the software NPU does not have; pass torch.float8_e4m3fn "
                                 "or torch.float8_e5m2 tensors and leave query_dtype None"
                           : std::string(" must name query's own dtype or be None")));
  }
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor&>{"query", query}, {"key", key},
                                {"value", value}}) {
    TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat8_e4m3fn || t.scalar_type() == at::kFloat8_e5m2, kOp, ": ", name,
                     " must be float8_e4m3fn or float8_e5m2 (block-quantised), got ", t.scalar_type(),
                     "; for float16 / bfloat16 / float32 attention use npu_fusion_attention");
  }
  TORCH_CHECK_VALUE(head_num > 0, kOp, ": head_num must be positive, got ", head_num);
  QuantFaDims x;
  x.layout = std::string(input_layout);
  for (char& c : x.layout) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (x.layout == "BNSD" || x.layout == "BSND") {
    TORCH_CHECK_VALUE(query.dim() == 4 && key.dim() == 4 && value.dim() == 4, kOp, ": ", x.layout,
                      " takes 4-D query, key and value, got ", query.sizes(), ", ", key.sizes(), " and ",
                      value.sizes());
    const int64_t heads_dim = x.layout == "BNSD" ? 1 : 2;
    TORCH_CHECK_VALUE(query.size(heads_dim) == head_num, kOp, ": query has ", query.size(heads_dim),
                      " heads but head_num is ", head_num);
    x.batch = query.size(0);
    x.q_rows = query.size(x.layout == "BNSD" ? 2 : 1);
  } else if (x.layout == "BSH" || x.layout == "SBH") {
    TORCH_CHECK_VALUE(query.dim() == 3 && key.dim() == 3 && value.dim() == 3, kOp, ": ", x.layout,
                      " takes 3-D query, key and value, got ", query.sizes(), ", ", key.sizes(), " and ",
                      value.sizes());
    TORCH_CHECK_VALUE(query.size(2) % head_num == 0, kOp, ": query's hidden size ", query.size(2),
                      " must be a multiple of head_num ", head_num);
    x.batch = query.size(x.layout == "BSH" ? 0 : 1);
    x.q_rows = query.size(x.layout == "BSH" ? 1 : 0);
  } else {
    TORCH_CHECK_VALUE(false, kOp, ": input_layout must be BNSD, BSND, BSH or SBH, got '", input_layout, "'");
  }
  return x;
}

// The attention output: query's shape with value's head size. In BSH / SBH value's hidden size must equal
// key's (the head size is not in the shape otherwise), so the output is query-shaped.
std::vector<int64_t> outShape(const QuantFaDims& x, const at::Tensor& query, const at::Tensor& key,
                              const at::Tensor& value) {
  std::vector<int64_t> shape = query.sizes().vec();
  if (query.dim() == 3) {
    TORCH_CHECK_VALUE(value.size(2) == key.size(2), kOp, ": in ", x.layout, " value's hidden size ", value.size(2),
                      " must equal key's ", key.size(2));
  } else {
    shape.back() = value.size(-1);
  }
  return shape;
}

QuantFaResult allocate(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
                       c10::string_view input_layout, std::optional<int64_t> query_dtype) {
  const QuantFaDims x = checkInputs(query, key, value, head_num, input_layout, query_dtype);
  const auto opts = query.options();
  // torch_npu keeps the fp8 mode's softmax statistics as one float per row: [B, N, Sq, 1].
  return {at::empty(outShape(x, query, key, value), opts.dtype(at::kHalf)),
          at::empty({x.batch, head_num, x.q_rows, 1}, opts.dtype(at::kFloat)),
          at::empty({x.batch, head_num, x.q_rows, 1}, opts.dtype(at::kFloat)), at::empty({0}, opts.dtype(at::kHalf)),
          0, 0, 0};
}

}  // namespace

QuantFaResult npu_quant_fusion_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                         int64_t head_num, c10::string_view input_layout,
                                         const at::Tensor& d_scale_q, const at::Tensor& d_scale_k,
                                         const at::Tensor& d_scale_v, const std::optional<at::Tensor>& p_scale,
                                         double scale, std::optional<int64_t> query_dtype) {
  QuantFaResult result = allocate(query, key, value, head_num, input_layout, query_dtype);
  auto& [out, softmax_max, softmax_sum, softmax_out, seed, offset, numels] = result;
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor&>{"d_scale_q", d_scale_q},
                                {"d_scale_k", d_scale_k}, {"d_scale_v", d_scale_v}}) {
    TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat, kOp, ": ", name, " must be float32 (one scale per block of ",
                     "rows, [B, N, blocks, 1]), got ", t.scalar_type());
  }
  // float8 values are exact in float16: the device op computes on them widened.
  const at::Tensor q = query.to(at::kHalf), k = key.to(at::kHalf), v = value.to(at::kHalf);
  std::string layout(input_layout);
  for (char& c : layout) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const at::Tensor no_mask, p_scale_t = p_scale.value_or(at::Tensor());
  const int64_t keep_all = 2147483647, sparse_mode = 0;
  EXEC_NPU_CMD(aclnnQuantFlashAttentionScore, q, k, v, no_mask, d_scale_q, d_scale_k, d_scale_v,
               p_scale_t, scale, keep_all, keep_all, head_num, layout, sparse_mode, softmax_max,
               softmax_sum, softmax_out, out);
  (void)seed;
  (void)offset;
  (void)numels;
  return result;
}

QuantFaResult npu_quant_fusion_attention_meta(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                              int64_t head_num, c10::string_view input_layout,
                                              const at::Tensor& d_scale_q, const at::Tensor& d_scale_k,
                                              const at::Tensor& d_scale_v, const std::optional<at::Tensor>& p_scale,
                                              double scale, std::optional<int64_t> query_dtype) {
  (void)d_scale_q, (void)d_scale_k, (void)d_scale_v, (void)p_scale, (void)scale;
  return allocate(query, key, value, head_num, input_layout, query_dtype);
}

}  // namespace at_npu::native
