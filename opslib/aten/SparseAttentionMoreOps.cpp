// SparseAttentionMoreOps.cpp - more sparse / linear attention device ops as ATen CPU math: BlockSparseAttention,
// KvQuantSparseFlashAttention(V2), NsaSelectedAttention(+Grad, Infer), NsaCompressAttention, ChunkGatedDeltaRule.
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/full.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Small local helper (SparseAttentionOps.cpp keeps its own in an anonymous namespace): a host index tensor as int64.
std::vector<int64_t> indexValues(const at::Tensor& t) {
  std::vector<int64_t> values;
  if (!t.defined()) {
    return values;
  }
  const at::Tensor flat = t.to(at::kLong).contiguous().view(-1);
  values.assign(flat.const_data_ptr<int64_t>(), flat.const_data_ptr<int64_t>() + flat.numel());
  return values;
}

bool isHalfOrFloat(at::ScalarType type) {
  return type == at::kHalf || type == at::kBFloat16 || type == at::kFloat;
}

// softmax(scores) @ values over the last dim of scores, with rows whose every score is -inf giving zeros (not NaN).
// Returns the attended rows and writes log-sum-exp per row into lse when it is defined (-inf for empty rows).
at::Tensor maskedSoftmaxAttend(const at::Tensor& scores, const at::Tensor& values, at::Tensor* lse) {
  const at::Tensor row_max = std::get<0>(scores.max(-1, /*keepdim=*/true));
  const at::Tensor safe_max = row_max.masked_fill(row_max.isinf(), 0.0f);
  const at::Tensor weights = (scores - safe_max).exp();
  const at::Tensor total = weights.sum(-1, /*keepdim=*/true);
  if (lse != nullptr) {
    *lse = (total.log() + safe_max).squeeze(-1);  // log(0) = -inf marks empty rows
  }
  return at::matmul(weights / total.masked_fill(total == 0, 1.0f), values);
}

}  // namespace

// ---------------------------------------------------------------- BlockSparseAttention
// For each batch b and query head n (key head n / (N1 / N2)): query row i may see key j iff
// blockSparseMask[b, n, i / blockShape[0], j / blockShape[1]] != 0, then out = softmax(scale q k^T) v over the
// visible keys (rows with none give zeros) and softmaxLse = log-sum-exp of the visible scaled scores (-inf if none).
// Layouts: BNSD ([B, N, S, D], lengths optional, default S) or TND ([T, N, D], one length per batch, batches packed
// one after another). Rows past a batch's length are left zero.
extern "C" NOP_API aclnnStatus aclnnBlockSparseAttentionGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* blockSparseMask,
    const aclTensor* attenMask, const aclIntArray* blockShape, const aclIntArray* actualSeqLengths,
    const aclIntArray* actualSeqLengthsKv, const aclTensor* blockTable, char* qInputLayout, char* kvInputLayout,
    int64_t numKeyValueHeads, int64_t maskType, double scaleValue, int64_t innerPrecise, int64_t blockSize,
    int64_t preTokens, int64_t nextTokens, int64_t softmaxLseFlag, aclTensor* attentionOut, aclTensor* softmaxLse,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnBlockSparseAttention", workspaceSize, executor, [&] {
    const char* op = "aclnnBlockSparseAttention";
    at::Tensor q = requiredTensor(query, "query"), k = requiredTensor(key, "key"), v = requiredTensor(value, "value");
    at::Tensor mask = requiredTensor(blockSparseMask, "block_sparse_mask");
    at::Tensor o = requiredTensor(attentionOut, "attention_out"), lse = hostTensor(softmaxLse);
    const std::string q_layout = qInputLayout == nullptr ? "TND" : qInputLayout;
    const std::string kv_layout = kvInputLayout == nullptr ? "TND" : kvInputLayout;
    const std::vector<int64_t> shape = intArray(blockShape);
    const std::vector<int64_t> q_lengths = intArray(actualSeqLengths), kv_lengths = intArray(actualSeqLengthsKv);
    // The atten_mask / paged-KV / band arguments are reserved by torch_npu (always absent / default).
    TORCH_CHECK(!hostTensor(attenMask).defined() && !hostTensor(blockTable).defined() &&
                    maskType == 0 && blockSize == 0,
                op, ": atten_mask, block_table, mask_type and block_size are reserved and must be absent / 0");
    TORCH_CHECK((q_layout == "TND" || q_layout == "BNSD") && q_layout == kv_layout, op,
                ": q_input_layout and kv_input_layout must both be TND or both be BNSD, got ", q_layout, "/",
                kv_layout);
    const bool tnd = q_layout == "TND";
    const int64_t rank = tnd ? 3 : 4;
    TORCH_CHECK(q.dim() == rank && k.dim() == rank && v.sizes() == k.sizes(), op, ": query/key/value must be ",
                rank, "-D for ", q_layout, " with value shaped like key");
    TORCH_CHECK(isHalfOrFloat(q.scalar_type()) && k.scalar_type() == q.scalar_type() &&
                    v.scalar_type() == q.scalar_type(),
                op, ": query, key and value must share one of float16/bfloat16/float32");
    TORCH_CHECK(shape.size() >= 2 && shape[0] > 0 && shape[1] > 0, op,
                ": block_shape needs two positive entries [blockShapeX, blockShapeY]");
    TORCH_CHECK(innerPrecise == 0 || innerPrecise == 1, op, ": inner_precise must be 0 or 1");
    TORCH_CHECK(softmaxLseFlag == 0 || softmaxLseFlag == 1, op, ": softmax_lse_flag must be 0 or 1");
    TORCH_CHECK(q_lengths.empty() == kv_lengths.empty(), op,
                ": actual_seq_lengths and actual_seq_lengths_kv must be given together");
    TORCH_CHECK(!tnd || !q_lengths.empty(), op, ": TND needs actual_seq_lengths and actual_seq_lengths_kv");
    TORCH_CHECK(q_lengths.size() == kv_lengths.size(), op, ": one query and one kv length per batch");
    const int64_t heads = q.size(1), kv_heads = k.size(1);  // N is axis 1 in both TND and BNSD
    TORCH_CHECK(kv_heads == numKeyValueHeads && kv_heads > 0 && heads % kv_heads == 0, op,
                ": key heads (", kv_heads, ") must equal num_key_value_heads (", numKeyValueHeads,
                ") and divide query heads (", heads, ")");
    TORCH_CHECK(k.size(-1) == q.size(-1), op, ": query and key head dims differ");
    TORCH_CHECK(o.sizes() == q.sizes(), op, ": attention_out must be shaped like query");
    const int64_t batches = tnd ? static_cast<int64_t>(q_lengths.size()) : q.size(0);
    TORCH_CHECK(tnd || k.size(0) == batches, op, ": key batch must equal query batch");
    TORCH_CHECK(q_lengths.empty() || static_cast<int64_t>(q_lengths.size()) == batches, op,
                ": actual_seq_lengths must hold one entry per batch (", batches, ")");
    int64_t max_q = tnd ? 0 : q.size(2), max_kv = tnd ? 0 : k.size(2), total_q = 0, total_kv = 0;
    for (size_t b = 0; b < q_lengths.size(); ++b) {
      TORCH_CHECK(q_lengths[b] >= 0 && kv_lengths[b] >= 0, op, ": sequence lengths must be non-negative");
      TORCH_CHECK(tnd || (q_lengths[b] <= q.size(2) && kv_lengths[b] <= k.size(2)), op,
                  ": BNSD lengths must not exceed S");
      total_q += q_lengths[b];
      total_kv += kv_lengths[b];
      if (tnd) {
        max_q = std::max(max_q, q_lengths[b]);
        max_kv = std::max(max_kv, kv_lengths[b]);
      }
    }
    TORCH_CHECK(!tnd || (total_q <= q.size(0) && total_kv <= k.size(0)), op,
                ": TND lengths (per batch) must sum to at most T (query ", q.size(0), ", key ", k.size(0), ")");
    const int64_t bx = shape[0], by = shape[1];
    TORCH_CHECK(mask.dim() == 4 && mask.size(0) == batches && mask.size(1) == heads &&
                    mask.size(2) >= (max_q + bx - 1) / bx && mask.size(3) >= (max_kv + by - 1) / by,
                op, ": block_sparse_mask must be [batch=", batches, ", N1=", heads, ", ceil(Sq/", bx, ")=",
                (max_q + bx - 1) / bx, ", ceil(Skv/", by, ")=", (max_kv + by - 1) / by, "], got ", mask.sizes());
    TORCH_CHECK(mask.scalar_type() == at::kChar || mask.scalar_type() == at::kByte || mask.scalar_type() == at::kBool,
                op, ": block_sparse_mask must be int8");
    const bool want_lse = softmaxLseFlag == 1 && lse.defined() && lse.numel() > 0;
    const double scale = scaleValue;
    return Prepared{{q, k, v, mask},
                    [=]() mutable {
                      o.zero_();
                      if (lse.defined()) {
                        lse.zero_();
                      }
                      const int64_t group = heads / kv_heads;
                      int64_t q_start = 0, kv_start = 0;
                      for (int64_t b = 0; b < batches; ++b) {
                        const int64_t sq = q_lengths.empty() ? q.size(2) : q_lengths[b];
                        const int64_t skv = kv_lengths.empty() ? k.size(2) : kv_lengths[b];
                        // Per-batch views as [N, S, D].
                        const at::Tensor qb = tnd ? q.narrow(0, q_start, sq).transpose(0, 1)
                                                  : q.select(0, b).narrow(1, 0, sq);
                        const at::Tensor kb = tnd ? k.narrow(0, kv_start, skv).transpose(0, 1)
                                                  : k.select(0, b).narrow(1, 0, skv);
                        const at::Tensor vb = tnd ? v.narrow(0, kv_start, skv).transpose(0, 1)
                                                  : v.select(0, b).narrow(1, 0, skv);
                        at::Tensor ob = tnd ? o.narrow(0, q_start, sq).transpose(0, 1) : o.select(0, b).narrow(1, 0, sq);
                        if (sq > 0 && skv > 0) {  // an empty side leaves zeros
                          const at::Tensor rows = at::arange(sq, at::kLong).floor_divide(bx);
                          const at::Tensor cols = at::arange(skv, at::kLong).floor_divide(by);
                          for (int64_t n = 0; n < heads; ++n) {
                            const int64_t h = n / group;
                            const at::Tensor seen = mask.select(0, b).select(0, n).index_select(0, rows)
                                                        .index_select(1, cols).ne(0);  // [sq, skv]
                            at::Tensor scores =
                                at::matmul(qb.select(0, n).to(at::kFloat), kb.select(0, h).to(at::kFloat).t()) * scale;
                            scores.masked_fill_(seen.logical_not(), kNegInf);
                            at::Tensor row_lse;
                            ob.select(0, n).copy_(
                                maskedSoftmaxAttend(scores, vb.select(0, h).to(at::kFloat), want_lse ? &row_lse : nullptr));
                            if (want_lse) {
                              // [T, N, 1] or [B, N, S, 1]
                              at::Tensor target = tnd ? lse.narrow(0, q_start, sq).select(1, n).select(-1, 0)
                                                      : lse.select(0, b).select(0, n).narrow(0, 0, sq).select(-1, 0);
                              target.copy_(row_lse);
                            }
                          }
                        }
                        q_start += sq;
                        kv_start += skv;
                      }
                    },
                    {o, lse}};
  });
}
NPU_ATEN_OP(BlockSparseAttention,
            "query, key, value, blockSparseMask, attenMask, blockShape, actualSeqLengths, actualSeqLengthsKv, "
            "blockTable, qInputLayout, kvInputLayout, numKeyValueHeads, maskType, scaleValue, innerPrecise, blockSize, "
            "preTokens, nextTokens, softmaxLseFlag, attentionOut, softmaxLse");

