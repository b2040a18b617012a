// SparseAttentionOps.cpp - DeepSeek sparse attention device ops: LightningIndexer (top-k key selection) and
// SparseFlashAttention(V2) (softmax attention restricted to selected key blocks), written as plain per-batch
// ATen CPU math over BSND / TND / PA_BSND layouts.
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/full.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/tensor.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<int64_t> hostInts(const at::Tensor& t) {
  std::vector<int64_t> values;
  if (!t.defined()) {
    return values;
  }
  at::Tensor flat = t.to(at::kLong).contiguous().view(-1);
  const int64_t* data = flat.data_ptr<int64_t>();
  values.assign(data, data + flat.numel());
  return values;
}

// Where one batch's query rows live: BSND rows are [b, 0:length], TND rows are [start, start+length).
struct QuerySpan {
  int64_t batch;
  int64_t start;
  int64_t length;
};

// Resolves the per-batch query spans. TND takes prefix sums (required); BSND takes plain lengths (optional).
std::vector<QuerySpan> querySpans(const char* op, const at::Tensor& query, const std::string& layout,
                                  const at::Tensor& actual_q) {
  std::vector<QuerySpan> spans;
  const std::vector<int64_t> lengths = hostInts(actual_q);
  if (layout == "TND") {
    TORCH_CHECK(!lengths.empty(), op, ": actual_seq_lengths_query is required when layout_query is TND");
    int64_t previous = 0;
    for (size_t b = 0; b < lengths.size(); ++b) {
      TORCH_CHECK(lengths[b] >= previous && lengths[b] <= query.size(0), op,
                  ": actual_seq_lengths_query must be a non-decreasing prefix sum within T=", query.size(0));
      spans.push_back({static_cast<int64_t>(b), previous, lengths[b] - previous});
      previous = lengths[b];
    }
    return spans;
  }
  TORCH_CHECK(lengths.empty() || static_cast<int64_t>(lengths.size()) >= query.size(0), op,
              ": actual_seq_lengths_query must hold one length per batch (", query.size(0), ")");
  for (int64_t b = 0; b < query.size(0); ++b) {
    const int64_t length = lengths.empty() ? query.size(1) : lengths[b];
    TORCH_CHECK(length >= 0 && length <= query.size(1), op, ": actual_seq_lengths_query[", b, "]=", length,
                " is outside [0, ", query.size(1), "]");
    spans.push_back({b, 0, length});
  }
  return spans;
}

// The query rows of one batch as [length, N, D] (a view, written through for outputs shaped like query).
at::Tensor queryRows(const at::Tensor& t, const std::string& layout, const QuerySpan& span) {
  if (layout == "TND") {
    return t.narrow(0, span.start, span.length);
  }
  return t.select(0, span.batch).narrow(0, 0, span.length);
}

// The valid key/value tokens of batch b as [length, N2, D] for BSND, TND (prefix sums) and PA_BSND (paged).
at::Tensor keyRows(const char* op, const at::Tensor& kv, const std::string& layout, const std::vector<int64_t>& lengths,
                   const at::Tensor& block_table, int64_t b) {
  if (layout == "TND") {
    TORCH_CHECK(static_cast<int64_t>(lengths.size()) > b, op, ": key lengths are required for a TND key");
    const int64_t start = b == 0 ? 0 : lengths[b - 1];
    TORCH_CHECK(lengths[b] >= start && lengths[b] <= kv.size(0), op, ": key lengths must be a prefix sum within T");
    return kv.narrow(0, start, lengths[b] - start);
  }
  if (layout == "PA_BSND") {
    TORCH_CHECK(static_cast<int64_t>(lengths.size()) > b, op, ": key lengths are required for a PA_BSND key");
    TORCH_CHECK(block_table.defined() && block_table.dim() == 2 && block_table.size(0) > b, op,
                ": PA_BSND needs a 2-D block_table with one row per batch");
    const int64_t block_size = kv.size(1);
    const int64_t blocks = (lengths[b] + block_size - 1) / block_size;
    TORCH_CHECK(blocks <= block_table.size(1), op, ": block_table row ", b, " holds ", block_table.size(1),
                " blocks, ", blocks, " are needed");
    const at::Tensor ids = block_table.select(0, b).narrow(0, 0, blocks).to(at::kLong);
    const at::Tensor gathered = kv.index_select(0, ids).reshape({blocks * block_size, kv.size(2), kv.size(3)});
    return gathered.narrow(0, 0, lengths[b]);
  }
  const int64_t length = lengths.empty() ? kv.size(1) : lengths[b];
  TORCH_CHECK(length >= 0 && length <= kv.size(1), op, ": key length ", length, " is outside [0, ", kv.size(1), "]");
  return kv.select(0, b).narrow(0, 0, length);
}

