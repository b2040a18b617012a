// CacheRopeOps.cpp - KV-cache / RoPE serving device ops: MlaProlog (V1, V2WeightNz, V3WeightNz: the MLA attention
// prologue), QkvRmsNormRopeCache, ScatterPaCache and DequantRopeQuantKvcache.
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/round.h>
#include <ATen/ops/rsqrt.h>

#include <initializer_list>
#include <string>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

at::Tensor rotateHalf(const at::Tensor& x) {
  auto halves = x.chunk(2, -1);
  return at::cat({-halves[1], halves[0]}, -1);
}

// The rope inputs hold their pairs interleaved; they are regrouped (evens, then odds) before the half rotation.
at::Tensor interleavedRope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const at::Tensor grouped = x.unflatten(-1, {x.size(-1) / 2, 2}).transpose(-1, -2).flatten(-2);
  return grouped * cos + rotateHalf(grouped) * sin;
}

at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& gamma, double eps) {
  return x * at::rsqrt(at::mean(x * x, {-1}, /*keepdim=*/true) + eps) * gamma;
}

enum class CacheLayout { kPaged, kPagedNz, kDense };

// Writes rows [T, H] into the cache; every one of its Nkv heads gets the row. Paged caches are [blocks, block_size,
// Nkv, H] addressed by slot (PA_NZ keeps the fractal [blocks, Nkv * H / C0, block_size, C0], C0 = 32 bytes, in
// memory); dense caches ([B, S, Nkv, H] or [T, Nkv, H]) take token t at position t.
void writeCache(const char* op, at::Tensor cache, const at::Tensor& rows, const at::Tensor& slots,
                CacheLayout layout) {
  const at::Tensor values = rows.to(cache.scalar_type());
  if (layout == CacheLayout::kDense) {
    const int64_t heads = cache.size(-2), h = cache.size(-1);
    TORCH_CHECK(cache.numel() == rows.size(0) * heads * h, op, ": a BSND / TND cache must hold one row per token (",
                rows.size(0), "), got ", cache.sizes());
    cache.view({rows.size(0), heads, h}).copy_(values.unsqueeze(1).expand({rows.size(0), heads, h}));
    return;
  }
  const bool nz = layout == CacheLayout::kPagedNz;
  const int64_t blocks = cache.size(0), block_size = cache.size(1), heads = cache.size(2), h = cache.size(3);
  const int64_t c0 = 32 / static_cast<int64_t>(cache.element_size());
  TORCH_CHECK(!nz || (heads * h) % c0 == 0, op, ": a PA_NZ cache holds Nkv * H in groups of ", c0, ", got ",
              cache.sizes());
  at::Tensor slot_view = nz ? cache.view({blocks, heads * h / c0, block_size, c0}).permute({0, 2, 1, 3}) : cache;
  const int64_t* ix = slots.const_data_ptr<int64_t>();
  for (int64_t t = 0; t < slots.numel(); ++t) {
    const int64_t slot = ix[t];
    if (slot < 0) continue;  // padding tokens carry a negative slot and are not cached
    TORCH_CHECK(slot < blocks * block_size, op, ": cache_index ", slot, " is past the cache's ", blocks * block_size,
                " slots");
    at::Tensor target = slot_view[slot / block_size][slot % block_size];
    if (nz) {
      target.copy_(values[t].repeat({heads}).view({target.size(0), target.size(1)}));
    } else {
      target.copy_(values[t].expand({heads, h}));
    }
  }
}

struct MlaShapes {
  int64_t tokens, heads, d_nope, d_rope, h_ckv;
};

MlaShapes checkMlaShapes(const char* op, const at::Tensor& x, const at::Tensor& wdq, const at::Tensor& wuq,
                         const at::Tensor& wuk, const at::Tensor& wdkv, const at::Tensor& gcq, const at::Tensor& gckv,
                         const at::Tensor& sin, const at::Tensor& cos, const at::Tensor& index,
                         const at::Tensor& kv_cache, const at::Tensor& kr_cache, bool dense = false) {
  TORCH_CHECK(x.dim() == 2 || x.dim() == 3, op, ": token_x must be [T, He] or [B, S, He], got ", x.sizes());
  TORCH_CHECK(c10::isFloatingType(x.scalar_type()), op, ": token_x must be float32, float16 or bfloat16 (the ",
              "quantized prologue is not supported), got ", x.scalar_type());
  TORCH_CHECK(wuk.dim() == 3 && sin.sizes() == cos.sizes() && sin.size(-1) % 2 == 0, op,
              ": weight_uk must be [N, D, Hckv] and rope_sin / rope_cos equal with an even last size, got ",
              wuk.sizes(), ", ", sin.sizes(), ", ", cos.sizes());
  MlaShapes s{x.numel() / x.size(-1), wuk.size(0), wuk.size(1), sin.size(-1), wuk.size(2)};
  const int64_t he = x.size(-1);
  TORCH_CHECK(wdq.dim() == 2 && wdq.size(0) == he && gcq.dim() == 1 && gcq.size(0) == wdq.size(1), op,
              ": weight_dq must be [He, Hcq] with gamma_cq [Hcq], got ", wdq.sizes(), ", ", gcq.sizes());
  TORCH_CHECK(wuq.dim() == 2 && wuq.size(0) == wdq.size(1) && wuq.size(1) == s.heads * (s.d_nope + s.d_rope), op,
              ": weight_uq_qr must be [Hcq, N * (D + Dr)] = [", wdq.size(1), ", ", s.heads * (s.d_nope + s.d_rope),
              "], got ", wuq.sizes());
  TORCH_CHECK(wdkv.dim() == 2 && wdkv.size(0) == he && wdkv.size(1) == s.h_ckv + s.d_rope && gckv.dim() == 1 &&
                  gckv.size(0) == s.h_ckv,
              op, ": weight_dkv_kr must be [He, Hckv + Dr] with gamma_ckv [Hckv], got ", wdkv.sizes(), ", ",
              gckv.sizes());
  TORCH_CHECK(sin.numel() == s.tokens * s.d_rope, op, ": rope_sin / rope_cos need one row per token (", s.tokens,
              "), got ", sin.sizes());
  TORCH_CHECK(dense || index.numel() == s.tokens, op, ": cache_index needs one slot per token (", s.tokens, "), got ",
              index.sizes());
  if (dense) {
    TORCH_CHECK(kv_cache.size(-1) == s.h_ckv && kr_cache.size(-1) == s.d_rope, op,
                ": kv_cache / kr_cache must end in Hckv = ", s.h_ckv, " / Dr = ", s.d_rope, ", got ", kv_cache.sizes(),
                " and ", kr_cache.sizes());
    return s;
  }
  TORCH_CHECK(kv_cache.dim() == 4 && kr_cache.dim() == 4 && kv_cache.size(3) == s.h_ckv && kr_cache.size(3) ==
                  s.d_rope && kv_cache.size(0) * kv_cache.size(1) == kr_cache.size(0) * kr_cache.size(1),
              op, ": kv_cache / kr_cache must be [BlockNum, BlockSize, Nkv, Hckv / Dr] with the same slots, got ",
              kv_cache.sizes(), " and ", kr_cache.sizes());
  return s;
}

