// FlashAttentionKernel.cpp - the tiled online-softmax attention kernels (see FlashAttentionKernel.h).
//
// Each (batch, head, block of query rows) runs on its own: the scores of one block of keys at a
// time (one GEMM), masked, exponentiated against a running row maximum, and multiplied into the
// output accumulator (a second GEMM), so that a block of scores is all that ever exists at once.
// The backward pass recomputes each block's probabilities from the saved row maximum and sum.
#include "FlashAttentionKernel.h"

#include <ATen/Parallel.h>
#include <ATen/native/CPUBlas.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/mm.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace npu::opslib::aten {
namespace {

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = 256;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// c (m x n, ldc) = a (m x k, lda) * b (k x n, ldb) (+ c when accumulating), row-major float32: oneDNN's
// batch-reduce GEMM as PyTorch's own CPU flash attention uses it, else ATen's mm on the blocks.
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc, bool accumulate) {
  static const bool brgemm_works = [] {
    try {
      float x[4] = {1, 2, 3, 4}, y[4] = {1, 0, 0, 1}, z[4] = {0, 0, 0, 0};
      at::native::cpublas::brgemm(2, 2, 2, 2, 2, 2, false, x, y, z, false);
      at::native::cpublas::brgemm_release(false);
      return z[0] == 1 && z[1] == 2 && z[2] == 3 && z[3] == 4;
    } catch (...) {
      return false;
    }
  }();
  if (brgemm_works) {
    at::native::cpublas::brgemm(m, n, k, lda, ldb, ldc, accumulate, a, b, c, false);
    return;
  }
  const auto options = at::TensorOptions().dtype(at::kFloat);
  at::Tensor ta = at::from_blob(const_cast<float*>(a), {m, k}, {lda, 1}, options);
  at::Tensor tb = at::from_blob(const_cast<float*>(b), {k, n}, {ldb, 1}, options);
  at::Tensor tc = at::from_blob(c, {m, n}, {ldc, 1}, options);
  if (accumulate) {
    tc.addmm_(ta, tb);
  } else {
    at::mm_out(tc, ta, tb);
  }
}

// dst (cols x rows, ld rows) = src^T for src rows x cols with ld.
void transpose(const float* src, int64_t rows, int64_t cols, int64_t ld, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * ld + c];
  }
}

// exp(x) for x <= 0 (scores minus their row maximum), to about 1e-7 relative: x = k ln2 + r with
// |r| <= ln2 / 2, exp(r) by a degree-6 polynomial, 2^k through the exponent bits. Branch-free, so
// that the compiler vectorizes the loops around it.
inline float expNonPositive(float x) {
  x = std::max(x, -87.0f);
  const float k = std::nearbyint(x * 1.44269504088896341f);
  const float r = x - k * 0.693145751953125f - k * 1.428606765330187045e-06f;
  float p = 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits;
  const int32_t e = static_cast<int32_t>(k) + 127;
  bits = e << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// s[j] = exp(s[j] - max) (masked scores are -inf and become 0); returns their sum.
__attribute__((target_clones("avx2", "default"))) float expRow(float* s, int64_t n, float max) {
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    const float x = s[j] - max;
    const float e = s[j] == kNegInf ? 0.0f : expNonPositive(x);
    s[j] = e;
    sum += e;
  }
  return sum;
}

__attribute__((target_clones("avx2", "default"))) float rowMax(const float* s, int64_t n, float start) {
  float m = start;
  for (int64_t j = 0; j < n; ++j) m = std::max(m, s[j]);
  return m;
}

__attribute__((target_clones("avx2", "default"))) void scaleRow(float* x, int64_t n, float by) {
  for (int64_t j = 0; j < n; ++j) x[j] *= by;
}

uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <typename T>
float toFloat(T v) {
  return static_cast<float>(v);
}

// Rows [s0, s0 + rows) of (b, n) of an operand as a float matrix with `ld` between rows: the operand's
// own memory when it is float32 (no copy), else converted into `buffer`.
struct RowsView {
  const float* data;
  int64_t ld;
};

