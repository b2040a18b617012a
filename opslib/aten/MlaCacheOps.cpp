// MlaCacheOps.cpp - KvRmsNormRopeCache (MLA's latent KV): RMSNorm of the latent part and rotary embedding of
// the rope part of each token, written into the KV caches at their positions (Norm: [B, 1, length, D] by
// [B, S] indices; PA / PA_BNSD / PA_NZ: slots of paged caches; PA_BLK_*: one index per page), optionally
// quantized to int8. V2: the whole vector normalised, its first 64 values rotated, v cached beside it.
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/round.h>
#include <ATen/ops/rsqrt.h>

#include <string>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

at::Tensor rotateHalf(const at::Tensor& x) {
  auto halves = x.chunk(2, -1);
  return at::cat({-halves[1], halves[0]}, -1);
}

// The rope part: pairs de-interleaved, then rotated by halves.
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const at::Tensor k = x.unflatten(-1, {x.size(-1) / 2, 2}).transpose(-1, -2).flatten(-2);
  return k * cos + rotateHalf(k) * sin;
}

at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& gamma, double eps) {
  return x * at::rsqrt(at::mean(x * x, {-1}, /*keepdim=*/true) + eps) * gamma;
}

// Values as the cache stores them: int8 caches take round(x * scale + offset) clipped to [-128, 127].
at::Tensor forCache(const at::Tensor& x, const at::Tensor& cache, const at::Tensor& scale, const at::Tensor& offset) {
  if (cache.scalar_type() != at::kChar) return x.to(cache.scalar_type());
  TORCH_CHECK(scale.defined(), "aclnnKvRmsNormRopeCache: an int8 cache needs its quantization scale");
  at::Tensor q = x * scale.to(at::kFloat);
  if (offset.defined()) q = q + offset.to(at::kFloat);
  return at::round(q).clamp(-128, 127).to(at::kChar);
}

// Writes rows [B, S, D] into `cache` as the mode lays it out.
void writeCache(const char* op, at::Tensor cache, const at::Tensor& rows, const at::Tensor& index,
                const std::string& mode) {
  const int64_t batch = rows.size(0), seq = rows.size(1), d = rows.size(2);
  const at::Tensor idx = index.to(at::kLong).contiguous();
  const int64_t* ix = idx.const_data_ptr<int64_t>();
  if (mode == "Norm") {
    TORCH_CHECK(cache.dim() == 4 && cache.size(0) == batch && cache.size(3) == d, op, ": a Norm cache must be [", batch,
                ", 1, length, ", d, "], got ", cache.sizes());
    TORCH_CHECK(idx.numel() == batch * seq, op, ": Norm mode takes [B, S] indices, got ", index.sizes());
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t at = ix[b * seq + s];
        if (at < 0) continue;
        TORCH_CHECK(at < cache.size(2), op, ": index ", at, " is past the cache length ", cache.size(2));
        cache[b][0][at].copy_(rows[b][s]);
      }
    }
    return;
  }
  TORCH_CHECK(cache.dim() == 4 && cache.size(2) == 1 && cache.size(3) == d, op, ": a paged cache must be [blocks, ",
              "block_size, 1, ", d, "], got ", cache.sizes());
  const int64_t blocks = cache.size(0), block_size = cache.size(1);
  const bool nz = mode.find("NZ") != std::string::npos, per_page = mode.find("BLK") != std::string::npos;
  const int64_t c0 = cache.scalar_type() == at::kChar ? 32 : 16;
  TORCH_CHECK(!nz || d % c0 == 0, op, ": NZ caches hold D in groups of ", c0, "; D = ", d);
  // [blocks, block_size, G, C] over the cache's memory (NZ: the fractal [blocks, D / C0, block_size, C0]).
  at::Tensor slots = nz ? cache.view({blocks, d / c0, block_size, c0}).permute({0, 2, 1, 3})
                        : cache.view({blocks, block_size, 1, d});
  const int64_t pages = (seq + block_size - 1) / block_size;
  TORCH_CHECK(per_page ? idx.numel() == batch * pages : idx.numel() == batch * seq, op, ": ", mode, " takes ",
              per_page ? batch * pages : batch * seq, " indices, got ", index.sizes());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seq; ++s) {
      int64_t slot = per_page ? ix[b * pages + s / block_size] : ix[b * seq + s];
      if (slot < 0) continue;
      if (per_page) slot = slot / block_size * block_size + s % block_size;
      TORCH_CHECK(slot < blocks * block_size, op, ": slot ", slot, " is past the cache's ", blocks * block_size);
      slots[slot / block_size][slot % block_size].copy_(rows[b][s].view({slots.size(2), slots.size(3)}));
    }
  }
}