// Which key j each query row i may see: sparse_mode 3 is the causal mask anchored at the bottom-right corner
// (j <= i + skv - sq); sparse_mode 0 is a band of pre_tokens before and next_tokens after the diagonal.
at::Tensor visibleMask(int64_t sq, int64_t skv, int64_t sparse_mode, int64_t pre_tokens, int64_t next_tokens) {
  const at::Tensor i = at::arange(sq, at::kLong).unsqueeze(1);
  const at::Tensor j = at::arange(skv, at::kLong).unsqueeze(0);
  const at::Tensor offset = j - i;
  if (sparse_mode == 3) {
    return offset <= (skv - sq);
  }
  // Clamping keeps the defaults (INT64_MAX) from overflowing while meaning "no limit".
  const int64_t limit = sq + skv;
  const int64_t before = std::min(pre_tokens, limit);
  const int64_t after = std::min(next_tokens, limit);
  return (offset <= after).logical_and(offset >= -before);
}

void checkLayout(const char* op, const std::string& layout, bool allow_paged, const char* what) {
  const bool known = layout == "BSND" || layout == "TND" || (allow_paged && layout == "PA_BSND");
  TORCH_CHECK(known, op, ": ", what, " must be BSND, TND", allow_paged ? " or PA_BSND" : "", ", got ", layout);
}

}  // namespace