void checkNoQuantScales(const char* op, std::initializer_list<const aclTensor*> scales) {
  for (const aclTensor* scale : scales) {
    TORCH_CHECK(scale == nullptr, op, ": the quantized prologue (dequant_scale_* / quant_scale_* / smooth_scales_cq) ",
                "is not supported; pass floating-point token_x and weights without scales");
  }
}

struct MlaResult {
  at::Tensor query, query_rope, cq_norm;  // [T, N, Hckv], [T, N, Dr], [T, Hcq] in float32
};

struct MlaOptions {
  double eps_cq, eps_ckv;
  CacheLayout layout;
  double qc_qr_scale = 1.0, kc_scale = 1.0;  // v3's scale corrections of the normalised query / latent KV
};

// The whole prologue in float32; the query branch rounds to the input dtype after each stage, as the device does.
MlaResult runMlaProlog(const char* op, const at::Tensor& x, const at::Tensor& wdq, const at::Tensor& wuq,
                       const at::Tensor& wuk, const at::Tensor& wdkv, const at::Tensor& gcq, const at::Tensor& gckv,
                       const at::Tensor& sin, const at::Tensor& cos, const at::Tensor& index, at::Tensor kv_cache,
                       at::Tensor kr_cache, const MlaOptions& o, const MlaShapes& s) {
  const at::ScalarType dt = x.scalar_type();
  auto stage = [dt](const at::Tensor& t) { return t.to(dt).to(at::kFloat); };
  const at::Tensor xf = x.reshape({s.tokens, x.size(-1)}).to(at::kFloat);
  const at::Tensor cosf = cos.reshape({s.tokens, s.d_rope}).to(at::kFloat);
  const at::Tensor sinf = sin.reshape({s.tokens, s.d_rope}).to(at::kFloat);

  const at::Tensor cq = stage(at::matmul(xf, wdq.to(at::kFloat)));
  const at::Tensor cq_norm = stage(rmsNorm(cq, gcq.to(at::kFloat), o.eps_cq) * o.qc_qr_scale);
  const at::Tensor q_all =
      stage(at::matmul(cq_norm, wuq.to(at::kFloat))).view({s.tokens, s.heads, s.d_nope + s.d_rope});
  MlaResult r;
  r.cq_norm = cq_norm;
  // Per head: [N, T, D] @ [N, D, Hckv] absorbs the nope part into the latent KV space.
  r.query = at::matmul(q_all.narrow(-1, 0, s.d_nope).transpose(0, 1), wuk.to(at::kFloat)).transpose(0, 1);
  r.query_rope = interleavedRope(q_all.narrow(-1, s.d_nope, s.d_rope), cosf.unsqueeze(1), sinf.unsqueeze(1));

  const at::Tensor kv_kr = at::matmul(xf, wdkv.to(at::kFloat));
  const at::Tensor ckv = rmsNorm(kv_kr.narrow(-1, 0, s.h_ckv), gckv.to(at::kFloat), o.eps_ckv) * o.kc_scale;
  const at::Tensor kr = interleavedRope(kv_kr.narrow(-1, s.h_ckv, s.d_rope), cosf, sinf);
  const at::Tensor slots =
      o.layout == CacheLayout::kDense ? at::Tensor() : index.reshape({-1}).to(at::kLong).contiguous();
  writeCache(op, kv_cache, ckv, slots, o.layout);
  writeCache(op, kr_cache, kr, slots, o.layout);
  return r;
}

// v1 / v2 take the paged modes; v3 also the dense BSND / TND caches.
CacheLayout cacheLayout(const char* op, const char* cache_mode, bool allow_dense) {
  const std::string mode = cache_mode == nullptr ? "PA_BSND" : cache_mode;
  if (mode == "PA_BSND") return CacheLayout::kPaged;
  if (mode == "PA_NZ") return CacheLayout::kPagedNz;
  TORCH_CHECK(allow_dense && (mode == "BSND" || mode == "TND"), op, ": cache_mode must be PA_BSND or PA_NZ",
              allow_dense ? ", BSND or TND" : "", ", got '", mode, "'");
  return CacheLayout::kDense;
}

}  // namespace

