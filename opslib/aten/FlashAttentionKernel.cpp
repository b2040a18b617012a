// FlashAttentionKernel.cpp - the tiled online-softmax attention kernels (see FlashAttentionKernel.h).
//
// Each (batch, head, block of query rows) runs on its own: the scores of one block of keys at a
// time (one GEMM), masked, exponentiated against a running row maximum, and multiplied into the
// output accumulator (a second GEMM), so that a block of scores is all that ever exists at once.
// The backward pass recomputes each block's probabilities from the saved row maximum and sum.
// The GEMMs read query / key / value where they lie (any row stride).
#include "FlashAttentionKernel.h"

#include <ATen/native/CPUBlas.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "FlashAttentionBlockOps.h"

namespace npu::opslib::aten {
namespace {

constexpr int64_t kQueryBlock = 128;
constexpr int64_t kKeyBlock = 256;

uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <typename T>
const T* rowPtr(const T* base, const RowLayout& layout, int64_t b, int64_t n, int64_t s) {
  return base + layout.batch_offset[b] + n * layout.head_stride + s * layout.seq_stride;
}
template <typename T>
T* rowPtr(T* base, const RowLayout& layout, int64_t b, int64_t n, int64_t s) {
  return base + layout.batch_offset[b] + n * layout.head_stride + s * layout.seq_stride;
}

template <typename T>
void storeRows(T* base, const RowLayout& layout, int64_t b, int64_t n, int64_t s0, int64_t rows, int64_t d,
               const float* src, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    T* row = rowPtr(base, layout, b, n, s0 + r);
    const float* from = src + r * ld;
    for (int64_t c = 0; c < d; ++c) row[c] = static_cast<T>(from[c]);
  }
}

// How a block of scores [i0, i1) x [j0, j1) of batch b is masked by the band and prefix rules.
enum class BlockMask { kNone, kPartial, kAll };

struct Masking {
  const AttentionProblem& p;

  // The band's visible keys of row i: [lo, hi] (clamped to the int64 range).
  int64_t lo(int64_t b, int64_t i) const {
    return p.mask.pre[b] == INT64_MAX ? INT64_MIN : i + p.mask.shift[b] - p.mask.pre[b];
  }
  int64_t hi(int64_t b, int64_t i) const {
    return p.mask.next[b] == INT64_MAX ? INT64_MAX : i + p.mask.shift[b] + p.mask.next[b];
  }

  BlockMask classify(int64_t b, int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
    const MaskRule& m = p.mask;
    const bool prefix_reaches = !m.prefix.empty() && j0 < m.prefix[b];
    if (!prefix_reaches && (j0 > hi(b, i1 - 1) || j1 - 1 < lo(b, i0))) return BlockMask::kAll;
    if (!m.explicit_mask.defined() && lo(b, i1 - 1) <= j0 && hi(b, i0) >= j1 - 1) return BlockMask::kNone;
    return BlockMask::kPartial;
  }
};

struct Dropout {
  const AttentionProblem& p;
  const float keep_scale = static_cast<float>(1.0 / p.keep_prob);