template <typename T>
RowsView loadRows(const T* base, const RowLayout& layout, int64_t b, int64_t n, int64_t s0, int64_t rows,
                  int64_t d, std::vector<float>& buffer) {
  const T* first = base + layout.batch_offset[b] + n * layout.head_stride + s0 * layout.seq_stride;
  if constexpr (std::is_same_v<T, float>) {
    return {first, layout.seq_stride};
  } else {
    buffer.resize(static_cast<size_t>(rows * d));
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = first + r * layout.seq_stride;
      float* dst = buffer.data() + r * d;
      for (int64_t c = 0; c < d; ++c) dst[c] = toFloat(row[c]);
    }
    return {buffer.data(), d};
  }
}

template <typename T>
void storeRows(T* base, const RowLayout& layout, int64_t b, int64_t n, int64_t s0, int64_t rows, int64_t d,
               const float* src, int64_t ld) {
  T* first = base + layout.batch_offset[b] + n * layout.head_stride + s0 * layout.seq_stride;
  for (int64_t r = 0; r < rows; ++r) {
    T* row = first + r * layout.seq_stride;
    const float* from = src + r * ld;
    for (int64_t c = 0; c < d; ++c) row[c] = static_cast<T>(from[c]);
  }
}

// How a block of scores [i0, i1) x [j0, j1) of batch b is masked by the band and prefix rules.
enum class BlockMask { kNone, kPartial, kAll };

struct Masking {
  const AttentionProblem& p;

  bool visible(int64_t b, int64_t i, int64_t j) const {
    const MaskRule& m = p.mask;
    const int64_t diag = i + m.shift[b];
    bool in_band = (m.pre[b] == INT64_MAX || j >= diag - m.pre[b]) && (m.next[b] == INT64_MAX || j <= diag + m.next[b]);
    if (!in_band && !m.prefix.empty() && j < m.prefix[b]) in_band = true;
    return in_band;
  }

  BlockMask classify(int64_t b, int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
    const MaskRule& m = p.mask;
    const bool explicit_mask = m.explicit_mask.defined();
    const int64_t pre = m.pre[b], next = m.next[b];
    // The band's lowest and highest visible key over the block's rows.
    auto lo = [&](int64_t i) { return pre == INT64_MAX ? INT64_MIN : i + m.shift[b] - pre; };
    auto hi = [&](int64_t i) { return next == INT64_MAX ? INT64_MAX : i + m.shift[b] + next; };
    const bool prefix_reaches = !m.prefix.empty() && j0 < m.prefix[b];
    if (!prefix_reaches && (j0 > hi(i1 - 1) || j1 - 1 < lo(i0))) return BlockMask::kAll;
    if (!explicit_mask && lo(i1 - 1) <= j0 && hi(i0) >= j1 - 1) return BlockMask::kNone;
    return BlockMask::kPartial;
  }

  bool explicitlyMasked(int64_t b, int64_t n, int64_t i, int64_t j, const uint8_t* mask) const {
    const MaskRule& m = p.mask;
    return mask[b * m.mask_b + n * m.mask_n + i * m.mask_i + j * m.mask_j] != 0;
  }
};

struct Dropout {
  const AttentionProblem& p;
  float keep_scale = 1.0f;  // 1 / keep_prob

  bool on() const { return p.keep_prob < 1.0 && p.drop_bits != nullptr; }
  bool keeps(int64_t b, int64_t n, int64_t i, int64_t j) const {
    const int64_t bit = p.drop_base[b] + (n * p.q_len[b] + i) * p.kv_len[b] + j;
    return (p.drop_bits[bit >> 3] >> (bit & 7)) & 1;
  }
};