// V1: the caches are copied into kvCacheOut / krCacheOut, which receive the new rows.
extern "C" NOP_API aclnnStatus aclnnMlaPrologGetWorkspaceSize(
    const aclTensor* tokenX, const aclTensor* weightDq, const aclTensor* weightUqQr, const aclTensor* weightUk,
    const aclTensor* weightDkvKr, const aclTensor* rmsnormGammaCq, const aclTensor* rmsnormGammaCkv,
    const aclTensor* ropeSin, const aclTensor* ropeCos, const aclTensor* cacheIndex, const aclTensor* kvCache,
    const aclTensor* krCache, const aclTensor* dequantScaleXOptional, const aclTensor* dequantScaleWDqOptional,
    const aclTensor* dequantScaleWUqQrOptional, const aclTensor* dequantScaleWDkvKrOptional,
    const aclTensor* quantScaleCkvOptional, const aclTensor* quantScaleCkrOptional,
    const aclTensor* smoothScalesCqOptional, double rmsnormEpsilonCq, double rmsnormEpsilonCkv, char* cacheMode,
    aclTensor* query, aclTensor* queryRope, aclTensor* kvCacheOut, aclTensor* krCacheOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  const char* op = "aclnnMlaProlog";
  return prepareOp(op, workspaceSize, executor, [&] {
    checkNoQuantScales(op, {dequantScaleXOptional, dequantScaleWDqOptional, dequantScaleWUqQrOptional,
                            dequantScaleWDkvKrOptional, quantScaleCkvOptional, quantScaleCkrOptional,
                            smoothScalesCqOptional});
    at::Tensor x = requiredTensor(tokenX, "tokenX"), wdq = requiredTensor(weightDq, "weightDq");
    at::Tensor wuq = requiredTensor(weightUqQr, "weightUqQr"), wuk = requiredTensor(weightUk, "weightUk");
    at::Tensor wdkv = requiredTensor(weightDkvKr, "weightDkvKr"), gcq = requiredTensor(rmsnormGammaCq, "gammaCq");
    at::Tensor gckv = requiredTensor(rmsnormGammaCkv, "gammaCkv"), sin = requiredTensor(ropeSin, "ropeSin");
    at::Tensor cos = requiredTensor(ropeCos, "ropeCos"), idx = requiredTensor(cacheIndex, "cacheIndex");
    at::Tensor kvc = requiredTensor(kvCache, "kvCache"), krc = requiredTensor(krCache, "krCache");
    at::Tensor q = requiredTensor(query, "query"), qr = requiredTensor(queryRope, "queryRope");
    at::Tensor kv_out = requiredTensor(kvCacheOut, "kvCacheOut"), kr_out = requiredTensor(krCacheOut, "krCacheOut");
    const CacheLayout layout = cacheLayout(op, cacheMode, /*allow_dense=*/false);
    const MlaShapes s = checkMlaShapes(op, x, wdq, wuq, wuk, wdkv, gcq, gckv, sin, cos, idx, kvc, krc);
    TORCH_CHECK(kv_out.sizes() == kvc.sizes() && kr_out.sizes() == krc.sizes(), op,
                ": kvCacheOut / krCacheOut must match the caches' shapes");
    const MlaOptions options{rmsnormEpsilonCq, rmsnormEpsilonCkv, layout};
    return Prepared{{x, wdq, wuq, wuk, wdkv, gcq, gckv, sin, cos, idx, kvc, krc}, [=]() mutable {
                      kv_out.copy_(kvc);
                      kr_out.copy_(krc);
                      MlaResult r = runMlaProlog(op, x, wdq, wuq, wuk, wdkv, gcq, gckv, sin, cos, idx, kv_out, kr_out,
                                                 options, s);
                      q.copy_(r.query.reshape(q.sizes()));
                      qr.copy_(r.query_rope.reshape(qr.sizes()));
                    },
                    {q, qr, kv_out, kr_out}};
  });
}
NPU_ATEN_OP(MlaProlog, "tokenX, weightDq, weightUqQr, weightUk, weightDkvKr, rmsnormGammaCq, rmsnormGammaCkv, ropeSin, ropeCos, cacheIndex, kvCache, krCache, dequantScaleXOptional, dequantScaleWDqOptional, dequantScaleWUqQrOptional, dequantScaleWDkvKrOptional, quantScaleCkvOptional, quantScaleCkrOptional, smoothScalesCqOptional, rmsnormEpsilonCq, rmsnormEpsilonCkv, cacheMode, query, queryRope, kvCacheOut, krCacheOut");

