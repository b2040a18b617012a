// SamplingOps.cpp - ApplyTopKTopP: top-k then top-p (nucleus) filtering of sampling logits, as torch_npu
// documents it (stable ascending sort, ties of the k-th value kept, at least one value kept by top-p).
#include <ATen/TensorOperators.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sort.h>

#include <limits>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

extern "C" NOP_API aclnnStatus aclnnApplyTopKTopPGetWorkspaceSize(const aclTensor* logits, const aclTensor* p,
                                                                  const aclTensor* k, aclTensor* out,
                                                                  uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnApplyTopKTopP", workspaceSize, executor, [&] {
    const char* op = "aclnnApplyTopKTopP";
    at::Tensor x = requiredTensor(logits, "logits"), pt = hostTensor(p), kt = hostTensor(k);
    at::Tensor o = requiredTensor(out, "out");
    TORCH_CHECK(x.dim() == 2, op, ": logits must be 2-D [batch, vocabulary], got ", x.sizes());
    TORCH_CHECK(!pt.defined() || (pt.dim() == 1 && pt.size(0) == x.size(0)), op, ": p must be [", x.size(0),
                "], got ", pt.sizes());
    TORCH_CHECK(!kt.defined() || (kt.dim() == 1 && kt.size(0) == x.size(0) && !at::isFloatingType(kt.scalar_type())),
                op, ": k must be integer [", x.size(0), "], got ", kt.defined() ? kt.sizes() : c10::IntArrayRef());
    return Prepared{{x, pt, kt}, [=]() mutable {
                      const int64_t vocab = x.size(1);
                      auto [sorted, indices] = x.to(at::kFloat).sort(/*stable=*/true, /*dim=*/-1, /*descending=*/false);
                      const float neg_inf = -std::numeric_limits<float>::infinity();
                      if (kt.defined()) {
                        const at::Tensor kk = kt.to(at::kLong);
                        TORCH_CHECK(kk.min().item<int64_t>() >= 1 && kk.max().item<int64_t>() <= vocab, op,
                                    ": every k must be in [1, ", vocab, "]");
                        const at::Tensor threshold = sorted.gather(-1, (vocab - kk).unsqueeze(1));
                        sorted.masked_fill_(sorted < threshold, neg_inf);
                      }
                      if (pt.defined()) {
                        const at::Tensor cumulative = at::softmax(sorted, -1).cumsum(-1);
                        at::Tensor drop = cumulative <= (1 - pt.to(at::kFloat)).unsqueeze(1);
                        drop.select(-1, vocab - 1).fill_(false);  // the largest value always stays
                        sorted.masked_fill_(drop, neg_inf);
                      }
                      o.scatter_(-1, indices, sorted.to(o.scalar_type()));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(ApplyTopKTopP, "logits, p, k, out");
