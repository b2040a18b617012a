// KvCacheOps.cpp - paged KV cache device ops: ScatterPaKvCache writes each token's key / value into its
// slot (block * block_size + offset); GatherPaKvCache reads sequences back through a block table.
// Caches are "Norm" [blocks, block_size, N, D] or "PA_NZ" [blocks, N * D / C, block_size, C] (the
// fractal layout: hidden values in groups of C per token).
#include <ATen/TensorOperators.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/index.h>
#include <ATen/ops/index_put.h>

#include <string>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

struct CacheView {
  bool nz = false;
  int64_t blocks = 0, block_size = 0;
};

CacheView cacheView(const char* op, const at::Tensor& cache, const std::string& mode, int64_t hidden, const char* what) {
  TORCH_CHECK(mode == "Norm" || mode == "PA_NZ", op, ": cache_mode must be 'Norm' or 'PA_NZ', got '", mode, "'");
  TORCH_CHECK(cache.dim() == 4, op, ": ", what, " must be 4-D, got ", cache.sizes());
  CacheView v;
  v.nz = mode == "PA_NZ";
  v.blocks = cache.size(0);
  v.block_size = v.nz ? cache.size(2) : cache.size(1);
  const int64_t cache_hidden = v.nz ? cache.size(1) * cache.size(3) : cache.size(2) * cache.size(3);
  TORCH_CHECK(cache_hidden == hidden, op, ": ", what, " ", cache.sizes(), " holds ", cache_hidden,
              " values per token, the tokens have ", hidden, (v.nz ? " (PA_NZ: [blocks, H / C, block_size, C])"
                                                                 : " (Norm: [blocks, block_size, N, D])"));
  return v;
}

// The cache as [blocks, block_size, G, C] over its own memory (NZ: the C-value groups of a token's G * C
// hidden values; Norm: one group of all of them), so that slots read and write in place.
at::Tensor slotView(const at::Tensor& cache, const CacheView& v) {
  return v.nz ? cache.permute({0, 2, 1, 3}) : cache.flatten(2).unsqueeze(2);
}

// values [T, H] into the slots [T] (non-negative, in range).
void putRows(at::Tensor& cache, const CacheView& v, const at::Tensor& slots, const at::Tensor& values) {
  at::Tensor view = slotView(cache, v);
  view.index_put_({slots.div(v.block_size, "floor"), slots.remainder(v.block_size)},
                  values.reshape({values.size(0), view.size(2), view.size(3)}));
}

// The rows [T, H] of slots [T].
at::Tensor takeRows(const at::Tensor& cache, const CacheView& v, const at::Tensor& slots) {
  return slotView(cache, v).index({slots.div(v.block_size, "floor"), slots.remainder(v.block_size)}).flatten(1);
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnScatterPaKvCacheGetWorkspaceSize(
    const aclTensor* key, aclTensor* keyCacheRef, const aclTensor* slotMapping, const aclTensor* value,
    aclTensor* valueCacheRef, const aclTensor* compressLensOptional, const aclTensor* compressSeqOffsetsOptional,
    const aclTensor* seqLensOptional, char* cacheModeOptional, char* scatterModeOptional,
    const aclIntArray* stridesOptional, const aclIntArray* offsetsOptional, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnScatterPaKvCache", workspaceSize, executor, [&] {
    const char* op = "aclnnScatterPaKvCache";
    at::Tensor k = requiredTensor(key, "key"), v = requiredTensor(value, "value");
    at::Tensor kc = requiredTensor(keyCacheRef, "keyCacheRef"), vc = requiredTensor(valueCacheRef, "valueCacheRef");
    at::Tensor slots = requiredTensor(slotMapping, "slotMapping");
    TORCH_CHECK(!hostTensor(compressLensOptional).defined() && !hostTensor(compressSeqOffsetsOptional).defined() &&
                    !hostTensor(seqLensOptional).defined(),
                op, ": the compressed form (compress_lens, compress_seq_offsets, seq_lens) is not supported on the ",
                "software NPU: pass None");
    const std::string mode = cacheModeOptional == nullptr ? "Norm" : cacheModeOptional;
    TORCH_CHECK(k.dim() == 3 && v.dim() == 3 && k.size(0) == v.size(0) && k.size(1) == v.size(1), op,
                ": key and value must be [tokens, N, D] with the same tokens and heads, got ", k.sizes(), " and ",
                v.sizes());
    TORCH_CHECK(slots.dim() == 1 && slots.size(0) == k.size(0), op, ": slot_mapping must be [tokens] (", k.size(0),
                "), got ", slots.sizes());
    TORCH_CHECK(kc.scalar_type() == k.scalar_type() && vc.scalar_type() == v.scalar_type(), op,
                ": caches and tokens must have one dtype");
    const CacheView kv = cacheView(op, kc, mode, k.size(1) * k.size(2), "key_cache");
    const CacheView vv = cacheView(op, vc, mode, v.size(1) * v.size(2), "value_cache");
    TORCH_CHECK(kv.blocks == vv.blocks && kv.block_size == vv.block_size, op,
                ": key_cache and value_cache must have the same blocks");
    return Prepared{{k, v, slots, kc, vc}, [=]() mutable {
                      const at::Tensor idx = slots.to(at::kLong);
                      const at::Tensor keep = idx.ge(0);  // negative slots: padding tokens
                      const at::Tensor where = idx.masked_select(keep);
                      const int64_t capacity = kv.blocks * kv.block_size;
                      if (where.numel() > 0) {
                        const int64_t top = where.max().item<int64_t>();
                        TORCH_CHECK(top < capacity, op, ": slot ", top, " is past the cache's ", capacity, " slots");
                      }
                      const at::Tensor rows = keep.nonzero().squeeze(1);
                      putRows(kc, kv, where, k.flatten(1).index_select(0, rows));
                      putRows(vc, vv, where, v.flatten(1).index_select(0, rows));
                    },
                    {kc, vc}};
  });
}
NPU_ATEN_OP(ScatterPaKvCache, "key, keyCacheRef, slotMapping, value, valueCacheRef, compressLensOptional, compressSeqOffsetsOptional, seqLensOptional, cacheModeOptional, scatterModeOptional, stridesOptional, offsetsOptional");

