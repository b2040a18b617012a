// MlaPrologKernelNpu.cpp - npu_mla_prolog / _v2 / _v3 / _v3_functional (MLA attention prologue: query in the latent
// space plus its rope part, latent KV written into caches) on aclnnMlaProlog / aclnnMlaPrologV2WeightNz / V3WeightNz.
#include <ATen/ops/empty.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using OptTensor = std::optional<at::Tensor>;

bool present(const OptTensor& t) { return t.has_value() && t->defined(); }

void checkArguments(const char* op, const at::Tensor& token_x, const at::Tensor& weight_uk,
                    const at::Tensor& rope_sin, std::initializer_list<const OptTensor*> quant_scales) {
  TORCH_CHECK_VALUE(token_x.dim() == 2 || token_x.dim() == 3, op, ": token_x must be 2-D [T, He] or 3-D [B, S, He], ",
                    "got ", token_x.dim(), "-D");
  TORCH_CHECK_VALUE(weight_uk.dim() == 3, op, ": weight_uk must be 3-D [N, D, Hckv], got ", weight_uk.dim(), "-D");
  TORCH_CHECK_VALUE(rope_sin.dim() == token_x.dim(), op, ": rope_sin must be ", token_x.dim(),
                    "-D like token_x ([T, Dr] or [B, S, Dr]), got ", rope_sin.dim(), "-D");
  TORCH_CHECK_TYPE(c10::isFloatingType(token_x.scalar_type()), op,
                   ": token_x must be float32, float16 or bfloat16 (the quantized int8 prologue is not supported), "
                   "got ", token_x.scalar_type());
  for (const OptTensor* scale : quant_scales) {
    TORCH_CHECK_VALUE(!present(*scale), op, ": dequant_scale_* / quant_scale_* / smooth_scales_cq belong to the ",
                      "quantized prologue, which is not supported; pass floating-point data without scales");
  }
}

void checkPagedMode(const char* op, c10::string_view cache_mode) {
  const std::string mode(cache_mode);
  TORCH_CHECK_VALUE(mode == "PA_BSND" || mode == "PA_NZ", op, ": cache_mode must be PA_BSND or PA_NZ, got '", mode,
                    "'");
}

