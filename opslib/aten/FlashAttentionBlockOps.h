// FlashAttentionBlockOps.h - the attention kernels' block operations: row-major GEMMs on PyTorch's BLAS,
// the vectorized row passes of the online softmax, and the op library's parallel loops. Internal to
// FlashAttentionKernel.cpp (everything has internal linkage; include it from that file only).
#pragma once

#include <ATen/ops/from_blob.h>
#include <ATen/ops/mm.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <dlfcn.h>
#include <immintrin.h>
#include <npu/opslib.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace npu::opslib::aten {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Row-major GEMMs with float results: c (m x n) = alpha * op(a) op(b) + beta * c, op(x) = x or x^T,
// the operands row-major with leading dimensions lda / ldb / ldc, read where they lie. They run on the
// BLAS PyTorch's CPU kernels use (MKL: its float GEMM, and its bfloat16 / float16 GEMMs with float
// results on the CPU's matrix units), found at run time in PyTorch's library; ATen's matmul on views
// of the blocks where that BLAS is not there.
struct Blas {
  using Sgemm = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                         const int*, const float*, const int*, const float*, float*, const int*);
  using Gemm16 = void (*)(int, int, int, int, int, int, float, const uint16_t*, int, const uint16_t*, int, float,
                          float*, int);
  Sgemm sgemm = nullptr;
  Gemm16 bf16 = nullptr, f16 = nullptr;
  int (*set_local_threads)(const int*) = nullptr;  // the Fortran entry point: by reference

  static const Blas& get() {
    static const Blas blas = [] {
      Blas b;
      if (void* torch = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD)) {
        b.sgemm = reinterpret_cast<Sgemm>(dlsym(torch, "sgemm_"));
        b.bf16 = reinterpret_cast<Gemm16>(dlsym(torch, "cblas_gemm_bf16bf16f32"));
        b.f16 = reinterpret_cast<Gemm16>(dlsym(torch, "cblas_gemm_f16f16f32"));
        b.set_local_threads = reinterpret_cast<int (*)(const int*)>(dlsym(torch, "mkl_set_num_threads_local_"));
      }
      return b;
    }();
    return blas;
  }
};

// While alive, the BLAS runs single-threaded on this thread: the kernels' blocks are small and the
// work items already run in parallel (a BLAS thread team per block costs more than the block).
class SerialBlas {
 public:
  SerialBlas() {
    const int one = 1;
    if (Blas::get().set_local_threads != nullptr) previous_ = Blas::get().set_local_threads(&one);
  }
  ~SerialBlas() {
    if (Blas::get().set_local_threads != nullptr) Blas::get().set_local_threads(&previous_);
  }
  SerialBlas(const SerialBlas&) = delete;
  SerialBlas& operator=(const SerialBlas&) = delete;

 private:
  int previous_ = 0;
};

// The kernels' parallel loops run where the op library's do (aclnnParallelFor): at::parallel_for is
// inline and this package is not built with OpenMP, so it would run them on one thread.
template <typename F>
void parallelFor(int64_t n, const F& fn, int64_t min_chunk = 1) {
  aclnnParallelFor(n, min_chunk, const_cast<void*>(static_cast<const void*>(&fn)), [](void* context, int64_t begin,
                                                                               int64_t end) {
    (*static_cast<const F*>(context))(begin, end);
  });
}

// The items of one wave of parallelWaves, handed out one at a time.
class WorkClaims {
 public:
  WorkClaims(int64_t from, int64_t to) : next_(from), to_(to) {}
  // The next unclaimed item, or false once the wave has none left.
  bool next(int64_t& item) const {
    item = next_.fetch_add(1, std::memory_order_relaxed);
    return item < to_;
  }

 private:
  mutable std::atomic<int64_t> next_;
  const int64_t to_;
};