// key / value [tokens, N, D] take the sequences one after another: sequence b's seq_lens[b] rows
// (cumulative ends with isSeqLensCumsum), from block seqOffset[b] / block_size of its block table on.
extern "C" NOP_API aclnnStatus aclnnGatherPaKvCacheGetWorkspaceSize(
    const aclTensor* keyCache, const aclTensor* valueCache, const aclTensor* blockTables, const aclTensor* seqLens,
    aclTensor* keyRef, aclTensor* valueRef, const aclTensor* seqOffsetOptional, char* cacheMode,
    bool isSeqLensCumsum, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnGatherPaKvCache", workspaceSize, executor, [&] {
    const char* op = "aclnnGatherPaKvCache";
    at::Tensor kc = requiredTensor(keyCache, "keyCache"), vc = requiredTensor(valueCache, "valueCache");
    at::Tensor table = requiredTensor(blockTables, "blockTables"), lens = requiredTensor(seqLens, "seqLens");
    at::Tensor k = requiredTensor(keyRef, "keyRef"), v = requiredTensor(valueRef, "valueRef");
    at::Tensor offsets = hostTensor(seqOffsetOptional);
    const std::string mode = cacheMode == nullptr ? "Norm" : cacheMode;
    TORCH_CHECK(k.dim() == 3 && v.dim() == 3 && k.size(0) == v.size(0) && k.is_contiguous() && v.is_contiguous(), op,
                ": key and value must be contiguous [tokens, N, D] with the same tokens, got ", k.sizes(), " and ",
                v.sizes());
    TORCH_CHECK(table.dim() == 2 && lens.dim() == 1, op, ": block_tables must be [B, blocks per sequence] and ",
                "seq_lens 1-D, got ", table.sizes(), " and ", lens.sizes());
    const int64_t batch = isSeqLensCumsum ? lens.size(0) - 1 : lens.size(0);
    TORCH_CHECK(batch >= 0 && table.size(0) >= batch, op, ": block_tables has ", table.size(0), " rows for ", batch,
                " sequences");
    const CacheView kv = cacheView(op, kc, mode, k.size(1) * k.size(2), "key_cache");
    const CacheView vv = cacheView(op, vc, mode, v.size(1) * v.size(2), "value_cache");
    return Prepared{{kc, vc, table, lens, offsets}, [=]() mutable {
                      const at::Tensor ids_t = table.to(at::kLong).contiguous(), n_t = lens.to(at::kLong).contiguous();
                      const auto ids = ids_t.accessor<int64_t, 2>();
                      const auto n = n_t.accessor<int64_t, 1>();
                      at::Tensor start_t = offsets.defined() ? offsets.to(at::kLong).contiguous() : at::Tensor();
                      const int64_t tokens = k.size(0), per_seq = ids_t.size(1);
                      // The cache slot of every output row (-1: zeros), then one gather.
                      std::vector<int64_t> slots;
                      slots.reserve(static_cast<size_t>(tokens));
                      for (int64_t b = 0; b < batch && static_cast<int64_t>(slots.size()) < tokens; ++b) {
                        const int64_t len = isSeqLensCumsum ? n[b + 1] - n[b] : n[b];
                        const int64_t first =
                            start_t.defined() ? start_t.const_data_ptr<int64_t>()[b] / kv.block_size : 0;
                        for (int64_t j = 0; j < len && static_cast<int64_t>(slots.size()) < tokens; ++j) {
                          const int64_t slot_block = first + j / kv.block_size;
                          const int64_t block = slot_block < per_seq ? ids[b][slot_block] : -1;
                          slots.push_back(block < 0 || block >= kv.blocks ? -1
                                                                          : block * kv.block_size + j % kv.block_size);
                        }
                      }
                      const at::Tensor slot_t = at::tensor(slots, at::TensorOptions().dtype(at::kLong));
                      const at::Tensor valid = slot_t.ge(0);
                      const at::Tensor picked = slot_t.clamp_min(0);
                      auto fill = [&](at::Tensor out, const at::Tensor& cache, const CacheView& view) {
                        at::Tensor rows = out.flatten(1).narrow(0, 0, slot_t.numel());
                        rows.copy_(takeRows(cache, view, picked).masked_fill_(valid.logical_not().unsqueeze(1), 0));
                      };
                      fill(k, kc, kv);
                      fill(v, vc, vv);
                    },
                    {k, v}};
  });
}
NPU_ATEN_OP(GatherPaKvCache, "keyCache, valueCache, blockTables, seqLens, keyRef, valueRef, seqOffsetOptional, cacheMode, isSeqLensCumsum");