  bool on() const { return p.keep_prob < 1.0 && p.drop_bits != nullptr; }
  bool keeps(int64_t b, int64_t n, int64_t i, int64_t j) const {
    const int64_t bit = p.drop_base[b] + (n * p.q_len[b] + i) * p.kv_len[b] + j;
    return (p.drop_bits[bit >> 3] >> (bit & 7)) & 1;
  }
  // row[c] for keys j0 + c of query row i: kept ones scaled by 1 / keep_prob, dropped ones 0.
  void apply(int64_t b, int64_t n, int64_t i, int64_t j0, int64_t cols, float* row) const {
    for (int64_t c = 0; c < cols; ++c) row[c] = keeps(b, n, i, j0 + c) ? row[c] * keep_scale : 0.0f;
  }
};

// The explicit mask's bytes (nonzero = masked), or nullptr.
inline const uint8_t* explicitMaskOf(const AttentionProblem& p) {
  return p.mask.explicit_mask.defined() ? static_cast<const uint8_t*>(p.mask.explicit_mask.const_data_ptr()) : nullptr;
}

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

// Scores of one block in s (rows x cols, ld cols), already scaled: bias added, masks applied.
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
  const MaskRule& m = p.mask;
  const int64_t prefix = m.prefix.empty() ? 0 : m.prefix[b];
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * cols;
    const int64_t i = i0 + r;
    // Outside the band [lo, hi] (keys below the prefix stay visible): whole column ranges.
    const int64_t lo = masking.lo(b, i), hi = masking.hi(b, i);
    const int64_t first_maskable = std::min(std::max<int64_t>(prefix - j0, 0), cols);  // column of key `prefix`
    const int64_t lo_end = lo == INT64_MIN ? 0 : std::clamp<int64_t>(lo - j0, 0, cols);
    const int64_t hi_begin = hi == INT64_MAX ? cols : std::clamp<int64_t>(hi - j0 + 1, 0, cols);
    if (lo_end > first_maskable) std::fill(row + first_maskable, row + lo_end, kNegInf);
    std::fill(row + std::max(hi_begin, first_maskable), row + cols, kNegInf);
    if (explicit_mask != nullptr) {
      const uint8_t* mrow = explicit_mask + b * m.mask_b + n * m.mask_n + i * m.mask_i + j0 * m.mask_j;
      for (int64_t c = 0; c < cols; ++c) {
        if (mrow[c * m.mask_j] != 0) row[c] = kNegInf;
      }
    }
  }
}

// The matrix units' micro-kernels (PyTorch's brgemm on oneDNN) read B packed (VNNI: pairs of rows
// interleaved) in panels of at most 64 columns, each with a leading dimension of 16, 32, 48 or 64.
constexpr int64_t kPanel = 64;
inline int64_t panelLd(int64_t width) { return (width + 15) / 16 * 16; }
inline int64_t packedCapacity(int64_t k, int64_t n) { return k * ((n + kPanel - 1) / kPanel) * kPanel; }

// B (k x n, row-major, ld_in) into panels at `out`; k is even.
template <typename T>
void packPanels(int64_t k, int64_t n, const T* in, int64_t ld_in, T* out) {
  for (int64_t c0 = 0; c0 < n; c0 += kPanel) {
    const int64_t w = std::min(kPanel, n - c0), ld = panelLd(w);
    at::native::cpublas::pack(k, w, ld_in, ld, scalarTypeOf<T>(), scalarTypeOf<T>(), in + c0, out);
    out += k * ld;
  }
}

// c (m x n, ldc) (+)= a (m x k, lda) b, b packed by packPanels.
template <typename T>
void gemmPanels(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, float* c, int64_t ldc,
                bool add) {
  for (int64_t c0 = 0; c0 < n; c0 += kPanel) {
    const int64_t w = std::min(kPanel, n - c0), ld = panelLd(w);
    at::native::cpublas::brgemm(m, w, k, lda, ld, ldc, add, a, b, c + c0);
    b += k * ld;
  }
}

// Keys and values of a reduced-precision forward packed once for those micro-kernels, so that the
// many query blocks reading one key block do not each repack it inside a general GEMM: per (batch,
// kv head, key block) K^T (d x cols) and V (cols x dv, cols rounded up to even with a zero row).
// Costs one copy of key and value (O(S), not O(S^2)).
template <typename T>
class PackedKeyValues {
 public:
  static bool usable(const AttentionProblem& p) {
    if constexpr (std::is_same_v<T, float>) {
      return false;
    } else {
      return p.head_dim % 2 == 0 && at::native::cpublas::could_pack(scalarTypeOf<T>());
    }
  }