// ---------------------------------------------------------------- LightningIndexer / QuantLightningIndexer
namespace {

struct IndexerArgs {
  at::Tensor q, k, w, act_q, act_k, table;  // q and k may be pre-scaled float (quantized variant)
  std::string q_layout, k_layout;
  int64_t sparse_count, sparse_mode, pre_tokens, next_tokens;
  at::Tensor indices_out, values_out;  // values_out undefined or empty: not requested
};

// Validation shared by both indexers (query/key ranks, heads, weights shape, layouts, mode, count).
void checkIndexerArgs(const char* op, const IndexerArgs& a) {
  checkLayout(op, a.q_layout, false, "layout_query");
  checkLayout(op, a.k_layout, true, "layout_key");
  TORCH_CHECK(a.q.dim() == (a.q_layout == "TND" ? 3 : 4), op, ": query rank does not match ", a.q_layout);
  TORCH_CHECK(a.k.dim() == (a.k_layout == "TND" ? 3 : 4), op, ": key rank does not match ", a.k_layout);
  TORCH_CHECK(a.sparse_mode == 0 || a.sparse_mode == 3, op, ": sparse_mode must be 0 or 3, got ", a.sparse_mode);
  TORCH_CHECK(a.sparse_count > 0, op, ": sparse_count must be positive, got ", a.sparse_count);
  const int64_t heads = a.q.size(-2), kv_heads = a.k.size(-2);
  TORCH_CHECK(a.k.size(-1) == a.q.size(-1), op, ": query and key head dims differ (", a.q.size(-1), " vs ",
              a.k.size(-1), ")");
  TORCH_CHECK(kv_heads > 0 && heads % kv_heads == 0, op, ": query heads (", heads,
              ") must be a multiple of key heads (", kv_heads, ")");
  TORCH_CHECK(a.w.dim() == a.q.dim() - 1 && a.w.size(-1) == heads, op,
              ": weights must be query's shape without D, got ", a.w.sizes());
  TORCH_CHECK(a.k_layout != "PA_BSND" || a.table.defined(), op, ": PA_BSND needs block_table");
}

// score[i, j] = sum_h weights[i, h] * relu(q[i, h] . k[j]) over the query heads h of each key head; the
// sparse_count highest visible keys per row are returned (descending), padded with -1 (values: -inf).
void runLightningIndexer(const char* op, IndexerArgs a) {
  // Sequence lengths are device data: read them when the kernel runs, not at enqueue time.
  const std::vector<QuerySpan> spans = querySpans(op, a.q, a.q_layout, a.act_q);
  const std::vector<int64_t> key_lengths = hostInts(a.act_k);
  const int64_t heads = a.q.size(-2), kv_heads = a.k.size(-2), group = heads / kv_heads;
  const bool with_values = a.values_out.defined() && a.values_out.numel() > 0;
  a.indices_out.fill_(-1);
  if (with_values) {
    a.values_out.fill_(kNegInf);
  }
  for (const QuerySpan& span : spans) {
    const at::Tensor q_rows = queryRows(a.q, a.q_layout, span).to(at::kFloat);  // [sq, N1, D]
    const at::Tensor w_rows = queryRows(a.w, a.q_layout, span).to(at::kFloat);  // [sq, N1]
    const at::Tensor k_rows = keyRows(op, a.k, a.k_layout, key_lengths, a.table, span.batch).to(at::kFloat);
    const int64_t sq = q_rows.size(0), skv = k_rows.size(0);
    if (sq == 0 || skv == 0) {
      continue;
    }
    const at::Tensor visible = visibleMask(sq, skv, a.sparse_mode, a.pre_tokens, a.next_tokens);
    const at::Tensor visible_count = visible.sum(-1, /*keepdim=*/true);  // [sq, 1]
    const int64_t keep = std::min(a.sparse_count, skv);
    at::Tensor idx_rows = queryRows(a.indices_out, a.q_layout, span);  // [sq, N2, sparse_count]
    for (int64_t h = 0; h < kv_heads; ++h) {
      // [g, sq, D] @ [D, skv] -> [g, sq, skv], weighted per head and summed over the group.
      const at::Tensor qh = q_rows.narrow(1, h * group, group).transpose(0, 1);
      const at::Tensor wh = w_rows.narrow(1, h * group, group).transpose(0, 1).unsqueeze(-1);
      const at::Tensor kh = k_rows.select(1, h).transpose(0, 1);
      at::Tensor score = (at::relu(at::matmul(qh, kh)) * wh).sum(0);  // [sq, skv]
      score.masked_fill_(visible.logical_not(), kNegInf);
      auto [sorted, order] = score.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true);
      const at::Tensor position = at::arange(keep, at::kLong).unsqueeze(0);
      const at::Tensor invalid = position >= visible_count;  // masked keys are not selections
      idx_rows.select(1, h).narrow(-1, 0, keep).copy_(order.narrow(-1, 0, keep).masked_fill(invalid, -1));
      if (with_values) {
        const at::Tensor top_values = sorted.narrow(-1, 0, keep).masked_fill(invalid, kNegInf);
        queryRows(a.values_out, a.q_layout, span).select(1, h).narrow(-1, 0, keep).copy_(top_values);
      }
    }
  }
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnLightningIndexerGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* weights, const aclTensor* actualSeqLengthsQuery,
    const aclTensor* actualSeqLengthsKey, const aclTensor* blockTable, char* layoutQuery, char* layoutKey,
    int64_t sparseCount, int64_t sparseMode, int64_t preTokens, int64_t nextTokens, bool returnValue,
    aclTensor* sparseIndicesOut, aclTensor* sparseValuesOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnLightningIndexer", workspaceSize, executor, [&] {
    const char* op = "aclnnLightningIndexer";
    IndexerArgs a;
    a.q = requiredTensor(query, "query");
    a.k = requiredTensor(key, "key");
    a.w = requiredTensor(weights, "weights");
    a.act_q = hostTensor(actualSeqLengthsQuery);
    a.act_k = hostTensor(actualSeqLengthsKey);
    a.table = hostTensor(blockTable);
    a.q_layout = layoutQuery == nullptr ? "BSND" : layoutQuery;
    a.k_layout = layoutKey == nullptr ? "BSND" : layoutKey;
    a.sparse_count = sparseCount;
    a.sparse_mode = sparseMode;
    a.pre_tokens = preTokens;
    a.next_tokens = nextTokens;
    a.indices_out = requiredTensor(sparseIndicesOut, "sparse_indices");
    a.values_out = returnValue ? hostTensor(sparseValuesOut) : at::Tensor();
    checkIndexerArgs(op, a);
    return Prepared{{a.q, a.k, a.w, a.act_q, a.act_k, a.table},
                    [=]() { runLightningIndexer(op, a); },
                    {a.indices_out, a.values_out}};
  });
}
NPU_ATEN_OP(LightningIndexer,
            "query, key, weights, actualSeqLengthsQuery, actualSeqLengthsKey, blockTable, layoutQuery, layoutKey, "
            "sparseCount, sparseMode, preTokens, nextTokens, returnValue, sparseIndicesOut, sparseValuesOut");