// ---------------------------------------------------------------- KvQuantSparseFlashAttention(V2)
namespace {

// One batch's query rows: BSND rows are [b, 0:length], TND rows are [start, start + length).
struct RowSpan {
  int64_t batch;
  int64_t start;
  int64_t length;
};

// TND lengths are prefix sums (required); BSND lengths are plain per-batch counts (optional, default S).
std::vector<RowSpan> rowSpans(const char* op, const at::Tensor& t, bool tnd, const std::vector<int64_t>& lengths,
                              const char* what) {
  std::vector<RowSpan> spans;
  if (tnd) {
    TORCH_CHECK(!lengths.empty(), op, ": ", what, " is required for a TND layout");
    int64_t previous = 0;
    for (size_t b = 0; b < lengths.size(); ++b) {
      TORCH_CHECK(lengths[b] >= previous && lengths[b] <= t.size(0), op, ": ", what,
                  " must be non-decreasing prefix sums within T=", t.size(0));
      spans.push_back({static_cast<int64_t>(b), previous, lengths[b] - previous});
      previous = lengths[b];
    }
    return spans;
  }
  TORCH_CHECK(lengths.empty() || static_cast<int64_t>(lengths.size()) >= t.size(0), op, ": ", what,
              " must hold one length per batch");
  for (int64_t b = 0; b < t.size(0); ++b) {
    const int64_t length = lengths.empty() ? t.size(1) : lengths[b];
    TORCH_CHECK(length >= 0 && length <= t.size(1), op, ": ", what, "[", b, "]=", length, " is outside [0, ",
                t.size(1), "]");
    spans.push_back({b, 0, length});
  }
  return spans;
}

at::Tensor spanRows(const at::Tensor& t, bool tnd, const RowSpan& span) {
  return tnd ? t.narrow(0, span.start, span.length) : t.select(0, span.batch).narrow(0, 0, span.length);
}

// The kv tokens of batch b as [length, N2, ...] for BSND (plain lengths), TND (prefix sums) and PA_BSND (paged
// blocks [blocks, block_size, N2, ...] addressed through block_table rows).
at::Tensor kvRows(const char* op, const at::Tensor& kv, const std::string& layout, const std::vector<int64_t>& lengths,
                  const at::Tensor& table, int64_t b) {
  if (layout == "TND") {
    TORCH_CHECK(static_cast<int64_t>(lengths.size()) > b, op, ": actual_seq_lengths_kv is required for TND");
    const int64_t start = b == 0 ? 0 : lengths[b - 1];
    TORCH_CHECK(lengths[b] >= start && lengths[b] <= kv.size(0), op, ": kv lengths must be prefix sums within T");
    return kv.narrow(0, start, lengths[b] - start);
  }
  if (layout == "PA_BSND") {
    TORCH_CHECK(static_cast<int64_t>(lengths.size()) > b, op, ": actual_seq_lengths_kv is required for PA_BSND");
    TORCH_CHECK(table.defined() && table.dim() == 2 && table.size(0) > b, op,
                ": PA_BSND needs a 2-D block_table with one row per batch");
    const int64_t block_size = kv.size(1);
    const int64_t blocks = (lengths[b] + block_size - 1) / block_size;
    TORCH_CHECK(blocks <= table.size(1), op, ": block_table row ", b, " is too short for ", lengths[b], " tokens");
    const at::Tensor ids = table.select(0, b).narrow(0, 0, blocks).to(at::kLong);
    std::vector<int64_t> shape = kv.sizes().vec();
    shape.erase(shape.begin());
    shape[0] = blocks * block_size;
    return kv.index_select(0, ids).reshape(shape).narrow(0, 0, lengths[b]);
  }
  const int64_t length = lengths.empty() ? kv.size(1) : lengths[b];
  TORCH_CHECK(length >= 0 && length <= kv.size(1), op, ": kv length ", length, " is outside [0, ", kv.size(1), "]");
  return kv.select(0, b).narrow(0, 0, length);
}

struct KvQuantArgs {
  at::Tensor q, key, indices, table, act_q, act_kv, sinks, out;
  std::string q_layout, kv_layout;
  double scale;
  int64_t block_size, sparse_mode, tile, rope;
};

// The combined per-tile cache row of one token and head is [nope int8 x Dn | rope (query dtype) as bytes | Dn/tile
// float32 scales as bytes]. Dequantized nope (rounded to the query dtype, as the chip's dequant output is) is both
// the key's nope part and the value (MLA-absorb: K and V share the cache); the rope part extends the key.
void runKvQuantSparseAttention(const char* op, const KvQuantArgs& a) {
  const at::ScalarType qtype = a.q.scalar_type();
  const int64_t dn = a.q.size(-1) - a.rope, esize = static_cast<int64_t>(c10::elementSize(qtype));
  const at::Tensor nope = a.key.narrow(-1, 0, dn).to(at::kFloat);
  const at::Tensor rope = a.key.narrow(-1, dn, a.rope * esize).contiguous().view(qtype).to(at::kFloat);
  const at::Tensor scales = a.key.narrow(-1, dn + a.rope * esize, (dn / a.tile) * 4).contiguous().view(at::kFloat);
  const at::Tensor k_nope = (nope * scales.repeat_interleave(a.tile, -1)).to(qtype).to(at::kFloat);
  const at::Tensor k_full = at::cat({k_nope, rope}, -1);  // key layout, [..., N2, Dn + R]
  const bool tnd = a.q_layout == "TND";
  const std::vector<RowSpan> spans = rowSpans(op, a.q, tnd, indexValues(a.act_q), "actual_seq_lengths_query");
  const std::vector<int64_t> kv_lengths = indexValues(a.act_kv);
  const int64_t heads = a.q.size(-2), kv_heads = a.key.size(-2), group = heads / kv_heads;
  const at::Tensor sinks = a.sinks.defined() ? a.sinks.to(at::kFloat) : at::Tensor();
  at::Tensor out = a.out;
  out.zero_();
  for (const RowSpan& span : spans) {
    const at::Tensor q_rows = spanRows(a.q, tnd, span).to(at::kFloat);  // [sq, N1, Dq]
    const at::Tensor k_rows = kvRows(op, k_full, a.kv_layout, kv_lengths, a.table, span.batch);
    const at::Tensor v_rows = kvRows(op, k_nope, a.kv_layout, kv_lengths, a.table, span.batch);
    const at::Tensor idx_rows = spanRows(a.indices, tnd, span);  // [sq, N2, K]
    at::Tensor out_rows = spanRows(out, tnd, span);
    const int64_t sq = q_rows.size(0), skv = k_rows.size(0);
    for (int64_t i = 0; i < sq; ++i) {
      // Causal (mode 3) from the bottom-right corner: j <= i + skv - sq; mode 0 sees everything.
      const int64_t last = a.sparse_mode == 3 ? i + skv - sq : skv - 1;
      for (int64_t h = 0; h < kv_heads; ++h) {
        std::vector<int64_t> positions;
        for (int64_t block : indexValues(idx_rows.select(0, i).select(0, h))) {
          if (block < 0) {
            break;  // valid indices come first
          }
          for (int64_t p = block * a.block_size; p < std::min((block + 1) * a.block_size, skv); ++p) {
            if (p <= last) {
              positions.push_back(p);
            }
          }
        }
        const at::Tensor pos = at::tensor(positions, at::kLong);
        const at::Tensor qh = q_rows.select(0, i).narrow(0, h * group, group);  // [g, Dq]
        at::Tensor scores = at::matmul(qh, k_rows.select(1, h).index_select(0, pos).t()) * a.scale;  // [g, m]
        at::Tensor row_max = positions.empty() ? at::full({group}, kNegInf, at::kFloat) : std::get<0>(scores.max(-1));
        at::Tensor sink;
        if (sinks.defined()) {
          sink = sinks.narrow(0, h * group, group);
          row_max = at::maximum(row_max, sink);
        }
        const at::Tensor safe_max = row_max.masked_fill(row_max.isinf(), 0.0f);
        const at::Tensor weights = (scores - safe_max.unsqueeze(-1)).exp();
        at::Tensor total = weights.sum(-1);
        if (sink.defined()) {
          total = total + (sink - safe_max).exp();
        }
        // The chip feeds the second matmul probabilities in the query dtype.
        const at::Tensor probs = (weights / total.masked_fill(total == 0, 1.0f).unsqueeze(-1)).to(qtype).to(at::kFloat);
        out_rows.select(0, i).narrow(0, h * group, group)
            .copy_(at::matmul(probs, v_rows.select(1, h).index_select(0, pos)));
      }
    }
  }
}

aclnnStatus prepareKvQuantSparseAttention(
    const char* op, const aclTensor* query, const aclTensor* key, const aclTensor* value,
    const aclTensor* sparseIndices, const aclTensor* keyDequantScale, const aclTensor* valueDequantScale,
    const aclTensor* blockTable, const aclTensor* actualSeqLengthsQuery, const aclTensor* actualSeqLengthsKv,
    const aclTensor* sinks, double scaleValue, int64_t keyQuantMode, int64_t valueQuantMode, int64_t sparseBlockSize,
    char* layoutQuery, char* layoutKv, int64_t sparseMode, int64_t preTokens, int64_t nextTokens,
    int64_t attentionMode, int64_t quantScaleRepoMode, int64_t tileSize, int64_t ropeHeadDim, aclTensor* attentionOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp(op, workspaceSize, executor, [&] {
    KvQuantArgs a;
    a.q = requiredTensor(query, "query");
    a.key = requiredTensor(key, "key");
    const at::Tensor v = requiredTensor(value, "value");
    a.indices = requiredTensor(sparseIndices, "sparse_indices");
    a.table = hostTensor(blockTable);
    a.act_q = hostTensor(actualSeqLengthsQuery);
    a.act_kv = hostTensor(actualSeqLengthsKv);
    a.sinks = hostTensor(sinks);
    a.out = requiredTensor(attentionOut, "attention_out");
    a.q_layout = layoutQuery == nullptr ? "BSND" : layoutQuery;
    a.kv_layout = layoutKv == nullptr ? "BSND" : layoutKv;
    a.scale = scaleValue;
    a.block_size = sparseBlockSize;
    a.sparse_mode = sparseMode;
    a.tile = tileSize;
    a.rope = ropeHeadDim;
    TORCH_CHECK(!hostTensor(keyDequantScale).defined() && !hostTensor(valueDequantScale).defined(), op,
                ": key_dequant_scale / value_dequant_scale are reserved; the scales live inside key");
    TORCH_CHECK(keyQuantMode == 2 && valueQuantMode == 2, op, ": only per-tile quantization (quant mode 2) exists");
    TORCH_CHECK(quantScaleRepoMode == 1, op, ": only quant_scale_repo_mode 1 (scales stored in key) exists");
    TORCH_CHECK(attentionMode == 2, op, ": only attention_mode 2 (MLA-absorb) exists");
    TORCH_CHECK(sparseMode == 0 || sparseMode == 3, op, ": sparse_mode must be 0 or 3, got ", sparseMode);
    TORCH_CHECK(preTokens == std::numeric_limits<int64_t>::max() && nextTokens == std::numeric_limits<int64_t>::max(),
                op, ": pre_tokens / next_tokens only take their defaults");
    TORCH_CHECK(sparseBlockSize > 0, op, ": sparse_block_size must be positive");
    TORCH_CHECK(a.q_layout == "BSND" || a.q_layout == "TND", op, ": layout_query must be BSND or TND");
    TORCH_CHECK(a.kv_layout == "BSND" || a.kv_layout == "TND" || a.kv_layout == "PA_BSND", op,
                ": layout_kv must be BSND, TND or PA_BSND");
    const int64_t q_rank = a.q_layout == "TND" ? 3 : 4, kv_rank = a.kv_layout == "TND" ? 3 : 4;
    TORCH_CHECK(a.q.dim() == q_rank && a.indices.dim() == q_rank && a.key.dim() == kv_rank && v.dim() == kv_rank, op,
                ": query / sparse_indices must be ", q_rank, "-D and key / value ", kv_rank, "-D");
    TORCH_CHECK(isHalfOrFloat(a.q.scalar_type()), op, ": query must be float16, bfloat16 or float32");
    TORCH_CHECK(a.key.scalar_type() == at::kChar && v.scalar_type() == at::kChar, op, ": key and value must be int8");
    TORCH_CHECK(a.indices.scalar_type() == at::kInt || a.indices.scalar_type() == at::kLong, op,
                ": sparse_indices must be int32");
    TORCH_CHECK(ropeHeadDim >= 0 && ropeHeadDim < a.q.size(-1) && tileSize > 0 &&
                    (a.q.size(-1) - ropeHeadDim) % tileSize == 0,
                op, ": query D - rope_head_dim must be a positive multiple of tile_size");
    const int64_t dn = a.q.size(-1) - ropeHeadDim;
    const int64_t dk = dn + ropeHeadDim * static_cast<int64_t>(c10::elementSize(a.q.scalar_type())) + dn / tileSize * 4;
    TORCH_CHECK(a.key.size(-1) == dk, op, ": key D must be ", dk, " (nope + rope bytes + float32 scales), got ",
                a.key.size(-1));
    const int64_t heads = a.q.size(-2), kv_heads = a.key.size(-2);
    TORCH_CHECK(kv_heads > 0 && heads % kv_heads == 0 && a.indices.size(-2) == kv_heads, op,
                ": query heads must be a multiple of key heads, and sparse_indices must have N2 heads");
    TORCH_CHECK(a.out.size(-1) == dn, op, ": out D must be ", dn);
    TORCH_CHECK(!a.sinks.defined() || (a.sinks.dim() == 1 && a.sinks.size(0) == heads), op, ": sinks must be [N1]");
    TORCH_CHECK(a.kv_layout != "PA_BSND" || a.table.defined(), op, ": PA_BSND needs block_table");
    return Prepared{{a.q, a.key, v, a.indices, a.table, a.act_q, a.act_kv, a.sinks},
                    [=]() { runKvQuantSparseAttention(op, a); },
                    {a.out}};
  });
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnKvQuantSparseFlashAttentionGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* sparseIndices,
    const aclTensor* keyDequantScale, const aclTensor* valueDequantScale, const aclTensor* blockTable,
    const aclTensor* actualSeqLengthsQuery, const aclTensor* actualSeqLengthsKv, double scaleValue,
    int64_t keyQuantMode, int64_t valueQuantMode, int64_t sparseBlockSize, char* layoutQuery, char* layoutKv,
    int64_t sparseMode, int64_t preTokens, int64_t nextTokens, int64_t attentionMode, int64_t quantScaleRepoMode,
    int64_t tileSize, int64_t ropeHeadDim, aclTensor* attentionOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareKvQuantSparseAttention("aclnnKvQuantSparseFlashAttention", query, key, value, sparseIndices,
                                       keyDequantScale, valueDequantScale, blockTable, actualSeqLengthsQuery,
                                       actualSeqLengthsKv, nullptr, scaleValue, keyQuantMode, valueQuantMode,
                                       sparseBlockSize, layoutQuery, layoutKv, sparseMode, preTokens, nextTokens,
                                       attentionMode, quantScaleRepoMode, tileSize, ropeHeadDim, attentionOut,
                                       workspaceSize, executor);
}
NPU_ATEN_OP(KvQuantSparseFlashAttention,
            "query, key, value, sparseIndices, keyDequantScale, valueDequantScale, blockTable, actualSeqLengthsQuery, "
            "actualSeqLengthsKv, scaleValue, keyQuantMode, valueQuantMode, sparseBlockSize, layoutQuery, layoutKv, "
            "sparseMode, preTokens, nextTokens, attentionMode, quantScaleRepoMode, tileSize, ropeHeadDim, "
            "attentionOut");

// V2 adds per-query-head sink logits that join the softmax denominator without attending to any value.
extern "C" NOP_API aclnnStatus aclnnKvQuantSparseFlashAttentionV2GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* sparseIndices,
    const aclTensor* keyDequantScale, const aclTensor* valueDequantScale, const aclTensor* blockTable,
    const aclTensor* actualSeqLengthsQuery, const aclTensor* actualSeqLengthsKv, const aclTensor* sinks,
    double scaleValue, int64_t keyQuantMode, int64_t valueQuantMode, int64_t sparseBlockSize, char* layoutQuery,
    char* layoutKv, int64_t sparseMode, int64_t preTokens, int64_t nextTokens, int64_t attentionMode,
    int64_t quantScaleRepoMode, int64_t tileSize, int64_t ropeHeadDim, aclTensor* attentionOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareKvQuantSparseAttention("aclnnKvQuantSparseFlashAttentionV2", query, key, value, sparseIndices,
                                       keyDequantScale, valueDequantScale, blockTable, actualSeqLengthsQuery,
                                       actualSeqLengthsKv, sinks, scaleValue, keyQuantMode, valueQuantMode,
                                       sparseBlockSize, layoutQuery, layoutKv, sparseMode, preTokens, nextTokens,
                                       attentionMode, quantScaleRepoMode, tileSize, ropeHeadDim, attentionOut,
                                       workspaceSize, executor);
}
NPU_ATEN_OP(KvQuantSparseFlashAttentionV2,
            "query, key, value, sparseIndices, keyDequantScale, valueDequantScale, blockTable, actualSeqLengthsQuery, "
            "actualSeqLengthsKv, sinks, scaleValue, keyQuantMode, valueQuantMode, sparseBlockSize, layoutQuery, "
            "layoutKv, sparseMode, preTokens, nextTokens, attentionMode, quantScaleRepoMode, tileSize, ropeHeadDim, "
            "attentionOut");