  PackedKeyValues(const AttentionProblem& p, const T* k, const T* v)
      : p_(p), first_(p.batch + 1, 0), key_slot_(packedCapacity(p.head_dim, kKeyBlock)),
        value_slot_(packedCapacity(kKeyBlock, p.value_dim)) {
    for (int64_t b = 0; b < p.batch; ++b) {
      first_[b + 1] = first_[b] + p.kv_heads * ((p.kv_len[b] + kKeyBlock - 1) / kKeyBlock);
    }
    // Not value-initialized: every byte read is packed first.
    keys_.reset(new T[static_cast<size_t>(first_[p.batch] * key_slot_)]);
    values_.reset(new T[static_cast<size_t>(first_[p.batch] * value_slot_)]);
    parallelFor(first_[p.batch], [&](int64_t begin, int64_t end) {
      std::vector<T> staging(static_cast<size_t>(kKeyBlock * std::max(p.head_dim, p.value_dim)));
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = std::upper_bound(first_.begin(), first_.end(), item) - first_.begin() - 1;
        const int64_t blocks = (p.kv_len[b] + kKeyBlock - 1) / kKeyBlock;
        const int64_t n = (item - first_[b]) / blocks, j0 = ((item - first_[b]) % blocks) * kKeyBlock;
        packBlock(item, k, v, b, n, j0, std::min(kKeyBlock, p.kv_len[b] - j0), staging);
      }
    });
  }

  // scores (rows x cols, ld cols) = q k^T for the key block at j0.
  void scores(int64_t b, int64_t n, int64_t j0, int64_t rows, int64_t cols, const T* q, int64_t ldq,
              float* out) const {
    gemmPanels<T>(rows, cols, p_.head_dim, q, ldq, keys_.get() + slot(b, n, j0) * key_slot_, out, cols, false);
  }
  // acc (rows x dv) += probs v for the key block at j0; probs as asPackedOperand gives them.
  void accumulate(int64_t b, int64_t n, int64_t j0, int64_t rows, int64_t cols, const T* probs, float* acc) const {
    const int64_t even = cols + (cols & 1);
    gemmPanels<T>(rows, p_.value_dim, even, probs, even, values_.get() + slot(b, n, j0) * value_slot_, acc,
                  p_.value_dim, true);
  }

 private:
  int64_t slot(int64_t b, int64_t n, int64_t j0) const {
    return first_[b] + n * ((p_.kv_len[b] + kKeyBlock - 1) / kKeyBlock) + j0 / kKeyBlock;
  }

  void packBlock(int64_t item, const T* k, const T* v, int64_t b, int64_t n, int64_t j0, int64_t cols,
                 std::vector<T>& staging) {
    const int64_t d = p_.head_dim, dv = p_.value_dim, even = cols + (cols & 1);
    for (int64_t j = 0; j < cols; ++j) {  // K^T: d x cols
      const T* row = rowPtr(k, p_.k, b, n, j0 + j);
      for (int64_t c = 0; c < d; ++c) staging[c * cols + j] = row[c];
    }
    packPanels<T>(d, cols, staging.data(), cols, keys_.get() + item * key_slot_);
    for (int64_t j = 0; j < cols; ++j) std::copy_n(rowPtr(v, p_.v, b, n, j0 + j), dv, staging.data() + j * dv);
    if (even != cols) std::fill_n(staging.data() + cols * dv, dv, T(0.0f));
    packPanels<T>(even, dv, staging.data(), dv, values_.get() + item * value_slot_);
  }

  const AttentionProblem& p_;
  std::vector<int64_t> first_;
  const int64_t key_slot_, value_slot_;
  std::unique_ptr<T[]> keys_, values_;
};

// to[j] = T(exp(s[j] - max)) (s may be overwritten); returns the sum of the float values.
template <typename T>
float expRowTo(float* s, int64_t n, float max, T* to, bool masked) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    if (hasAvx512BFloat16()) return expRowToBFloat16Avx512(s, n, max, reinterpret_cast<uint16_t*>(to), masked);
  }
  const float sum = masked ? expRowSum<true>(s, n, max) : expRowSum<false>(s, n, max);  // each loop on its own vectorizes; fused they do not
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    toBFloat16(s, n, reinterpret_cast<uint16_t*>(to));
  } else {
    for (int64_t j = 0; j < n; ++j) to[j] = static_cast<T>(s[j]);
  }
  return sum;
}