// The quantized indexer: relu((scale_q * scale_k) * (q_int8 . k_int8)) equals relu((scale_q q) . (scale_k k)), so
// the int8 operands are dequantized per token/head and the float indexer above does the rest.
extern "C" NOP_API aclnnStatus aclnnQuantLightningIndexerGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* weights, const aclTensor* queryDequantScale,
    const aclTensor* keyDequantScale, const aclTensor* actualSeqLengthsQuery, const aclTensor* actualSeqLengthsKey,
    const aclTensor* blockTable, int64_t queryQuantMode, int64_t keyQuantMode, char* layoutQuery, char* layoutKey,
    int64_t sparseCount, int64_t sparseMode, int64_t preTokens, int64_t nextTokens, aclTensor* sparseIndicesOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnQuantLightningIndexer", workspaceSize, executor, [&] {
    const char* op = "aclnnQuantLightningIndexer";
    IndexerArgs a;
    a.q = requiredTensor(query, "query");
    a.k = requiredTensor(key, "key");
    a.w = requiredTensor(weights, "weights");
    const at::Tensor q_scale = requiredTensor(queryDequantScale, "query_dequant_scale");
    const at::Tensor k_scale = requiredTensor(keyDequantScale, "key_dequant_scale");
    a.act_q = hostTensor(actualSeqLengthsQuery);
    a.act_k = hostTensor(actualSeqLengthsKey);
    a.table = hostTensor(blockTable);
    a.q_layout = layoutQuery == nullptr ? "BSND" : layoutQuery;
    a.k_layout = layoutKey == nullptr ? "BSND" : layoutKey;
    a.sparse_count = sparseCount;
    a.sparse_mode = sparseMode;
    a.pre_tokens = preTokens;
    a.next_tokens = nextTokens;
    a.indices_out = requiredTensor(sparseIndicesOut, "sparse_indices");
    TORCH_CHECK(queryQuantMode == 0 && keyQuantMode == 0, op,
                ": only quant mode 0 (one scale per token and head) is supported, got ", queryQuantMode, "/",
                keyQuantMode);
    TORCH_CHECK(a.q.scalar_type() == at::kChar && a.k.scalar_type() == at::kChar, op,
                ": query and key must be int8, got ", a.q.scalar_type(), "/", a.k.scalar_type());
    checkIndexerArgs(op, a);
    TORCH_CHECK(q_scale.sizes() == a.q.sizes().slice(0, a.q.dim() - 1), op,
                ": query_dequant_scale must be query's shape without D, got ", q_scale.sizes());
    TORCH_CHECK(k_scale.sizes() == a.k.sizes().slice(0, a.k.dim() - 1), op,
                ": key_dequant_scale must be key's shape without D, got ", k_scale.sizes());
    const at::Tensor q_int8 = a.q, k_int8 = a.k;
    return Prepared{{q_int8, k_int8, a.w, q_scale, k_scale, a.act_q, a.act_k, a.table},
                    [=]() mutable {
                      a.q = q_int8.to(at::kFloat) * q_scale.to(at::kFloat).unsqueeze(-1);
                      a.k = k_int8.to(at::kFloat) * k_scale.to(at::kFloat).unsqueeze(-1);
                      runLightningIndexer(op, a);
                    },
                    {a.indices_out}};
  });
}
NPU_ATEN_OP(QuantLightningIndexer,
            "query, key, weights, queryDequantScale, keyDequantScale, actualSeqLengthsQuery, actualSeqLengthsKey, "
            "blockTable, queryQuantMode, keyQuantMode, layoutQuery, layoutKey, sparseCount, sparseMode, preTokens, "
            "nextTokens, sparseIndicesOut");