// Element (i, j) of the bias of batch b at `base` (its offset for (b, n)): the compressed alibi form
// continues its first row's diagonal upwards; columns that fall off it (above the diagonal, masked
// in the causal modes that use it) read as 0. Returns -1 for those, else the element's offset.
inline int64_t pseOffset(const AttentionProblem& p, int64_t b, int64_t i, int64_t j, int64_t si, int64_t sj) {
  if (p.pse_rows == 0) return i * si + j * sj;
  const int64_t from_last = p.q_len[b] - 1 - i;
  if (from_last < p.pse_rows) return (p.pse_rows - 1 - from_last) * si + j * sj;
  const int64_t col = j + from_last - (p.pse_rows - 1);
  return col < p.kv_len[b] ? col * sj : -1;
}

// Scores of one block into s (rows x cols, ld cols): scale, bias, masks applied.
void biasAndMask(const AttentionProblem& p, const Masking& masking, BlockMask kind, const uint8_t* explicit_mask,
                 const float* pse, int64_t b, int64_t n, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                 float* s) {
  const bool alibi = !p.alibi_slopes.empty();
  if (pse != nullptr || alibi) {
    for (int64_t r = 0; r < rows; ++r) {
      float* row = s + r * cols;
      const int64_t i = i0 + r;
      if (pse != nullptr) {
        const float* bias = pse + b * p.pse_b + n * p.pse_n;
        if (p.pse_rows == 0) {
          const float* from = bias + i * p.pse_i + j0 * p.pse_j;
          for (int64_t c = 0; c < cols; ++c) row[c] += p.pse_scale * from[c * p.pse_j];
        } else {
          for (int64_t c = 0; c < cols; ++c) {
            const int64_t at = pseOffset(p, b, i, j0 + c, p.pse_i, p.pse_j);
            if (at >= 0) row[c] += p.pse_scale * bias[at];
          }
        }
      }
      if (alibi) {
        const float slope = static_cast<float>(p.alibi_slopes[n]);
        const int64_t diag = i + p.mask.shift[b];
        for (int64_t c = 0; c < cols; ++c) row[c] -= slope * static_cast<float>(std::llabs(j0 + c - diag));
      }
    }
  }
  if (kind != BlockMask::kPartial) return;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * cols;
    const int64_t i = i0 + r;
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t j = j0 + c;
      if (!masking.visible(b, i, j) ||
          (explicit_mask != nullptr && masking.explicitlyMasked(b, n, i, j, explicit_mask))) {
        row[c] = kNegInf;
      }
    }
  }
}

