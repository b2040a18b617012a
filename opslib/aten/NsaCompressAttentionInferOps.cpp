// NsaCompressAttentionInferOps.cpp - aclnnNsaCompressAttentionInfer as ATen CPU math: NSA decode-time attention over a
// paged cache of compressed key/value tokens, plus the top-k choice of select blocks for the select-attention stage.
#include <ATen/TensorOperators.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <string>
#include <vector>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

// Small local helper (SparseAttentionMoreOps.cpp keeps its own in an anonymous namespace): a host tensor as int64.
std::vector<int64_t> longValues(const at::Tensor& t) {
  const at::Tensor flat = t.to(at::kLong).contiguous().view(-1);
  return std::vector<int64_t>(flat.const_data_ptr<int64_t>(), flat.const_data_ptr<int64_t>() + flat.numel());
}

// Number of select blocks covering a sequence of `cmp_len` compressed tokens: the uncompressed length it stands for,
// (cmp_len - 1) * stride + compress_block_size, in select_block_size blocks (rounded up).
int64_t selectBlocks(int64_t cmp_len, int64_t compress_block_size, int64_t compress_stride, int64_t select_block_size) {
  return ((cmp_len - 1) * compress_stride + compress_block_size + select_block_size - 1) / select_block_size;
}

// [cmp_len, blocks] weights turning compressed-token probabilities into select-block importance: with
// m = select_block_size / stride and n = compress_block_size / stride (rounded down), select block k collects
// compressed token m (k + 1) - i - j once for every i < m, j < n (so a token counts as often as that pair sum occurs).
at::Tensor selectWeights(int64_t cmp_len, int64_t blocks, int64_t m, int64_t n) {
  std::vector<float> w(static_cast<size_t>(cmp_len * blocks), 0.0f);
  for (int64_t k = 0; k < blocks; ++k) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const int64_t pos = m * (k + 1) - i - j;
        if (pos >= 0 && pos < cmp_len) {
          w[static_cast<size_t>(pos * blocks + k)] += 1.0f;
        }
      }
    }
  }
  return at::tensor(w, at::kFloat).view({cmp_len, blocks});
}

}  // namespace

