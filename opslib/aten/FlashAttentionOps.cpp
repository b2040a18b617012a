// FlashAttentionOps.cpp - the FlashAttentionScore device ops (forward, backward, variable-length
// forms) and the dropout mask they read, with CANN's parameters, on FlashAttentionKernel.
#include <ATen/ops/zeros.h>

#include <cstring>
#include <string>

#include "AtenOpSupport.h"
#include "FlashAttentionKernel.h"
#include "FlashAttentionSetup.h"

using namespace npu::opslib::aten;
using namespace npu::opslib::aten::fa;

namespace {

struct ForwardIo {
  const aclTensor *query, *queryRope = nullptr, *key, *keyRope = nullptr, *value, *realShift, *dropMask, *paddingMask,
      *attenMask, *sink = nullptr;
  const aclIntArray *prefix, *actualSeqQLen = nullptr, *actualSeqKvLen = nullptr;
  double scaleValue, keepProb;
  int64_t preTokens, nextTokens, headNum;
  const char* inputLayout;
  int64_t innerPrecise, sparseMode, pseType = 1;
  const char* softmaxLayout = nullptr;
  aclTensor *softmaxMaxOut, *softmaxSumOut, *softmaxOutOut, *attentionOutOut;
};

Args argsOf(const char* op, const aclTensor* query, const aclTensor* queryRope, const aclTensor* key,
            const aclTensor* keyRope, const aclTensor* value, const aclTensor* pse, const aclTensor* dropMask,
            const aclTensor* paddingMask, const aclTensor* attenMask, const aclTensor* sink, const aclIntArray* prefix,
            const aclIntArray* qlen, const aclIntArray* kvlen, double scale, double keepProb, int64_t pre,
            int64_t next, int64_t headNum, const char* layout, int64_t sparseMode, int64_t pseType,
            const char* softmaxLayout) {
  TORCH_CHECK(optionalTensor(paddingMask).defined() == false, op,
              ": padding_mask is reserved (as on NPUs): pass None and give sequence lengths with TND's "
              "actual_seq_qlen / actual_seq_kvlen");
  TORCH_CHECK(!optionalTensor(queryRope).defined() && !optionalTensor(keyRope).defined(), op,
              ": query_rope / key_rope are not taken: concatenate them to query / key along the head dimension");
  Args a;
  a.op = op;
  a.layout = stringOf(layout, "inputLayout");
  for (auto& c : a.layout) c = static_cast<char>(toupper(c));
  a.q = requiredTensor(query, "query");
  a.k = requiredTensor(key, "key");
  a.v = requiredTensor(value, "value");
  a.pse = optionalTensor(pse);
  a.drop = optionalTensor(dropMask);
  a.mask = optionalTensor(attenMask);
  a.sink = optionalTensor(sink);
  a.prefix = intArray(prefix);
  a.cum_q = intArray(qlen);
  a.cum_kv = intArray(kvlen);
  a.scale = scale;
  a.keep_prob = keepProb;
  a.pre_tokens = pre;
  a.next_tokens = next;
  a.head_num = headNum;
  a.sparse_mode = sparseMode;
  a.pse_type = pseType;
  a.softmax_layout = softmaxLayout == nullptr ? "" : softmaxLayout;
  return a;
}

aclnnStatus forward(const char* op, const ForwardIo& io, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp(op, workspaceSize, executor, [&] {
    const Args a = argsOf(op, io.query, io.queryRope, io.key, io.keyRope, io.value, io.realShift, io.dropMask,
                          io.paddingMask, io.attenMask, io.sink, io.prefix, io.actualSeqQLen, io.actualSeqKvLen,
                          io.scaleValue, io.keepProb, io.preTokens, io.nextTokens, io.headNum, io.inputLayout,
                          io.sparseMode, io.pseType, io.softmaxLayout);
    at::Tensor smax = requiredTensor(io.softmaxMaxOut, "softmaxMax");
    at::Tensor ssum = requiredTensor(io.softmaxSumOut, "softmaxSum");
    at::Tensor out = requiredTensor(io.attentionOutOut, "attentionOut");
    auto setup = std::make_shared<Setup>(setUp(a));
    setup->problem.out = outputRows(*setup, a.q, out, "attentionOut");
    const int64_t rows = a.layout == "TND" ? a.q.size(0) * setup->shapes.q_heads
                                           : setup->shapes.batch * setup->shapes.q_heads * setup->shapes.q_pad;
    TORCH_CHECK(smax.scalar_type() == at::kFloat && ssum.scalar_type() == at::kFloat && smax.is_contiguous() &&
                    ssum.is_contiguous() && smax.numel() == rows * 8 && ssum.numel() == rows * 8,
                op, ": softmaxMax and softmaxSum must be contiguous float32 of ", rows, " x 8 values");
    // innerPrecise: the software NPU always accumulates in float32, the most precise of its modes.
    const at::Tensor q = a.q, k = a.k, v = a.v;
    return Prepared{{q, k, v, a.pse, a.mask, a.sink},
                    [=]() {
                      bind(*setup);
                      flashAttentionForward(setup->problem, q, k, v, out, smax, ssum, setup->stats);
                    },
                    {out, smax, ssum}};
  });
}

struct BackwardIo {
  const aclTensor *query, *queryRope = nullptr, *key, *keyRope = nullptr, *value, *dy, *pseShift, *dropMask,
      *paddingMask, *attenMask, *softmaxMax, *softmaxSum, *softmaxIn, *attentionIn, *sink = nullptr;
  const aclIntArray *prefix, *actualSeqQLen = nullptr, *actualSeqKvLen = nullptr;
  double scaleValue, keepProb;
  int64_t preTokens, nextTokens, headNum;
  const char* inputLayout;
  int64_t innerPrecise, sparseMode, pseType = 1;
  const char* softmaxLayout = nullptr;
  aclTensor *dqOut, *dkOut, *dvOut, *dpseOut, *dsinkOut = nullptr;
};

aclnnStatus backward(const char* op, const BackwardIo& io, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp(op, workspaceSize, executor, [&] {
    const Args a = argsOf(op, io.query, io.queryRope, io.key, io.keyRope, io.value, io.pseShift, io.dropMask,
                          io.paddingMask, io.attenMask, io.sink, io.prefix, io.actualSeqQLen, io.actualSeqKvLen,
                          io.scaleValue, io.keepProb, io.preTokens, io.nextTokens, io.headNum, io.inputLayout,
                          io.sparseMode, io.pseType, io.softmaxLayout);
    at::Tensor g = requiredTensor(io.dy, "dy");
    at::Tensor smax = requiredTensor(io.softmaxMax, "softmaxMax"), ssum = requiredTensor(io.softmaxSum, "softmaxSum");
    at::Tensor out = requiredTensor(io.attentionIn, "attentionIn");
    at::Tensor dq = requiredTensor(io.dqOut, "dq"), dk = requiredTensor(io.dkOut, "dk");
    at::Tensor dv = requiredTensor(io.dvOut, "dv");
    at::Tensor dpse = optionalTensor(io.dpseOut), dsink = optionalTensor(io.dsinkOut);
    auto setup = std::make_shared<Setup>(setUp(a));
    setup->problem.out = outputRows(*setup, a.q, out, "attentionIn");
    const RowLayout dy_rows = outputRows(*setup, a.q, g, "dy");
    TORCH_CHECK(dy_rows.seq_stride == setup->problem.out.seq_stride &&
                    dy_rows.head_stride == setup->problem.out.head_stride &&
                    dy_rows.batch_offset == setup->problem.out.batch_offset,
                op, ": dy must be laid out as attentionIn");
    TORCH_CHECK(smax.scalar_type() == at::kFloat && ssum.scalar_type() == at::kFloat && smax.is_contiguous() &&
                    ssum.is_contiguous(),
                op, ": softmaxMax and softmaxSum must be contiguous float32");
    TORCH_CHECK(dq.sizes() == a.q.sizes() && dq.strides() == a.q.strides() && dk.sizes() == a.k.sizes() &&
                    dk.strides() == a.k.strides() && dv.sizes() == a.v.sizes() && dv.strides() == a.v.strides(),
                op, ": dq / dk / dv must have the shapes and strides of query / key / value");
    TORCH_CHECK(!dpse.defined() || (a.pse.defined() && dpse.sizes() == a.pse.sizes()), op,
                ": dpse must have pse's shape");
    TORCH_CHECK(!dsink.defined() || (a.sink.defined() && dsink.scalar_type() == at::kFloat &&
                                     dsink.sizes() == a.sink.sizes() && dsink.is_contiguous()),
                op, ": dsink must be contiguous float32 of sink's shape");
    const at::Tensor q = a.q, k = a.k, v = a.v, pse = a.pse;
    return Prepared{{q, k, v, g, pse, a.mask, a.sink, smax, ssum, out},
                    [=]() mutable {
                      // The bias gradient accumulates in float32 over every (batch, head) and row the
                      // bias covers, then sums over the dimensions it broadcasts.
                      bind(*setup);
                      at::Tensor work;
                      AttentionProblem& p = setup->problem;
                      if (dpse.defined()) {
                        work = at::zeros({p.batch, p.q_heads, setup->pse_rows_full, pse.size(3)},
                                         at::TensorOptions().dtype(at::kFloat));
                        p.dpse_b = work.stride(0);
                        p.dpse_n = work.stride(1);
                        p.dpse_i = work.stride(2);
                        p.dpse_j = work.stride(3);
                      }
                      flashAttentionBackward(p, q, k, v, out, g, smax, ssum, setup->stats, dq, dk, dv, work, dsink);
                      if (dpse.defined()) {
                        if (pse.size(0) == 1) work = work.sum(0, true);
                        if (pse.size(1) == 1) work = work.sum(1, true);
                        if (pse.size(2) == 1) work = work.sum(2, true);
                        dpse.copy_(work);
                      }
                    },
                    {dq, dk, dv, dpse, dsink}};
  });
}

}  // namespace

