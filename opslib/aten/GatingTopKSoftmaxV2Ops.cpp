// GatingTopKSoftmaxV2Ops.cpp - aclnnMoeGatingTopKSoftmaxV2: MoE routing. renorm 0: softmax over the experts (float32),
// then the k largest; renorm 1: the k largest logits, then a softmax over those k. Ties go to the lower expert
// index (a stable descending sort); rows marked finished are routed to expert E (one past the last).
#include <ATen/ops/softmax.h>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

extern "C" NOP_API aclnnStatus aclnnMoeGatingTopKSoftmaxV2GetWorkspaceSize(
    const aclTensor* x, const aclTensor* finishedOptional, int64_t k, int64_t renorm, bool outputSoftmaxResultFlag,
    aclTensor* yOut, aclTensor* expertIdxOut, aclTensor* softmaxResultOutOptional, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnMoeGatingTopKSoftmaxV2", workspaceSize, executor, [&] {
    const char* op = "aclnnMoeGatingTopKSoftmaxV2";
    at::Tensor xt = requiredTensor(x, "x"), fin = hostTensor(finishedOptional);
    at::Tensor y = requiredTensor(yOut, "yOut"), idx = requiredTensor(expertIdxOut, "expertIdxOut");
    at::Tensor sm = hostTensor(softmaxResultOutOptional);
    TORCH_CHECK(xt.dim() >= 2, op, ": x must be [..., experts], got ", xt.sizes());
    const int64_t experts = xt.size(-1);
    TORCH_CHECK(k >= 1 && k <= experts, op, ": k must be in [1, ", experts, "], got ", k);
    TORCH_CHECK(renorm == 0 || renorm == 1, op, ": renorm must be 0 or 1, got ", renorm);
    TORCH_CHECK(!fin.defined() || (fin.scalar_type() == at::kBool && fin.numel() * experts == xt.numel()), op,
                ": finished must be bool with one entry per row of x");
    TORCH_CHECK(y.numel() * experts == xt.numel() * k && idx.sizes() == y.sizes(), op, ": yOut and expertIdxOut must "
                "be x's shape with k (", k, ") in the last dimension");
    TORCH_CHECK(!outputSoftmaxResultFlag || (sm.defined() && sm.sizes() == xt.sizes()), op,
                ": the softmax output must have x's shape ", xt.sizes());
    return Prepared{{xt, fin}, [=]() mutable {
                      const at::Tensor rows = xt.reshape({-1, experts});
                      const at::Tensor probs = at::softmax(rows.to(at::kFloat), -1);
                      at::Tensor values, order;
                      if (renorm == 0) {
                        auto [sorted, indices] = probs.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true);
                        values = sorted.narrow(-1, 0, k);
                        order = indices.narrow(-1, 0, k);
                      } else {
                        auto [sorted, indices] = rows.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true);
                        values = at::softmax(sorted.narrow(-1, 0, k).to(at::kFloat), -1);
                        order = indices.narrow(-1, 0, k);
                      }
                      if (fin.defined()) order = order.masked_fill(fin.reshape({-1, 1}), experts);
                      y.copy_(values.reshape(y.sizes()));
                      idx.copy_(order.reshape(idx.sizes()));
                      if (outputSoftmaxResultFlag) sm.copy_(probs.reshape(sm.sizes()));
                    },
                    {y, idx, sm}};
  });
}
NPU_ATEN_OP(MoeGatingTopKSoftmaxV2,
            "x, finishedOptional, k, renorm, outputSoftmaxResultFlag, yOut, expertIdxOut, softmaxResultOutOptional");