// ---------------------------------------------------------------- NsaSelectedAttention / Grad / Infer
namespace {

// Sample spans of a packed TND tensor from prefix-sum lengths (empty: the whole tensor is one sample).
std::vector<RowSpan> packedSpans(const char* op, int64_t tokens, const std::vector<int64_t>& prefix,
                                 const char* what) {
  if (prefix.empty()) {
    return {{0, 0, tokens}};
  }
  std::vector<RowSpan> spans;
  int64_t previous = 0;
  for (size_t b = 0; b < prefix.size(); ++b) {
    TORCH_CHECK(prefix[b] >= previous && prefix[b] <= tokens, op, ": ", what,
                " must be non-decreasing prefix sums within T=", tokens);
    spans.push_back({static_cast<int64_t>(b), previous, prefix[b] - previous});
    previous = prefix[b];
  }
  return spans;
}

// The key positions (within a sample of skv tokens) one query row attends: every selected block id b >= 0 stands
// for [b*size, (b+1)*size) cut at skv; with the causal mask (sparse_mode 2, left-up) only positions <= row remain.
std::vector<int64_t> selectedBlockPositions(const std::vector<int64_t>& blocks, int64_t size, int64_t skv,
                                            int64_t last_visible) {
  std::vector<int64_t> positions;
  for (int64_t block : blocks) {
    if (block < 0) {
      continue;  // padding slot
    }
    for (int64_t p = block * size; p < std::min((block + 1) * size, skv); ++p) {
      if (p <= last_visible) {
        positions.push_back(p);
      }
    }
  }
  return positions;
}

struct NsaSelectArgs {
  at::Tensor q, k, v, topk;
  std::vector<int64_t> q_prefix, kv_prefix;
  double scale;
  int64_t block_size, block_count;
  bool causal;
};

void checkNsaSelectArgs(const char* op, const NsaSelectArgs& a, int64_t head_num) {
  TORCH_CHECK(a.q.dim() == 3 && a.k.dim() == 3 && a.v.dim() == 3, op, ": query/key/value must be TND");
  TORCH_CHECK(isHalfOrFloat(a.q.scalar_type()) && a.k.scalar_type() == a.q.scalar_type() &&
                  a.v.scalar_type() == a.q.scalar_type(),
              op, ": query, key and value must share one of float16/bfloat16/float32");
  const int64_t heads = a.q.size(1), kv_heads = a.k.size(1);
  TORCH_CHECK(heads == head_num, op, ": head_num (", head_num, ") must equal query's N (", heads, ")");
  TORCH_CHECK(kv_heads > 0 && heads % kv_heads == 0 && a.v.size(1) == kv_heads && a.v.size(0) == a.k.size(0), op,
              ": query heads must be a multiple of key/value heads, value shaped [T2, N2, Dv]");
  TORCH_CHECK(a.k.size(2) == a.q.size(2), op, ": query and key head dims differ");
  TORCH_CHECK(a.block_size > 0 && a.block_count > 0, op, ": select_block_size and select_block_count must be > 0");
  TORCH_CHECK(a.topk.dim() == 3 && a.topk.size(0) == a.q.size(0) && a.topk.size(1) == kv_heads &&
                  a.topk.size(2) >= a.block_count,
              op, ": topk_indices must be [T1, N2, select_block_count]");
  TORCH_CHECK(a.topk.scalar_type() == at::kInt || a.topk.scalar_type() == at::kLong, op,
              ": topk_indices must be int32");
  TORCH_CHECK(a.q_prefix.size() == a.kv_prefix.size(), op,
              ": actual_seq_qlen and actual_seq_kvlen need one entry per sample each");
}

// Visits every (query token, key head) with its attended positions (global key rows). Stops nothing on empty rows.
template <typename Visit>
void forEachSelectedRow(const char* op, const NsaSelectArgs& a, Visit visit) {
  const std::vector<RowSpan> q_spans = packedSpans(op, a.q.size(0), a.q_prefix, "actual_seq_qlen");
  const std::vector<RowSpan> kv_spans = packedSpans(op, a.k.size(0), a.kv_prefix, "actual_seq_kvlen");
  const at::Tensor topk = a.topk.narrow(2, 0, a.block_count).to(at::kLong).contiguous();
  const int64_t kv_heads = a.k.size(1);
  for (size_t b = 0; b < q_spans.size(); ++b) {
    const RowSpan qs = q_spans[b], ks = kv_spans[b];
    for (int64_t i = 0; i < qs.length; ++i) {
      const int64_t t = qs.start + i;
      const int64_t last = a.causal ? i : ks.length - 1;
      for (int64_t h = 0; h < kv_heads; ++h) {
        std::vector<int64_t> positions =
            selectedBlockPositions(indexValues(topk.select(0, t).select(0, h)), a.block_size, ks.length, last);
        for (int64_t& p : positions) {
          p += ks.start;
        }
        visit(t, h, at::tensor(positions, at::kLong));
      }
    }
  }
}

// out = softmax(scale q K_sel^T) V_sel per query token and head; softmax_max / softmax_sum ([T1, N1, 8], the row
// statistics repeated 8 times as the chip lays them out). Probabilities meet V in the input dtype, as on the chip.
void runNsaSelectForward(const char* op, const NsaSelectArgs& a, at::Tensor out, at::Tensor max8, at::Tensor sum8) {
  const at::ScalarType type = a.q.scalar_type();
  const int64_t group = a.q.size(1) / a.k.size(1);
  const at::Tensor qf = a.q.to(at::kFloat), kf = a.k.to(at::kFloat), vf = a.v.to(at::kFloat);
  out.zero_();
  if (max8.defined()) {
    max8.fill_(kNegInf);
    sum8.zero_();
  }
  forEachSelectedRow(op, a, [&](int64_t t, int64_t h, const at::Tensor& pos) {
    const at::Tensor qh = qf.select(0, t).narrow(0, h * group, group);  // [g, D]
    const at::Tensor scores = at::matmul(qh, kf.index_select(0, pos).select(1, h).t()) * a.scale;
    if (pos.numel() == 0) {
      return;
    }
    const at::Tensor row_max = std::get<0>(scores.max(-1, true));
    const at::Tensor weights = (scores - row_max).exp();
    const at::Tensor total = weights.sum(-1, true);
    const at::Tensor probs = (weights / total).to(type).to(at::kFloat);
    out.select(0, t).narrow(0, h * group, group).copy_(at::matmul(probs, vf.index_select(0, pos).select(1, h)));
    if (max8.defined()) {
      max8.select(0, t).narrow(0, h * group, group).copy_(row_max.expand({group, max8.size(2)}));
      sum8.select(0, t).narrow(0, h * group, group).copy_(total.expand({group, sum8.size(2)}));
    }
  });
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnNsaSelectedAttentionGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* topkIndices,
    const aclTensor* attenMaskOptional, const aclIntArray* actualSeqQLenOptional,
    const aclIntArray* actualSeqKvLenOptional, double scaleValue, int64_t headNum, char* inputLayout,
    int64_t sparseMode, int64_t selectBlockSize, int64_t selectBlockCount, aclTensor* softmaxMaxOut,
    aclTensor* softmaxSumOut, aclTensor* attentionOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnNsaSelectedAttention", workspaceSize, executor, [&] {
    const char* op = "aclnnNsaSelectedAttention";
    NsaSelectArgs a;
    a.q = requiredTensor(query, "query");
    a.k = requiredTensor(key, "key");
    a.v = requiredTensor(value, "value");
    a.topk = requiredTensor(topkIndices, "topk_indices");
    const at::Tensor mask = hostTensor(attenMaskOptional);
    a.q_prefix = intArray(actualSeqQLenOptional);
    a.kv_prefix = intArray(actualSeqKvLenOptional);
    a.scale = scaleValue;
    a.block_size = selectBlockSize;
    a.block_count = selectBlockCount;
    // sparse_mode 2 with an atten_mask is the left-up causal mask; without one nothing is masked.
    a.causal = mask.defined() && sparseMode == 2;
    const std::string layout = inputLayout == nullptr ? "TND" : inputLayout;
    TORCH_CHECK(layout == "TND", op, ": only layout TND is supported");
    TORCH_CHECK(sparseMode == 0 || sparseMode == 2, op, ": sparse_mode must be 0 or 2, got ", sparseMode);
    checkNsaSelectArgs(op, a, headNum);
    at::Tensor out = requiredTensor(attentionOut, "attention_out");
    at::Tensor max8 = requiredTensor(softmaxMaxOut, "softmax_max"), sum8 = requiredTensor(softmaxSumOut, "softmax_sum");
    TORCH_CHECK(out.dim() == 3 && out.size(0) == a.q.size(0) && out.size(1) == a.q.size(1) &&
                    out.size(2) == a.v.size(2),
                op, ": attention_out must be [T1, N1, Dv]");
    TORCH_CHECK(max8.dim() == 3 && max8.size(0) == a.q.size(0) && max8.size(1) == a.q.size(1) &&
                    sum8.sizes() == max8.sizes(),
                op, ": softmax_max / softmax_sum must be [T1, N1, 8]");
    return Prepared{{a.q, a.k, a.v, a.topk, mask},
                    [=]() { runNsaSelectForward(op, a, out, max8, sum8); },
                    {out, max8, sum8}};
  });
}
NPU_ATEN_OP(NsaSelectedAttention,
            "query, key, value, topkIndices, attenMaskOptional, actualSeqQLenOptional, actualSeqKvLenOptional, "
            "scaleValue, headNum, inputLayout, sparseMode, selectBlockSize, selectBlockCount, softmaxMaxOut, "
            "softmaxSumOut, attentionOut");