// Work items [0, n) on the parallel loop's threads: each thread runs body(claims) once per wave and
// takes items with claims.next(item) until the wave has none left, so that items of uneven cost
// (causal blocks) balance. The waves grow from n / 16 items: between waves the host's pool may
// resize its team (a kernel that starts while the host is still launching runs its first wave on
// fewer threads and takes every core once the host waits for it), so a first wave on too few
// threads costs little. Fewer than 16 items run as one wave.
template <typename F>
void parallelWaves(int64_t n, const F& body) {
  int64_t size = n < 16 ? n : n / 16;
  for (int64_t from = 0; from < n; size *= 2) {
    int64_t to = std::min(n, from + size);
    if (n - to < 2 * size) to = n;  // the last wave takes a remainder smaller than the next wave
    const WorkClaims claims(from, to);
    parallelFor(to - from, [&](int64_t, int64_t) { body(claims); });
    from = to;
  }
}

template <typename T>
at::ScalarType scalarTypeOf() {
  if constexpr (std::is_same_v<T, float>) return at::kFloat;
  if constexpr (std::is_same_v<T, c10::BFloat16>) return at::kBFloat16;
  return at::kHalf;
}

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const Blas& blas = Blas::get();
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  const int ilda = static_cast<int>(lda), ildb = static_cast<int>(ldb), ildc = static_cast<int>(ldc);
  if constexpr (std::is_same_v<T, float>) {
    if (blas.sgemm != nullptr) {
      // Column-major BLAS: c^T = op(b)^T op(a)^T, with the same transpose flags.
      const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
      blas.sgemm(&tb, &ta, &in, &im, &ik, &alpha, b, &ildb, a, &ilda, &beta, c, &ildc);
      return;
    }
  } else {
    const auto fn = std::is_same_v<T, c10::BFloat16> ? blas.bf16 : blas.f16;
    if (fn != nullptr) {
      constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
      fn(kRowMajor, trans_a ? kTrans : kNoTrans, trans_b ? kTrans : kNoTrans, im, in, ik, alpha,
         reinterpret_cast<const uint16_t*>(a), ilda, reinterpret_cast<const uint16_t*>(b), ildb, beta, c, ildc);
      return;
    }
  }
  const auto options = at::TensorOptions().dtype(scalarTypeOf<T>());
  auto view = [&](const T* x, bool trans, int64_t rows, int64_t cols, int64_t ld) {
    // op(x) is rows x cols; x itself is stored row-major with leading dimension ld.
    at::Tensor t = trans ? at::from_blob(const_cast<T*>(x), {cols, rows}, {ld, 1}, options).t()
                         : at::from_blob(const_cast<T*>(x), {rows, cols}, {ld, 1}, options);
    return t.to(at::kFloat);
  };
  at::Tensor tc = at::from_blob(c, {m, n}, {ldc, 1}, at::TensorOptions().dtype(at::kFloat));
  at::Tensor product = at::mm(view(a, trans_a, m, k, lda), view(b, trans_b, k, n, ldb));
  if (beta == 0.0f) {
    tc.copy_(product.mul_(alpha));
  } else {
    tc.mul_(beta).add_(product, alpha);
  }
}

