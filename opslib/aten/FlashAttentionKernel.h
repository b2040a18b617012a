// FlashAttentionKernel.h - tiled attention with an online softmax, forward and backward, over
// strided query / key / value of any of torch_npu's layouts: memory grows with the sequence, not
// with its square (no S x S score buffer), as on an NPU's FlashAttention kernel.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace npu::opslib::aten {

// Where the rows of one operand (query, key, value, output and their gradients) live: row (b, n, s)
// starts at batch_offset[b] + n * head_stride + s * seq_stride elements; D values follow contiguously.
struct RowLayout {
  std::vector<int64_t> batch_offset;  // per batch (TND: the cumulative token offset times seq_stride)
  int64_t head_stride = 0;
  int64_t seq_stride = 0;
};

// Which scores are masked out (true: the query does not attend to that key), for batch b, query row
// i and key column j, in torch_npu's sparse modes; see FlashAttentionOps.cpp for how each mode maps here.
struct MaskRule {
  // Band relative to the diagonal j = i + shift[b]: key j is visible when
  // shift + i - pre <= j <= shift + i + next (pre / next of INT64_MAX: unbounded). All per batch.
  std::vector<int64_t> shift, pre, next;
  // Keys below prefix[b] stay visible whatever the band says (prefix mode); empty: none.
  std::vector<int64_t> prefix;
  // An explicit boolean / uint8 mask (nonzero = masked), indexed [b][n][i][j] through these strides
  // (a stride of 0 broadcasts); undefined: none.
  at::Tensor explicit_mask;
  int64_t mask_b = 0, mask_n = 0, mask_i = 0, mask_j = 0;
};

struct AttentionProblem {
  int64_t batch = 0;
  int64_t q_heads = 0;
  int64_t kv_heads = 0;                   // divides q_heads (grouped-query attention)
  int64_t head_dim = 0;                   // of query and key
  int64_t value_dim = 0;                  // of value and the output
  std::vector<int64_t> q_len, kv_len;     // per batch
  double scale = 1.0;
  double keep_prob = 1.0;                 // dropout: keep a score with this probability
  // The dropout mask when keep_prob < 1: one bit per score (1 = keep), score (b, n, i, j) at bit
  // drop_base[b] + (n * Sq_b + i) * Skv_b + j, as torch_npu's dropout masks are laid out.
  const uint8_t* drop_bits = nullptr;
  std::vector<int64_t> drop_base;         // per batch
  at::Tensor pse;                         // additive bias [B or 1, N or 1, Sq, Skv] (float), or undefined
  int64_t pse_b = 0, pse_n = 0, pse_i = 0, pse_j = 0;
  // A compressed alibi bias holds only the last pse_rows rows of [Sq, Skv] (0: all rows): an earlier
  // row i is the last rows' diagonal continued (bias[i][j] = bias[i + t][j + t]).
  int64_t pse_rows = 0;
  // Where the backward pass accumulates the bias gradient (float32, strides as pse_*; the batch
  // stride is never 0: work items of different batches would race).
  int64_t dpse_b = 0, dpse_n = 0, dpse_i = 0, dpse_j = 0;
  float pse_scale = 1.0f;                 // the bias is added times this (scale: pse_type 1, inside the scaling)
  std::vector<double> alibi_slopes;       // per head: bias slope * -(|i + shift - j|) when not empty
  MaskRule mask;
  // Attention sinks: per query head, a logit that joins each row's softmax without a value (float32
  // [N]), or nullptr.
  const float* sink = nullptr;
  RowLayout q, k, v, out;
};

// Forward. query/key/value/out are device memory seen as CPU tensors (any dtype of float32 / float16
// / bfloat16; computed in float32); softmax_max / softmax_sum: float32 [B, N, Sq] rows (TND: [T, N])
// laid out as `stats` says, holding each row's running max and sum of exp (zero sum: all masked).
struct StatsLayout {
  std::vector<int64_t> batch_offset;
  int64_t head_stride = 0;
  int64_t seq_stride = 0;
  int64_t lanes = 1;  // the value is repeated in this many consecutive floats (torch_npu keeps 8)
};
void flashAttentionForward(const AttentionProblem& p, const at::Tensor& query, const at::Tensor& key,
                           const at::Tensor& value, const at::Tensor& out, const at::Tensor& softmax_max,
                           const at::Tensor& softmax_sum, const StatsLayout& stats);

// Backward from the forward's statistics and output. dpse (same layout as pse) and dsink (float32
// [N], with a sink) may be undefined.
void flashAttentionBackward(const AttentionProblem& p, const at::Tensor& query, const at::Tensor& key,
                            const at::Tensor& value, const at::Tensor& out, const at::Tensor& dout,
                            const at::Tensor& softmax_max, const at::Tensor& softmax_sum,
                            const StatsLayout& stats, const at::Tensor& dq, const at::Tensor& dk,
                            const at::Tensor& dv, const at::Tensor& dpse, const at::Tensor& dsink);

// Fills `bits` (numel bits, LSB first) with a dropout mask: each bit is 1 with probability keep_prob,
// a function of (seed, offset, bit index) only, so the backward pass regenerates the forward's mask.
void dropoutGenMask(uint64_t seed, uint64_t offset, double keep_prob, int64_t numel, uint8_t* bits);

}  // namespace npu::opslib::aten