// query [.., N, Hckv] and query_rope [.., N, Dr], where .. is token_x's leading dims.
std::pair<std::vector<int64_t>, std::vector<int64_t>> queryShapes(const at::Tensor& token_x,
                                                                  const at::Tensor& weight_uk,
                                                                  const at::Tensor& rope_sin) {
  std::vector<int64_t> lead(token_x.sizes().begin(), token_x.sizes().end() - 1);
  std::vector<int64_t> q = lead, qr = lead;
  q.insert(q.end(), {weight_uk.size(0), weight_uk.size(2)});
  qr.insert(qr.end(), {weight_uk.size(0), rope_sin.size(-1)});
  return {q, qr};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_mla_prolog(
    const at::Tensor& token_x, const at::Tensor& weight_dq, const at::Tensor& weight_uq_qr,
    const at::Tensor& weight_uk, const at::Tensor& weight_dkv_kr, const at::Tensor& rmsnorm_gamma_cq,
    const at::Tensor& rmsnorm_gamma_ckv, const at::Tensor& rope_sin, const at::Tensor& rope_cos,
    const at::Tensor& cache_index, const at::Tensor& kv_cache, const at::Tensor& kr_cache,
    const OptTensor& dequant_scale_x, const OptTensor& dequant_scale_w_dq, const OptTensor& dequant_scale_w_uq_qr,
    const OptTensor& dequant_scale_w_dkv_kr, const OptTensor& quant_scale_ckv, const OptTensor& quant_scale_ckr,
    const OptTensor& smooth_scales_cq, double rmsnorm_epsilon_cq, double rmsnorm_epsilon_ckv,
    c10::string_view cache_mode) {
  checkPagedMode("npu_mla_prolog", cache_mode);
  checkArguments("npu_mla_prolog", token_x, weight_uk, rope_sin,
                 {&dequant_scale_x, &dequant_scale_w_dq, &dequant_scale_w_uq_qr, &dequant_scale_w_dkv_kr,
                  &quant_scale_ckv, &quant_scale_ckr, &smooth_scales_cq});
  auto [q_shape, qr_shape] = queryShapes(token_x, weight_uk, rope_sin);
  at::Tensor query = at::empty(q_shape, token_x.options()), query_rope = at::empty(qr_shape, token_x.options());
  // V1 returns updated copies of the caches and leaves the inputs as they were.
  at::Tensor kv_cache_out = at::empty(kv_cache.sizes(), kv_cache.options());
  at::Tensor kr_cache_out = at::empty(kr_cache.sizes(), kr_cache.options());
  const std::string mode(cache_mode);
  EXEC_NPU_CMD(aclnnMlaProlog, token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
               rmsnorm_gamma_ckv, rope_sin, rope_cos, cache_index, kv_cache, kr_cache, dequant_scale_x,
               dequant_scale_w_dq, dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr, quant_scale_ckv, quant_scale_ckr,
               smooth_scales_cq, rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv, mode, query, query_rope, kv_cache_out,
               kr_cache_out);
  return {query, query_rope, kv_cache_out, kr_cache_out};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_mla_prolog_meta(
    const at::Tensor& token_x, const at::Tensor& weight_dq, const at::Tensor& weight_uq_qr,
    const at::Tensor& weight_uk, const at::Tensor& weight_dkv_kr, const at::Tensor& rmsnorm_gamma_cq,
    const at::Tensor& rmsnorm_gamma_ckv, const at::Tensor& rope_sin, const at::Tensor& rope_cos,
    const at::Tensor& cache_index, const at::Tensor& kv_cache, const at::Tensor& kr_cache,
    const OptTensor& dequant_scale_x, const OptTensor& dequant_scale_w_dq, const OptTensor& dequant_scale_w_uq_qr,
    const OptTensor& dequant_scale_w_dkv_kr, const OptTensor& quant_scale_ckv, const OptTensor& quant_scale_ckr,
    const OptTensor& smooth_scales_cq, double rmsnorm_epsilon_cq, double rmsnorm_epsilon_ckv,
    c10::string_view cache_mode) {
  auto [q_shape, qr_shape] = queryShapes(token_x, weight_uk, rope_sin);
  return {at::empty(q_shape, token_x.options()), at::empty(qr_shape, token_x.options()),
          at::empty(kv_cache.sizes(), kv_cache.options()), at::empty(kr_cache.sizes(), kr_cache.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_mla_prolog_v2(
    const at::Tensor& token_x, const at::Tensor& weight_dq, const at::Tensor& weight_uq_qr,
    const at::Tensor& weight_uk, const at::Tensor& weight_dkv_kr, const at::Tensor& rmsnorm_gamma_cq,
    const at::Tensor& rmsnorm_gamma_ckv, const at::Tensor& rope_sin, const at::Tensor& rope_cos,
    const at::Tensor& cache_index, const at::Tensor& kv_cache, const at::Tensor& kr_cache,
    const OptTensor& dequant_scale_x, const OptTensor& dequant_scale_w_dq, const OptTensor& dequant_scale_w_uq_qr,
    const OptTensor& dequant_scale_w_dkv_kr, const OptTensor& quant_scale_ckv, const OptTensor& quant_scale_ckr,
    const OptTensor& smooth_scales_cq, double rmsnorm_epsilon_cq, double rmsnorm_epsilon_ckv,
    c10::string_view cache_mode) {
  checkPagedMode("npu_mla_prolog_v2", cache_mode);
  checkArguments("npu_mla_prolog_v2", token_x, weight_uk, rope_sin,
                 {&dequant_scale_x, &dequant_scale_w_dq, &dequant_scale_w_uq_qr, &dequant_scale_w_dkv_kr,
                  &quant_scale_ckv, &quant_scale_ckr, &smooth_scales_cq});
  auto [q_shape, qr_shape] = queryShapes(token_x, weight_uk, rope_sin);
  // As torch_npu: the query takes rope_sin's dtype, its rope part is bfloat16, and the (unused) dequant scale is
  // one float32 value when the query is not quantized.
  at::Tensor query = at::empty(q_shape, token_x.options().dtype(rope_sin.scalar_type()));
  at::Tensor query_rope = at::empty(qr_shape, token_x.options().dtype(at::kBFloat16));
  at::Tensor dequant_scale_q_nope = at::empty({1}, token_x.options().dtype(at::kFloat));
  const std::string mode(cache_mode);
  EXEC_NPU_CMD(aclnnMlaPrologV2WeightNz, token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
               rmsnorm_gamma_ckv, rope_sin, rope_cos, cache_index, kv_cache, kr_cache, dequant_scale_x,
               dequant_scale_w_dq, dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr, quant_scale_ckv, quant_scale_ckr,
               smooth_scales_cq, rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv, mode, query, query_rope,
               dequant_scale_q_nope);
  return {query, query_rope, kv_cache, kr_cache, dequant_scale_q_nope};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_mla_prolog_v2_meta(
    const at::Tensor& token_x, const at::Tensor& weight_dq, const at::Tensor& weight_uq_qr,
    const at::Tensor& weight_uk, const at::Tensor& weight_dkv_kr, const at::Tensor& rmsnorm_gamma_cq,
    const at::Tensor& rmsnorm_gamma_ckv, const at::Tensor& rope_sin, const at::Tensor& rope_cos,
    const at::Tensor& cache_index, const at::Tensor& kv_cache, const at::Tensor& kr_cache,
    const OptTensor& dequant_scale_x, const OptTensor& dequant_scale_w_dq, const OptTensor& dequant_scale_w_uq_qr,
    const OptTensor& dequant_scale_w_dkv_kr, const OptTensor& quant_scale_ckv, const OptTensor& quant_scale_ckr,
    const OptTensor& smooth_scales_cq, double rmsnorm_epsilon_cq, double rmsnorm_epsilon_ckv,
    c10::string_view cache_mode) {
  auto [q_shape, qr_shape] = queryShapes(token_x, weight_uk, rope_sin);
  return {at::empty(q_shape, token_x.options().dtype(rope_sin.scalar_type())),
          at::empty(qr_shape, token_x.options().dtype(at::kBFloat16)),
          at::empty(kv_cache.sizes(), kv_cache.options()), at::empty(kr_cache.sizes(), kr_cache.options()),
          at::empty({1}, token_x.options().dtype(at::kFloat))};
}

namespace {

// v3's outputs besides the caches: query and query_rope in bfloat16, the dequant scales empty (nothing is
// quantized), query_norm [.., Hcq] in weight_uq_qr's dtype when query_norm_flag is set, else empty.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> v3Outputs(
    const at::Tensor& token_x, const at::Tensor& weight_dq, const at::Tensor& weight_uq_qr,
    const at::Tensor& weight_uk, const at::Tensor& rope_sin, bool query_norm_flag) {
  auto [q_shape, qr_shape] = queryShapes(token_x, weight_uk, rope_sin);
  std::vector<int64_t> norm_shape{0};
  if (query_norm_flag) {
    norm_shape.assign(token_x.sizes().begin(), token_x.sizes().end() - 1);
    norm_shape.push_back(weight_dq.size(1));
  }
  const auto bf16 = token_x.options().dtype(at::kBFloat16), f32 = token_x.options().dtype(at::kFloat);
  return {at::empty(q_shape, bf16), at::empty(qr_shape, bf16), at::empty({0}, f32),
          at::empty(norm_shape, token_x.options().dtype(weight_uq_qr.scalar_type())), at::empty({0}, f32)};
}

void checkV3(const char* op, const at::Tensor& token_x, const at::Tensor& weight_uk, const at::Tensor& rope_sin,
             std::initializer_list<const OptTensor*> quant_scales, c10::string_view cache_mode,
             int64_t weight_quant_mode, int64_t kv_cache_quant_mode, int64_t query_quant_mode,
             int64_t ckvkr_repo_mode, int64_t quant_scale_repo_mode,
             std::initializer_list<std::optional<int64_t>> dtype_overrides) {
  checkArguments(op, token_x, weight_uk, rope_sin, quant_scales);
  const std::string mode(cache_mode);
  TORCH_CHECK_VALUE(mode == "PA_BSND" || mode == "PA_NZ" || mode == "BSND" || mode == "TND", op,
                    ": cache_mode must be PA_BSND, PA_NZ, BSND or TND (PA_BLK_* are not supported yet), got '", mode,
                    "'");
  TORCH_CHECK_VALUE(weight_quant_mode == 0 && kv_cache_quant_mode == 0 && query_quant_mode == 0 &&
                        quant_scale_repo_mode == 0,
                    op, ": only the unquantized prologue is supported (weight_quant_mode, kv_cache_quant_mode, ",
                    "query_quant_mode and quant_scale_repo_mode 0), got ", weight_quant_mode, ", ",
                    kv_cache_quant_mode, ", ", query_quant_mode, ", ", quant_scale_repo_mode);
  TORCH_CHECK_VALUE(ckvkr_repo_mode == 0, op, ": ckvkr_repo_mode must be 0 (kv and kr in separate caches), got ",
                    ckvkr_repo_mode);
  for (const auto& dtype : dtype_overrides) {
    // The *_dtype arguments only name hifloat8 storage, a chip-specific format.
    TORCH_CHECK_TYPE(!dtype.has_value(), op, ": token_x_dtype / weight_*_dtype / kv_cache_dtype select hifloat8, ",
                     "which the software NPU does not support");
  }
}

void launchV3(const at::Tensor& token_x, const at::Tensor& weight_dq, const at::Tensor& weight_uq_qr,
              const at::Tensor& weight_uk, const at::Tensor& weight_dkv_kr, const at::Tensor& rmsnorm_gamma_cq,
              const at::Tensor& rmsnorm_gamma_ckv, const at::Tensor& rope_sin, const at::Tensor& rope_cos,
              at::Tensor& kv_cache, at::Tensor& kr_cache, const OptTensor& cache_index,
              const OptTensor& dequant_scale_x, const OptTensor& dequant_scale_w_dq,
              const OptTensor& dequant_scale_w_uq_qr, const OptTensor& dequant_scale_w_dkv_kr,
              const OptTensor& quant_scale_ckv, const OptTensor& quant_scale_ckr, const OptTensor& smooth_scales_cq,
              const OptTensor& actual_seq_len, const OptTensor& k_nope_clip_alpha, double rmsnorm_epsilon_cq,
              double rmsnorm_epsilon_ckv, c10::string_view cache_mode, bool query_norm_flag, int64_t weight_quant_mode,
              int64_t kv_cache_quant_mode, int64_t query_quant_mode, int64_t ckvkr_repo_mode,
              int64_t quant_scale_repo_mode, int64_t tile_size, double qc_qr_scale, double kc_scale,
              std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>& outs) {
  // Named references (not structured bindings): the launch macro may capture its arguments in a lambda.
  at::Tensor& query = std::get<0>(outs);
  at::Tensor& query_rope = std::get<1>(outs);
  at::Tensor& dequant_scale_q_nope = std::get<2>(outs);
  at::Tensor& query_norm = std::get<3>(outs);
  at::Tensor& dequant_scale_q_norm = std::get<4>(outs);
  const std::string mode(cache_mode);
  EXEC_NPU_CMD(aclnnMlaPrologV3WeightNz, token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
               rmsnorm_gamma_ckv, rope_sin, rope_cos, kv_cache, kr_cache, cache_index, dequant_scale_x,
               dequant_scale_w_dq, dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr, quant_scale_ckv, quant_scale_ckr,
               smooth_scales_cq, actual_seq_len, k_nope_clip_alpha, rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv, mode,
               query_norm_flag, weight_quant_mode, kv_cache_quant_mode, query_quant_mode, ckvkr_repo_mode,
               quant_scale_repo_mode, tile_size, qc_qr_scale, kc_scale, query, query_rope, dequant_scale_q_nope,
               query_norm, dequant_scale_q_norm);
}

}  // namespace

#define MLA_V3_CHECK(OP)                                                                                              \
  checkV3(OP, token_x, weight_uk, rope_sin,                                                                           \
          {&dequant_scale_x, &dequant_scale_w_dq, &dequant_scale_w_uq_qr, &dequant_scale_w_dkv_kr, &quant_scale_ckv, \
           &quant_scale_ckr, &smooth_scales_cq, &k_nope_clip_alpha},                                                  \
          cache_mode, weight_quant_mode, kv_cache_quant_mode, query_quant_mode, ckvkr_repo_mode,                      \
          quant_scale_repo_mode,                                                                                      \
          {token_x_dtype, weight_dq_dtype, weight_uq_qr_dtype, weight_dkv_kr_dtype, kv_cache_dtype})

#define MLA_V3_LAUNCH(KV, KR, OUTS)                                                                                   \
  launchV3(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv, rope_sin, \
           rope_cos, KV, KR, cache_index, dequant_scale_x, dequant_scale_w_dq, dequant_scale_w_uq_qr,                \
           dequant_scale_w_dkv_kr, quant_scale_ckv, quant_scale_ckr, smooth_scales_cq, actual_seq_len,               \
           k_nope_clip_alpha, rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv, cache_mode, query_norm_flag,                  \
           weight_quant_mode, kv_cache_quant_mode, query_quant_mode, ckvkr_repo_mode, quant_scale_repo_mode,         \
           tile_size, qc_qr_scale, kc_scale, OUTS)

// In place: kv_cache / kr_cache receive the new rows.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_mla_prolog_v3(
    const at::Tensor& token_x, const at::Tensor& weight_dq, const at::Tensor& weight_uq_qr, const at::Tensor& weight_uk,
    const at::Tensor& weight_dkv_kr, const at::Tensor& rmsnorm_gamma_cq, const at::Tensor& rmsnorm_gamma_ckv,
    const at::Tensor& rope_sin, const at::Tensor& rope_cos, at::Tensor& kv_cache, at::Tensor& kr_cache,
    const OptTensor& cache_index, const OptTensor& dequant_scale_x, const OptTensor& dequant_scale_w_dq,
    const OptTensor& dequant_scale_w_uq_qr, const OptTensor& dequant_scale_w_dkv_kr, const OptTensor& quant_scale_ckv,
    const OptTensor& quant_scale_ckr, const OptTensor& smooth_scales_cq, const OptTensor& actual_seq_len,
    const OptTensor& k_nope_clip_alpha, double rmsnorm_epsilon_cq, double rmsnorm_epsilon_ckv,
    c10::string_view cache_mode, bool query_norm_flag, int64_t weight_quant_mode, int64_t kv_cache_quant_mode,
    int64_t query_quant_mode, int64_t ckvkr_repo_mode, int64_t quant_scale_repo_mode, int64_t tile_size,
    double qc_qr_scale, double kc_scale, std::optional<int64_t> token_x_dtype, std::optional<int64_t> weight_dq_dtype,
    std::optional<int64_t> weight_uq_qr_dtype, std::optional<int64_t> weight_dkv_kr_dtype,
    std::optional<int64_t> kv_cache_dtype) {
  MLA_V3_CHECK("npu_mla_prolog_v3");
  auto outs = v3Outputs(token_x, weight_dq, weight_uq_qr, weight_uk, rope_sin, query_norm_flag);
  MLA_V3_LAUNCH(kv_cache, kr_cache, outs);
  return outs;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_mla_prolog_v3_meta(
    const at::Tensor& token_x, const at::Tensor& weight_dq, const at::Tensor& weight_uq_qr, const at::Tensor& weight_uk,
    const at::Tensor& weight_dkv_kr, const at::Tensor& rmsnorm_gamma_cq, const at::Tensor& rmsnorm_gamma_ckv,
    const at::Tensor& rope_sin, const at::Tensor& rope_cos, at::Tensor& kv_cache, at::Tensor& kr_cache,
    const OptTensor& cache_index, const OptTensor& dequant_scale_x, const OptTensor& dequant_scale_w_dq,
    const OptTensor& dequant_scale_w_uq_qr, const OptTensor& dequant_scale_w_dkv_kr, const OptTensor& quant_scale_ckv,
    const OptTensor& quant_scale_ckr, const OptTensor& smooth_scales_cq, const OptTensor& actual_seq_len,
    const OptTensor& k_nope_clip_alpha, double rmsnorm_epsilon_cq, double rmsnorm_epsilon_ckv,
    c10::string_view cache_mode, bool query_norm_flag, int64_t weight_quant_mode, int64_t kv_cache_quant_mode,
    int64_t query_quant_mode, int64_t ckvkr_repo_mode, int64_t quant_scale_repo_mode, int64_t tile_size,
    double qc_qr_scale, double kc_scale, std::optional<int64_t> token_x_dtype, std::optional<int64_t> weight_dq_dtype,
    std::optional<int64_t> weight_uq_qr_dtype, std::optional<int64_t> weight_dkv_kr_dtype,
    std::optional<int64_t> kv_cache_dtype) {
  return v3Outputs(token_x, weight_dq, weight_uq_qr, weight_uk, rope_sin, query_norm_flag);
}

// Functional: the caches are copied and the copies updated and returned after the five outputs.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
npu_mla_prolog_v3_functional(
    const at::Tensor& token_x, const at::Tensor& weight_dq, const at::Tensor& weight_uq_qr, const at::Tensor& weight_uk,
    const at::Tensor& weight_dkv_kr, const at::Tensor& rmsnorm_gamma_cq, const at::Tensor& rmsnorm_gamma_ckv,
    const at::Tensor& rope_sin, const at::Tensor& rope_cos, const at::Tensor& kv_cache, const at::Tensor& kr_cache,
    const OptTensor& cache_index, const OptTensor& dequant_scale_x, const OptTensor& dequant_scale_w_dq,
    const OptTensor& dequant_scale_w_uq_qr, const OptTensor& dequant_scale_w_dkv_kr, const OptTensor& quant_scale_ckv,
    const OptTensor& quant_scale_ckr, const OptTensor& smooth_scales_cq, const OptTensor& actual_seq_len,
    const OptTensor& k_nope_clip_alpha, double rmsnorm_epsilon_cq, double rmsnorm_epsilon_ckv,
    c10::string_view cache_mode, bool query_norm_flag, int64_t weight_quant_mode, int64_t kv_cache_quant_mode,
    int64_t query_quant_mode, int64_t ckvkr_repo_mode, int64_t quant_scale_repo_mode, int64_t tile_size,
    double qc_qr_scale, double kc_scale, std::optional<int64_t> token_x_dtype, std::optional<int64_t> weight_dq_dtype,
    std::optional<int64_t> weight_uq_qr_dtype, std::optional<int64_t> weight_dkv_kr_dtype,
    std::optional<int64_t> kv_cache_dtype) {
  MLA_V3_CHECK("npu_mla_prolog_v3_functional");
  auto outs = v3Outputs(token_x, weight_dq, weight_uq_qr, weight_uk, rope_sin, query_norm_flag);
  at::Tensor kv_cache_out = kv_cache.clone(), kr_cache_out = kr_cache.clone();
  MLA_V3_LAUNCH(kv_cache_out, kr_cache_out, outs);
  auto& [query, query_rope, dequant_scale_q_nope, query_norm, dequant_scale_q_norm] = outs;
  return {query, query_rope, dequant_scale_q_nope, query_norm, dequant_scale_q_norm, kv_cache_out, kr_cache_out};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
npu_mla_prolog_v3_functional_meta(
    const at::Tensor& token_x, const at::Tensor& weight_dq, const at::Tensor& weight_uq_qr, const at::Tensor& weight_uk,
    const at::Tensor& weight_dkv_kr, const at::Tensor& rmsnorm_gamma_cq, const at::Tensor& rmsnorm_gamma_ckv,
    const at::Tensor& rope_sin, const at::Tensor& rope_cos, const at::Tensor& kv_cache, const at::Tensor& kr_cache,
    const OptTensor& cache_index, const OptTensor& dequant_scale_x, const OptTensor& dequant_scale_w_dq,
    const OptTensor& dequant_scale_w_uq_qr, const OptTensor& dequant_scale_w_dkv_kr, const OptTensor& quant_scale_ckv,
    const OptTensor& quant_scale_ckr, const OptTensor& smooth_scales_cq, const OptTensor& actual_seq_len,
    const OptTensor& k_nope_clip_alpha, double rmsnorm_epsilon_cq, double rmsnorm_epsilon_ckv,
    c10::string_view cache_mode, bool query_norm_flag, int64_t weight_quant_mode, int64_t kv_cache_quant_mode,
    int64_t query_quant_mode, int64_t ckvkr_repo_mode, int64_t quant_scale_repo_mode, int64_t tile_size,
    double qc_qr_scale, double kc_scale, std::optional<int64_t> token_x_dtype, std::optional<int64_t> weight_dq_dtype,
    std::optional<int64_t> weight_uq_qr_dtype, std::optional<int64_t> weight_dkv_kr_dtype,
    std::optional<int64_t> kv_cache_dtype) {
  auto [query, query_rope, dequant_scale_q_nope, query_norm, dequant_scale_q_norm] =
      v3Outputs(token_x, weight_dq, weight_uq_qr, weight_uk, rope_sin, query_norm_flag);
  return {query,
          query_rope,
          dequant_scale_q_nope,
          query_norm,
          dequant_scale_q_norm,
          at::empty(kv_cache.sizes(), kv_cache.options()),
          at::empty(kr_cache.sizes(), kr_cache.options())};
}

#undef MLA_V3_CHECK
#undef MLA_V3_LAUNCH
}  // namespace at_npu::native