template <typename T>
void gemmNN(int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
            float beta, float* c, int64_t ldc) {
  gemm<T>(false, false, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
template <typename T>
void gemmNT(int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
            float beta, float* c, int64_t ldc) {
  gemm<T>(false, true, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
template <typename T>
void gemmTN(int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
            float beta, float* c, int64_t ldc) {
  gemm<T>(true, false, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// exp(x) for x <= 0 (scores minus their row maximum), to about 1e-7 relative: x = k ln2 + r with
// |r| <= ln2 / 2, exp(r) by a degree-6 polynomial, 2^k through the exponent bits. Branch-free and
// call-free, so that the loops around it vectorize.
inline float expNonPositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  // k = round(x / ln2) by the 1.5 * 2^23 trick (no rounding call, so that the loops vectorize); its
  // integer value sits in the low mantissa bits of t.
  const float t = x * 1.44269504088896341f + 12582912.0f;
  const float k = t - 12582912.0f;
  const float r = x - k * 0.693145751953125f - k * 1.428606765330187045e-06f;
  float p = 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * std::bit_cast<float>((std::bit_cast<int32_t>(t) - 0x4B400000 + 127) << 23);
}

#define NPU_FA_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))

NPU_FA_SIMD float sumRow(const float* s, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += s[j];
  return sum;
}

// s[j] = exp(s[j] - max) * by (masked scores are -inf and become 0).
NPU_FA_SIMD void expScaleRow(float* s, int64_t n, float max, float by) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const float e = expNonPositive(s[j] - max) * by;
    s[j] = s[j] == kNegInf ? 0.0f : e;
  }
}

// Row reductions keep 16 partial results (one vector register) and combine them as a tree at the
// end: the rows are short (a key block), and a reduction clause's lane-by-lane scalar epilogue costs
// about as much as the loop itself.
constexpr int64_t kLanes = 16;

inline float treeSum(float* part) {
  for (int64_t w = kLanes / 2; w >= 1; w /= 2) {
    for (int64_t k = 0; k < w; ++k) part[k] += part[k + w];
  }
  return part[0];
}

inline float treeMax(float* part) {
  for (int64_t w = kLanes / 2; w >= 1; w /= 2) {
    for (int64_t k = 0; k < w; ++k) part[k] = part[k] > part[k + w] ? part[k] : part[k + w];
  }
  return part[0];
}

// s[j] = exp(s[j] - max) (masked -inf scores become 0, unless the caller knows there are none);
// returns their sum.
template <bool kMasked>
NPU_FA_SIMD float expRowSum(float* s, int64_t n, float max) {
  float part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
#pragma omp simd
    for (int64_t k = 0; k < kLanes; ++k) {
      const float x = s[j + k];
      const float v = kMasked && x == kNegInf ? 0.0f : expNonPositive(x - max);
      s[j + k] = v;
      part[k] += v;
    }
  }
  for (int64_t k = 0; j + k < n; ++k) {
    const float x = s[j + k];
    const float v = kMasked && x == kNegInf ? 0.0f : expNonPositive(x - max);
    s[j + k] = v;
    part[k] += v;
  }
  return treeSum(part);
}
float expRow(float* s, int64_t n, float max) { return expRowSum<true>(s, n, max); }

// expRowSum's exponentials written straight to bfloat16 (round to nearest even) in one pass, on
// AVX-512 with its bfloat16 conversion: the portable loops need two passes (fused, they do not
// vectorize), and that second pass over the block is what the fused path spends on it.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) float expRowToBFloat16Avx512(const float* s, int64_t n, float max,
                                                                           uint16_t* to, bool masked) {
  const __m512 vmax = _mm512_set1_ps(max), lo = _mm512_set1_ps(-87.0f), neg_inf = _mm512_set1_ps(kNegInf);
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f), shifter = _mm512_set1_ps(12582912.0f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693145751953125f), ln2_lo = _mm512_set1_ps(1.428606765330187045e-06f);
  const __m512i bias = _mm512_set1_epi32(0x4B400000 - 127);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 lanes = n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1u);
    const __m512 x = _mm512_maskz_loadu_ps(lanes, s + j);
    // The same steps as expNonPositive.
    const __m512 y = _mm512_max_ps(_mm512_sub_ps(x, vmax), lo);
    const __m512 t = _mm512_fmadd_ps(y, log2e, shifter);
    const __m512 k = _mm512_sub_ps(t, shifter);
    const __m512 r = _mm512_fnmadd_ps(k, ln2_lo, _mm512_fnmadd_ps(k, ln2_hi, y));
    __m512 poly = _mm512_set1_ps(1.3981999507e-3f);
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(8.3334519073e-3f));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(4.1665795894e-2f));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.6666665459e-1f));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(5.0000001201e-1f));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f));
    const __m512 two_k = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_castps_si512(t), bias), 23));
    __mmask16 keep = lanes;
    if (masked) keep &= _mm512_cmp_ps_mask(x, neg_inf, _CMP_NEQ_OQ);  // masked (-inf) scores become 0
    const __m512 v = _mm512_maskz_mul_ps(keep, poly, two_k);
    sum = _mm512_add_ps(sum, v);
    const __m256bh packed = _mm512_cvtneps_pbh(v);
    _mm256_mask_storeu_epi16(to + j, lanes, reinterpret_cast<const __m256i&>(packed));
  }
  return _mm512_reduce_add_ps(sum);
}