template <typename T>
void forwardImpl(const AttentionProblem& p, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                 const at::Tensor& out, const at::Tensor& softmax_max, const at::Tensor& softmax_sum,
                 const StatsLayout& stats) {
  const int64_t d = p.head_dim, dv = p.value_dim;
  const int64_t group = p.q_heads / p.kv_heads;
  const T* q = static_cast<const T*>(query.const_data_ptr());
  const T* k = static_cast<const T*>(key.const_data_ptr());
  const T* v = static_cast<const T*>(value.const_data_ptr());
  T* o = static_cast<T*>(out.data_ptr());
  float* smax = softmax_max.data_ptr<float>();
  float* ssum = softmax_sum.data_ptr<float>();
  const Masking masking{p};
  Dropout dropout{p};
  dropout.keep_scale = static_cast<float>(1.0 / p.keep_prob);
  const uint8_t* explicit_mask =
      p.mask.explicit_mask.defined() ? static_cast<const uint8_t*>(p.mask.explicit_mask.const_data_ptr()) : nullptr;
  const float* pse = p.pse.defined() ? p.pse.const_data_ptr<float>() : nullptr;

  // Work items: (b, n, block of query rows).
  std::vector<int64_t> first_block(p.batch + 1, 0);
  for (int64_t b = 0; b < p.batch; ++b) {
    first_block[b + 1] = first_block[b] + p.q_heads * ((p.q_len[b] + kQueryBlock - 1) / kQueryBlock);
  }
  at::parallel_for(0, first_block[p.batch], 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(kQueryBlock * kKeyBlock), acc(kQueryBlock * dv), qbuf, kbuf, vbuf, kt;
    std::vector<float> m(kQueryBlock), l(kQueryBlock);
    const float scale = static_cast<float>(p.scale);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = std::upper_bound(first_block.begin(), first_block.end(), item) - first_block.begin() - 1;
      const int64_t blocks = (p.q_len[b] + kQueryBlock - 1) / kQueryBlock;
      const int64_t n = (item - first_block[b]) / blocks;
      const int64_t i0 = ((item - first_block[b]) % blocks) * kQueryBlock;
      const int64_t rows = std::min(kQueryBlock, p.q_len[b] - i0);
      const int64_t kvn = n / group;
      const RowsView qv = loadRows(q, p.q, b, n, i0, rows, d, qbuf);
      // A sink joins every row as a logit of its own: the running max starts at it, with exp(0) = 1.
      std::fill(m.begin(), m.begin() + rows, p.sink != nullptr ? p.sink[n] : kNegInf);
      std::fill(l.begin(), l.begin() + rows, p.sink != nullptr ? 1.0f : 0.0f);
      std::fill(acc.begin(), acc.begin() + rows * dv, 0.0f);
      for (int64_t j0 = 0; j0 < p.kv_len[b]; j0 += kKeyBlock) {
        const int64_t cols = std::min(kKeyBlock, p.kv_len[b] - j0);
        const BlockMask kind = masking.classify(b, i0, i0 + rows, j0, j0 + cols);
        if (kind == BlockMask::kAll) continue;
        const RowsView kv_k = loadRows(k, p.k, b, kvn, j0, cols, d, kbuf);
        // scores (rows x cols) = q k^T * scale
        kt.resize(static_cast<size_t>(d * cols));
        transpose(kv_k.data, cols, d, kv_k.ld, kt.data());
        gemm(rows, cols, d, qv.data, qv.ld, kt.data(), cols, scores.data(), cols, false);
        for (int64_t x = 0; x < rows * cols; ++x) scores[x] *= scale;
        biasAndMask(p, masking, kind, explicit_mask, pse, b, n, i0, rows, j0, cols, scores.data());
        for (int64_t r = 0; r < rows; ++r) {
          float* row = scores.data() + r * cols;
          const float new_max = rowMax(row, cols, m[r]);
          if (new_max == kNegInf) {  // nothing visible in this row yet
            std::fill(row, row + cols, 0.0f);
            continue;
          }
          const float correction = m[r] == kNegInf ? 0.0f : std::exp(m[r] - new_max);
          l[r] = l[r] * correction + expRow(row, cols, new_max);
          m[r] = new_max;
          if (correction != 1.0f) scaleRow(acc.data() + r * dv, dv, correction);
          if (dropout.on()) {
            for (int64_t c = 0; c < cols; ++c) {
              row[c] = dropout.keeps(b, n, i0 + r, j0 + c) ? row[c] * dropout.keep_scale : 0.0f;
            }
          }
        }
        const RowsView kv_v = loadRows(v, p.v, b, kvn, j0, cols, dv, vbuf);
        // acc (rows x dv) += p v
        gemm(rows, dv, cols, scores.data(), cols, kv_v.data, kv_v.ld, acc.data(), dv, true);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        scaleRow(acc.data() + r * dv, dv, inv);
        float* mx = smax + stats.batch_offset[b] + n * stats.head_stride + (i0 + r) * stats.seq_stride;
        float* sm = ssum + stats.batch_offset[b] + n * stats.head_stride + (i0 + r) * stats.seq_stride;
        for (int64_t lane = 0; lane < stats.lanes; ++lane) {
          mx[lane] = m[r];
          sm[lane] = l[r];
        }
      }
      storeRows(o, p.out, b, n, i0, rows, dv, acc.data(), dv);
    }
  });
}