// Gradients of the selected attention from the saved softmax statistics: P = exp(scale q k^T - max) / sum,
// dP = dO V^T, dS = P (dP - rowsum(dO * O)), dQ = scale dS K, dK += scale dS^T Q, dV += P^T dO (keys picked by
// several rows or blocks accumulate).
extern "C" NOP_API aclnnStatus aclnnNsaSelectedAttentionGradGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* attentionOut,
    const aclTensor* attentionOutGrad, const aclTensor* softmaxMax, const aclTensor* softmaxSum,
    const aclTensor* topkIndices, const aclIntArray* actualSeqQLenOptional, const aclIntArray* actualSeqKvLenOptional,
    const aclTensor* attenMaskOptional, double scaleValue, int64_t selectBlockSize, int64_t selectBlockCount,
    int64_t headNum, char* inputLayout, int64_t sparseMode, aclTensor* queryGradOut, aclTensor* keyGradOut,
    aclTensor* valueGradOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnNsaSelectedAttentionGrad", workspaceSize, executor, [&] {
    const char* op = "aclnnNsaSelectedAttentionGrad";
    NsaSelectArgs a;
    a.q = requiredTensor(query, "query");
    a.k = requiredTensor(key, "key");
    a.v = requiredTensor(value, "value");
    a.topk = requiredTensor(topkIndices, "topk_indices");
    const at::Tensor o = requiredTensor(attentionOut, "attention_out");
    const at::Tensor dout = requiredTensor(attentionOutGrad, "grad");
    const at::Tensor smax = requiredTensor(softmaxMax, "softmax_max"), ssum = requiredTensor(softmaxSum, "softmax_sum");
    const at::Tensor mask = hostTensor(attenMaskOptional);
    a.q_prefix = intArray(actualSeqQLenOptional);
    a.kv_prefix = intArray(actualSeqKvLenOptional);
    a.scale = scaleValue;
    a.block_size = selectBlockSize;
    a.block_count = selectBlockCount;
    a.causal = mask.defined() && sparseMode == 2;
    const std::string layout = inputLayout == nullptr ? "TND" : inputLayout;
    TORCH_CHECK(layout == "TND", op, ": only layout TND is supported");
    TORCH_CHECK(sparseMode == 0 || sparseMode == 2, op, ": sparse_mode must be 0 or 2, got ", sparseMode);
    checkNsaSelectArgs(op, a, headNum);
    const std::vector<int64_t> out_shape = {a.q.size(0), a.q.size(1), a.v.size(2)};
    TORCH_CHECK(o.sizes() == at::IntArrayRef(out_shape) && dout.sizes() == o.sizes(), op,
                ": attention_out and grad must be [T1, N1, Dv]");
    TORCH_CHECK(smax.dim() == 3 && smax.size(0) == a.q.size(0) && smax.size(1) == a.q.size(1) &&
                    ssum.sizes() == smax.sizes(),
                op, ": softmax_max / softmax_sum must be [T1, N1, 8]");
    at::Tensor dq = requiredTensor(queryGradOut, "query_grad"), dk = requiredTensor(keyGradOut, "key_grad");
    at::Tensor dv = requiredTensor(valueGradOut, "value_grad");
    TORCH_CHECK(dq.sizes() == a.q.sizes() && dk.sizes() == a.k.sizes() && dv.sizes() == a.v.sizes(), op,
                ": gradients must be shaped like query/key/value");
    return Prepared{{a.q, a.k, a.v, o, dout, smax, ssum, a.topk, mask},
                    [=]() mutable {
                      const int64_t group = a.q.size(1) / a.k.size(1);
                      const at::Tensor qf = a.q.to(at::kFloat), kf = a.k.to(at::kFloat), vf = a.v.to(at::kFloat);
                      const at::Tensor of = o.to(at::kFloat), gf = dout.to(at::kFloat);
                      const at::Tensor mx = smax.select(2, 0).to(at::kFloat), sm = ssum.select(2, 0).to(at::kFloat);
                      at::Tensor gq = at::zeros(qf.sizes(), qf.options());
                      at::Tensor gk = at::zeros(kf.sizes(), kf.options());
                      at::Tensor gv = at::zeros(vf.sizes(), vf.options());
                      forEachSelectedRow(op, a, [&](int64_t t, int64_t h, const at::Tensor& pos) {
                        if (pos.numel() == 0) {
                          return;
                        }
                        const at::Tensor qh = qf.select(0, t).narrow(0, h * group, group);      // [g, D]
                        const at::Tensor ks = kf.index_select(0, pos).select(1, h);           // [m, D]
                        const at::Tensor vs = vf.index_select(0, pos).select(1, h);           // [m, Dv]
                        const at::Tensor dO = gf.select(0, t).narrow(0, h * group, group);    // [g, Dv]
                        const at::Tensor oh = of.select(0, t).narrow(0, h * group, group);
                        const at::Tensor row_max = mx.select(0, t).narrow(0, h * group, group).unsqueeze(-1);
                        const at::Tensor row_sum = sm.select(0, t).narrow(0, h * group, group).unsqueeze(-1);
                        const at::Tensor p = (at::matmul(qh, ks.t()) * a.scale - row_max).exp() / row_sum;
                        const at::Tensor dp = at::matmul(dO, vs.t());
                        const at::Tensor ds = p * (dp - (dO * oh).sum(-1, true));
                        gq.select(0, t).narrow(0, h * group, group).add_(at::matmul(ds, ks) * a.scale);
                        gk.select(1, h).index_add_(0, pos, at::matmul(ds.t(), qh) * a.scale);
                        gv.select(1, h).index_add_(0, pos, at::matmul(p.t(), dO));
                      });
                      dq.copy_(gq);
                      dk.copy_(gk);
                      dv.copy_(gv);
                    },
                    {dq, dk, dv}};
  });
}
NPU_ATEN_OP(NsaSelectedAttentionGrad,
            "query, key, value, attentionOut, attentionOutGrad, softmaxMax, softmaxSum, topkIndices, "
            "actualSeqQLenOptional, actualSeqKvLenOptional, attenMaskOptional, scaleValue, selectBlockSize, "
            "selectBlockCount, headNum, inputLayout, sparseMode, queryGradOut, keyGradOut, valueGradOut");