// V2: the caches are updated in place; dequantScaleQNope is the per-token scale of a quantized query (1 here).
extern "C" NOP_API aclnnStatus aclnnMlaPrologV2WeightNzGetWorkspaceSize(
    const aclTensor* tokenX, const aclTensor* weightDq, const aclTensor* weightUqQr, const aclTensor* weightUk,
    const aclTensor* weightDkvKr, const aclTensor* rmsnormGammaCq, const aclTensor* rmsnormGammaCkv,
    const aclTensor* ropeSin, const aclTensor* ropeCos, const aclTensor* cacheIndex, aclTensor* kvCacheRef,
    aclTensor* krCacheRef, const aclTensor* dequantScaleXOptional, const aclTensor* dequantScaleWDqOptional,
    const aclTensor* dequantScaleWUqQrOptional, const aclTensor* dequantScaleWDkvKrOptional,
    const aclTensor* quantScaleCkvOptional, const aclTensor* quantScaleCkrOptional,
    const aclTensor* smoothScalesCqOptional, double rmsnormEpsilonCq, double rmsnormEpsilonCkv, char* cacheMode,
    aclTensor* query, aclTensor* queryRope, aclTensor* dequantScaleQNope, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  const char* op = "aclnnMlaPrologV2WeightNz";
  return prepareOp(op, workspaceSize, executor, [&] {
    checkNoQuantScales(op, {dequantScaleXOptional, dequantScaleWDqOptional, dequantScaleWUqQrOptional,
                            dequantScaleWDkvKrOptional, quantScaleCkvOptional, quantScaleCkrOptional,
                            smoothScalesCqOptional});
    at::Tensor x = requiredTensor(tokenX, "tokenX"), wdq = requiredTensor(weightDq, "weightDq");
    at::Tensor wuq = requiredTensor(weightUqQr, "weightUqQr"), wuk = requiredTensor(weightUk, "weightUk");
    at::Tensor wdkv = requiredTensor(weightDkvKr, "weightDkvKr"), gcq = requiredTensor(rmsnormGammaCq, "gammaCq");
    at::Tensor gckv = requiredTensor(rmsnormGammaCkv, "gammaCkv"), sin = requiredTensor(ropeSin, "ropeSin");
    at::Tensor cos = requiredTensor(ropeCos, "ropeCos"), idx = requiredTensor(cacheIndex, "cacheIndex");
    at::Tensor kvc = requiredTensor(kvCacheRef, "kvCacheRef"), krc = requiredTensor(krCacheRef, "krCacheRef");
    at::Tensor q = requiredTensor(query, "query"), qr = requiredTensor(queryRope, "queryRope");
    at::Tensor dq = requiredTensor(dequantScaleQNope, "dequantScaleQNope");
    const CacheLayout layout = cacheLayout(op, cacheMode, /*allow_dense=*/false);
    const MlaShapes s = checkMlaShapes(op, x, wdq, wuq, wuk, wdkv, gcq, gckv, sin, cos, idx, kvc, krc);
    const MlaOptions options{rmsnormEpsilonCq, rmsnormEpsilonCkv, layout};
    return Prepared{{x, wdq, wuq, wuk, wdkv, gcq, gckv, sin, cos, idx}, [=]() mutable {
                      MlaResult r = runMlaProlog(op, x, wdq, wuq, wuk, wdkv, gcq, gckv, sin, cos, idx, kvc, krc,
                                                 options, s);
                      q.copy_(r.query.reshape(q.sizes()));
                      qr.copy_(r.query_rope.reshape(qr.sizes()));
                      dq.fill_(1.0);  // an unquantized query needs no dequantization
                    },
                    {q, qr, dq, kvc, krc}};
  });
}
NPU_ATEN_OP(MlaPrologV2WeightNz, "tokenX, weightDq, weightUqQr, weightUk, weightDkvKr, rmsnormGammaCq, rmsnormGammaCkv, ropeSin, ropeCos, cacheIndex, kvCacheRef, krCacheRef, dequantScaleXOptional, dequantScaleWDqOptional, dequantScaleWUqQrOptional, dequantScaleWDkvKrOptional, quantScaleCkvOptional, quantScaleCkrOptional, smoothScalesCqOptional, rmsnormEpsilonCq, rmsnormEpsilonCkv, cacheMode, query, queryRope, dequantScaleQNope");