// Forward, fixed sequence lengths (BSH, SBH, BSND, BNSD).
extern "C" NOP_API aclnnStatus aclnnFlashAttentionScoreGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclIntArray* prefixOptional, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens,
    int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode, aclTensor* softmaxMaxOut,
    aclTensor* softmaxSumOut, aclTensor* softmaxOutOut, aclTensor* attentionOutOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  ForwardIo io{.query = query, .key = key, .value = value, .realShift = realShiftOptional,
               .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
               .prefix = prefixOptional, .scaleValue = scaleValue, .keepProb = keepProb, .preTokens = preTokens,
               .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
               .innerPrecise = innerPrecise, .sparseMode = sparseMode, .softmaxMaxOut = softmaxMaxOut,
               .softmaxSumOut = softmaxSumOut, .softmaxOutOut = softmaxOutOut, .attentionOutOut = attentionOutOut};
  return forward("aclnnFlashAttentionScore", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionScore, "query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, prefixOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut");

// Forward with attention sinks (and pse_type).
extern "C" NOP_API aclnnStatus aclnnFlashAttentionScoreV3GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclTensor* sinkOptional, const aclIntArray* prefixOptional, const aclIntArray* qStartIdxOptional,
    const aclIntArray* kvStartIdxOptional, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens,
    int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode, int64_t pseType,
    aclTensor* softmaxMaxOut, aclTensor* softmaxSumOut, aclTensor* softmaxOutOut, aclTensor* attentionOutOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  ForwardIo io{.query = query, .key = key, .value = value, .realShift = realShiftOptional,
               .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
               .sink = sinkOptional, .prefix = prefixOptional, .scaleValue = scaleValue, .keepProb = keepProb,
               .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
               .innerPrecise = innerPrecise, .sparseMode = sparseMode, .pseType = pseType,
               .softmaxMaxOut = softmaxMaxOut, .softmaxSumOut = softmaxSumOut, .softmaxOutOut = softmaxOutOut,
               .attentionOutOut = attentionOutOut};
  return forward("aclnnFlashAttentionScoreV3", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionScoreV3, "query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, sinkOptional, prefixOptional, qStartIdxOptional, kvStartIdxOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, pseType, softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut");