template <typename T>
void backwardImpl(const AttentionProblem& p, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                  const at::Tensor& out, const at::Tensor& dout, const at::Tensor& softmax_max,
                  const at::Tensor& softmax_sum, const StatsLayout& stats, const at::Tensor& dq_t,
                  const at::Tensor& dk_t, const at::Tensor& dv_t, const at::Tensor& dpse_t, const at::Tensor& dsink_t) {
  const int64_t d = p.head_dim, dvd = p.value_dim;
  const int64_t group = p.q_heads / p.kv_heads;
  const T* q = static_cast<const T*>(query.const_data_ptr());
  const T* k = static_cast<const T*>(key.const_data_ptr());
  const T* v = static_cast<const T*>(value.const_data_ptr());
  const T* o = static_cast<const T*>(out.const_data_ptr());
  const T* g = static_cast<const T*>(dout.const_data_ptr());
  T* dq = static_cast<T*>(dq_t.data_ptr());
  T* dk = static_cast<T*>(dk_t.data_ptr());
  T* dv = static_cast<T*>(dv_t.data_ptr());
  float* dpse = dpse_t.defined() ? dpse_t.data_ptr<float>() : nullptr;
  // d sink_n = -sum over rows of p_sink * delta (the sink's probability times the row term), summed
  // per (b, n) by each work item and over batches afterwards.
  std::vector<double> dsink_bn(dsink_t.defined() && p.sink != nullptr ? p.batch * p.q_heads : 0, 0.0);
  const float* smax = softmax_max.const_data_ptr<float>();
  const float* ssum = softmax_sum.const_data_ptr<float>();
  const Masking masking{p};
  Dropout dropout{p};
  dropout.keep_scale = static_cast<float>(1.0 / p.keep_prob);
  const uint8_t* explicit_mask =
      p.mask.explicit_mask.defined() ? static_cast<const uint8_t*>(p.mask.explicit_mask.const_data_ptr()) : nullptr;
  const float* pse = p.pse.defined() ? p.pse.const_data_ptr<float>() : nullptr;
  const float scale = static_cast<float>(p.scale);

  // One work item per (b, kv head): it owns dk / dv of that head and dq of the query heads of its group.
  at::parallel_for(0, p.batch * p.kv_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> s(kQueryBlock * kKeyBlock), dp(kQueryBlock * kKeyBlock), qbuf, kbuf, vbuf, obuf, gbuf;
    std::vector<float> dqacc, dkacc, dvacc, delta, dropped, kt, vt, pt;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / p.kv_heads, kvn = item % p.kv_heads;
      const int64_t sq = p.q_len[b], skv = p.kv_len[b];
      dkacc.assign(static_cast<size_t>(skv * d), 0.0f);
      dvacc.assign(static_cast<size_t>(skv * dvd), 0.0f);
      for (int64_t n = kvn * group; n < (kvn + 1) * group; ++n) {
        dqacc.assign(static_cast<size_t>(sq * d), 0.0f);
        // delta_i = sum_c dout_ic * out_ic (the softmax Jacobian's row term)
        delta.assign(static_cast<size_t>(sq), 0.0f);
        for (int64_t i0 = 0; i0 < sq; i0 += kQueryBlock) {
          const int64_t rows = std::min(kQueryBlock, sq - i0);
          const RowsView ov = loadRows(o, p.out, b, n, i0, rows, dvd, obuf);
          const RowsView gv = loadRows(g, p.out, b, n, i0, rows, dvd, gbuf);
          for (int64_t r = 0; r < rows; ++r) {
            float acc = 0.0f;
            for (int64_t c = 0; c < dvd; ++c) acc += ov.data[r * ov.ld + c] * gv.data[r * gv.ld + c];
            delta[i0 + r] = acc;
            if (!dsink_bn.empty()) {
              const int64_t at_row = stats.batch_offset[b] + n * stats.head_stride + (i0 + r) * stats.seq_stride;
              const float sm = ssum[at_row];
              if (sm > 0.0f) {
                const float p_sink = std::exp(p.sink[n] - smax[at_row]) / sm;
                dsink_bn[b * p.q_heads + n] -= static_cast<double>(p_sink) * acc;
              }
            }
          }
        }
        for (int64_t j0 = 0; j0 < skv; j0 += kKeyBlock) {
          const int64_t cols = std::min(kKeyBlock, skv - j0);
          const RowsView kv_k = loadRows(k, p.k, b, kvn, j0, cols, d, kbuf);
          const RowsView kv_v = loadRows(v, p.v, b, kvn, j0, cols, dvd, vbuf);
          kt.resize(static_cast<size_t>(d * cols));
          vt.resize(static_cast<size_t>(dvd * cols));
          transpose(kv_k.data, cols, d, kv_k.ld, kt.data());
          transpose(kv_v.data, cols, dvd, kv_v.ld, vt.data());
          for (int64_t i0 = 0; i0 < sq; i0 += kQueryBlock) {
            const int64_t rows = std::min(kQueryBlock, sq - i0);
            const BlockMask kind = masking.classify(b, i0, i0 + rows, j0, j0 + cols);
            if (kind == BlockMask::kAll) continue;
            const RowsView qv = loadRows(q, p.q, b, n, i0, rows, d, qbuf);
            const RowsView gv = loadRows(g, p.out, b, n, i0, rows, dvd, gbuf);
            // p = softmax(s), recomputed from the saved row max and sum
            gemm(rows, cols, d, qv.data, qv.ld, kt.data(), cols, s.data(), cols, false);
            for (int64_t x = 0; x < rows * cols; ++x) s[x] *= scale;
            biasAndMask(p, masking, kind, explicit_mask, pse, b, n, i0, rows, j0, cols, s.data());
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t at_row = stats.batch_offset[b] + n * stats.head_stride + (i0 + r) * stats.seq_stride;
              const float mx = smax[at_row], sm = ssum[at_row];
              float* row = s.data() + r * cols;
              if (sm <= 0.0f || mx == kNegInf) {
                std::fill(row, row + cols, 0.0f);
                continue;
              }
              expRow(row, cols, mx);
              scaleRow(row, cols, 1.0f / sm);
            }
            // dp (rows x cols) = dout v^T
            gemm(rows, cols, dvd, gv.data, gv.ld, vt.data(), cols, dp.data(), cols, false);
            // With dropout: dv takes the dropped probabilities, and dp flows through the same mask.
            if (dropout.on()) {
              dropped.resize(static_cast<size_t>(rows * cols));
              for (int64_t r = 0; r < rows; ++r) {
                for (int64_t c = 0; c < cols; ++c) {
                  const bool keep = dropout.keeps(b, n, i0 + r, j0 + c);
                  dropped[r * cols + c] = keep ? s[r * cols + c] * dropout.keep_scale : 0.0f;
                  dp[r * cols + c] = keep ? dp[r * cols + c] * dropout.keep_scale : 0.0f;
                }
              }
            }
            const float* pd = dropout.on() ? dropped.data() : s.data();
            // dv (cols x d) += p_dropped^T dout
            pt.resize(static_cast<size_t>(rows * cols));
            transpose(pd, rows, cols, cols, pt.data());
            gemm(cols, dvd, rows, pt.data(), rows, gv.data, gv.ld, dvacc.data() + j0 * dvd, dvd, true);
            // ds = p * (dp - delta)
            for (int64_t r = 0; r < rows; ++r) {
              float* prow = s.data() + r * cols;
              const float* dprow = dp.data() + r * cols;
              const float dl = delta[i0 + r];
              for (int64_t c = 0; c < cols; ++c) prow[c] = prow[c] * (dprow[c] - dl);
            }
            if (dpse != nullptr) {
              float* to = dpse + b * p.dpse_b + n * p.dpse_n;
              for (int64_t r = 0; r < rows; ++r) {
                for (int64_t c = 0; c < cols; ++c) {
                  const int64_t at = pseOffset(p, b, i0 + r, j0 + c, p.dpse_i, p.dpse_j);
                  if (at >= 0) to[at] += p.pse_scale * s[r * cols + c];
                }
              }
            }
            // dq (rows x d) += ds k ; dk (cols x d) += ds^T q (both times scale, applied when stored)
            gemm(rows, d, cols, s.data(), cols, kv_k.data, kv_k.ld, dqacc.data() + i0 * d, d, true);
            transpose(s.data(), rows, cols, cols, pt.data());
            gemm(cols, d, rows, pt.data(), rows, qv.data, qv.ld, dkacc.data() + j0 * d, d, true);
          }
        }
        scaleRow(dqacc.data(), sq * d, scale);
        storeRows(dq, p.q, b, n, 0, sq, d, dqacc.data(), d);
      }
      scaleRow(dkacc.data(), skv * d, scale);
      storeRows(dk, p.k, b, kvn, 0, skv, d, dkacc.data(), d);
      storeRows(dv, p.v, b, kvn, 0, skv, dvd, dvacc.data(), dvd);
    }
  });
  if (!dsink_bn.empty()) {
    float* dsink = dsink_t.data_ptr<float>();
    for (int64_t n = 0; n < p.q_heads; ++n) {
      double total = 0.0;
      for (int64_t b = 0; b < p.batch; ++b) total += dsink_bn[b * p.q_heads + n];
      dsink[n] = static_cast<float>(total);
    }
  }
}

}  // namespace