// V3: caches updated in place; only the unquantized prologue (all quant modes 0, separate kv / kr caches).
// queryNorm (numel > 0 when query_norm_flag is set) receives the normalised, scaled c^Q.
extern "C" NOP_API aclnnStatus aclnnMlaPrologV3WeightNzGetWorkspaceSize(
    const aclTensor* tokenX, const aclTensor* weightDq, const aclTensor* weightUqQr, const aclTensor* weightUk,
    const aclTensor* weightDkvKr, const aclTensor* rmsnormGammaCq, const aclTensor* rmsnormGammaCkv,
    const aclTensor* ropeSin, const aclTensor* ropeCos, aclTensor* kvCacheRef, aclTensor* krCacheRef,
    const aclTensor* cacheIndexOptional, const aclTensor* dequantScaleXOptional,
    const aclTensor* dequantScaleWDqOptional, const aclTensor* dequantScaleWUqQrOptional,
    const aclTensor* dequantScaleWDkvKrOptional, const aclTensor* quantScaleCkvOptional,
    const aclTensor* quantScaleCkrOptional, const aclTensor* smoothScalesCqOptional,
    const aclTensor* actualSeqLenOptional, const aclTensor* kNopeClipAlphaOptional, double rmsnormEpsilonCq,
    double rmsnormEpsilonCkv, char* cacheMode, bool queryNormFlag, int64_t weightQuantMode, int64_t kvCacheQuantMode,
    int64_t queryQuantMode, int64_t ckvkrRepoMode, int64_t quantScaleRepoMode, int64_t tileSize, double qcQrScale,
    double kcScale, aclTensor* query, aclTensor* queryRope, aclTensor* dequantScaleQNope, aclTensor* queryNorm,
    aclTensor* dequantScaleQNorm, uint64_t* workspaceSize, aclOpExecutor** executor) {
  const char* op = "aclnnMlaPrologV3WeightNz";
  return prepareOp(op, workspaceSize, executor, [&] {
    checkNoQuantScales(op, {dequantScaleXOptional, dequantScaleWDqOptional, dequantScaleWUqQrOptional,
                            dequantScaleWDkvKrOptional, quantScaleCkvOptional, quantScaleCkrOptional,
                            smoothScalesCqOptional, kNopeClipAlphaOptional});
    TORCH_CHECK(weightQuantMode == 0 && kvCacheQuantMode == 0 && queryQuantMode == 0 && quantScaleRepoMode == 0, op,
                ": only the unquantized prologue (weight / kv_cache / query / quant_scale_repo modes 0) is ",
                "supported, got ", weightQuantMode, ", ", kvCacheQuantMode, ", ", queryQuantMode, ", ",
                quantScaleRepoMode);
    TORCH_CHECK(ckvkrRepoMode == 0, op, ": ckvkr_repo_mode 1 (kv and kr in one cache) is not supported");
    (void)tileSize;  // only used by the per-tile quantized cache
    (void)actualSeqLenOptional;  // the paged / dense layouts supported here do not need per-batch lengths
    at::Tensor x = requiredTensor(tokenX, "tokenX"), wdq = requiredTensor(weightDq, "weightDq");
    at::Tensor wuq = requiredTensor(weightUqQr, "weightUqQr"), wuk = requiredTensor(weightUk, "weightUk");
    at::Tensor wdkv = requiredTensor(weightDkvKr, "weightDkvKr"), gcq = requiredTensor(rmsnormGammaCq, "gammaCq");
    at::Tensor gckv = requiredTensor(rmsnormGammaCkv, "gammaCkv"), sin = requiredTensor(ropeSin, "ropeSin");
    at::Tensor cos = requiredTensor(ropeCos, "ropeCos"), idx = hostTensor(cacheIndexOptional);
    at::Tensor kvc = requiredTensor(kvCacheRef, "kvCacheRef"), krc = requiredTensor(krCacheRef, "krCacheRef");
    at::Tensor q = requiredTensor(query, "query"), qr = requiredTensor(queryRope, "queryRope");
    at::Tensor q_norm = hostTensor(queryNorm), dq_nope = hostTensor(dequantScaleQNope);
    at::Tensor dq_norm = hostTensor(dequantScaleQNorm);
    const CacheLayout layout = cacheLayout(op, cacheMode, /*allow_dense=*/true);
    const bool dense = layout == CacheLayout::kDense;
    TORCH_CHECK(dense || idx.defined(), op, ": the paged cache modes need cache_index");
    const MlaShapes s = checkMlaShapes(op, x, wdq, wuq, wuk, wdkv, gcq, gckv, sin, cos, idx, kvc, krc, dense);
    TORCH_CHECK(!queryNormFlag || (q_norm.defined() && q_norm.numel() == s.tokens * wdq.size(1)), op,
                ": with query_norm_flag, queryNorm must hold ", s.tokens, " x ", wdq.size(1), " values");
    MlaOptions options{rmsnormEpsilonCq, rmsnormEpsilonCkv, layout};
    options.qc_qr_scale = qcQrScale;
    options.kc_scale = kcScale;
    const bool want_norm = queryNormFlag;
    return Prepared{{x, wdq, wuq, wuk, wdkv, gcq, gckv, sin, cos, idx}, [=]() mutable {
                      MlaResult r = runMlaProlog(op, x, wdq, wuq, wuk, wdkv, gcq, gckv, sin, cos, idx, kvc, krc,
                                                 options, s);
                      q.copy_(r.query.reshape(q.sizes()));
                      qr.copy_(r.query_rope.reshape(qr.sizes()));
                      if (want_norm) q_norm.copy_(r.cq_norm.reshape(q_norm.sizes()));
                      // Unquantized outputs carry no dequantization scales; any given buffer reads as 1.
                      if (dq_nope.defined() && dq_nope.numel() > 0) dq_nope.fill_(1.0);
                      if (dq_norm.defined() && dq_norm.numel() > 0) dq_norm.fill_(1.0);
                    },
                    {q, qr, q_norm, dq_nope, dq_norm, kvc, krc}};
  });
}
NPU_ATEN_OP(MlaPrologV3WeightNz, "tokenX, weightDq, weightUqQr, weightUk, weightDkvKr, rmsnormGammaCq, rmsnormGammaCkv, ropeSin, ropeCos, kvCacheRef, krCacheRef, cacheIndexOptional, dequantScaleXOptional, dequantScaleWDqOptional, dequantScaleWUqQrOptional, dequantScaleWDkvKrOptional, quantScaleCkvOptional, quantScaleCkrOptional, smoothScalesCqOptional, actualSeqLenOptional, kNopeClipAlphaOptional, rmsnormEpsilonCq, rmsnormEpsilonCkv, cacheMode, queryNormFlag, weightQuantMode, kvCacheQuantMode, queryQuantMode, ckvkrRepoMode, quantScaleRepoMode, tileSize, qcQrScale, kcScale, query, queryRope, dequantScaleQNope, queryNorm, dequantScaleQNorm");

namespace {

// Plain (non-interleaved) half rotation, cos / sin broadcast against x.
at::Tensor halfRope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return x * cos + rotateHalf(x) * sin;
}

// Values as the cache stores them: with a scale, round(x / scale + offset) clipped to int8's range.
at::Tensor quantizeForCache(const at::Tensor& x, const at::Tensor& cache, const at::Tensor& scale,
                            const at::Tensor& offset) {
  if (!scale.defined()) return x.to(cache.scalar_type());
  at::Tensor q = x / scale.to(at::kFloat);
  if (offset.defined()) q = q + offset.to(at::kFloat);
  return at::round(q).clamp(-128, 127).to(cache.scalar_type());
}

// rows [T, N, D] into a PA_NZ cache [blocks, N * D / C0, block_size, C0] at slots [T] (negative: skipped).
void writeNzRows(const char* op, at::Tensor cache, const at::Tensor& rows, const int64_t* slots) {
  TORCH_CHECK(cache.dim() == 4, op, ": a PA_NZ cache must be 4-D [blocks, N * D / C0, block_size, C0], got ",
              cache.sizes());
  const int64_t tokens = rows.size(0), groups = cache.size(1), block_size = cache.size(2), c0 = cache.size(3);
  TORCH_CHECK(groups * c0 == rows.size(1) * rows.size(2), op, ": cache ", cache.sizes(), " does not hold ",
              rows.size(1), " heads of ", rows.size(2), " values");
  const at::Tensor by_slot = cache.permute({0, 2, 1, 3});  // [blocks, block_size, groups, C0]
  for (int64_t t = 0; t < tokens; ++t) {
    if (slots[t] < 0) continue;
    TORCH_CHECK(slots[t] < cache.size(0) * block_size, op, ": index ", slots[t], " is past the cache's ",
                cache.size(0) * block_size, " slots");
    by_slot[slots[t] / block_size][slots[t] % block_size].copy_(rows[t].reshape({groups, c0}));
  }
}

}  // namespace

