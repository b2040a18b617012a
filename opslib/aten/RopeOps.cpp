// RopeOps.cpp - the inference rotary embedding device ops: ApplyRotaryPosEmb (query and key in place,
// per layout), InterleaveRope (de-interleave then rotate half) and RopeWithSinCosCache (RoPE / MRoPE
// from a cos-sin cache indexed by positions). Float16 / bfloat16 compute in float32.
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/stack.h>

#include <string>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

at::Tensor wide(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }

// x * cos + rotate(x) * sin over x's first cos.size(-1) values of the last dimension (the rest pass);
// rotate: "half" cat(-x2, x1), "interleave" the pairs (-x_odd, x_even).
at::Tensor rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const std::string& mode) {
  const int64_t rot = cos.size(-1);
  at::Tensor part = x.narrow(-1, 0, rot);
  at::Tensor turned;
  if (mode == "half") {
    auto halves = part.chunk(2, -1);
    turned = at::cat({-halves[1], halves[0]}, -1);
  } else {
    auto pairs = part.unflatten(-1, {rot / 2, 2});
    turned = at::stack({-pairs.select(-1, 1), pairs.select(-1, 0)}, -1).flatten(-2);
  }
  at::Tensor out = part * cos + turned * sin;
  return rot == x.size(-1) ? out : at::cat({out, x.narrow(-1, rot, x.size(-1) - rot)}, -1);
}

}  // namespace

// layout: 1 BSND (or BSH), 2 SBND, 3 BNSD, 4 TND; cos / sin broadcast over the heads.
extern "C" NOP_API aclnnStatus aclnnApplyRotaryPosEmbV2GetWorkspaceSize(aclTensor* queryRef, aclTensor* keyRef,
                                                                         const aclTensor* cos, const aclTensor* sin,
                                                                         int64_t layout, char* rotaryMode,
                                                                         uint64_t* workspaceSize,
                                                                         aclOpExecutor** executor) {
  return prepareOp("aclnnApplyRotaryPosEmbV2", workspaceSize, executor, [&] {
    at::Tensor q = requiredTensor(queryRef, "queryRef"), k = requiredTensor(keyRef, "keyRef");
    at::Tensor c = requiredTensor(cos, "cos"), s = requiredTensor(sin, "sin");
    const std::string mode = rotaryMode == nullptr ? "half" : rotaryMode;
    const char* op = "aclnnApplyRotaryPosEmbV2";
    TORCH_CHECK(mode == "half" || mode == "interleave", op, ": rotary_mode must be 'half' or 'interleave' ('quarter' ",
                "is an Ascend 950 form), got '", mode, "'");
    TORCH_CHECK(layout >= 1 && layout <= 4, op, ": layout must be 1 (BSND), 2 (SBND), 3 (BNSD) or 4 (TND), got ",
                layout);
    const int64_t dims = layout == 4 ? 3 : 4;
    TORCH_CHECK(q.dim() == dims && k.dim() == dims && c.dim() == dims && s.dim() == dims, op, ": query, key, cos ",
                "and sin must be ", dims, "-D for this layout, got ", q.sizes(), ", ", k.sizes(), ", ", c.sizes(),
                ", ", s.sizes());
    TORCH_CHECK(c.sizes() == s.sizes(), op, ": cos and sin must have one shape, got ", c.sizes(), " and ", s.sizes());
    TORCH_CHECK(q.size(-1) == k.size(-1) && c.size(-1) <= q.size(-1) && c.size(-1) % 2 == 0, op,
                ": query and key must share their head size D, and cos / sin cover an even part of it (got ",
                q.size(-1), ", ", k.size(-1), ", ", c.size(-1), ")");
    const int64_t head_dim = layout == 3 ? 1 : (layout == 4 ? 1 : 2);
    for (int64_t d = 0; d < dims - 1; ++d) {
      if (d == head_dim) {
        TORCH_CHECK(c.size(d) == 1, op, ": cos / sin must have 1 head (dimension ", d, "), got ", c.sizes());
        continue;
      }
      TORCH_CHECK((c.size(d) == q.size(d) || c.size(d) == 1) && q.size(d) == k.size(d), op,
                  ": query, key and cos / sin disagree in dimension ", d, ": ", q.sizes(), ", ", k.sizes(), ", ",
                  c.sizes());
    }
    return Prepared{{q, k, c, s}, [=]() mutable {
                      const at::Tensor cf = wide(c), sf = wide(s);
                      q.copy_(rotary(wide(q), cf, sf, mode));
                      k.copy_(rotary(wide(k), cf, sf, mode));
                    },
                    {q, k}};
  });
}
NPU_ATEN_OP(ApplyRotaryPosEmbV2, "queryRef, keyRef, cos, sin, layout, rotaryMode");

