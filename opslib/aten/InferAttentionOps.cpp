// InferAttentionOps.cpp - the inference attention device ops (PromptFlashAttention, IncreFlashAttention,
// FusedInferAttentionScore V3 and V4) on the flash-attention kernel: padded batches with valid lengths, TND, GQA,
// sparse modes 0-4, paged KV caches (block tables), MLA's rope parts, layout-converting outputs and
// the softmax log-sum-exp. Quantized forms are not taken (a clear error names the argument).
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/log.h>

#include <string>
#include <utility>

#include "AtenOpSupport.h"
#include "FlashAttentionKernel.h"
#include "FlashAttentionSetup.h"

using namespace npu::opslib::aten;
using namespace npu::opslib::aten::fa;

namespace {

struct InferIo {
  const aclTensor* query = nullptr;
  const aclTensorList* key = nullptr;  // or, for PromptFlashAttention, single tensors:
  const aclTensorList* value = nullptr;
  const aclTensor *keyTensor = nullptr, *valueTensor = nullptr;
  const aclTensor *pseShift = nullptr, *attenMask = nullptr, *blockTable = nullptr;
  const aclTensor *queryRope = nullptr, *keyRope = nullptr;
  const aclIntArray *actualSeqLengths = nullptr, *actualSeqLengthsKv = nullptr;
  // Arguments of the quantized and shared-prefix forms: each must be absent.
  std::vector<std::pair<const char*, const aclTensor*>> absent;
  int64_t numHeads = 1;
  double scale = 1.0;
  int64_t preTokens = INT64_MAX, nextTokens = INT64_MAX;
  const char* inputLayout = nullptr;
  int64_t numKeyValueHeads = 0, sparseMode = 0, blockSize = 0;
  bool softmaxLseFlag = false;
  bool kvLengthsFromActual = false;  // IncreFlashAttention: actualSeqLengths are the key / value lengths
  aclTensor* attentionOut = nullptr;
  aclTensor* softmaxLse = nullptr;
};

at::Tensor single(const char* op, const aclTensorList* list, const char* what) {
  std::vector<at::Tensor> tensors = hostTensors(list);
  TORCH_CHECK(tensors.size() == 1, op, ": ", what, " must be one tensor (lists of per-batch tensors are not taken: ",
              "pad them into one), got ", tensors.size());
  return tensors[0];
}

// x in layout `layout` as [B, N, S, D] (or [T, N, D] for the token layouts), without copying.
at::Tensor canonical(const char* op, const at::Tensor& x, const std::string& layout, int64_t heads, const char* what) {
  const int64_t want = layout == "BSH" || layout == "TND" || layout == "NTD" ? 3 : 4;
  TORCH_CHECK(x.dim() == want, op, ": ", what, " must be ", want, "-D for input_layout ", layout, ", got ", x.sizes());
  TORCH_CHECK(x.stride(-1) == 1, op, ": ", what, " must be contiguous in its last dimension");
  if (layout == "BSH") {
    TORCH_CHECK(heads > 0 && x.size(2) % heads == 0, op, ": ", what, "'s hidden size ", x.size(2),
                " is not a multiple of its ", heads, " heads");
    return x.unflatten(2, {heads, x.size(2) / heads}).permute({0, 2, 1, 3});
  }
  if (layout == "BSND") return x.permute({0, 2, 1, 3});
  if (layout == "NTD") return x.permute({1, 0, 2});
  return x;  // BNSD, TND
}

// The key / value rows of each batch gathered from a paged cache ([blocks, block_size, H] or
// [blocks, N, block_size, D]) by the block table, as [B, N, blocks_per_seq * block_size, D].
at::Tensor gatherPaged(const at::Tensor& cache, const at::Tensor& block_table, int64_t heads, int64_t block_size) {
  const at::Tensor ids = block_table.to(at::kLong);
  at::Tensor blocks = cache.dim() == 3 ? cache.unflatten(2, {heads, cache.size(2) / heads}).permute({0, 2, 1, 3})
                                       : cache;  // [blocks, N, block_size, D]
  at::Tensor picked = blocks.index_select(0, ids.flatten());  // [B * per_seq, N, bs, D]
  const int64_t batch = ids.size(0), per_seq = ids.size(1);
  return picked.unflatten(0, {batch, per_seq}).permute({0, 2, 1, 3, 4}).reshape(
      {batch, blocks.size(1), per_seq * block_size, blocks.size(3)});
}

aclnnStatus inferAttention(const char* op, const InferIo& io, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp(op, workspaceSize, executor, [&] {
    for (const auto& [name, tensor] : io.absent) {
      TORCH_CHECK(!optionalTensor(tensor).defined(), op, ": ", name,
                  " (quantized / shared-prefix forms) is not supported on the software NPU: pass None");
    }
    std::string layout = stringOf(io.inputLayout, "inputLayout");
    std::string out_layout = layout;
    if (const size_t bar = layout.find('_'); bar != std::string::npos) {
      out_layout = layout.substr(bar + 1);
      layout = layout.substr(0, bar);
    }
    const bool tokens = layout == "TND" || layout == "NTD";
    TORCH_CHECK(layout == "BSH" || layout == "BSND" || layout == "BNSD" || tokens, op,
                ": input_layout must be BSH, BSND, BNSD, TND or NTD (optionally _<output layout>), got '",
                io.inputLayout, "'");
    TORCH_CHECK(tokens ? (out_layout == "TND" || out_layout == "NTD")
                       : (out_layout == "BSH" || out_layout == "BSND" || out_layout == "BNSD" || out_layout == "NBSD"),
                op, ": output layout ", out_layout, " does not go with input layout ", layout);
    const int64_t heads = io.numHeads;
    TORCH_CHECK(heads > 0, op, ": num_heads must be positive, got ", heads);
    const int64_t kv_heads = io.numKeyValueHeads == 0 ? heads : io.numKeyValueHeads;
    TORCH_CHECK(kv_heads > 0 && heads % kv_heads == 0, op, ": num_heads ", heads,
                " must be a multiple of num_key_value_heads ", kv_heads);

    const at::Tensor q_in = requiredTensor(io.query, "query");
    const at::Tensor k_in = io.key != nullptr ? single(op, io.key, "key") : requiredTensor(io.keyTensor, "key");
    const at::Tensor v_in =
        io.value != nullptr ? single(op, io.value, "value") : requiredTensor(io.valueTensor, "value");
    const at::Tensor q_rope = optionalTensor(io.queryRope), k_rope = optionalTensor(io.keyRope);
    TORCH_CHECK(q_rope.defined() == k_rope.defined(), op, ": query_rope and key_rope come together");
    const at::Tensor block_table = optionalTensor(io.blockTable);
    const bool paged = block_table.defined();
    std::vector<int64_t> actual_q = intArray(io.actualSeqLengths), actual_kv = intArray(io.actualSeqLengthsKv);
    if (io.kvLengthsFromActual) std::swap(actual_q, actual_kv);

    // Operands as [B, N, S, D] (or [T, N, D]) views, or host buffers filled when the kernel runs.
    const at::Tensor q = canonical(op, q_in, layout, heads, "query");
    at::Tensor qr = q_rope.defined() ? canonical(op, q_rope, layout, heads, "query_rope") : at::Tensor();
    at::Tensor k, v, kr;
    const auto host = at::TensorOptions().dtype(q_in.scalar_type());
    if (paged) {
      TORCH_CHECK(!tokens, op, ": paged key / value take BSH, BSND or BNSD queries");
      TORCH_CHECK(block_table.dim() == 2 && block_table.size(0) == q.size(0), op,
                  ": block_table must be [B, max blocks per sequence] with B = ", q.size(0), ", got ",
                  block_table.sizes());
      TORCH_CHECK(io.blockSize > 0, op, ": block_size must be positive with a block table, got ", io.blockSize);
      TORCH_CHECK(!actual_kv.empty(), op, ": paged key / value need the key / value lengths of each batch");
      const int64_t rows = block_table.size(1) * io.blockSize;
      auto paged_shape = [&](const at::Tensor& cache, const char* what) {
        TORCH_CHECK((cache.dim() == 3 && cache.size(1) == io.blockSize && cache.size(2) % kv_heads == 0) ||
                        (cache.dim() == 4 && cache.size(1) == kv_heads && cache.size(2) == io.blockSize),
                    op, ": paged ", what, " must be [blocks, block_size, H] or [blocks, N, block_size, D], got ",
                    cache.sizes());
        const int64_t d = cache.dim() == 3 ? cache.size(2) / kv_heads : cache.size(3);
        return at::empty({q.size(0), kv_heads, rows, d}, host);
      };
      k = paged_shape(k_in, "key");
      v = paged_shape(v_in, "value");
      if (k_rope.defined()) kr = paged_shape(k_rope, "key_rope");
    } else {
      k = canonical(op, k_in, layout, kv_heads, "key");
      v = canonical(op, v_in, layout, kv_heads, "value");
      if (k_rope.defined()) kr = canonical(op, k_rope, layout, kv_heads, "key_rope");
    }
    // MLA: the rope parts join the query / key head dimension (their scores add up).
    at::Tensor q_full = q, k_full = k;
    if (q_rope.defined()) {
      std::vector<int64_t> qs = q.sizes().vec(), ks = k.sizes().vec();
      qs.back() += qr.size(-1);
      ks.back() += kr.size(-1);
      q_full = at::empty(qs, host);
      k_full = at::empty(ks, host);
    }

    // The attention problem, in BNSD / TND terms.
    const std::string base = tokens ? "TND" : "BNSD";
    const int64_t q_s = tokens ? -1 : q.size(2);
    Args a;
    a.op = op;
    a.layout = base;
    a.q = q_full;
    a.k = k_full;
    a.v = v;
    a.head_num = heads;
    a.scale = io.scale;
    a.pre_tokens = io.preTokens;
    a.next_tokens = io.nextTokens;
    a.sparse_mode = io.sparseMode >= 10 ? io.sparseMode - 10 : io.sparseMode;  // 10-14: high-precision forms
    TORCH_CHECK(a.sparse_mode >= 0 && a.sparse_mode <= 4, op, ": sparse_mode must be 0 to 4 (or 10 to 14), got ",
                io.sparseMode);
    a.pse = optionalTensor(io.pseShift);
    a.pse_type = 0;  // added after the scaling
    a.stats_lanes = 1;
    at::Tensor mask = optionalTensor(io.attenMask);
    if (tokens) {
      a.cum_q = actual_q;
      a.cum_kv = actual_kv;
      a.softmax_layout = "same_as_input";  // softmax_lse is [T, N, 1]
    } else {
      a.actual_q = actual_q;
      a.actual_kv = actual_kv;
      if (paged) {
        // Rows past a batch's blocks do not exist: its valid length bounds them.
        for (int64_t& n : a.actual_kv) n = std::min(n, k.size(2));
      }
    }
    if (mask.defined()) {
      if (mask.dim() == 3) mask = mask.unsqueeze(1);                              // [B or 1, Sq, Skv]
      if (q_s == 1 && mask.dim() == 2 && mask.size(0) == q.size(0) && q.size(0) > 1) {
        mask = mask.unsqueeze(1).unsqueeze(1);                                   // [B, Skv] of decoding
      }
    }
    if (q_s == 1) {
      // Decoding: one query row attends to every valid key; the sparse mode does not apply.
      if (a.sparse_mode >= 2) mask = at::Tensor();
      a.sparse_mode = 0;
      a.pre_tokens = a.next_tokens = INT64_MAX;
    }
    a.mask = mask;
    auto setup = std::make_shared<Setup>(setUp(a));

    // The output in its own layout, seen as the problem's rows.
    at::Tensor out = requiredTensor(io.attentionOut, "attentionOut");
    const Shapes& s = setup->shapes;
    const int64_t dv = s.dv;
    at::Tensor out_view;
    if (tokens) {
      TORCH_CHECK(out.dim() == 3, op, ": attentionOut must be 3-D for ", out_layout, ", got ", out.sizes());
      out_view = out_layout == "NTD" ? out.permute({1, 0, 2}) : out;
    } else if (out_layout == "NBSD") {
      out_view = out.permute({1, 0, 2, 3});
    } else {
      out_view = canonical(op, out, out_layout, heads, "attentionOut");
    }
    std::vector<int64_t> want = q.sizes().vec();
    want.back() = dv;
    TORCH_CHECK(out_view.sizes().vec() == want, op, ": attentionOut ", out.sizes(), " does not hold the output ",
                c10::IntArrayRef(want), " (as ", base, ") in layout ", out_layout);
    setup->problem.out = rowsOf(base, out_view, dv, s.batch, s.q_start);

    // softmax_lse: [B, N, Sq, 1] (TND: [T, N, 1]) float32.
    at::Tensor lse = optionalTensor(io.softmaxLse);
    const bool want_lse = io.softmaxLseFlag && lse.defined();
    const int64_t stat_rows = tokens ? q.size(0) * heads : q.size(0) * heads * q.size(2);
    if (want_lse) {
      TORCH_CHECK(lse.scalar_type() == at::kFloat && lse.is_contiguous() && lse.numel() == stat_rows, op,
                  ": softmaxLse must be contiguous float32 of ", stat_rows, " values");
    }
    const bool padded = !tokens && (!actual_q.empty());
    const int64_t block_size = io.blockSize;
    return Prepared{{q_in, k_in, v_in, a.pse, mask, block_table, q_rope, k_rope},
                    [=]() mutable {
                      if (paged) {
                        k.copy_(gatherPaged(k_in, block_table, kv_heads, block_size));
                        v.copy_(gatherPaged(v_in, block_table, kv_heads, block_size));
                        if (kr.defined()) kr.copy_(gatherPaged(k_rope, block_table, kv_heads, block_size));
                      }
                      if (qr.defined()) {
                        q_full.copy_(at::cat({q, qr}, -1));
                        k_full.copy_(at::cat({k, kr}, -1));
                      }
                      if (padded) out.zero_();  // rows past a batch's valid length
                      bind(*setup);
                      at::Tensor smax = at::empty({stat_rows}, at::TensorOptions().dtype(at::kFloat));
                      at::Tensor ssum = at::empty({stat_rows}, at::TensorOptions().dtype(at::kFloat));
                      flashAttentionForward(setup->problem, q_full, k_full, v, out, smax, ssum, setup->stats);
                      if (want_lse) lse.view({-1}).copy_(smax + at::log(ssum));
                    },
                    {out, lse}};
  });
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnPromptFlashAttentionV3GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* pseShift,
    const aclTensor* attenMask, const aclIntArray* actualSeqLengths, const aclIntArray* actualSeqLengthsKv,
    const aclTensor* deqScale1, const aclTensor* quantScale1, const aclTensor* deqScale2, const aclTensor* quantScale2,
    const aclTensor* quantOffset2, int64_t numHeads, double scaleValue, int64_t preTokens, int64_t nextTokens,
    char* inputLayout, int64_t numKeyValueHeads, int64_t sparseMode, int64_t innerPrecise,
    aclTensor* attentionOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  InferIo io;
  io.query = query;
  io.keyTensor = key;
  io.valueTensor = value;
  io.pseShift = pseShift;
  io.attenMask = attenMask;
  io.actualSeqLengths = actualSeqLengths;
  io.actualSeqLengthsKv = actualSeqLengthsKv;
  io.absent = {{"deq_scale1", deqScale1}, {"quant_scale1", quantScale1}, {"deq_scale2", deqScale2},
               {"quant_scale2", quantScale2}, {"quant_offset2", quantOffset2}};
  io.numHeads = numHeads;
  io.scale = scaleValue;
  io.preTokens = preTokens;
  io.nextTokens = nextTokens;
  io.inputLayout = inputLayout;
  io.numKeyValueHeads = numKeyValueHeads;
  io.sparseMode = sparseMode;
  io.attentionOut = attentionOut;
  return inferAttention("aclnnPromptFlashAttentionV3", io, workspaceSize, executor);
}
NPU_ATEN_OP(PromptFlashAttentionV3, "query, key, value, pseShift, attenMask, actualSeqLengths, actualSeqLengthsKv, deqScale1, quantScale1, deqScale2, quantScale2, quantOffset2, numHeads, scaleValue, preTokens, nextTokens, inputLayout, numKeyValueHeads, sparseMode, innerPrecise, attentionOut");

extern "C" NOP_API aclnnStatus aclnnIncreFlashAttentionV4GetWorkspaceSize(
    const aclTensor* query, const aclTensorList* key, const aclTensorList* value, const aclTensor* pseShift,
    const aclTensor* attenMask, const aclIntArray* actualSeqLengths, const aclTensor* dequantScale1,
    const aclTensor* quantScale1, const aclTensor* dequantScale2, const aclTensor* quantScale2,
    const aclTensor* quantOffset2, const aclTensor* antiquantScale, const aclTensor* antiquantOffset,
    const aclTensor* blockTable, const aclTensor* kvPaddingSize, int64_t numHeads, double scaleValue,
    char* inputLayout, int64_t numKeyValueHeads, int64_t blockSize, int64_t innerPrecise,
    aclTensor* attentionOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  InferIo io;
  io.query = query;
  io.key = key;
  io.value = value;
  io.pseShift = pseShift;
  io.attenMask = attenMask;
  io.actualSeqLengths = actualSeqLengths;
  io.kvLengthsFromActual = true;
  io.blockTable = blockTable;
  io.absent = {{"dequant_scale1", dequantScale1}, {"quant_scale1", quantScale1},
               {"dequant_scale2", dequantScale2}, {"quant_scale2", quantScale2},
               {"quant_offset2", quantOffset2}, {"antiquant_scale", antiquantScale},
               {"antiquant_offset", antiquantOffset}, {"kv_padding_size", kvPaddingSize}};
  io.numHeads = numHeads;
  io.scale = scaleValue;
  io.inputLayout = inputLayout;
  io.numKeyValueHeads = numKeyValueHeads;
  io.blockSize = blockSize;
  io.attentionOut = attentionOut;
  return inferAttention("aclnnIncreFlashAttentionV4", io, workspaceSize, executor);
}
NPU_ATEN_OP(IncreFlashAttentionV4, "query, key, value, pseShift, attenMask, actualSeqLengths, dequantScale1, quantScale1, dequantScale2, quantScale2, quantOffset2, antiquantScale, antiquantOffset, blockTable, kvPaddingSize, numHeads, scaleValue, inputLayout, numKeyValueHeads, blockSize, innerPrecise, attentionOut");

extern "C" NOP_API aclnnStatus aclnnFusedInferAttentionScoreV3GetWorkspaceSize(
    const aclTensor* query, const aclTensorList* key, const aclTensorList* value, const aclTensor* pseShift,
    const aclTensor* attenMask, const aclIntArray* actualSeqLengths, const aclIntArray* actualSeqLengthsKv,
    const aclTensor* dequantScale1, const aclTensor* quantScale1, const aclTensor* dequantScale2,
    const aclTensor* quantScale2, const aclTensor* quantOffset2, const aclTensor* antiquantScale,
    const aclTensor* antiquantOffset, const aclTensor* blockTable, const aclTensor* queryPaddingSize,
    const aclTensor* kvPaddingSize, const aclTensor* keyAntiquantScale, const aclTensor* keyAntiquantOffset,
    const aclTensor* valueAntiquantScale, const aclTensor* valueAntiquantOffset, const aclTensor* keySharedPrefix,
    const aclTensor* valueSharedPrefix, const aclIntArray* actualSharedPrefixLen, const aclTensor* queryRope,
    const aclTensor* keyRope, const aclTensor* keyRopeAntiquantScale, int64_t numHeads, double scaleValue,
    int64_t preTokens, int64_t nextTokens, char* inputLayout, int64_t numKeyValueHeads, int64_t sparseMode,
    int64_t innerPrecise, int64_t blockSize, int64_t antiquantMode, bool softmaxLseFlag, int64_t keyAntiquantMode,
    int64_t valueAntiquantMode, aclTensor* attentionOut, aclTensor* softmaxLse, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  InferIo io;
  io.query = query;
  io.key = key;
  io.value = value;
  io.pseShift = pseShift;
  io.attenMask = attenMask;
  io.actualSeqLengths = actualSeqLengths;
  io.actualSeqLengthsKv = actualSeqLengthsKv;
  io.blockTable = blockTable;
  io.queryRope = queryRope;
  io.keyRope = keyRope;
  io.absent = {{"dequant_scale1", dequantScale1}, {"quant_scale1", quantScale1},
               {"dequant_scale2", dequantScale2}, {"quant_scale2", quantScale2},
               {"quant_offset2", quantOffset2}, {"antiquant_scale", antiquantScale},
               {"antiquant_offset", antiquantOffset}, {"query_padding_size", queryPaddingSize},
               {"kv_padding_size", kvPaddingSize}, {"key_antiquant_scale", keyAntiquantScale},
               {"key_antiquant_offset", keyAntiquantOffset}, {"value_antiquant_scale", valueAntiquantScale},
               {"value_antiquant_offset", valueAntiquantOffset}, {"key_shared_prefix", keySharedPrefix},
               {"value_shared_prefix", valueSharedPrefix}, {"key_rope_antiquant_scale", keyRopeAntiquantScale}};
  TORCH_CHECK(actualSharedPrefixLen == nullptr || intArray(actualSharedPrefixLen).empty(),
              "aclnnFusedInferAttentionScoreV3: actual_shared_prefix_len is not supported on the software NPU");
  io.numHeads = numHeads;
  io.scale = scaleValue;
  io.preTokens = preTokens;
  io.nextTokens = nextTokens;
  io.inputLayout = inputLayout;
  io.numKeyValueHeads = numKeyValueHeads;
  io.sparseMode = sparseMode;
  io.blockSize = blockSize;
  io.softmaxLseFlag = softmaxLseFlag;
  io.attentionOut = attentionOut;
  io.softmaxLse = softmaxLse;
  return inferAttention("aclnnFusedInferAttentionScoreV3", io, workspaceSize, executor);
}
NPU_ATEN_OP(FusedInferAttentionScoreV3, "query, key, value, pseShift, attenMask, actualSeqLengths, actualSeqLengthsKv, dequantScale1, quantScale1, dequantScale2, quantScale2, quantOffset2, antiquantScale, antiquantOffset, blockTable, queryPaddingSize, kvPaddingSize, keyAntiquantScale, keyAntiquantOffset, valueAntiquantScale, valueAntiquantOffset, keySharedPrefix, valueSharedPrefix, actualSharedPrefixLen, queryRope, keyRope, keyRopeAntiquantScale, numHeads, scaleValue, preTokens, nextTokens, inputLayout, numKeyValueHeads, sparseMode, innerPrecise, blockSize, antiquantMode, softmaxLseFlag, keyAntiquantMode, valueAntiquantMode, attentionOut, softmaxLse");

// V4 adds dequantScaleQuery, learnableSink and queryQuantMode to V3. The quantized-query form has no
// software kernel; the learnable sink is not a kernel feature here either: torch_npu folds it into the
// output from the softmax log-sum-exp after this op (so a C caller passing one gets a clear error).
extern "C" NOP_API aclnnStatus aclnnFusedInferAttentionScoreV4GetWorkspaceSize(
    const aclTensor* query, const aclTensorList* key, const aclTensorList* value, const aclTensor* pseShift,
    const aclTensor* attenMask, const aclIntArray* actualSeqLengths, const aclIntArray* actualSeqLengthsKv,
    const aclTensor* dequantScale1, const aclTensor* quantScale1, const aclTensor* dequantScale2,
    const aclTensor* quantScale2, const aclTensor* quantOffset2, const aclTensor* antiquantScale,
    const aclTensor* antiquantOffset, const aclTensor* blockTable, const aclTensor* queryPaddingSize,
    const aclTensor* kvPaddingSize, const aclTensor* keyAntiquantScale, const aclTensor* keyAntiquantOffset,
    const aclTensor* valueAntiquantScale, const aclTensor* valueAntiquantOffset, const aclTensor* keySharedPrefix,
    const aclTensor* valueSharedPrefix, const aclIntArray* actualSharedPrefixLen, const aclTensor* queryRope,
    const aclTensor* keyRope, const aclTensor* keyRopeAntiquantScale, const aclTensor* dequantScaleQuery,
    const aclTensor* learnableSink, int64_t numHeads, double scaleValue, int64_t preTokens, int64_t nextTokens,
    char* inputLayout, int64_t numKeyValueHeads, int64_t sparseMode, int64_t innerPrecise, int64_t blockSize,
    int64_t antiquantMode, bool softmaxLseFlag, int64_t keyAntiquantMode, int64_t valueAntiquantMode,
    int64_t queryQuantMode, aclTensor* attentionOut, aclTensor* softmaxLse, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  const char* op = "aclnnFusedInferAttentionScoreV4";
  std::string reason;
  if (optionalTensor(dequantScaleQuery).defined()) {
    reason = "dequant_scale_query (quantized query) is not supported on the software NPU: pass None";
  } else if (queryQuantMode != 0) {
    reason = "query_quant_mode " + std::to_string(queryQuantMode) +
             " (quantized query) is not supported on the software NPU: pass 0";
  } else if (optionalTensor(learnableSink).defined()) {
    reason = "learnable_sink is applied by torch_npu.npu_fused_infer_attention_score_v2 from the softmax lse, "
             "not by the device op: pass NULL";
  }
  if (!reason.empty()) {
    return aclnnSetRecentErrMsg(ACLNN_ERR_PARAM_INVALID, (std::string(op) + ": " + reason).c_str());
  }
  return aclnnFusedInferAttentionScoreV3GetWorkspaceSize(
      query, key, value, pseShift, attenMask, actualSeqLengths, actualSeqLengthsKv, dequantScale1, quantScale1,
      dequantScale2, quantScale2, quantOffset2, antiquantScale, antiquantOffset, blockTable, queryPaddingSize,
      kvPaddingSize, keyAntiquantScale, keyAntiquantOffset, valueAntiquantScale, valueAntiquantOffset,
      keySharedPrefix, valueSharedPrefix, actualSharedPrefixLen, queryRope, keyRope, keyRopeAntiquantScale, numHeads,
      scaleValue, preTokens, nextTokens, inputLayout, numKeyValueHeads, sparseMode, innerPrecise, blockSize,
      antiquantMode, softmaxLseFlag, keyAntiquantMode, valueAntiquantMode, attentionOut, softmaxLse, workspaceSize,
      executor);
}
NPU_ATEN_OP(FusedInferAttentionScoreV4, "query, key, value, pseShift, attenMask, actualSeqLengths, actualSeqLengthsKv, dequantScale1, quantScale1, dequantScale2, quantScale2, quantOffset2, antiquantScale, antiquantOffset, blockTable, queryPaddingSize, kvPaddingSize, keyAntiquantScale, keyAntiquantOffset, valueAntiquantScale, valueAntiquantOffset, keySharedPrefix, valueSharedPrefix, actualSharedPrefixLen, queryRope, keyRope, keyRopeAntiquantScale, dequantScaleQuery, learnableSink, numHeads, scaleValue, preTokens, nextTokens, inputLayout, numKeyValueHeads, sparseMode, innerPrecise, blockSize, antiquantMode, softmaxLseFlag, keyAntiquantMode, valueAntiquantMode, queryQuantMode, attentionOut, softmaxLse");