inline bool hasAvx512BFloat16() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  return has;
}

// s[j] *= by (by > 0: masked -inf scores stay -inf); returns max(start, s[j]).
NPU_FA_SIMD float scaleRowMax(float* s, int64_t n, float by, float start) {
  float part[kLanes];
  std::fill_n(part, kLanes, start);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
#pragma omp simd
    for (int64_t k = 0; k < kLanes; ++k) {
      const float x = s[j + k] * by;
      s[j + k] = x;
      part[k] = x > part[k] ? x : part[k];
    }
  }
  for (int64_t k = 0; j + k < n; ++k) {
    const float x = s[j + k] * by;
    s[j + k] = x;
    part[k] = x > part[k] ? x : part[k];
  }
  return treeMax(part);
}

NPU_FA_SIMD float rowMax(const float* s, int64_t n, float start) {
  float m = start;
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = s[j] > m ? s[j] : m;
  return m;
}

NPU_FA_SIMD void scaleRow(float* x, int64_t n, float by) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) x[j] *= by;
}

// p[j] = exp(s[j] - max) / sum (the probabilities of a saved row).
void probRow(float* s, int64_t n, float max, float inv_sum) { expScaleRow(s, n, max, inv_sum); }

// ds[j] = p[j] * (dp[j] - delta), in place in p.
NPU_FA_SIMD void softmaxGradRow(float* p, const float* dp, int64_t n, float delta) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) p[j] = p[j] * (dp[j] - delta);
}

template <typename T>
float toFloat(T v) {
  return static_cast<float>(v);
}

template <typename T>
float dotRow(const T* a, const T* b, int64_t n) {
  float acc = 0.0f;
  for (int64_t j = 0; j < n; ++j) acc += toFloat(a[j]) * toFloat(b[j]);
  return acc;
}
template <>
NPU_FA_SIMD float dotRow<float>(const float* a, const float* b, int64_t n) {
  float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
  for (int64_t j = 0; j < n; ++j) acc += a[j] * b[j];
  return acc;
}

// A float block (rows x cols, ld) as GEMM operands of type T: the block itself for float, else a
// converted copy in `buffer` (as PyTorch's own CPU flash attention feeds reduced-precision GEMMs).
// float -> bfloat16, rounding to nearest even (the values are finite), in a loop that vectorizes.
NPU_FA_SIMD void toBFloat16(const float* from, int64_t n, uint16_t* to) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t u = std::bit_cast<uint32_t>(from[j]);
    to[j] = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
}

template <typename T>
const T* asOperand(const float* block, int64_t rows, int64_t cols, int64_t ld, std::vector<T>& buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return block;
  } else {
    buffer.resize(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      if constexpr (std::is_same_v<T, c10::BFloat16>) {
        toBFloat16(block + r * ld, cols, reinterpret_cast<uint16_t*>(buffer.data() + r * cols));
      } else {
        for (int64_t c = 0; c < cols; ++c) buffer[r * cols + c] = static_cast<T>(block[r * ld + c]);
      }
    }
    return buffer.data();
  }
}

}  // namespace
}  // namespace npu::opslib::aten