// q and k: RMSNorm per head, then RoPE over the whole head (cos / sin [B * Srope, Nrope * D], Srope in {1, S},
// Nrope in {1, N}); v as is. q goes to qOut, k / v to the caches; the *BeforeQuant outputs (when non-empty) hold
// the unquantized q / k / v rows.
extern "C" NOP_API aclnnStatus aclnnQkvRmsNormRopeCacheGetWorkspaceSize(
    const aclTensor* qkv, const aclTensor* qGamma, const aclTensor* kGamma, const aclTensor* cos, const aclTensor* sin,
    const aclTensor* index, aclTensor* qOut, aclTensor* kCache, aclTensor* vCache, const aclTensor* kScaleOptional,
    const aclTensor* vScaleOptional, const aclTensor* kOffsetOptional, const aclTensor* vOffsetOptional,
    const aclIntArray* qkvSize, const aclIntArray* headNums, double epsilon, char* cacheMode,
    aclTensor* qOutBeforeQuant, aclTensor* kOutBeforeQuant, aclTensor* vOutBeforeQuant, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  const char* op = "aclnnQkvRmsNormRopeCache";
  return prepareOp(op, workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(qkv, "qkv"), qg = requiredTensor(qGamma, "qGamma");
    at::Tensor kg = requiredTensor(kGamma, "kGamma");
    at::Tensor c = requiredTensor(cos, "cos"), s = requiredTensor(sin, "sin"), idx = requiredTensor(index, "index");
    at::Tensor q_out = requiredTensor(qOut, "qOut"), kc = requiredTensor(kCache, "kCache");
    at::Tensor vc = requiredTensor(vCache, "vCache");
    at::Tensor ks = hostTensor(kScaleOptional), vs = hostTensor(vScaleOptional);
    at::Tensor ko = hostTensor(kOffsetOptional), vo = hostTensor(vOffsetOptional);
    at::Tensor q_before = hostTensor(qOutBeforeQuant), k_before = hostTensor(kOutBeforeQuant);
    at::Tensor v_before = hostTensor(vOutBeforeQuant);
    const std::vector<int64_t> size = intArray(qkvSize), heads = intArray(headNums);
    const std::string mode = cacheMode == nullptr ? "PA_NZ" : cacheMode;
    TORCH_CHECK(mode == "PA_NZ", op, ": cache_mode must be PA_NZ, got '", mode, "'");
    TORCH_CHECK(size.size() == 4 && heads.size() == 3 && heads[0] + heads[1] + heads[2] == size[2], op,
                ": qkvSize must be [B, S, Nq + Nk + Nv, D] and headNums [Nq, Nk, Nv]");
    const int64_t batch = size[0], seq = size[1], d = size[3];
    TORCH_CHECK(x.dim() == 2 && x.size(0) == batch * seq && x.size(1) == size[2] * d, op, ": qkv must be [",
                batch * seq, ", ", size[2] * d, "], got ", x.sizes());
    TORCH_CHECK(qg.numel() == d && kg.numel() == d && d % 2 == 0, op, ": q / k gamma must hold D = ", d,
                " values (D even)");
    TORCH_CHECK(c.sizes() == s.sizes() && c.dim() == 2 && c.size(0) % batch == 0 && c.size(1) % d == 0, op,
                ": cos / sin must be [B * Srope, Nrope * D], got ", c.sizes());
    const int64_t s_rope = c.size(0) / batch, n_rope = c.size(1) / d;
    TORCH_CHECK((s_rope == 1 || s_rope == seq) && (n_rope == 1 || n_rope == heads[0]), op,
                ": cos / sin broadcast over S (Srope 1 or ", seq, ") and heads (Nrope 1 or Nq), got ", c.sizes());
    TORCH_CHECK(idx.numel() == batch * seq && q_out.numel() == batch * seq * heads[0] * d, op,
                ": index needs one slot per token and qOut [B * S, Nq * D]");
    return Prepared{{x, qg, kg, c, s, idx, ks, vs, ko, vo}, [=]() mutable {
                      const int64_t tokens = batch * seq;
                      const at::Tensor xf = x.to(at::kFloat).view({tokens, size[2], d});
                      const at::Tensor cf = c.to(at::kFloat).view({batch, s_rope, n_rope, d});
                      const at::Tensor sf = s.to(at::kFloat).view({batch, s_rope, n_rope, d});
                      auto normRope = [&](const at::Tensor& part, const at::Tensor& gamma) {
                        const at::Tensor y = rmsNorm(part, gamma.to(at::kFloat), epsilon)
                                                 .view({batch, seq, part.size(1), d});
                        return halfRope(y, cf, sf).view({tokens, part.size(1), d});
                      };
                      const at::Tensor q = normRope(xf.narrow(1, 0, heads[0]), qg);
                      const at::Tensor k = normRope(xf.narrow(1, heads[0], heads[1]), kg);
                      const at::Tensor v = xf.narrow(1, heads[0] + heads[1], heads[2]);
                      const at::Tensor slots = idx.reshape({-1}).to(at::kLong).contiguous();
                      writeNzRows(op, kc, quantizeForCache(k, kc, ks, ko), slots.const_data_ptr<int64_t>());
                      writeNzRows(op, vc, quantizeForCache(v, vc, vs, vo), slots.const_data_ptr<int64_t>());
                      q_out.copy_(q.reshape(q_out.sizes()));
                      if (q_before.defined() && q_before.numel() > 0) q_before.copy_(q.reshape(q_before.sizes()));
                      if (k_before.defined() && k_before.numel() > 0) k_before.copy_(k.reshape(k_before.sizes()));
                      if (v_before.defined() && v_before.numel() > 0) v_before.copy_(v.reshape(v_before.sizes()));
                    },
                    {q_out, kc, vc, q_before, k_before, v_before}};
  });
}
NPU_ATEN_OP(QkvRmsNormRopeCache, "qkv, qGamma, kGamma, cos, sin, index, qOut, kCache, vCache, kScaleOptional, vScaleOptional, kOffsetOptional, vOffsetOptional, qkvSize, headNums, epsilon, cacheMode, qOutBeforeQuant, kOutBeforeQuant, vOutBeforeQuant");