// One query token per batch b (TND [B, N1, D] or BSND [B, 1, N1, D]); key / value are a paged cache
// [blocks, page_block_size, N2 * D] / [.., N2 * Dv] addressed through blockTable[b], actualCmpKvSeqLen[b] compressed
// tokens long. Query head h reads key head h / (N1 / N2):
//   p = softmax(scale q k^T) (float32), output = p (rounded to the input dtype, as the kernel's P) @ v;
//   importance[N2, blocks] = sum over each key head's query heads of p @ selectWeights;
//   topkIndices[b, h] = [0, blocks - 2, blocks - 1] (always kept), then the other blocks by falling importance
//   (ties to the lower block), selectBlockCount in all.
// atten_mask, topk_mask, actual_seq_qlen and actual_sel_seq_kvlen are reserved (upstream does not support them yet).
extern "C" NOP_API aclnnStatus aclnnNsaCompressAttentionInferGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* attenMaskOptional,
    const aclTensor* blockTableOptional, const aclIntArray* actualQSeqLenOptional,
    const aclIntArray* actualCmpKvSeqLenOptional, const aclIntArray* actualSelKvSeqLenOptional,
    const aclTensor* topkMaskOptional, int64_t numHeads, int64_t numKeyValueHeads, int64_t selectBlockSize,
    int64_t selectBlockCount, int64_t compressBlockSize, int64_t compressStride, double scaleValue,
    char* layoutOptional, int64_t pageBlockSize, int64_t sparseMode, aclTensor* output, aclTensor* topkIndicesOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnNsaCompressAttentionInfer", workspaceSize, executor, [&] {
    const char* op = "aclnnNsaCompressAttentionInfer";
    const at::Tensor q = requiredTensor(query, "query"), k = requiredTensor(key, "key"), v = requiredTensor(value, "value");
    const at::Tensor table = hostTensor(blockTableOptional);
    at::Tensor out = requiredTensor(output, "output"), topk = requiredTensor(topkIndicesOut, "topk_indices");
    const std::vector<int64_t> lens = intArray(actualCmpKvSeqLenOptional);
    const std::string layout = layoutOptional == nullptr ? "TND" : layoutOptional;
    TORCH_CHECK(layout == "TND" || layout == "BSND", op, ": layout must be TND or BSND, got ", layout);
    TORCH_CHECK(!hostTensor(attenMaskOptional).defined() && !hostTensor(topkMaskOptional).defined() &&
                    intArray(actualQSeqLenOptional).empty() && intArray(actualSelKvSeqLenOptional).empty() &&
                    sparseMode == 0,
                op, ": atten_mask, topk_mask, actual_seq_qlen and actual_sel_seq_kvlen are not supported (pass none) "
                    "and sparse_mode must be 0");
    const at::ScalarType dtype = q.scalar_type();
    TORCH_CHECK((dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat) && k.scalar_type() == dtype &&
                    v.scalar_type() == dtype,
                op, ": query, key and value must share one of float16/bfloat16/float32");
    const int64_t n1 = numHeads, n2 = numKeyValueHeads;
    TORCH_CHECK(n1 > 0 && n2 > 0 && n1 % n2 == 0, op, ": head_num must be a positive multiple of key_value_head_num");
    const bool bsnd = layout == "BSND";
    TORCH_CHECK(q.dim() == (bsnd ? 4 : 3) && (!bsnd || q.size(1) == 1) && q.size(-2) == n1, op,
                ": query must be [B, N1, D] (TND) or [B, 1, N1, D] (BSND) with N1 = head_num");
    TORCH_CHECK(k.dim() == 3 && v.dim() == 3 && k.size(0) == v.size(0) && k.size(1) == pageBlockSize &&
                    v.size(1) == pageBlockSize && pageBlockSize > 0,
                op, ": key/value must be paged [blocks, page_block_size, N2 * D]");
    const int64_t d = q.size(-1);
    TORCH_CHECK(k.size(2) == n2 * d && v.size(2) % n2 == 0, op,
                ": key's last dim must be key_value_head_num * query's D and value's a multiple of key_value_head_num");
    const int64_t dv = v.size(2) / n2, batches = q.size(0);
    TORCH_CHECK(compressStride > 0 && compressBlockSize >= compressStride && selectBlockSize >= compressBlockSize &&
                    selectBlockSize % compressStride == 0,
                op, ": need compress_block_size >= compress_stride > 0 and select_block_size >= compress_block_size, "
                    "a multiple of compress_stride");
    TORCH_CHECK(selectBlockCount >= 3, op, ": select_block_count must be at least 3 (the first and last two blocks are "
                "always selected)");
    TORCH_CHECK(table.defined() && table.dim() == 2 && table.size(0) == batches &&
                    (table.scalar_type() == at::kInt || table.scalar_type() == at::kLong),
                op, ": block_table (int32 [B, max blocks]) is required, one row per query batch");
    TORCH_CHECK(static_cast<int64_t>(lens.size()) == batches, op,
                ": actual_cmp_seq_kvlen must hold one compressed kv length per batch (", batches, ")");
    for (int64_t b = 0; b < batches; ++b) {
      TORCH_CHECK(lens[b] >= 1 && (lens[b] + pageBlockSize - 1) / pageBlockSize <= table.size(1), op,
                  ": actual_cmp_seq_kvlen[", b, "]=", lens[b], " must be positive and fit in block_table's row");
      TORCH_CHECK(selectBlocks(lens[b], compressBlockSize, compressStride, selectBlockSize) >= selectBlockCount, op,
                  ": select_block_count exceeds the select blocks of batch ", b);
    }
    TORCH_CHECK(out.numel() == batches * n1 * dv && out.scalar_type() == dtype, op,
                ": output must hold [B, N1, Dv] in query's dtype");
    TORCH_CHECK(topk.numel() == batches * n2 * selectBlockCount && topk.scalar_type() == at::kInt, op,
                ": topk_indices must be int32 [B, N2, select_block_count]");
    const double scale = scaleValue;
    const int64_t page = pageBlockSize, count = selectBlockCount, cmp = compressBlockSize, stride = compressStride;
    const int64_t sel = selectBlockSize;
    return Prepared{{q, k, v, table},
                    [=]() mutable {
                      const int64_t group = n1 / n2, total_blocks = k.size(0);
                      const at::Tensor k4 = k.reshape({total_blocks, page, n2, d});
                      const at::Tensor v4 = v.reshape({total_blocks, page, n2, dv});
                      const at::Tensor q3 = q.reshape({batches, n1, d});
                      at::Tensor result = at::zeros({batches, n1, dv}, at::kFloat);
                      at::Tensor picks = at::zeros({batches, n2, count}, at::kLong);
                      for (int64_t b = 0; b < batches; ++b) {
                        const int64_t len = lens[b], pages = (len + page - 1) / page;
                        const at::Tensor ids = table.select(0, b).narrow(0, 0, pages).to(at::kLong);
                        for (int64_t id : longValues(ids)) {  // device data: only readable once the kernel runs
                          TORCH_CHECK(id >= 0 && id < total_blocks, op, ": block_table[", b, "] holds block ", id,
                                      " outside [0, ", total_blocks, ")");
                        }
                        const at::Tensor kb = k4.index_select(0, ids).reshape({pages * page, n2, d}).narrow(0, 0, len)
                                                  .to(at::kFloat).transpose(0, 1);   // [N2, len, D]
                        const at::Tensor vb = v4.index_select(0, ids).reshape({pages * page, n2, dv}).narrow(0, 0, len)
                                                  .to(at::kFloat).transpose(0, 1);   // [N2, len, Dv]
                        const at::Tensor qb = q3.select(0, b).to(at::kFloat).reshape({n2, group, d});
                        const at::Tensor probs = at::softmax(at::matmul(qb, kb.transpose(1, 2)) * scale, -1);
                        result.select(0, b).copy_(at::matmul(probs.to(dtype).to(at::kFloat), vb).reshape({n1, dv}));
                        const int64_t blocks = selectBlocks(len, cmp, stride, sel);
                        const at::Tensor importance =
                            at::matmul(probs, selectWeights(len, blocks, sel / stride, cmp / stride)).sum(1);  // [N2, blocks]
                        at::Tensor row = picks.select(0, b);  // [N2, count]
                        row.select(1, 0).fill_(0);
                        row.select(1, 1).fill_(blocks - 2);
                        row.select(1, 2).fill_(blocks - 1);
                        if (count > 3) {
                          const at::Tensor middle = importance.narrow(1, 1, blocks - 3);
                          const at::Tensor order = std::get<1>(middle.sort(/*stable=*/true, -1, /*descending=*/true));
                          row.narrow(1, 3, count - 3).copy_(order.narrow(1, 0, count - 3) + 1);
                        }
                      }
                      out.copy_(result.view(out.sizes()));
                      topk.copy_(picks.view(topk.sizes()));
                    },
                    {out, topk}};
  });
}
NPU_ATEN_OP(NsaCompressAttentionInfer,
            "query, key, value, attenMaskOptional, blockTableOptional, actualQSeqLenOptional, actualCmpKvSeqLenOptional, "
            "actualSelKvSeqLenOptional, topkMaskOptional, numHeads, numKeyValueHeads, selectBlockSize, selectBlockCount, "
            "compressBlockSize, compressStride, scaleValue, layoutOptional, pageBlockSize, sparseMode, output, "
            "topkIndicesOut");