aclnnStatus kvRmsNormRopeCache(const char* op, const aclTensor* kv, const aclTensor* gamma, const aclTensor* cos,
                               const aclTensor* sin, const aclTensor* index, aclTensor* kCache, aclTensor* ckvCache,
                               const aclTensor* kRopeScale, const aclTensor* cKvScale, const aclTensor* kRopeOffset,
                               const aclTensor* cKvOffset, const aclTensor* v, double epsilon, const char* cacheMode,
                               bool isOutputKv, aclTensor* kRopeOut, aclTensor* cKvOut, uint64_t* workspaceSize,
                               aclOpExecutor** executor) {
  return prepareOp(op, workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(kv, "kv"), g = requiredTensor(gamma, "gamma"), c = requiredTensor(cos, "cos");
    at::Tensor s = requiredTensor(sin, "sin"), idx = requiredTensor(index, "index");
    at::Tensor kc = requiredTensor(kCache, "kCache"), cc = requiredTensor(ckvCache, "ckvCache");
    at::Tensor ks = hostTensor(kRopeScale), cs = hostTensor(cKvScale), ko = hostTensor(kRopeOffset);
    at::Tensor co = hostTensor(cKvOffset), vt = hostTensor(v);
    at::Tensor k_out = requiredTensor(kRopeOut, "kRopeOut"), c_out = requiredTensor(cKvOut, "cKvOut");
    const std::string mode = cacheMode == nullptr ? "Norm" : cacheMode;
    TORCH_CHECK(mode == "Norm" || mode == "PA" || mode == "PA_BNSD" || mode == "PA_NZ" || mode == "PA_BLK_BNSD" ||
                    mode == "PA_BLK_NZ",
                op, ": cache_mode must be Norm, PA, PA_BNSD, PA_NZ, PA_BLK_BNSD or PA_BLK_NZ, got '", mode, "'");
    TORCH_CHECK(x.dim() == 4 && x.size(1) == 1 && c.dim() == 4 && c.sizes() == s.sizes() && c.size(-1) % 2 == 0, op,
                ": kv must be [B, 1, S, H] and cos / sin [B, 1, S, rope], got ", x.sizes(), " and ", c.sizes());
    const int64_t rope_d = c.size(-1);
    if (vt.defined()) {
      TORCH_CHECK(g.dim() == 1 && g.size(0) == x.size(-1) && rope_d <= x.size(-1), op,
                  ": with v, gamma must cover kv's ", x.size(-1), " values, got ", g.sizes());
    } else {
      TORCH_CHECK(g.dim() == 1 && g.size(0) + rope_d == x.size(-1), op, ": kv's ", x.size(-1),
                  " values must be gamma's ", g.size(0), " plus the rope part's ", rope_d);
    }
    return Prepared{{x, g, c, s, idx, vt}, [=]() mutable {
                      const at::Tensor xf = x.to(at::kFloat).select(1, 0), gf = g.to(at::kFloat);
                      const at::Tensor cf = c.to(at::kFloat).select(1, 0), sf = s.to(at::kFloat).select(1, 0);
                      at::Tensor k_rows, c_rows;  // [B, S, Dk], [B, S, Dc]
                      if (vt.defined()) {
                        const at::Tensor y = rmsNorm(xf, gf, epsilon);
                        k_rows = at::cat({rope(y.narrow(-1, 0, rope_d), cf, sf), y.narrow(-1, rope_d, y.size(-1) - rope_d)},
                                         -1);
                        c_rows = vt.to(at::kFloat).select(1, 0);
                      } else {
                        const int64_t rms_d = gf.size(0);
                        c_rows = rmsNorm(xf.narrow(-1, 0, rms_d), gf, epsilon);
                        k_rows = rope(xf.narrow(-1, rms_d, rope_d), cf, sf);
                      }
                      writeCache(op, kc, forCache(k_rows, kc, ks, ko), idx, mode);
                      writeCache(op, cc, forCache(c_rows, cc, cs, co), idx, mode);
                      if (k_out.numel() > 0) k_out.copy_(k_rows.unsqueeze(1));
                      if (c_out.numel() > 0) c_out.copy_(c_rows.unsqueeze(1));
                    },
                    {kc, cc, k_out, c_out}};
  });
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnKvRmsNormRopeCacheGetWorkspaceSize(
    const aclTensor* kv, const aclTensor* gamma, const aclTensor* cos, const aclTensor* sin, const aclTensor* index,
    aclTensor* kCache, aclTensor* ckvCache, const aclTensor* kRopeScaleOptional, const aclTensor* cKvScaleOptional,
    const aclTensor* kRopeOffsetOptional, const aclTensor* cKvOffsetOptional, double epsilon, char* cacheMode,
    bool isOutputKv, aclTensor* kRopeOut, aclTensor* cKvOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return kvRmsNormRopeCache("aclnnKvRmsNormRopeCache", kv, gamma, cos, sin, index, kCache, ckvCache,
                            kRopeScaleOptional, cKvScaleOptional, kRopeOffsetOptional, cKvOffsetOptional, nullptr,
                            epsilon, cacheMode, isOutputKv, kRopeOut, cKvOut, workspaceSize, executor);
}
NPU_ATEN_OP(KvRmsNormRopeCache, "kv, gamma, cos, sin, index, kCache, ckvCache, kRopeScaleOptional, cKvScaleOptional, kRopeOffsetOptional, cKvOffsetOptional, epsilon, cacheMode, isOutputKv, kRopeOut, cKvOut");

extern "C" NOP_API aclnnStatus aclnnKvRmsNormRopeCacheV2GetWorkspaceSize(
    const aclTensor* kv, const aclTensor* gamma, const aclTensor* cos, const aclTensor* sin, const aclTensor* index,
    aclTensor* kCache, aclTensor* ckvCache, const aclTensor* kRopeScaleOptional, const aclTensor* cKvScaleOptional,
    const aclTensor* kRopeOffsetOptional, const aclTensor* cKvOffsetOptional, const aclTensor* vOptional,
    double epsilon, char* cacheMode, bool isOutputKv, aclTensor* kRopeOut, aclTensor* cKvOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return kvRmsNormRopeCache("aclnnKvRmsNormRopeCacheV2", kv, gamma, cos, sin, index, kCache, ckvCache,
                            kRopeScaleOptional, cKvScaleOptional, kRopeOffsetOptional, cKvOffsetOptional, vOptional,
                            epsilon, cacheMode, isOutputKv, kRopeOut, cKvOut, workspaceSize, executor);
}
NPU_ATEN_OP(KvRmsNormRopeCacheV2, "kv, gamma, cos, sin, index, kCache, ckvCache, kRopeScaleOptional, cKvScaleOptional, kRopeOffsetOptional, cKvOffsetOptional, vOptional, epsilon, cacheMode, isOutputKv, kRopeOut, cKvOut");