// One paged cache [blocks, block_size, N, D] ("Norm"): key [T, N, D] row t goes to slot slotMapping[t]
// (block slot / block_size, offset slot % block_size); negative slots are padding and skipped.
extern "C" NOP_API aclnnStatus aclnnScatterPaCacheGetWorkspaceSize(
    const aclTensor* key, aclTensor* keyCacheRef, const aclTensor* slotMapping, const aclTensor* compressLensOptional,
    const aclTensor* compressSeqOffsetsOptional, const aclTensor* seqLensOptional, char* cacheModeOptional,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  const char* op = "aclnnScatterPaCache";
  return prepareOp(op, workspaceSize, executor, [&] {
    at::Tensor k = requiredTensor(key, "key"), cache = requiredTensor(keyCacheRef, "keyCacheRef");
    at::Tensor slots = requiredTensor(slotMapping, "slotMapping");
    TORCH_CHECK(compressLensOptional == nullptr && compressSeqOffsetsOptional == nullptr && seqLensOptional == nullptr,
                op, ": the compressed form (compress_lens, compress_seq_offsets, seq_lens) is not supported");
    const std::string mode = cacheModeOptional == nullptr ? "Norm" : cacheModeOptional;
    TORCH_CHECK(mode == "Norm", op, ": cache_mode must be Norm, got '", mode, "'");
    TORCH_CHECK(k.dim() == 3 && cache.dim() == 4 && cache.size(2) == k.size(1) && cache.size(3) == k.size(2), op,
                ": key must be [T, N, D] and the cache [blocks, block_size, N, D], got ", k.sizes(), " and ",
                cache.sizes());
    TORCH_CHECK(slots.numel() == k.size(0), op, ": slotMapping needs one slot per token");
    return Prepared{{k, slots}, [=]() mutable {
                      const at::Tensor idx = slots.reshape({-1}).to(at::kLong).contiguous();
                      const int64_t* ix = idx.const_data_ptr<int64_t>();
                      const int64_t block_size = cache.size(1), capacity = cache.size(0) * block_size;
                      for (int64_t t = 0; t < idx.numel(); ++t) {
                        if (ix[t] < 0) continue;
                        TORCH_CHECK(ix[t] < capacity, op, ": slot ", ix[t], " is past the cache's ", capacity,
                                    " slots");
                        cache[ix[t] / block_size][ix[t] % block_size].copy_(k[t]);
                      }
                    },
                    {cache}};
  });
}
NPU_ATEN_OP(ScatterPaCache, "key, keyCacheRef, slotMapping, compressLensOptional, compressSeqOffsetsOptional, seqLensOptional, cacheModeOptional");

namespace {

// round(x * scale + offset) clipped to int8, scale / offset per value of a head ([D]) or of all heads ([N * D]).
at::Tensor staticQuant(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& offset) {
  const int64_t heads = x.size(-2), d = x.size(-1);
  auto perValue = [&](const at::Tensor& t) {
    return t.numel() == heads * d ? t.to(at::kFloat).reshape({heads, d}) : t.to(at::kFloat).reshape({d});
  };
  at::Tensor q = x * perValue(scale);
  if (offset.defined()) q = q + perValue(offset);
  return at::round(q).clamp(-128, 127).to(at::kChar);
}

// rows [B, S, N, D]: contiguous caches [B, L, N, D] take batch b's S rows from position indices[b] on; page caches
// [blocks, block_size, N, D] take token (b, s) at slot indices[b * S + s] (negative: skipped).
void scatterQuantRows(const char* op, at::Tensor cache, const at::Tensor& rows, const at::Tensor& indices,
                      bool paged) {
  const int64_t batch = rows.size(0), seq = rows.size(1);
  const at::Tensor idx = indices.reshape({-1}).to(at::kLong).contiguous();
  const int64_t* ix = idx.const_data_ptr<int64_t>();
  if (!paged) {
    TORCH_CHECK(cache.size(0) == batch && idx.numel() == batch, op, ": a contiguous cache [B, L, N, D] takes one ",
                "start index per batch, got cache ", cache.sizes(), " and ", idx.numel(), " indices");
    for (int64_t b = 0; b < batch; ++b) {
      TORCH_CHECK(ix[b] >= 0 && ix[b] + seq <= cache.size(1), op, ": batch ", b, " writes past the cache length");
      cache[b].narrow(0, ix[b], seq).copy_(rows[b]);
    }
    return;
  }
  TORCH_CHECK(idx.numel() == batch * seq, op, ": a page cache takes one slot per token");
  const at::Tensor slots = cache.flatten(0, 1);
  for (int64_t t = 0; t < batch * seq; ++t) {
    if (ix[t] < 0) continue;
    TORCH_CHECK(ix[t] < slots.size(0), op, ": slot ", ix[t], " is past the cache's ", slots.size(0), " slots");
    slots[ix[t]].copy_(rows[t / seq][t % seq]);
  }
}

}  // namespace