// Inference form over a paged KV cache ([blocks, page_block_size, N2*D] for BSH/TND, [blocks, page, N2, D] for BSND)
// addressed through block_table with plain per-batch kv lengths. Each query row attends its selected blocks in
// order, stopping at the first -1, cut at the batch's kv length; no mask (sparse_mode 0). Query rows: BSH/BSND
// [B, S1, ...] with plain lengths (default S1); TND [T, N1, D] with prefix-sum lengths (default one token per batch).
extern "C" NOP_API aclnnStatus aclnnNsaSelectedAttentionInferGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* topkIndices,
    const aclTensor* attenMaskOptional, const aclTensor* blockTableOptional, const aclIntArray* actualQSeqLenOptional,
    const aclIntArray* actualKvSeqLenOptional, char* layoutOptional, int64_t numHeads, int64_t numKeyValueHeads,
    int64_t selectBlockSize, int64_t selectBlockCount, int64_t pageBlockSize, double scaleValue, int64_t sparseMode,
    aclTensor* output, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnNsaSelectedAttentionInfer", workspaceSize, executor, [&] {
    const char* op = "aclnnNsaSelectedAttentionInfer";
    const at::Tensor q = requiredTensor(query, "query"), k = requiredTensor(key, "key"), v = requiredTensor(value, "value");
    const at::Tensor topk = requiredTensor(topkIndices, "topk_indices"), table = hostTensor(blockTableOptional);
    at::Tensor out = requiredTensor(output, "output");
    const std::vector<int64_t> q_len = intArray(actualQSeqLenOptional), kv_len = intArray(actualKvSeqLenOptional);
    const std::string layout = layoutOptional == nullptr ? "BSND" : layoutOptional;
    TORCH_CHECK(layout == "BSH" || layout == "BSND" || layout == "TND", op, ": layout must be BSH, BSND or TND");
    TORCH_CHECK(!hostTensor(attenMaskOptional).defined() && sparseMode == 0, op,
                ": atten_mask is reserved (sparse_mode 0, no mask)");
    TORCH_CHECK(isHalfOrFloat(q.scalar_type()) && k.scalar_type() == q.scalar_type() &&
                    v.scalar_type() == q.scalar_type(),
                op, ": query, key and value must share one of float16/bfloat16/float32");
    TORCH_CHECK(numHeads > 0 && numKeyValueHeads > 0 && numHeads % numKeyValueHeads == 0, op,
                ": head_num must be a positive multiple of key_value_head_num");
    TORCH_CHECK(selectBlockSize > 0 && selectBlockCount > 0, op, ": select block size / count must be positive");
    TORCH_CHECK(table.defined() && table.dim() == 2, op, ": block_table (2-D) is required for the paged KV cache");
    TORCH_CHECK(k.dim() == (layout == "BSND" ? 4 : 3) && v.dim() == k.dim() && k.size(0) == v.size(0), op,
                ": key/value must be paged [blocks, page_block_size, ...] for layout ", layout);
    TORCH_CHECK(k.size(1) == pageBlockSize && v.size(1) == pageBlockSize, op, ": key/value dim 1 must be page_block_size");
    const int64_t n1 = numHeads, n2 = numKeyValueHeads;
    int64_t d = 0, dv = 0;
    if (layout == "BSND") {
      TORCH_CHECK(q.dim() == 4 && q.size(2) == n1 && k.size(2) == n2 && v.size(2) == n2, op,
                  ": BSND query must be [B, S1, N1, D] and key/value [blocks, page, N2, D]");
      d = q.size(3);
      dv = v.size(3);
      TORCH_CHECK(k.size(3) == d, op, ": query and key head dims differ");
    } else {
      const int64_t hq = layout == "BSH" ? q.size(-1) : q.size(1) * q.size(2);
      TORCH_CHECK(q.dim() == 3 && hq % n1 == 0 && k.size(2) % n2 == 0 && v.size(2) % n2 == 0,
                  op, ": query / key / value hidden sizes must split into head_num / key_value_head_num heads");
      TORCH_CHECK(layout != "TND" || q.size(1) == n1, op, ": TND query must be [T, N1, D]");
      d = hq / n1;
      dv = v.size(2) / n2;
      TORCH_CHECK(k.size(2) / n2 == d, op, ": query and key head dims differ");
    }
    const int64_t batches = table.size(0);
    TORCH_CHECK(static_cast<int64_t>(kv_len.size()) == batches, op,
                ": actual_seq_kvlen must hold one kv length per block_table row (", batches, ")");
    // Query rows as [R, N1, D] with their batch; BSH/BSND rows are b*S1 + s.
    const bool tnd = layout == "TND";
    const at::Tensor q_rows = tnd ? q : q.reshape({q.size(0) * q.size(1), n1, d});
    std::vector<std::pair<int64_t, int64_t>> rows;  // (row, batch)
    if (tnd) {
      std::vector<int64_t> prefix = q_len;
      if (prefix.empty()) {
        for (int64_t b = 1; b <= batches; ++b) prefix.push_back(b);
      }
      TORCH_CHECK(static_cast<int64_t>(prefix.size()) == batches, op, ": actual_seq_qlen needs one entry per batch");
      for (const RowSpan& span : packedSpans(op, q.size(0), prefix, "actual_seq_qlen")) {
        for (int64_t i = 0; i < span.length; ++i) rows.emplace_back(span.start + i, span.batch);
      }
    } else {
      TORCH_CHECK(q.size(0) == batches, op, ": query batch must equal block_table rows");
      for (int64_t b = 0; b < batches; ++b) {
        const int64_t length = q_len.empty() ? q.size(1) : q_len[b];
        TORCH_CHECK(length >= 0 && length <= q.size(1), op, ": actual_seq_qlen[", b, "] is outside [0, S1]");
        for (int64_t s = 0; s < length; ++s) rows.emplace_back(b * q.size(1) + s, b);
      }
    }
    TORCH_CHECK(topk.scalar_type() == at::kInt || topk.scalar_type() == at::kLong, op, ": topk_indices must be int32");
    TORCH_CHECK(topk.dim() >= 2 && topk.size(-1) == selectBlockCount && topk.size(-2) == n2 &&
                    topk.numel() == q_rows.size(0) * n2 * selectBlockCount,
                op, ": topk_indices must be [query rows, N2, select_block_count]");
    TORCH_CHECK(out.numel() == q_rows.size(0) * n1 * dv, op, ": output must hold [query rows, N1, Dv]");
    const double scale = scaleValue;
    const int64_t size = selectBlockSize, page = pageBlockSize;
    return Prepared{{q, k, v, topk, table},
                    [=]() mutable {
                      const int64_t group = n1 / n2;
                      const at::Tensor qf = q_rows.to(at::kFloat);
                      const at::Tensor k4 = k.reshape({k.size(0), page, n2, d}).to(at::kFloat);
                      const at::Tensor v4 = v.reshape({v.size(0), page, n2, dv}).to(at::kFloat);
                      const at::Tensor idx = topk.reshape({-1, n2, selectBlockCount}).to(at::kLong).contiguous();
                      at::Tensor result = at::zeros({q_rows.size(0), n1, dv}, at::kFloat);
                      std::vector<at::Tensor> k_batch(batches), v_batch(batches);
                      for (int64_t b = 0; b < batches; ++b) {
                        const int64_t blocks = (kv_len[b] + page - 1) / page;
                        TORCH_CHECK(kv_len[b] >= 0 && blocks <= table.size(1), op, ": block_table row ", b,
                                    " is too short for ", kv_len[b], " tokens");
                        const at::Tensor ids = table.select(0, b).narrow(0, 0, blocks).to(at::kLong);
                        k_batch[b] = k4.index_select(0, ids).reshape({blocks * page, n2, d}).narrow(0, 0, kv_len[b]);
                        v_batch[b] = v4.index_select(0, ids).reshape({blocks * page, n2, dv}).narrow(0, 0, kv_len[b]);
                      }
                      for (const auto& [row, b] : rows) {
                        for (int64_t h = 0; h < n2; ++h) {
                          std::vector<int64_t> positions;
                          for (int64_t block : indexValues(idx.select(0, row).select(0, h))) {
                            if (block < 0) break;  // valid ids come first
                            for (int64_t p = block * size; p < std::min((block + 1) * size, kv_len[b]); ++p) {
                              positions.push_back(p);
                            }
                          }
                          if (positions.empty()) continue;
                          const at::Tensor pos = at::tensor(positions, at::kLong);
                          const at::Tensor scores = at::matmul(qf.select(0, row).narrow(0, h * group, group),
                                                               k_batch[b].index_select(0, pos).select(1, h).t()) * scale;
                          result.select(0, row).narrow(0, h * group, group)
                              .copy_(maskedSoftmaxAttend(scores, v_batch[b].index_select(0, pos).select(1, h), nullptr));
                        }
                      }
                      out.copy_(result.view(out.sizes()));
                    },
                    {out}};
  });
}
NPU_ATEN_OP(NsaSelectedAttentionInfer,
            "query, key, value, topkIndices, attenMaskOptional, blockTableOptional, actualQSeqLenOptional, "
            "actualKvSeqLenOptional, layoutOptional, numHeads, numKeyValueHeads, selectBlockSize, selectBlockCount, "
            "pageBlockSize, scaleValue, sparseMode, output");