void dropoutGenMask(uint64_t seed, uint64_t offset, double keep_prob, int64_t numel, uint8_t* bits) {
  const uint64_t key = mix(seed ^ (offset * 0xd1b54a32d192ed03ULL));
  const uint64_t threshold = keep_prob >= 1.0 ? UINT64_MAX : static_cast<uint64_t>(keep_prob * 18446744073709551616.0);
  const int64_t bytes = (numel + 7) / 8;
  at::parallel_for(0, bytes, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t byte = begin; byte < end; ++byte) {
      uint8_t value = 0;
      for (int bit = 0; bit < 8; ++bit) {
        const int64_t index = byte * 8 + bit;
        if (index < numel && (keep_prob >= 1.0 || mix(key + static_cast<uint64_t>(index)) < threshold)) {
          value |= static_cast<uint8_t>(1u << bit);
        }
      }
      bits[byte] = value;
    }
  });
}

void flashAttentionForward(const AttentionProblem& p, const at::Tensor& query, const at::Tensor& key,
                           const at::Tensor& value, const at::Tensor& out, const at::Tensor& softmax_max,
                           const at::Tensor& softmax_sum, const StatsLayout& stats) {
  switch (query.scalar_type()) {
    case at::kFloat: return forwardImpl<float>(p, query, key, value, out, softmax_max, softmax_sum, stats);
    case at::kHalf: return forwardImpl<c10::Half>(p, query, key, value, out, softmax_max, softmax_sum, stats);
    case at::kBFloat16:
      return forwardImpl<c10::BFloat16>(p, query, key, value, out, softmax_max, softmax_sum, stats);
    default: TORCH_CHECK(false, "flash attention takes float32, float16 or bfloat16, got ", query.scalar_type());
  }
}

void flashAttentionBackward(const AttentionProblem& p, const at::Tensor& query, const at::Tensor& key,
                            const at::Tensor& value, const at::Tensor& out, const at::Tensor& dout,
                            const at::Tensor& softmax_max, const at::Tensor& softmax_sum,
                            const StatsLayout& stats, const at::Tensor& dq, const at::Tensor& dk,
                            const at::Tensor& dv, const at::Tensor& dpse, const at::Tensor& dsink) {
  switch (query.scalar_type()) {
    case at::kFloat:
      return backwardImpl<float>(p, query, key, value, out, dout, softmax_max, softmax_sum, stats, dq, dk, dv, dpse,
                                 dsink);
    case at::kHalf:
      return backwardImpl<c10::Half>(p, query, key, value, out, dout, softmax_max, softmax_sum, stats, dq, dk, dv,
                                     dpse, dsink);
    case at::kBFloat16:
      return backwardImpl<c10::BFloat16>(p, query, key, value, out, dout, softmax_max, softmax_sum, stats, dq, dk,
                                         dv, dpse, dsink);
    default: TORCH_CHECK(false, "flash attention takes float32, float16 or bfloat16, got ", query.scalar_type());
  }
}

}  // namespace npu::opslib::aten