// x [B, S, H] (or [T, H], one token per row) split into q / k / v by sizeSplits; an int32 x is first dequantized
// (x (+ int32 bias) * weightScale [H] * activationScale [tokens], a float bias added after). q and k are rotated by
// halves with cos / sin ([B, S, 1, D] or anything broadcasting to the heads); k and v are quantized statically into
// the int8 caches. qOut / kOut / vOut (the latter two when non-empty) get the float results.
extern "C" NOP_API aclnnStatus aclnnDequantRopeQuantKvcacheGetWorkspaceSize(
    const aclTensor* x, const aclTensor* cos, const aclTensor* sin, aclTensor* kCacheRef, aclTensor* vCacheRef,
    const aclTensor* indices, const aclTensor* scaleK, const aclTensor* scaleV, const aclTensor* offsetKOptional,
    const aclTensor* offsetVOptional, const aclTensor* weightScaleOptional, const aclTensor* activationScaleOptional,
    const aclTensor* biasOptional, const aclIntArray* sizeSplits, char* quantMode, char* layout, bool kvOutput,
    char* cacheMode, aclTensor* qOut, aclTensor* kOut, aclTensor* vOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  const char* op = "aclnnDequantRopeQuantKvcache";
  return prepareOp(op, workspaceSize, executor, [&] {
    at::Tensor xt = requiredTensor(x, "x"), c = requiredTensor(cos, "cos"), s = requiredTensor(sin, "sin");
    at::Tensor kc = requiredTensor(kCacheRef, "kCacheRef"), vc = requiredTensor(vCacheRef, "vCacheRef");
    at::Tensor idx = requiredTensor(indices, "indices");
    at::Tensor sk = requiredTensor(scaleK, "scaleK"), sv = requiredTensor(scaleV, "scaleV");
    at::Tensor ok = hostTensor(offsetKOptional), ov = hostTensor(offsetVOptional);
    at::Tensor ws = hostTensor(weightScaleOptional), as = hostTensor(activationScaleOptional);
    at::Tensor bias = hostTensor(biasOptional);
    at::Tensor q_out = requiredTensor(qOut, "qOut"), k_out = hostTensor(kOut), v_out = hostTensor(vOut);
    const std::vector<int64_t> splits = intArray(sizeSplits);
    const std::string quant = quantMode == nullptr ? "static" : quantMode;
    const std::string mode = cacheMode == nullptr ? "contiguous" : cacheMode;
    TORCH_CHECK(quant == "static", op, ": only static quantization is supported, got '", quant, "'");
    TORCH_CHECK(mode == "contiguous" || mode == "page", op, ": cacheMode must be contiguous or page, got '", mode, "'");
    TORCH_CHECK(kc.scalar_type() == at::kChar && vc.scalar_type() == at::kChar && kc.dim() == 4 && vc.dim() == 4, op,
                ": the caches must be 4-D int8");
    const int64_t d = vc.size(3), kv_heads = vc.size(2);
    TORCH_CHECK(splits.size() == 3 && splits[0] % d == 0 && splits[1] == kv_heads * d && splits[2] == kv_heads * d &&
                    splits[0] + splits[1] + splits[2] == xt.size(-1),
                op, ": sizeSplits must cover x's ", xt.size(-1), " values as [Nq * D, Nkv * D, Nkv * D] with D = ", d,
                " and Nkv = ", kv_heads);
    TORCH_CHECK(xt.scalar_type() != at::kInt || ws.defined(), op, ": an int32 x needs weightScale");
    const bool paged = mode == "page";
    // [B, S, ..]: a 2-D x is one token per batch row.
    const int64_t batch = xt.size(0), seq = xt.dim() == 3 ? xt.size(1) : 1;
    return Prepared{{xt, c, s, idx, sk, sv, ok, ov, ws, as, bias}, [=]() mutable {
                      at::Tensor xf = xt.reshape({batch * seq, xt.size(-1)});
                      if (xf.scalar_type() == at::kInt) {
                        const bool int_bias = bias.defined() && bias.scalar_type() == at::kInt;
                        xf = xf.to(at::kFloat);
                        if (int_bias) xf = xf + bias.to(at::kFloat);
                        xf = xf * ws.to(at::kFloat).reshape({-1});
                        if (as.defined()) xf = xf * as.to(at::kFloat).reshape({-1, 1});
                        if (bias.defined() && !int_bias) xf = xf + bias.to(at::kFloat).reshape({-1});
                      } else {
                        xf = xf.to(at::kFloat);
                      }
                      const at::Tensor x4 = xf.view({batch, seq, xf.size(-1)});
                      const at::Tensor q = x4.narrow(-1, 0, splits[0]).reshape({batch, seq, -1, d});
                      const at::Tensor k = x4.narrow(-1, splits[0], splits[1]).reshape({batch, seq, kv_heads, d});
                      const at::Tensor v = x4.narrow(-1, splits[0] + splits[1], splits[2])
                                               .reshape({batch, seq, kv_heads, d});
                      const at::Tensor cf = c.to(at::kFloat).reshape({batch, seq, 1, d});
                      const at::Tensor sf = s.to(at::kFloat).reshape({batch, seq, 1, d});
                      const at::Tensor q_rot = halfRope(q, cf, sf), k_rot = halfRope(k, cf, sf);
                      scatterQuantRows(op, kc, staticQuant(k_rot, sk, ok), idx, paged);
                      scatterQuantRows(op, vc, staticQuant(v, sv, ov), idx, paged);
                      q_out.copy_(q_rot.reshape(q_out.sizes()));
                      if (k_out.defined() && k_out.numel() > 0) k_out.copy_(k_rot.reshape(k_out.sizes()));
                      if (v_out.defined() && v_out.numel() > 0) v_out.copy_(v.reshape(v_out.sizes()));
                    },
                    {q_out, k_out, v_out, kc, vc}};
  });
}
NPU_ATEN_OP(DequantRopeQuantKvcache, "x, cos, sin, kCacheRef, vCacheRef, indices, scaleK, scaleV, offsetKOptional, offsetVOptional, weightScaleOptional, activationScaleOptional, biasOptional, sizeSplits, quantMode, layout, kvOutput, cacheMode, qOut, kOut, vOut");