// ---------------------------------------------------------------- SparseFlashAttention
namespace {

struct SfaArgs {
  at::Tensor q, k, v, indices, table, act_q, act_kv, q_rope, k_rope, sinks;
  double scale;
  int64_t block_size, sparse_mode, pre_tokens, next_tokens;
  std::string q_layout, kv_layout;
  bool return_lse;
  at::Tensor out, softmax_max, softmax_sum;
};

// The selected key positions of one query row: each index b stands for tokens [b*block, (b+1)*block) cut at
// skv; the list ends at the first -1 (valid indices come first) and drops positions the mask hides.
at::Tensor selectedPositions(const at::Tensor& row_indices, int64_t block_size, int64_t skv,
                             const at::Tensor& visible_row) {
  std::vector<int64_t> positions;
  const std::vector<int64_t> blocks = hostInts(row_indices);
  const bool* seen = visible_row.data_ptr<bool>();
  for (int64_t block : blocks) {
    if (block < 0) {
      break;
    }
    for (int64_t p = block * block_size; p < std::min((block + 1) * block_size, skv); ++p) {
      if (seen[p]) {
        positions.push_back(p);
      }
    }
  }
  return at::tensor(positions, at::kLong);
}

// Runs one (batch, kv head, query row): softmax(q k^T * scale [with sink logits]) v over the selected keys.
void attendRow(const SfaArgs& a, const at::Tensor& q_row, const at::Tensor& k_head, const at::Tensor& v_head,
               const at::Tensor& positions, const at::Tensor& sink_logits, at::Tensor out_row, at::Tensor max_row,
               at::Tensor sum_row) {
  const int64_t group = q_row.size(0);
  at::Tensor scores = at::matmul(q_row, k_head.index_select(0, positions).transpose(0, 1)) * a.scale;  // [g, m]
  at::Tensor row_max = scores.numel() > 0 ? std::get<0>(scores.max(-1)) : at::full({group}, kNegInf, at::kFloat);
  if (sink_logits.defined()) {
    row_max = at::maximum(row_max, sink_logits);
  }
  // A row with nothing to attend (no keys, no sink) gives zeros rather than NaN.
  const at::Tensor safe_max = row_max.masked_fill(row_max.isinf(), 0.0f);
  const at::Tensor weights = (scores - safe_max.unsqueeze(-1)).exp();
  at::Tensor total = weights.sum(-1);
  if (sink_logits.defined()) {
    total = total + (sink_logits - safe_max).exp();
  }
  const at::Tensor denominator = total.masked_fill(total == 0, 1.0f).unsqueeze(-1);
  const at::Tensor attended = at::matmul(weights / denominator, v_head.index_select(0, positions));  // [g, Dv]
  out_row.copy_(attended);
  if (max_row.defined()) {
    max_row.copy_(row_max);
    sum_row.copy_(total);
  }
}

void runSparseFlashAttention(const char* op, SfaArgs a) {
  const std::vector<int64_t> kv_lengths = hostInts(a.act_kv);
  const std::vector<QuerySpan> spans = querySpans(op, a.q, a.q_layout, a.act_q);
  const int64_t heads = a.q.size(-2), kv_heads = a.k.size(-2), group = heads / kv_heads;
  const at::Tensor sinks = a.sinks.defined() ? a.sinks.to(at::kFloat) : at::Tensor();
  a.out.zero_();
  const bool lse = a.return_lse && a.softmax_max.numel() > 0;
  for (const QuerySpan& span : spans) {
    at::Tensor q_rows = queryRows(a.q, a.q_layout, span).to(at::kFloat);  // [sq, N1, D]
    at::Tensor k_rows = keyRows(op, a.k, a.kv_layout, kv_lengths, a.table, span.batch).to(at::kFloat);
    const at::Tensor v_rows = keyRows(op, a.v, a.kv_layout, kv_lengths, a.table, span.batch).to(at::kFloat);
    if (a.q_rope.defined()) {  // MLA-absorb: the rope part extends the head dim of both sides
      q_rows = at::cat({q_rows, queryRows(a.q_rope, a.q_layout, span).to(at::kFloat)}, -1);
      k_rows = at::cat({k_rows, keyRows(op, a.k_rope, a.kv_layout, kv_lengths, a.table, span.batch)
                                    .to(at::kFloat)}, -1);
    }
    const int64_t sq = q_rows.size(0), skv = k_rows.size(0);
    if (sq == 0) {
      continue;
    }
    const at::Tensor visible = visibleMask(sq, skv, a.sparse_mode, a.pre_tokens, a.next_tokens).contiguous();
    const at::Tensor idx_rows = queryRows(a.indices, a.q_layout, span);  // [sq, N2, K]
    const at::Tensor out_rows = queryRows(a.out, a.q_layout, span);      // [sq, N1, Dv]
    for (int64_t h = 0; h < kv_heads; ++h) {
      const at::Tensor k_head = k_rows.select(1, h), v_head = v_rows.select(1, h);
      const at::Tensor sink_logits = sinks.defined() ? sinks.narrow(0, h * group, group) : at::Tensor();
      for (int64_t i = 0; i < sq; ++i) {
        const at::Tensor positions =
            selectedPositions(idx_rows.select(0, i).select(0, h), a.block_size, skv, visible.select(0, i));
        at::Tensor out_row = out_rows.select(0, i).narrow(0, h * group, group);
        at::Tensor max_row, sum_row;
        if (lse) {
          // Statistics are [B, N2, S1, G] (BSND) or [N2, T1, G] (TND).
          if (a.q_layout == "TND") {
            max_row = a.softmax_max.select(0, h).select(0, span.start + i);
            sum_row = a.softmax_sum.select(0, h).select(0, span.start + i);
          } else {
            max_row = a.softmax_max.select(0, span.batch).select(0, h).select(0, i);
            sum_row = a.softmax_sum.select(0, span.batch).select(0, h).select(0, i);
          }
        }
        attendRow(a, q_rows.select(0, i).narrow(0, h * group, group), k_head, v_head, positions, sink_logits,
                  out_row, max_row, sum_row);
      }
    }
  }
}

aclnnStatus prepareSparseFlashAttention(const char* op, const aclTensor* query, const aclTensor* key,
                                        const aclTensor* value, const aclTensor* sparseIndices,
                                        const aclTensor* blockTable, const aclTensor* actualSeqLengthsQuery,
                                        const aclTensor* actualSeqLengthsKv, const aclTensor* queryRope,
                                        const aclTensor* keyRope, const aclTensor* sinks, double scaleValue,
                                        int64_t sparseBlockSize, char* layoutQuery, char* layoutKv, int64_t sparseMode,
                                        int64_t preTokens, int64_t nextTokens, int64_t attentionMode,
                                        bool returnSoftmaxLse, aclTensor* attentionOut, aclTensor* softmaxMax,
                                        aclTensor* softmaxSum, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp(op, workspaceSize, executor, [&] {
    SfaArgs a;
    a.q = requiredTensor(query, "query");
    a.k = requiredTensor(key, "key");
    a.v = requiredTensor(value, "value");
    a.indices = requiredTensor(sparseIndices, "sparse_indices");
    a.table = hostTensor(blockTable);
    a.act_q = hostTensor(actualSeqLengthsQuery);
    a.act_kv = hostTensor(actualSeqLengthsKv);
    a.q_rope = hostTensor(queryRope);
    a.k_rope = hostTensor(keyRope);
    a.sinks = hostTensor(sinks);
    a.scale = scaleValue;
    a.block_size = sparseBlockSize;
    a.sparse_mode = sparseMode;
    a.pre_tokens = preTokens;
    a.next_tokens = nextTokens;
    a.q_layout = layoutQuery == nullptr ? "BSND" : layoutQuery;
    a.kv_layout = layoutKv == nullptr ? "BSND" : layoutKv;
    a.return_lse = returnSoftmaxLse;
    a.out = requiredTensor(attentionOut, "attention_out");
    a.softmax_max = hostTensor(softmaxMax);
    a.softmax_sum = hostTensor(softmaxSum);
    checkLayout(op, a.q_layout, false, "layout_query");
    checkLayout(op, a.kv_layout, true, "layout_kv");
    const int64_t q_rank = a.q_layout == "TND" ? 3 : 4;
    TORCH_CHECK(a.q.dim() == q_rank && a.indices.dim() == q_rank, op, ": query and sparse_indices must be ", q_rank,
                "-D for ", a.q_layout);
    TORCH_CHECK(a.k.dim() == (a.kv_layout == "TND" ? 3 : 4) && a.v.dim() == a.k.dim(), op,
                ": key/value rank does not match ", a.kv_layout);
    TORCH_CHECK(sparseMode == 0 || sparseMode == 3, op, ": sparse_mode must be 0 or 3, got ", sparseMode);
    TORCH_CHECK(sparseBlockSize > 0, op, ": sparse_block_size must be positive, got ", sparseBlockSize);
    TORCH_CHECK(attentionMode == 0 || attentionMode == 2, op, ": attention_mode must be 0 or 2, got ", attentionMode);
    TORCH_CHECK(a.q_rope.defined() == a.k_rope.defined(), op, ": query_rope and key_rope go together");
    const int64_t heads = a.q.size(-2), kv_heads = a.k.size(-2);
    TORCH_CHECK(kv_heads > 0 && heads % kv_heads == 0, op, ": query heads (", heads,
                ") must be a multiple of key heads (", kv_heads, ")");
    TORCH_CHECK(a.k.size(-1) == a.q.size(-1), op, ": query and key head dims differ");
    TORCH_CHECK(a.indices.size(-2) == kv_heads, op, ": sparse_indices must have N2=", kv_heads, " heads");
    TORCH_CHECK(a.out.size(-1) == a.v.size(-1), op, ": attention_out head dim must equal value's");
    TORCH_CHECK(!a.sinks.defined() || (a.sinks.dim() == 1 && a.sinks.size(0) == heads), op,
                ": sinks must be [N1=", heads, "]");
    TORCH_CHECK(a.kv_layout != "PA_BSND" || a.table.defined(), op, ": PA_BSND needs block_table");
    return Prepared{{a.q, a.k, a.v, a.indices, a.table, a.act_q, a.act_kv, a.q_rope, a.k_rope, a.sinks},
                    [=]() { runSparseFlashAttention(op, a); },
                    {a.out, a.softmax_max, a.softmax_sum}};
  });
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnSparseFlashAttentionGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* sparseIndices,
    const aclTensor* blockTable, const aclTensor* actualSeqLengthsQuery, const aclTensor* actualSeqLengthsKv,
    const aclTensor* queryRope, const aclTensor* keyRope, double scaleValue, int64_t sparseBlockSize,
    char* layoutQuery, char* layoutKv, int64_t sparseMode, int64_t preTokens, int64_t nextTokens,
    int64_t attentionMode, bool returnSoftmaxLse, aclTensor* attentionOut, aclTensor* softmaxMax,
    aclTensor* softmaxSum, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareSparseFlashAttention("aclnnSparseFlashAttention", query, key, value, sparseIndices, blockTable,
                                     actualSeqLengthsQuery, actualSeqLengthsKv, queryRope, keyRope, nullptr,
                                     scaleValue, sparseBlockSize, layoutQuery, layoutKv, sparseMode, preTokens,
                                     nextTokens, attentionMode, returnSoftmaxLse, attentionOut, softmaxMax,
                                     softmaxSum, workspaceSize, executor);
}
NPU_ATEN_OP(SparseFlashAttention,
            "query, key, value, sparseIndices, blockTable, actualSeqLengthsQuery, actualSeqLengthsKv, queryRope, "
            "keyRope, scaleValue, sparseBlockSize, layoutQuery, layoutKv, sparseMode, preTokens, nextTokens, "
            "attentionMode, returnSoftmaxLse, attentionOut, softmaxMax, softmaxSum");

// V2 adds per-query-head sink logits that join the softmax denominator without attending to any value.
extern "C" NOP_API aclnnStatus aclnnSparseFlashAttentionV2GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* sparseIndices,
    const aclTensor* blockTable, const aclTensor* actualSeqLengthsQuery, const aclTensor* actualSeqLengthsKv,
    const aclTensor* queryRope, const aclTensor* keyRope, const aclTensor* sinks, double scaleValue,
    int64_t sparseBlockSize, char* layoutQuery, char* layoutKv, int64_t sparseMode, int64_t preTokens,
    int64_t nextTokens, int64_t attentionMode, bool returnSoftmaxLse, aclTensor* attentionOut, aclTensor* softmaxMax,
    aclTensor* softmaxSum, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareSparseFlashAttention("aclnnSparseFlashAttentionV2", query, key, value, sparseIndices, blockTable,
                                     actualSeqLengthsQuery, actualSeqLengthsKv, queryRope, keyRope, sinks, scaleValue,
                                     sparseBlockSize, layoutQuery, layoutKv, sparseMode, preTokens, nextTokens,
                                     attentionMode, returnSoftmaxLse, attentionOut, softmaxMax, softmaxSum,
                                     workspaceSize, executor);
}
NPU_ATEN_OP(SparseFlashAttentionV2,
            "query, key, value, sparseIndices, blockTable, actualSeqLengthsQuery, actualSeqLengthsKv, queryRope, "
            "keyRope, sinks, scaleValue, sparseBlockSize, layoutQuery, layoutKv, sparseMode, preTokens, nextTokens, "
            "attentionMode, returnSoftmaxLse, attentionOut, softmaxMax, softmaxSum");