// Forward, TND with cumulative sequence ends per batch.
extern "C" NOP_API aclnnStatus aclnnFlashAttentionVarLenScoreGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclIntArray* prefixOptional, const aclIntArray* actualSeqQLenOptional,
    const aclIntArray* actualSeqKvLenOptional, double scaleValue, double keepProb, int64_t preTokens,
    int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode,
    aclTensor* softmaxMaxOut, aclTensor* softmaxSumOut, aclTensor* softmaxOutOut, aclTensor* attentionOutOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  ForwardIo io{.query = query, .key = key, .value = value, .realShift = realShiftOptional,
               .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
               .prefix = prefixOptional, .actualSeqQLen = actualSeqQLenOptional,
               .actualSeqKvLen = actualSeqKvLenOptional, .scaleValue = scaleValue, .keepProb = keepProb,
               .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
               .innerPrecise = innerPrecise, .sparseMode = sparseMode, .softmaxMaxOut = softmaxMaxOut,
               .softmaxSumOut = softmaxSumOut, .softmaxOutOut = softmaxOutOut, .attentionOutOut = attentionOutOut};
  return forward("aclnnFlashAttentionVarLenScore", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionVarLenScore, "query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut");

// TND forward whose statistics may be laid out as the input (softmaxLayout "same_as_input").
extern "C" NOP_API aclnnStatus aclnnFlashAttentionVarLenScoreV4GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclIntArray* prefixOptional, const aclIntArray* actualSeqQLenOptional,
    const aclIntArray* actualSeqKvLenOptional, double scaleValue, double keepProb, int64_t preTokens,
    int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode,
    char* softmaxLayout, aclTensor* softmaxMaxOut, aclTensor* softmaxSumOut, aclTensor* softmaxOutOut,
    aclTensor* attentionOutOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  ForwardIo io{.query = query, .key = key, .value = value, .realShift = realShiftOptional,
               .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
               .prefix = prefixOptional, .actualSeqQLen = actualSeqQLenOptional,
               .actualSeqKvLen = actualSeqKvLenOptional, .scaleValue = scaleValue, .keepProb = keepProb,
               .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
               .innerPrecise = innerPrecise, .sparseMode = sparseMode, .softmaxLayout = softmaxLayout,
               .softmaxMaxOut = softmaxMaxOut, .softmaxSumOut = softmaxSumOut, .softmaxOutOut = softmaxOutOut,
               .attentionOutOut = attentionOutOut};
  return forward("aclnnFlashAttentionVarLenScoreV4", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionVarLenScoreV4, "query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, softmaxLayout, softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut");