// x [B, N, S, D]: pairs de-interleaved (x0, x2, ..., x1, x3, ...), then rotated by halves.
extern "C" NOP_API aclnnStatus aclnnInterleaveRopeGetWorkspaceSize(const aclTensor* x, const aclTensor* cos,
                                                                   const aclTensor* sin, aclTensor* out,
                                                                   uint64_t* workspaceSize,
                                                                   aclOpExecutor** executor) {
  return prepareOp("aclnnInterleaveRope", workspaceSize, executor, [&] {
    at::Tensor xt = requiredTensor(x, "x"), c = requiredTensor(cos, "cos"), s = requiredTensor(sin, "sin");
    at::Tensor o = requiredTensor(out, "out");
    const char* op = "aclnnInterleaveRope";
    TORCH_CHECK(xt.dim() == 4 && c.dim() == 4 && c.sizes() == s.sizes(), op,
                ": x, cos and sin must be 4-D [B, N, S, D] (cos / sin of one shape), got ", xt.sizes(), ", ",
                c.sizes(), ", ", s.sizes());
    TORCH_CHECK(xt.size(-1) % 2 == 0 && c.size(-1) == xt.size(-1) && c.size(1) == 1 &&
                    (c.size(0) == xt.size(0) || c.size(0) == 1) && (c.size(2) == xt.size(2) || c.size(2) == 1),
                op, ": cos / sin must be [B or 1, 1, S or 1, D] for x ", xt.sizes(), ", got ", c.sizes());
    return Prepared{{xt, c, s}, [=]() mutable {
                      const at::Tensor xf = wide(xt);
                      const at::Tensor q = xf.unflatten(-1, {xf.size(-1) / 2, 2}).transpose(-1, -2).flatten(-2);
                      o.copy_(rotary(q, wide(c), wide(s), "half"));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(InterleaveRope, "x, cos, sin, out");

// RoPE (positions [T]) or MRoPE (positions [m, T], mropeSection of m parts of rotary_dim / 2) from
// cosSinCache [max positions, rotary_dim] (cos then sin); query / key [T, heads * headSize].
// cacheMode 0: sections one after another; 1: interleaved (sections 1 and 2 take every third value).
extern "C" NOP_API aclnnStatus aclnnRopeWithSinCosCacheV2GetWorkspaceSize(
    const aclTensor* positions, const aclTensor* queryIn, const aclTensor* keyIn, const aclTensor* cosSinCache,
    const aclIntArray* mropeSection, int64_t headSize, bool isNeoxStyle, int64_t cacheMode, aclTensor* queryOut,
    aclTensor* keyOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnRopeWithSinCosCacheV2", workspaceSize, executor, [&] {
    const char* op = "aclnnRopeWithSinCosCacheV2";
    at::Tensor pos = requiredTensor(positions, "positions"), q = requiredTensor(queryIn, "queryIn");
    at::Tensor k = requiredTensor(keyIn, "keyIn"), cache = requiredTensor(cosSinCache, "cosSinCache");
    at::Tensor qo = requiredTensor(queryOut, "queryOut"), ko = requiredTensor(keyOut, "keyOut");
    std::vector<int64_t> sections = intArray(mropeSection);
    const bool mrope = std::any_of(sections.begin(), sections.end(), [](int64_t v) { return v != 0; });
    TORCH_CHECK(headSize > 0 && q.dim() == 2 && k.dim() == 2 && q.size(1) % headSize == 0 && k.size(1) % headSize == 0,
                op, ": query / key must be [num_tokens, heads * head_size] with head_size ", headSize, ", got ",
                q.sizes(), " and ", k.sizes());
    TORCH_CHECK(cache.dim() == 2 && cache.size(1) % 2 == 0 && cache.size(1) <= headSize, op,
                ": cos_sin_cache must be [max positions, rotary_dim] with an even rotary_dim <= head_size, got ",
                cache.sizes());
    const int64_t half = cache.size(1) / 2;
    if (mrope) {
      int64_t total = 0;
      for (int64_t v : sections) total += v;
      TORCH_CHECK((sections.size() == 3 || sections.size() == 4) && total == half, op,
                  ": mrope_section must have 3 or 4 parts summing to rotary_dim / 2 (", half, "), got ",
                  c10::IntArrayRef(sections));
      TORCH_CHECK(pos.dim() == 2 && pos.size(0) == static_cast<int64_t>(sections.size()) && pos.size(1) == q.size(0),
                  op, ": MRoPE positions must be [", sections.size(), ", num_tokens], got ", pos.sizes());
      TORCH_CHECK(cacheMode == 0 || (cacheMode == 1 && sections.size() == 3), op,
                  ": cache_mode must be 0 (default) or 1 (interleave, with 3 sections), got ", cacheMode);
    } else {
      TORCH_CHECK(pos.dim() == 1 && pos.size(0) == q.size(0), op, ": RoPE positions must be [num_tokens], got ",
                  pos.sizes());
    }
    return Prepared{{pos, q, k, cache}, [=]() mutable {
                      const at::Tensor cs = wide(cache).index_select(0, pos.flatten().to(at::kLong))
                                                .unflatten(0, pos.sizes());  // [(m,) T, rotary_dim]
                      at::Tensor cos = cs.narrow(-1, 0, half), sin = cs.narrow(-1, half, half);
                      if (mrope) {
                        auto merge = [&](const at::Tensor& t) {
                          if (cacheMode == 1) {
                            at::Tensor merged = t.select(0, 0).clone();
                            const int64_t n = sections[1] * 3;
                            merged.narrow(-1, 0, n).slice(-1, 1, n, 3).copy_(t.select(0, 1).narrow(-1, 0, n).slice(-1, 1, n, 3));
                            merged.narrow(-1, 0, n).slice(-1, 2, n, 3).copy_(t.select(0, 2).narrow(-1, 0, n).slice(-1, 2, n, 3));
                            return merged;
                          }
                          std::vector<at::Tensor> parts;
                          int64_t at = 0;
                          for (size_t i = 0; i < sections.size(); ++i) {
                            parts.push_back(t.select(0, static_cast<int64_t>(i)).narrow(-1, at, sections[i]));
                            at += sections[i];
                          }
                          return at::cat(parts, -1);
                        };
                        cos = merge(cos);
                        sin = merge(sin);
                      }
                      // [T, rotary_dim / 2] -> the rotate-half or interleaved layout over rotary_dim.
                      const std::string mode = isNeoxStyle ? "half" : "interleave";
                      auto spread = [&](const at::Tensor& t) {
                        return (isNeoxStyle ? at::cat({t, t}, -1) : t.repeat_interleave(2, -1)).unsqueeze(1);
                      };
                      const at::Tensor c2 = spread(cos), s2 = spread(sin);
                      auto apply = [&](const at::Tensor& x, at::Tensor& o) {
                        const at::Tensor heads = wide(x).unflatten(1, {x.size(1) / headSize, headSize});
                        o.copy_(rotary(heads, c2, s2, mode).flatten(1));
                      };
                      apply(q, qo);
                      apply(k, ko);
                    },
                    {qo, ko}};
  });
}
NPU_ATEN_OP(RopeWithSinCosCacheV2, "positions, queryIn, keyIn, cosSinCache, mropeSection, headSize, isNeoxStyle, cacheMode, queryOut, keyOut");
