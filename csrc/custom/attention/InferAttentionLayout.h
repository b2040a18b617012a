// InferAttentionLayout.h - the input_layout arithmetic the inference attention adapters share (prompt / incre /
// fused infer attention and its v2): splitting "IN_OUT" layouts, the output's shape in its layout, and the
// softmax log-sum-exp's shape. Each adapter checks which layouts it takes itself.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace at_npu::native::infer_attention {

struct LayoutPair {
  std::string in, out;
};

// "BNSD_BSND" -> {BNSD, BSND}; a single layout is both.
inline LayoutPair splitLayout(const std::string& layout) {
  LayoutPair l{layout, layout};
  if (const size_t bar = layout.find('_'); bar != std::string::npos) {
    l.in = layout.substr(0, bar);
    l.out = layout.substr(bar + 1);
  }
  return l;
}

// The attention output's shape: the query's (B, N, S) or (T, N), read in the input layout, written in the
// output layout with head size dv (BSH queries carry `heads` heads in their hidden size).
inline std::vector<int64_t> outputShape(const LayoutPair& l, const at::Tensor& query, int64_t heads, int64_t dv) {
  int64_t b = 0, n = heads, s = 0, t = 0;
  if (l.in == "BSH") {
    b = query.size(0), s = query.size(1);
  } else if (l.in == "BSND") {
    b = query.size(0), s = query.size(1), n = query.size(2);
  } else if (l.in == "BNSD") {
    b = query.size(0), n = query.size(1), s = query.size(2);
  } else if (l.in == "TND") {
    t = query.size(0), n = query.size(1);
  } else {  // NTD
    n = query.size(0), t = query.size(1);
  }
  if (l.out == "BSH") return {b, s, n * dv};
  if (l.out == "BSND") return {b, s, n, dv};
  if (l.out == "BNSD") return {b, n, s, dv};
  if (l.out == "NBSD") return {n, b, s, dv};
  if (l.out == "TND") return {t, n, dv};
  return {n, t, dv};  // NTD
}

// softmax_lse: [T, N, 1] for the token layouts, [B, N, S, 1] otherwise (float32).
inline std::vector<int64_t> lseShape(const LayoutPair& l, const at::Tensor& query, int64_t heads) {
  if (l.in == "TND") return {query.size(0), query.size(1), 1};
  if (l.in == "NTD") return {query.size(1), query.size(0), 1};
  if (l.in == "BSH") return {query.size(0), heads, query.size(1), 1};
  if (l.in == "BSND") return {query.size(0), query.size(2), query.size(1), 1};
  return {query.size(0), query.size(1), query.size(2), 1};
}

}  // namespace at_npu::native::infer_attention
