// RopeKernelNpu.cpp - the inference rotary embeddings: npu_apply_rotary_pos_emb (query and key updated in
// place), npu_interleave_rope and npu_mrope (RoPE / MRoPE from a cos-sin cache) on the
// aclnnApplyRotaryPosEmbV2 / aclnnInterleaveRope / aclnnRopeWithSinCosCacheV2 device ops.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include <string>

#include "csrc/custom/CustomOpUtils.h"
#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

int64_t layoutCode(c10::string_view layout) {
  if (layout == "BSND" || layout == "BSH") return 1;
  if (layout == "SBND") return 2;
  if (layout == "BNSD") return 3;
  if (layout == "TND") return 4;
  TORCH_CHECK_VALUE(false, "npu_apply_rotary_pos_emb: layout must be BSND, SBND, BNSD or TND, got '", layout, "'");
}

void checkMode(const char* op, c10::string_view mode) {
  TORCH_CHECK_VALUE(mode == "half" || mode == "interleave", op,
                    ": rotary_mode must be 'half' or 'interleave' ('quarter' is an Ascend 950 form), got '", mode,
                    "'");
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_apply_rotary_pos_emb(const at::Tensor& query, const at::Tensor& key,
                                                            const at::Tensor& cos, const at::Tensor& sin,
                                                            c10::string_view layout, c10::string_view rotary_mode) {
  checkMode("npu_apply_rotary_pos_emb", rotary_mode);
  const int64_t code = layoutCode(layout);
  const std::string mode(rotary_mode);
  // As on NPUs, query and key are updated in place; the results are returned as tensors of their own
  // (the schema promises fresh outputs to torch.compile).
  EXEC_NPU_CMD(aclnnApplyRotaryPosEmbV2, query, key, cos, sin, code, mode);
  return {custom::fresh(query, query), custom::fresh(key, key)};
}

std::tuple<at::Tensor, at::Tensor> npu_apply_rotary_pos_emb_meta(const at::Tensor& query, const at::Tensor& key,
                                                                 const at::Tensor& cos, const at::Tensor& sin,
                                                                 c10::string_view layout,
                                                                 c10::string_view rotary_mode) {
  checkMode("npu_apply_rotary_pos_emb", rotary_mode);
  layoutCode(layout);
  return {at::empty_like(query), at::empty_like(key)};
}

at::Tensor npu_interleave_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  at::Tensor out = at::empty(x.sizes(), x.options());
  EXEC_NPU_CMD(aclnnInterleaveRope, x, cos, sin, out);
  return out;
}

at::Tensor npu_interleave_rope_meta(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  TORCH_CHECK_VALUE(x.dim() == 4, "npu_interleave_rope: x must be 4-D [B, N, S, D], got ", x.sizes());
  return at::empty(x.sizes(), x.options());
}

std::tuple<at::Tensor, at::Tensor> npu_mrope(const at::Tensor& positions, const at::Tensor& query,
                                             const at::Tensor& key, const at::Tensor& cos_sin_cache, int64_t head_size,
                                             at::OptionalIntArrayRef mrope_section,
                                             std::optional<c10::string_view> rotary_mode,
                                             std::optional<c10::string_view> cache_mode) {
  const std::string mode(rotary_mode.value_or("half")), cache(cache_mode.value_or("default"));
  TORCH_CHECK_VALUE(mode == "half" || mode == "interleave", "npu_mrope: rotary_mode must be 'half' or 'interleave', got '",
                    mode, "'");
  TORCH_CHECK_VALUE(cache == "default" || cache == "interleave",
                    "npu_mrope: cache_mode must be 'default' or 'interleave', got '", cache, "'");
  std::vector<int64_t> sections = mrope_section.has_value() ? mrope_section->vec() : std::vector<int64_t>{0, 0, 0};
  at::Tensor query_out = at::empty(query.sizes(), query.options());
  at::Tensor key_out = at::empty(key.sizes(), key.options());
  const bool neox = mode == "half";
  const int64_t cache_code = cache == "interleave" ? 1 : 0;
  EXEC_NPU_CMD(aclnnRopeWithSinCosCacheV2, positions, query, key, cos_sin_cache, at::IntArrayRef(sections), head_size,
               neox, cache_code, query_out, key_out);
  return {query_out, key_out};
}

std::tuple<at::Tensor, at::Tensor> npu_mrope_meta(const at::Tensor& positions, const at::Tensor& query,
                                                  const at::Tensor& key, const at::Tensor& cos_sin_cache,
                                                  int64_t head_size, at::OptionalIntArrayRef mrope_section,
                                                  std::optional<c10::string_view> rotary_mode,
                                                  std::optional<c10::string_view> cache_mode) {
  return {at::empty(query.sizes(), query.options()), at::empty(key.sizes(), key.options())};
}

}  // namespace at_npu::native