// ---------------------------------------------------------------- ChunkGatedDeltaRule
// The chunked gated delta rule gives exactly the token-by-token recurrence, which is what runs here: for each
// sequence b (plain lengths, packed in T) and value head h (key head h / (Nv / Nk)), S = initialState[b, h]
// (Dv x Dk, float32 along the sequence), then per token t: S = e^g[t] S; S += beta[t] (v_t - S k_t) k_t^T;
// out_t = S (scale q_t). finalState[b] = S in finalState's dtype.
extern "C" NOP_API aclnnStatus aclnnChunkGatedDeltaRuleGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* beta,
    const aclTensor* initialState, const aclTensor* actualSeqLengths, float scale, const aclTensor* gOptional,
    aclTensor* out, aclTensor* finalState, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnChunkGatedDeltaRule", workspaceSize, executor, [&] {
    const char* op = "aclnnChunkGatedDeltaRule";
    const at::Tensor q = requiredTensor(query, "query"), k = requiredTensor(key, "key"), v = requiredTensor(value, "value");
    const at::Tensor b = requiredTensor(beta, "beta"), s0 = requiredTensor(initialState, "initial_state");
    const at::Tensor lengths = requiredTensor(actualSeqLengths, "actual_seq_lengths"), g = hostTensor(gOptional);
    at::Tensor o = requiredTensor(out, "out"), s_out = requiredTensor(finalState, "final_state");
    TORCH_CHECK(q.dim() == 3 && k.sizes() == q.sizes() && v.dim() == 3 && v.size(0) == q.size(0), op,
                ": query/key must be (T, Nk, Dk) and value (T, Nv, Dv)");
    const int64_t tokens = q.size(0), nk = q.size(1), dk = q.size(2), nv = v.size(1), dv = v.size(2);
    TORCH_CHECK(nk > 0 && nv % nk == 0, op, ": Nv must be a multiple of Nk");
    TORCH_CHECK(b.sizes() == at::IntArrayRef({tokens, nv}), op, ": beta must be (T, Nv)");
    TORCH_CHECK(!g.defined() || g.sizes() == at::IntArrayRef({tokens, nv}), op, ": g must be (T, Nv)");
    TORCH_CHECK(s0.dim() == 4 && s0.size(1) == nv && s0.size(2) == dv && s0.size(3) == dk, op,
                ": initial_state must be (B, Nv, Dv, Dk)");
    TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == s0.size(0), op,
                ": actual_seq_lengths must hold one length per initial_state batch");
    TORCH_CHECK(o.sizes() == v.sizes() && s_out.sizes() == s0.sizes(), op,
                ": out must be (T, Nv, Dv) and final_state shaped like initial_state");
    return Prepared{{q, k, v, b, s0, lengths, g},
                    [=]() mutable {
                      const std::vector<int64_t> lens = indexValues(lengths);
                      int64_t total = 0;
                      for (int64_t l : lens) {
                        TORCH_CHECK(l >= 0, op, ": actual_seq_lengths must be non-negative");
                        total += l;
                      }
                      TORCH_CHECK(total <= tokens, op, ": actual_seq_lengths sum to ", total, " > T=", tokens);
                      const int64_t group = nv / nk;
                      // [T, Nv, Dk] views of q / k per value head.
                      const at::Tensor qf = q.to(at::kFloat).repeat_interleave(group, 1) * static_cast<double>(scale);
                      const at::Tensor kf = k.to(at::kFloat).repeat_interleave(group, 1);
                      const at::Tensor vf = v.to(at::kFloat), bf = b.to(at::kFloat);
                      const at::Tensor decay = g.defined() ? g.to(at::kFloat).exp() : at::Tensor();
                      at::Tensor result = at::zeros({tokens, nv, dv}, at::kFloat);
                      at::Tensor states = s0.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);  // never alias the input
                      int64_t start = 0;
                      for (size_t seq = 0; seq < lens.size(); ++seq) {
                        at::Tensor S = states.select(0, static_cast<int64_t>(seq)).clone();  // [Nv, Dv, Dk]
                        for (int64_t t = start; t < start + lens[seq]; ++t) {
                          if (decay.defined()) {
                            S.mul_(decay.select(0, t).view({nv, 1, 1}));
                          }
                          const at::Tensor kt = kf.select(0, t);                        // [Nv, Dk]
                          const at::Tensor predicted = at::matmul(S, kt.unsqueeze(-1)).squeeze(-1);  // [Nv, Dv]
                          const at::Tensor delta = (vf.select(0, t) - predicted) * bf.select(0, t).unsqueeze(-1);
                          S.add_(delta.unsqueeze(-1) * kt.unsqueeze(1));
                          result.select(0, t).copy_(at::matmul(S, qf.select(0, t).unsqueeze(-1)).squeeze(-1));
                        }
                        states.select(0, static_cast<int64_t>(seq)).copy_(S);
                        start += lens[seq];
                      }
                      o.copy_(result);
                      s_out.copy_(states);
                    },
                    {o, s_out}};
  });
}
NPU_ATEN_OP(ChunkGatedDeltaRule,
            "query, key, value, beta, initialState, actualSeqLengths, scale, gOptional, out, finalState");

