// AttentionInferMoreOps.cpp - aclnnFusedInferAttentionScoreV4 (npu_fused_infer_attention_score_v2's device op):
// the V3 inference attention plus the V4-only arguments, delegated to aclnnFusedInferAttentionScoreV3.
#include <string>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {
// An optional operand is absent when NULL or empty (torch_npu may pass an empty tensor for None).
bool present(const aclTensor* t) {
  if (t == nullptr) return false;
  int64_t* dims = nullptr;
  uint64_t rank = 0;
  if (aclGetViewShape(t, &dims, &rank) != ACLNN_SUCCESS) return true;  // let the V3 checks report it
  int64_t numel = 1;
  for (uint64_t i = 0; i < rank; ++i) numel *= dims[i];
  delete[] dims;
  return numel > 0;
}
}  // namespace

// The V3 device op (InferAttentionOps.cpp) is a public C entry point: V4 takes everything it takes.
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
    aclOpExecutor** executor);

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
  if (present(dequantScaleQuery)) {
    reason = "dequant_scale_query (quantized query) is not supported on the software NPU: pass None";
  } else if (queryQuantMode != 0) {
    reason = "query_quant_mode " + std::to_string(queryQuantMode) +
             " (quantized query) is not supported on the software NPU: pass 0";
  } else if (present(learnableSink)) {
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