// TND forward with attention sinks.
extern "C" NOP_API aclnnStatus aclnnFlashAttentionVarLenScoreV5GetWorkspaceSize(
    const aclTensor* query, const aclTensor* queryRopeOptional, const aclTensor* key,
    const aclTensor* keyRopeOptional, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclTensor* sinkOptional, const aclIntArray* prefixOptional, const aclIntArray* actualSeqQLenOptional,
    const aclIntArray* actualSeqKvLenOptional, const aclIntArray* qStartIdxOptional,
    const aclIntArray* kvStartIdxOptional, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens,
    int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode, int64_t pseType,
    char* softmaxLayout, aclTensor* softmaxMaxOut, aclTensor* softmaxSumOut, aclTensor* softmaxOutOut,
    aclTensor* attentionOutOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  ForwardIo io{.query = query, .queryRope = queryRopeOptional, .key = key, .keyRope = keyRopeOptional,
               .value = value, .realShift = realShiftOptional, .dropMask = dropMaskOptional,
               .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional, .sink = sinkOptional,
               .prefix = prefixOptional, .actualSeqQLen = actualSeqQLenOptional,
               .actualSeqKvLen = actualSeqKvLenOptional, .scaleValue = scaleValue, .keepProb = keepProb,
               .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
               .innerPrecise = innerPrecise, .sparseMode = sparseMode, .pseType = pseType,
               .softmaxLayout = softmaxLayout, .softmaxMaxOut = softmaxMaxOut, .softmaxSumOut = softmaxSumOut,
               .softmaxOutOut = softmaxOutOut, .attentionOutOut = attentionOutOut};
  return forward("aclnnFlashAttentionVarLenScoreV5", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionVarLenScoreV5, "query, queryRopeOptional, key, keyRopeOptional, value, realShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, sinkOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, qStartIdxOptional, kvStartIdxOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, pseType, softmaxLayout, softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut");

extern "C" NOP_API aclnnStatus aclnnFlashAttentionScoreGradGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclIntArray* prefixOptional,
    double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout,
    int64_t innerPrecise, int64_t sparseMode, aclTensor* dqOut, aclTensor* dkOut, aclTensor* dvOut,
    aclTensor* dpseOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  BackwardIo io{.query = query, .key = key, .value = value, .dy = dy, .pseShift = pseShiftOptional,
                .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
                .softmaxMax = softmaxMaxOptional, .softmaxSum = softmaxSumOptional, .softmaxIn = softmaxInOptional,
                .attentionIn = attentionInOptional, .prefix = prefixOptional, .scaleValue = scaleValue,
                .keepProb = keepProb, .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum,
                .inputLayout = inputLayout, .innerPrecise = innerPrecise, .sparseMode = sparseMode, .dqOut = dqOut,
                .dkOut = dkOut, .dvOut = dvOut, .dpseOut = dpseOut};
  return backward("aclnnFlashAttentionScoreGrad", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionScoreGrad, "query, key, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional, attentionInOptional, prefixOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, dqOut, dkOut, dvOut, dpseOut");

extern "C" NOP_API aclnnStatus aclnnFlashAttentionScoreGradV3GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclTensor* sinkOptional,
    const aclIntArray* prefixOptional, const aclIntArray* qStartIdxOptional, const aclIntArray* kvStartIdxOptional,
    double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout,
    int64_t innerPrecise, int64_t sparseMode, int64_t pseType, aclTensor* dqOut, aclTensor* dkOut, aclTensor* dvOut,
    aclTensor* dpseOut, aclTensor* dsinkOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  BackwardIo io{.query = query, .key = key, .value = value, .dy = dy, .pseShift = pseShiftOptional,
                .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
                .softmaxMax = softmaxMaxOptional, .softmaxSum = softmaxSumOptional, .softmaxIn = softmaxInOptional,
                .attentionIn = attentionInOptional, .sink = sinkOptional, .prefix = prefixOptional,
                .scaleValue = scaleValue, .keepProb = keepProb, .preTokens = preTokens, .nextTokens = nextTokens,
                .headNum = headNum, .inputLayout = inputLayout, .innerPrecise = innerPrecise,
                .sparseMode = sparseMode, .pseType = pseType, .dqOut = dqOut, .dkOut = dkOut, .dvOut = dvOut,
                .dpseOut = dpseOut, .dsinkOut = dsinkOut};
  return backward("aclnnFlashAttentionScoreGradV3", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionScoreGradV3, "query, key, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional, attentionInOptional, sinkOptional, prefixOptional, qStartIdxOptional, kvStartIdxOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, pseType, dqOut, dkOut, dvOut, dpseOut, dsinkOut");

extern "C" NOP_API aclnnStatus aclnnFlashAttentionUnpaddingScoreGradGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclIntArray* prefixOptional,
    const aclIntArray* actualSeqQLenOptional, const aclIntArray* actualSeqKvLenOptional, double scaleValue,
    double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise,
    int64_t sparseMode, aclTensor* dqOut, aclTensor* dkOut, aclTensor* dvOut, aclTensor* dpseOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  BackwardIo io{.query = query, .key = key, .value = value, .dy = dy, .pseShift = pseShiftOptional,
                .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
                .softmaxMax = softmaxMaxOptional, .softmaxSum = softmaxSumOptional, .softmaxIn = softmaxInOptional,
                .attentionIn = attentionInOptional, .prefix = prefixOptional, .actualSeqQLen = actualSeqQLenOptional,
                .actualSeqKvLen = actualSeqKvLenOptional, .scaleValue = scaleValue, .keepProb = keepProb,
                .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
                .innerPrecise = innerPrecise, .sparseMode = sparseMode, .dqOut = dqOut, .dkOut = dkOut,
                .dvOut = dvOut, .dpseOut = dpseOut};
  return backward("aclnnFlashAttentionUnpaddingScoreGrad", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionUnpaddingScoreGrad, "query, key, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional, attentionInOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, dqOut, dkOut, dvOut, dpseOut");

extern "C" NOP_API aclnnStatus aclnnFlashAttentionUnpaddingScoreGradV4GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclIntArray* prefixOptional,
    const aclIntArray* actualSeqQLenOptional, const aclIntArray* actualSeqKvLenOptional, double scaleValue,
    double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise,
    int64_t sparseMode, aclTensor* dqOut, aclTensor* dkOut, aclTensor* dvOut, aclTensor* dpseOut, char* softmaxLayout,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  BackwardIo io{.query = query, .key = key, .value = value, .dy = dy, .pseShift = pseShiftOptional,
                .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
                .softmaxMax = softmaxMaxOptional, .softmaxSum = softmaxSumOptional, .softmaxIn = softmaxInOptional,
                .attentionIn = attentionInOptional, .prefix = prefixOptional, .actualSeqQLen = actualSeqQLenOptional,
                .actualSeqKvLen = actualSeqKvLenOptional, .scaleValue = scaleValue, .keepProb = keepProb,
                .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
                .innerPrecise = innerPrecise, .sparseMode = sparseMode, .softmaxLayout = softmaxLayout,
                .dqOut = dqOut, .dkOut = dkOut, .dvOut = dvOut, .dpseOut = dpseOut};
  return backward("aclnnFlashAttentionUnpaddingScoreGradV4", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionUnpaddingScoreGradV4, "query, key, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional, attentionInOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, dqOut, dkOut, dvOut, dpseOut, softmaxLayout");

extern "C" NOP_API aclnnStatus aclnnFlashAttentionUnpaddingScoreGradV5GetWorkspaceSize(
    const aclTensor* query, const aclTensor* queryRopeOptional, const aclTensor* key,
    const aclTensor* keyRopeOptional, const aclTensor* value, const aclTensor* dy, const aclTensor* pseShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional, const aclTensor* softmaxInOptional,
    const aclTensor* attentionInOptional, const aclTensor* sinkOptional, const aclIntArray* prefixOptional,
    const aclIntArray* actualSeqQLenOptional, const aclIntArray* actualSeqKvLenOptional,
    const aclIntArray* qStartIdxOptional, const aclIntArray* kvStartIdxOptional, double scaleValue, double keepProb,
    int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise,
    int64_t sparseMode, int64_t pseType, char* softmaxLayout, aclTensor* dqOut, aclTensor* dqRopeOut,
    aclTensor* dkOut, aclTensor* dkRopeOut, aclTensor* dvOut, aclTensor* dpseOut, aclTensor* dsinkOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  BackwardIo io{.query = query, .queryRope = queryRopeOptional, .key = key, .keyRope = keyRopeOptional,
                .value = value, .dy = dy, .pseShift = pseShiftOptional, .dropMask = dropMaskOptional,
                .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional, .softmaxMax = softmaxMaxOptional,
                .softmaxSum = softmaxSumOptional, .softmaxIn = softmaxInOptional, .attentionIn = attentionInOptional,
                .sink = sinkOptional, .prefix = prefixOptional, .actualSeqQLen = actualSeqQLenOptional,
                .actualSeqKvLen = actualSeqKvLenOptional, .scaleValue = scaleValue, .keepProb = keepProb,
                .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
                .innerPrecise = innerPrecise, .sparseMode = sparseMode, .pseType = pseType,
                .softmaxLayout = softmaxLayout, .dqOut = dqOut, .dkOut = dkOut, .dvOut = dvOut, .dpseOut = dpseOut,
                .dsinkOut = dsinkOut};
  return backward("aclnnFlashAttentionUnpaddingScoreGradV5", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionUnpaddingScoreGradV5, "query, queryRopeOptional, key, keyRopeOptional, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional, attentionInOptional, sinkOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, qStartIdxOptional, kvStartIdxOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, pseType, softmaxLayout, dqOut, dqRopeOut, dkOut, dkRopeOut, dvOut, dpseOut, dsinkOut");

// The dropout mask of FlashAttentionScore: `shape`'s element count of bits (1 = keep), each 0 with
// probability `prob` (the probability of dropping, as CANN's op takes it), a function of (seed,
// offset) only.
extern "C" NOP_API aclnnStatus aclnnDropoutGenMaskV2GetWorkspaceSize(const aclIntArray* shape, double prob, int64_t seed,
                                                                     int64_t offset, int64_t probDataType,
                                                                     aclTensor* out, uint64_t* workspaceSize,
                                                                     aclOpExecutor** executor) {
  return prepareOp("aclnnDropoutGenMaskV2", workspaceSize, executor, [&] {
    const std::vector<int64_t> dims = intArray(shape);
    at::Tensor o = requiredTensor(out, "out");
    int64_t numel = 1;
    for (int64_t d : dims) numel *= d;
    TORCH_CHECK(o.scalar_type() == at::kByte && o.is_contiguous() && o.numel() * 8 >= numel,
                "aclnnDropoutGenMaskV2: out must be contiguous uint8 with at least ", (numel + 7) / 8, " bytes");
    TORCH_CHECK(prob >= 0.0 && prob <= 1.0, "aclnnDropoutGenMaskV2: prob must be in [0, 1], got ", prob);
    (void)probDataType;
    return Prepared{{}, [=]() mutable {
                      dropoutGenMask(static_cast<uint64_t>(seed), static_cast<uint64_t>(offset), 1.0 - prob, numel,
                                     static_cast<uint8_t*>(o.data_ptr()));
                      // The padding past the last element (masks are 128-element aligned) reads 0.
                      const int64_t used = (numel + 7) / 8;
                      if (o.numel() > used) o.view(-1).narrow(0, used, o.numel() - used).zero_();
                    }, {o}};
  });
}
NPU_ATEN_OP(DropoutGenMaskV2, "shape, prob, seed, offset, probDataType, out");