// Probabilities (rows x cols floats) as the brgemm's left operand: T, rows of an even width, the
// padding column zero (it meets the packed values' zero row).
template <typename T>
const T* asPackedOperand(const float* block, int64_t rows, int64_t cols, std::vector<T>& buffer) {
  const int64_t even = cols + (cols & 1);
  buffer.resize(static_cast<size_t>(rows * even));
  for (int64_t r = 0; r < rows; ++r) {
    T* to = buffer.data() + r * even;
    if constexpr (std::is_same_v<T, c10::BFloat16>) {
      toBFloat16(block + r * cols, cols, reinterpret_cast<uint16_t*>(to));
    } else {
      for (int64_t c = 0; c < cols; ++c) to[c] = static_cast<T>(block[r * cols + c]);
    }
    if (even != cols) to[cols] = T(0.0f);
  }
  return buffer.data();
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
  const Dropout dropout{p};
  const uint8_t* explicit_mask = explicitMaskOf(p);
  const float* pse = p.pse.defined() ? p.pse.const_data_ptr<float>() : nullptr;
  const float scale = static_cast<float>(p.scale);
  std::optional<PackedKeyValues<T>> packed;
  if (PackedKeyValues<T>::usable(p)) packed.emplace(p, k, v);
  // Without a bias or dropout between them, the packed path fuses the row passes.
  const bool fused_rows = packed && pse == nullptr && p.alibi_slopes.empty() && scale > 0.0f && !dropout.on();

  // Work items: (b, n, block of query rows).
  std::vector<int64_t> first_block(p.batch + 1, 0);
  for (int64_t b = 0; b < p.batch; ++b) {
    first_block[b + 1] = first_block[b] + p.q_heads * ((p.q_len[b] + kQueryBlock - 1) / kQueryBlock);
  }
  parallelWaves(first_block[p.batch], [&](const WorkClaims& claims) {
    const SerialBlas serial;
    std::vector<float> scores(kQueryBlock * kKeyBlock), acc(kQueryBlock * dv);
    std::vector<float> m(kQueryBlock), l(kQueryBlock);
    std::vector<T> pbuf;
    for (int64_t item; claims.next(item);) {
      const int64_t b = std::upper_bound(first_block.begin(), first_block.end(), item) - first_block.begin() - 1;
      const int64_t blocks = (p.q_len[b] + kQueryBlock - 1) / kQueryBlock;
      const int64_t n = (item - first_block[b]) / blocks;
      // A head's last blocks first: under a causal mask they cost the most, and the cheap ones left
      // for the end of a wave balance its threads.
      const int64_t i0 = (blocks - 1 - (item - first_block[b]) % blocks) * kQueryBlock;
      const int64_t rows = std::min(kQueryBlock, p.q_len[b] - i0);
      const int64_t kvn = n / group;
      const T* qrows = rowPtr(q, p.q, b, n, i0);
      // A sink joins every row as a logit of its own: the running max starts at it, with exp(0) = 1.
      std::fill(m.begin(), m.begin() + rows, p.sink != nullptr ? p.sink[n] : kNegInf);
      std::fill(l.begin(), l.begin() + rows, p.sink != nullptr ? 1.0f : 0.0f);
      std::fill(acc.begin(), acc.begin() + rows * dv, 0.0f);
      for (int64_t j0 = 0; j0 < p.kv_len[b]; j0 += kKeyBlock) {
        const int64_t cols = std::min(kKeyBlock, p.kv_len[b] - j0);
        const BlockMask kind = masking.classify(b, i0, i0 + rows, j0, j0 + cols);
        if (kind == BlockMask::kAll) continue;
        // scores (rows x cols) = scale * q k^T
        if (packed) {
          packed->scores(b, kvn, j0, rows, cols, qrows, p.q.seq_stride, scores.data());
          if (!fused_rows) scaleRow(scores.data(), rows * cols, scale);
        } else {
          gemmNT<T>(rows, cols, d, scale, qrows, p.q.seq_stride, rowPtr(k, p.k, b, kvn, j0), p.k.seq_stride, 0.0f,
                    scores.data(), cols);
        }
        // A band-only mask leaves each row one visible run of keys: the fused path reads that run alone.
        const bool band_only = fused_rows && explicit_mask == nullptr && p.mask.prefix.empty();
        if (!band_only) biasAndMask(p, masking, kind, explicit_mask, pse, b, n, i0, rows, j0, cols, scores.data());
        if (fused_rows) {
          // One pass scales and finds the maximum, one exponentiates straight into the next GEMM's
          // operand (scores are only masked here: scaling after the mask keeps -inf).
          const int64_t even = cols + (cols & 1);
          pbuf.resize(static_cast<size_t>(kQueryBlock * (kKeyBlock + 1)));
          for (int64_t r = 0; r < rows; ++r) {
            float* row = scores.data() + r * cols;
            T* to = pbuf.data() + r * even;
            int64_t first = 0, last = cols;  // the visible run [first, last)
            if (band_only && kind == BlockMask::kPartial) {
              // Compared before subtracting: an unbounded side is INT64_MIN / INT64_MAX.
              const int64_t lo = masking.lo(b, i0 + r), hi = masking.hi(b, i0 + r);
              first = lo <= j0 ? 0 : std::min(lo - j0, cols);
              last = hi >= j0 + cols - 1 ? cols : std::max(hi < j0 ? 0 : hi - j0 + 1, first);
            }
            std::fill(to, to + first, T(0.0f));
            std::fill(to + last, to + even, T(0.0f));
            if (first == last) continue;
            const float new_max = scaleRowMax(row + first, last - first, scale, m[r]);
            if (new_max == kNegInf) {
              std::fill(to + first, to + last, T(0.0f));
              continue;
            }
            const float correction = m[r] == kNegInf ? 0.0f : expNonPositive(m[r] - new_max);
            l[r] = l[r] * correction + expRowTo(row + first, last - first, new_max, to + first, !band_only);
            m[r] = new_max;
            if (correction != 1.0f) scaleRow(acc.data() + r * dv, dv, correction);
          }
          packed->accumulate(b, kvn, j0, rows, cols, pbuf.data(), acc.data());
          continue;
        }
        for (int64_t r = 0; r < rows; ++r) {
          float* row = scores.data() + r * cols;
          const float new_max = rowMax(row, cols, m[r]);
          if (new_max == kNegInf) {  // nothing visible in this row yet
            std::fill(row, row + cols, 0.0f);
            continue;
          }
          const float correction = m[r] == kNegInf ? 0.0f : expNonPositive(m[r] - new_max);
          l[r] = l[r] * correction + expRow(row, cols, new_max);
          m[r] = new_max;
          if (correction != 1.0f) scaleRow(acc.data() + r * dv, dv, correction);
          if (dropout.on()) dropout.apply(b, n, i0 + r, j0, cols, row);
        }
        // acc (rows x dv) += p v
        if (packed) {
          packed->accumulate(b, kvn, j0, rows, cols, asPackedOperand<T>(scores.data(), rows, cols, pbuf),
                             acc.data());
        } else {
          const T* pv = asOperand<T>(scores.data(), rows, cols, cols, pbuf);
          gemmNN<T>(rows, dv, cols, 1.0f, pv, cols, rowPtr(v, p.v, b, kvn, j0), p.v.seq_stride, 1.0f, acc.data(),
                    dv);
        }
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
    if (packed) at::native::cpublas::brgemm_release();  // the matrix units' tile state of this thread
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
  const float* smax = softmax_max.const_data_ptr<float>();
  const float* ssum = softmax_sum.const_data_ptr<float>();
  const Masking masking{p};
  const Dropout dropout{p};
  const uint8_t* explicit_mask = explicitMaskOf(p);
  const float* pse = p.pse.defined() ? p.pse.const_data_ptr<float>() : nullptr;
  const float scale = static_cast<float>(p.scale);
  // d sink_n = -sum over rows of p_sink * delta (the sink's probability times the row term), summed
  // per (b, n) by each work item and over batches afterwards.
  std::vector<double> dsink_bn(dsink_t.defined() && p.sink != nullptr ? p.batch * p.q_heads : 0, 0.0);

  // One work item per (b, query head): it writes dq of that head, and the head's share of dk / dv
  // (key rows x D, float) into a buffer of its own; the shares of a group sum into dk / dv after.
  std::vector<int64_t> kv_offset(p.batch + 1, 0);
  for (int64_t b = 0; b < p.batch; ++b) kv_offset[b + 1] = kv_offset[b] + p.kv_len[b];
  const bool shared = group > 1;
  std::vector<float> dk_share(shared ? kv_offset[p.batch] * p.q_heads * d : 0);
  std::vector<float> dv_share(shared ? kv_offset[p.batch] * p.q_heads * dvd : 0);

  parallelWaves(p.batch * p.q_heads, [&](const WorkClaims& claims) {
    const SerialBlas serial;
    std::vector<float> s(kQueryBlock * kKeyBlock), dp(kQueryBlock * kKeyBlock), dropped;
    std::vector<float> dqacc, own_dk, own_dv, delta;
    std::vector<T> pbuf, dsbuf;
    for (int64_t item; claims.next(item);) {
      const int64_t b = item / p.q_heads, n = item % p.q_heads, kvn = n / group;
      const int64_t sq = p.q_len[b], skv = p.kv_len[b];
      float* dkacc;
      float* dvacc;
      if (shared) {
        dkacc = dk_share.data() + (kv_offset[b] * p.q_heads + n * skv) * d;
        dvacc = dv_share.data() + (kv_offset[b] * p.q_heads + n * skv) * dvd;
      } else {
        own_dk.assign(static_cast<size_t>(skv * d), 0.0f);
        own_dv.assign(static_cast<size_t>(skv * dvd), 0.0f);
        dkacc = own_dk.data();
        dvacc = own_dv.data();
      }
      dqacc.assign(static_cast<size_t>(sq * d), 0.0f);
      // delta_i = sum_c dout_ic * out_ic (the softmax Jacobian's row term)
      delta.assign(static_cast<size_t>(sq), 0.0f);
      for (int64_t i = 0; i < sq; ++i) {
        const float acc = dotRow(rowPtr(o, p.out, b, n, i), rowPtr(g, p.out, b, n, i), dvd);
        delta[i] = acc;
        if (!dsink_bn.empty()) {
          const int64_t at_row = stats.batch_offset[b] + n * stats.head_stride + i * stats.seq_stride;
          if (ssum[at_row] > 0.0f) {
            const float p_sink = std::exp(p.sink[n] - smax[at_row]) / ssum[at_row];
            dsink_bn[b * p.q_heads + n] -= static_cast<double>(p_sink) * acc;
          }
        }
      }
      for (int64_t j0 = 0; j0 < skv; j0 += kKeyBlock) {
        const int64_t cols = std::min(kKeyBlock, skv - j0);
        const T* krows = rowPtr(k, p.k, b, kvn, j0);
        const T* vrows = rowPtr(v, p.v, b, kvn, j0);
        for (int64_t i0 = 0; i0 < sq; i0 += kQueryBlock) {
          const int64_t rows = std::min(kQueryBlock, sq - i0);
          const BlockMask kind = masking.classify(b, i0, i0 + rows, j0, j0 + cols);
          if (kind == BlockMask::kAll) continue;
          const T* qrows = rowPtr(q, p.q, b, n, i0);
          const T* grows = rowPtr(g, p.out, b, n, i0);
          // p = softmax(s), recomputed from the saved row max and sum
          gemmNT<T>(rows, cols, d, scale, qrows, p.q.seq_stride, krows, p.k.seq_stride, 0.0f, s.data(), cols);
          biasAndMask(p, masking, kind, explicit_mask, pse, b, n, i0, rows, j0, cols, s.data());
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t at_row = stats.batch_offset[b] + n * stats.head_stride + (i0 + r) * stats.seq_stride;
            const float mx = smax[at_row], sm = ssum[at_row];
            float* row = s.data() + r * cols;
            if (sm <= 0.0f || mx == kNegInf) {
              std::fill(row, row + cols, 0.0f);
              continue;
            }
            probRow(row, cols, mx, 1.0f / sm);
          }
          // dp (rows x cols) = dout v^T
          gemmNT<T>(rows, cols, dvd, 1.0f, grows, p.out.seq_stride, vrows, p.v.seq_stride, 0.0f, dp.data(), cols);
          // With dropout: dv takes the dropped probabilities, and dp flows through the same mask.
          const float* pd = s.data();
          if (dropout.on()) {
            dropped.assign(s.begin(), s.begin() + rows * cols);
            for (int64_t r = 0; r < rows; ++r) {
              dropout.apply(b, n, i0 + r, j0, cols, dropped.data() + r * cols);
              dropout.apply(b, n, i0 + r, j0, cols, dp.data() + r * cols);
            }
            pd = dropped.data();
          }
          // dv (cols x dv) += p_dropped^T dout
          gemmTN<T>(cols, dvd, rows, 1.0f, asOperand<T>(pd, rows, cols, cols, pbuf), cols, grows, p.out.seq_stride,
                    1.0f, dvacc + j0 * dvd, dvd);
          // ds = p * (dp - delta)
          for (int64_t r = 0; r < rows; ++r) {
            softmaxGradRow(s.data() + r * cols, dp.data() + r * cols, cols, delta[i0 + r]);
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
          // dq (rows x d) += ds k ; dk (cols x d) += ds^T q (both times scale)
          const T* ds = asOperand<T>(s.data(), rows, cols, cols, dsbuf);
          gemmNN<T>(rows, d, cols, scale, ds, cols, krows, p.k.seq_stride, 1.0f, dqacc.data() + i0 * d, d);
          gemmTN<T>(cols, d, rows, scale, ds, cols, qrows, p.q.seq_stride, 1.0f, dkacc + j0 * d, d);
        }
      }
      storeRows(dq, p.q, b, n, 0, sq, d, dqacc.data(), d);
      if (!shared) {
        storeRows(dk, p.k, b, kvn, 0, skv, d, dkacc, d);
        storeRows(dv, p.v, b, kvn, 0, skv, dvd, dvacc, dvd);
      }
    }
  });
  if (shared) {
    // dk / dv of each key / value head: the sum of its group's shares.
    parallelFor(p.batch * p.kv_heads, [&](int64_t begin, int64_t end) {
      std::vector<float> sum_k, sum_v;
      for (int64_t item = begin; item < end; ++item) {
        const int64_t b = item / p.kv_heads, kvn = item % p.kv_heads, skv = p.kv_len[b];
        sum_k.assign(static_cast<size_t>(skv * d), 0.0f);
        sum_v.assign(static_cast<size_t>(skv * dvd), 0.0f);
        for (int64_t n = kvn * group; n < (kvn + 1) * group; ++n) {
          const float* share_k = dk_share.data() + (kv_offset[b] * p.q_heads + n * skv) * d;
          const float* share_v = dv_share.data() + (kv_offset[b] * p.q_heads + n * skv) * dvd;
          for (int64_t x = 0; x < skv * d; ++x) sum_k[x] += share_k[x];
          for (int64_t x = 0; x < skv * dvd; ++x) sum_v[x] += share_v[x];
        }
        storeRows(dk, p.k, b, kvn, 0, skv, d, sum_k.data(), d);
        storeRows(dv, p.v, b, kvn, 0, skv, dvd, sum_v.data(), dvd);
      }
    });
  }
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
  parallelFor(bytes, [&](int64_t begin, int64_t end) {
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
  }, 4096);
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