// ---------------------------------------------------------------- GatherV3
// out = input gathered along `dim` by an index of any shape (out shape: input[:dim] + index + input[dim+1:]).
// Only batchDims 0 is used by torch_npu's npu_gather_sparse_index; `mode` picks a kernel variant, not the math.
extern "C" NOP_API aclnnStatus aclnnGatherV3GetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                             const aclTensor* index, int64_t batchDims, int64_t mode,
                                                             aclTensor* out, uint64_t* workspaceSize,
                                                             aclOpExecutor** executor) {
  return prepareOp("aclnnGatherV3", workspaceSize, executor, [&] {
    const char* op = "aclnnGatherV3";
    at::Tensor x = requiredTensor(self, "self"), idx = requiredTensor(index, "index");
    at::Tensor o = requiredTensor(out, "out");
    TORCH_CHECK(batchDims == 0, op, ": only batchDims 0 is supported, got ", batchDims);
    TORCH_CHECK(idx.scalar_type() == at::kInt || idx.scalar_type() == at::kLong, op,
                ": index must be int32 or int64, got ", idx.scalar_type());
    const int64_t axis = x.dim() == 0 ? 0 : (dim < 0 ? dim + x.dim() : dim);
    TORCH_CHECK(x.dim() == 0 || (axis >= 0 && axis < x.dim()), op, ": dim ", dim, " is out of range for ", x.sizes());
    return Prepared{{x, idx},
                    [=]() mutable {
                      if (x.dim() == 0) {
                        o.copy_(x);
                        return;
                      }
                      const at::Tensor flat = idx.to(at::kLong).reshape(-1);
                      const int64_t rows = x.size(axis);
                      TORCH_CHECK(flat.numel() == 0 || (flat.min().item<int64_t>() >= 0 &&
                                                        flat.max().item<int64_t>() < rows),
                                  op, ": index values must be in [0, ", rows - 1, "]");
                      o.copy_(x.index_select(axis, flat).reshape(o.sizes()));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(GatherV3, "self, dim, index, batchDims, mode, out");

// ---------------------------------------------------------------- DenseLightningIndexerSoftmaxLse
// The softmax statistics of the (unselected) indexer scores: per query row and key head, max over the visible keys
// of score = sum_h weights[h] * relu(q[h] . k) and sum of exp(score - max). Outputs [B, N2, S1] (BSND) or [N2, T1]
// (TND, prefix-sum lengths); rows with no visible key get max -inf and sum 0.
extern "C" NOP_API aclnnStatus aclnnDenseLightningIndexerSoftmaxLseGetWorkspaceSize(
    const aclTensor* queryIndex, const aclTensor* keyIndex, const aclTensor* weights, const aclIntArray* actualSeqQlen,
    const aclIntArray* actualSeqKlen, char* layout, int64_t sparseMode, int64_t preTokens, int64_t nextTokens,
    aclTensor* softmaxMaxOut, aclTensor* softmaxSumOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnDenseLightningIndexerSoftmaxLse", workspaceSize, executor, [&] {
    const char* op = "aclnnDenseLightningIndexerSoftmaxLse";
    IndexerArgs a;
    a.q = requiredTensor(queryIndex, "query_index");
    a.k = requiredTensor(keyIndex, "key_index");
    a.w = requiredTensor(weights, "weights");
    const std::vector<int64_t> q_lengths = intArray(actualSeqQlen), k_lengths = intArray(actualSeqKlen);
    a.q_layout = layout == nullptr ? "BSND" : layout;
    // The lengths are prefix sums that only TND reads; BSND always uses the full S1/S2.
    const bool packed = a.q_layout == "TND";
    a.act_q = packed && !q_lengths.empty() ? at::tensor(q_lengths, at::kLong) : at::Tensor();
    a.act_k = packed && !k_lengths.empty() ? at::tensor(k_lengths, at::kLong) : at::Tensor();
    a.k_layout = a.q_layout;
    a.sparse_count = 1;  // unused: no selection happens here
    a.sparse_mode = sparseMode;
    a.pre_tokens = preTokens;
    a.next_tokens = nextTokens;
    checkIndexerArgs(op, a);
    TORCH_CHECK(a.q_layout != "TND" || (!q_lengths.empty() && !k_lengths.empty()), op,
                ": layout TND needs actual_seq_qlen and actual_seq_klen (prefix sums)");
    at::Tensor max_out = requiredTensor(softmaxMaxOut, "softmax_max");
    at::Tensor sum_out = requiredTensor(softmaxSumOut, "softmax_sum");
    return Prepared{{a.q, a.k, a.w},
                    [=]() mutable {
                      const std::vector<QuerySpan> spans = querySpans(op, a.q, a.q_layout, a.act_q);
                      const std::vector<int64_t> key_lengths = hostInts(a.act_k);
                      const int64_t kv_heads = a.k.size(-2), group = a.q.size(-2) / kv_heads;
                      max_out.fill_(kNegInf);
                      sum_out.zero_();
                      for (const QuerySpan& span : spans) {
                        const at::Tensor q_rows = queryRows(a.q, a.q_layout, span).to(at::kFloat);
                        const at::Tensor w_rows = queryRows(a.w, a.q_layout, span).to(at::kFloat);
                        const at::Tensor k_rows = keyRows(op, a.k, a.k_layout, key_lengths, a.table, span.batch)
                                                      .to(at::kFloat);
                        const int64_t sq = q_rows.size(0), skv = k_rows.size(0);
                        if (sq == 0 || skv == 0) {
                          continue;
                        }
                        const at::Tensor hidden =
                            visibleMask(sq, skv, a.sparse_mode, a.pre_tokens, a.next_tokens).logical_not();
                        for (int64_t h = 0; h < kv_heads; ++h) {
                          const at::Tensor qh = q_rows.narrow(1, h * group, group).transpose(0, 1);
                          const at::Tensor wh = w_rows.narrow(1, h * group, group).transpose(0, 1).unsqueeze(-1);
                          const at::Tensor kh = k_rows.select(1, h).transpose(0, 1);
                          at::Tensor score = (at::relu(at::matmul(qh, kh)) * wh).sum(0);
                          score.masked_fill_(hidden, kNegInf);
                          const at::Tensor row_max = std::get<0>(score.max(-1));  // [sq]
                          const at::Tensor safe_max = row_max.masked_fill(row_max.isinf(), 0.0f);
                          const at::Tensor row_sum = (score - safe_max.unsqueeze(-1)).exp().sum(-1);
                          // [B, N2, S1] rows are (batch, head, 0:sq); [N2, T1] rows are (head, start:start+sq).
                          at::Tensor max_rows = a.q_layout == "TND"
                                                    ? max_out.select(0, h).narrow(0, span.start, sq)
                                                    : max_out.select(0, span.batch).select(0, h).narrow(0, 0, sq);
                          at::Tensor sum_rows = a.q_layout == "TND"
                                                    ? sum_out.select(0, h).narrow(0, span.start, sq)
                                                    : sum_out.select(0, span.batch).select(0, h).narrow(0, 0, sq);
                          max_rows.copy_(row_max);
                          sum_rows.copy_(row_sum);
                        }
                      }
                    },
                    {max_out, sum_out}};
  });
}
NPU_ATEN_OP(DenseLightningIndexerSoftmaxLse,
            "queryIndex, keyIndex, weights, actualSeqQlen, actualSeqKlen, layout, sparseMode, preTokens, nextTokens, "
            "softmaxMaxOut, softmaxSumOut");