// ---------------------------------------------------------------- NsaCompressAttention
namespace {

// [s2, sel] weights turning compressed-token probabilities into select-block importance: with m = select / stride
// and n = compress / stride, select block d collects the compressed tokens m(d+1) - j, j in [0, m+n-1), weighted by
// how many of that token's n stride pieces overlap the block: min(j + 1, n) on the rising half, min(m+n-1-j, n) after.
at::Tensor importanceWeights(int64_t s2, int64_t sel, int64_t m, int64_t n) {
  std::vector<float> w(static_cast<size_t>(s2 * sel), 0.0f);
  const int64_t inner = m + n - 1;
  for (int64_t d = 0; d < sel; ++d) {
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t pos = m * (d + 1) - j;
      if (pos < 0 || pos >= s2) {
        continue;
      }
      const int64_t times = std::min<int64_t>(2 * j < inner ? j + 1 : inner - j, n);
      w[static_cast<size_t>(pos * sel + d)] += static_cast<float>(times);
    }
  }
  return at::tensor(w, at::kFloat).view({s2, sel});
}

}  // namespace

// Per sample (prefix-sum lengths): out = softmax(scale q k_cmp^T, atten_mask) v_cmp over the compressed keys
// (atten_mask [S1, S2cmp], 1 = hidden, read from its top-left corner; sparse_mode 1), softmax_max / softmax_sum as the
// TND flash-attention statistics ([T, N1, 8] shaped, N-major in memory, so npu_fusion_attention_grad can read them),
// and topk_indices [T, N2, select_block_count]: the select blocks with the highest importance (probabilities mapped
// by importanceWeights, summed over the query heads of each key head; topk_mask 1 forces a block first), ties to the
// lower block, -1 past the sample's select-block count.
extern "C" NOP_API aclnnStatus aclnnNsaCompressAttentionGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* attenMaskOptional,
    const aclTensor* topkMaskOptional, const aclIntArray* actualSeqQLen, const aclIntArray* actualCmpSeqKvLen,
    const aclIntArray* actualSelSeqKvLen, double scaleValue, int64_t headNum, char* inputLayout, int64_t sparseMode,
    int64_t compressBlockSize, int64_t compressStride, int64_t selectBlockSize, int64_t selectBlockCount,
    aclTensor* softmaxMaxOut, aclTensor* softmaxSumOut, aclTensor* attentionOutOut, aclTensor* topkIndicesOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnNsaCompressAttention", workspaceSize, executor, [&] {
    const char* op = "aclnnNsaCompressAttention";
    const at::Tensor q = requiredTensor(query, "query"), k = requiredTensor(key, "key"), v = requiredTensor(value, "value");
    const at::Tensor mask = hostTensor(attenMaskOptional), topk_mask = hostTensor(topkMaskOptional);
    const std::vector<int64_t> q_prefix = intArray(actualSeqQLen), cmp_prefix = intArray(actualCmpSeqKvLen);
    const std::vector<int64_t> sel_prefix = intArray(actualSelSeqKvLen);
    at::Tensor max8 = requiredTensor(softmaxMaxOut, "softmax_max"), sum8 = requiredTensor(softmaxSumOut, "softmax_sum");
    at::Tensor out = requiredTensor(attentionOutOut, "attention_out"), topk = requiredTensor(topkIndicesOut, "topk_indices");
    const std::string layout = inputLayout == nullptr ? "TND" : inputLayout;
    TORCH_CHECK(layout == "TND", op, ": only layout TND is supported");
    TORCH_CHECK(sparseMode == 0 || sparseMode == 1, op, ": sparse_mode must be 0 (no mask) or 1 (atten_mask given)");
    TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3 && v.size(0) == k.size(0) && v.size(1) == k.size(1), op,
                ": query/key/value must be TND with value [T2, N2, Dv]");
    TORCH_CHECK(isHalfOrFloat(q.scalar_type()) && k.scalar_type() == q.scalar_type() &&
                    v.scalar_type() == q.scalar_type(),
                op, ": query, key and value must share one of float16/bfloat16/float32");
    const int64_t n1 = q.size(1), n2 = k.size(1);
    TORCH_CHECK(n1 == headNum && n2 > 0 && n1 % n2 == 0 && k.size(2) == q.size(2), op,
                ": head_num must equal query's N, a multiple of key's N, with equal head dims");
    TORCH_CHECK(compressStride > 0 && compressBlockSize % compressStride == 0 && selectBlockSize % compressStride == 0,
                op, ": compress_block_size and select_block_size must be multiples of compress_stride");
    TORCH_CHECK(selectBlockCount > 0, op, ": select_block_count must be positive");
    TORCH_CHECK(!q_prefix.empty() && q_prefix.size() == cmp_prefix.size() && q_prefix.size() == sel_prefix.size(), op,
                ": actual_seq_qlen, actual_cmp_seq_kvlen and actual_sel_seq_kvlen need one prefix sum per sample");
    TORCH_CHECK(out.sizes() == at::IntArrayRef({q.size(0), n1, v.size(2)}) &&
                    topk.sizes() == at::IntArrayRef({q.size(0), n2, selectBlockCount}) &&
                    max8.dim() == 3 && max8.size(0) == q.size(0) && max8.size(1) == n1 && sum8.sizes() == max8.sizes(),
                op, ": outputs must be attention_out [T, N1, Dv], topk_indices [T, N2, count], stats [T, N1, 8]");
    const double scale = scaleValue;
    const int64_t m = selectBlockSize / compressStride, n = compressBlockSize / compressStride;
    const int64_t count = selectBlockCount;
    const bool use_mask = mask.defined() && sparseMode == 1;
    return Prepared{{q, k, v, mask, topk_mask},
                    [=]() mutable {
                      const std::vector<RowSpan> q_spans = packedSpans(op, q.size(0), q_prefix, "actual_seq_qlen");
                      const std::vector<RowSpan> k_spans = packedSpans(op, k.size(0), cmp_prefix, "actual_cmp_seq_kvlen");
                      const std::vector<RowSpan> sel_spans = packedSpans(op, std::numeric_limits<int64_t>::max(), sel_prefix, "actual_sel_seq_kvlen");
                      const int64_t group = n1 / n2, t1 = q.size(0), lanes = max8.size(2);
                      at::Tensor result = at::zeros({t1, n1, v.size(2)}, at::kFloat);
                      at::Tensor stat_max = at::full({n1, t1}, kNegInf, at::kFloat), stat_sum = at::zeros({n1, t1}, at::kFloat);
                      at::Tensor picks = at::full({t1, n2, count}, -1, at::kLong);
                      for (size_t b = 0; b < q_spans.size(); ++b) {
                        const int64_t s1 = q_spans[b].length, s2 = k_spans[b].length, sel = sel_spans[b].length;
                        if (s1 == 0) continue;
                        const at::Tensor qb = q.narrow(0, q_spans[b].start, s1).to(at::kFloat).transpose(0, 1);  // [N1,s1,D]
                        const at::Tensor kb = k.narrow(0, k_spans[b].start, s2).to(at::kFloat).transpose(0, 1)
                                                  .repeat_interleave(group, 0);  // [N1, s2, D]
                        const at::Tensor vb = v.narrow(0, k_spans[b].start, s2).to(at::kFloat).transpose(0, 1)
                                                  .repeat_interleave(group, 0);
                        at::Tensor scores = at::matmul(qb, kb.transpose(1, 2)) * scale;  // [N1, s1, s2]
                        if (use_mask) {
                          TORCH_CHECK(mask.dim() == 2 && mask.size(0) >= s1 && mask.size(1) >= s2, op,
                                      ": atten_mask must be [S1, S2cmp] covering every sample");
                          scores.masked_fill_(mask.narrow(0, 0, s1).narrow(1, 0, s2).ne(0).unsqueeze(0), kNegInf);
                        }
                        const at::Tensor row_max = s2 > 0 ? std::get<0>(scores.max(-1, true))
                                                          : at::full({n1, s1, 1}, kNegInf, at::kFloat);
                        const at::Tensor safe = row_max.masked_fill(row_max.isinf(), 0.0f);
                        const at::Tensor weights = (scores - safe).exp();
                        const at::Tensor total = weights.sum(-1, true);
                        const at::Tensor probs = weights / total.masked_fill(total == 0, 1.0f);
                        result.narrow(0, q_spans[b].start, s1).copy_(at::matmul(probs, vb).transpose(0, 1));
                        stat_max.narrow(1, q_spans[b].start, s1).copy_(row_max.squeeze(-1));
                        stat_sum.narrow(1, q_spans[b].start, s1).copy_(total.squeeze(-1));
                        if (sel == 0) continue;
                        at::Tensor importance = at::matmul(probs, importanceWeights(s2, sel, m, n));  // [N1, s1, sel]
                        importance = importance.view({n2, group, s1, sel}).sum(1);            // [N2, s1, sel]
                        if (topk_mask.defined()) {
                          TORCH_CHECK(topk_mask.dim() == 2 && topk_mask.size(0) >= s1 && topk_mask.size(1) >= sel, op,
                                      ": topk_mask must be [S1, S2sel] covering every sample");
                          importance.masked_fill_(topk_mask.narrow(0, 0, s1).narrow(1, 0, sel).ne(0).unsqueeze(0),
                                                  23333.0f);  // forced blocks outrank any probability mass
                        }
                        const at::Tensor order = std::get<1>(importance.sort(/*stable=*/true, -1, /*descending=*/true));
                        const int64_t keep = std::min(count, sel);
                        picks.narrow(0, q_spans[b].start, s1).narrow(2, 0, keep)
                            .copy_(order.narrow(-1, 0, keep).permute({1, 0, 2}));
                      }
                      out.copy_(result);
                      topk.copy_(picks);
                      // N-major statistics: element (n, t, lane) at (n * T + t) * lanes.
                      max8.view({n1, t1, lanes}).copy_(stat_max.unsqueeze(-1).expand({n1, t1, lanes}));
                      sum8.view({n1, t1, lanes}).copy_(stat_sum.unsqueeze(-1).expand({n1, t1, lanes}));
                    },
                    {max8, sum8, out, topk}};
  });
}
NPU_ATEN_OP(NsaCompressAttention,
            "query, key, value, attenMaskOptional, topkMaskOptional, actualSeqQLen, actualCmpSeqKvLen, "
            "actualSelSeqKvLen, scaleValue, headNum, inputLayout, sparseMode, compressBlockSize, compressStride, "
            "selectBlockSize, selectBlockCount, softmaxMaxOut, softmaxSumOut, attentionOutOut, topkIndicesOut");
