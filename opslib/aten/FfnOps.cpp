// FfnOps.cpp - FFNV2: a transformer feed-forward block, y = act(x W1 + b1) W2 + b2, for one expert or for
// groups of rows per expert (MoE; counts or cumulative ends). Gated activations (geglu, swiglu, reglu)
// activate the first half of x W1 + b1 and multiply by the second. Quantized forms are not taken.
#include <ATen/TensorOperators.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/zeros.h>

#include <string>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

bool gated(const std::string& act) { return act == "geglu" || act == "swiglu" || act == "reglu"; }

at::Tensor activate(const at::Tensor& h, const std::string& act) {
  if (act == "relu") return at::relu(h);
  if (act == "silu") return at::silu(h);
  if (act == "gelu") return at::gelu(h, "tanh");
  if (act == "fastgelu") return h * at::sigmoid(h * 1.702);
  auto halves = h.chunk(2, -1);
  const at::Tensor gate = act == "geglu" ? at::gelu(halves[0], "tanh")
                                         : (act == "swiglu" ? at::silu(halves[0]) : at::relu(halves[0]));
  return gate * halves[1];
}

// One expert's rows: act(x W1 + b1) W2 + b2 in float32.
at::Tensor ffn(const at::Tensor& x, const at::Tensor& w1, const at::Tensor& w2, const at::Tensor& b1,
               const at::Tensor& b2, const std::string& act) {
  at::Tensor h = at::matmul(x, w1.to(at::kFloat));
  if (b1.defined()) h = h + b1.to(at::kFloat);
  at::Tensor y = at::matmul(activate(h, act), w2.to(at::kFloat));
  if (b2.defined()) y = y + b2.to(at::kFloat);
  return y;
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnFFNV2GetWorkspaceSize(
    const aclTensor* x, const aclTensor* weight1, const aclTensor* weight2, const aclIntArray* expertTokens,
    const aclTensor* bias1, const aclTensor* bias2, const aclTensor* scale, const aclTensor* offset,
    const aclTensor* deqScale1, const aclTensor* deqScale2, const aclTensor* antiquantScale1,
    const aclTensor* antiquantScale2, const aclTensor* antiquantOffset1, const aclTensor* antiquantOffset2,
    const char* activation, int64_t innerPrecise, bool tokensIndexFlag, aclTensor* y, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnFFNV2", workspaceSize, executor, [&] {
    const char* op = "aclnnFFNV2";
    const std::pair<const char*, const aclTensor*> quant[] = {
        {"scale", scale}, {"offset", offset}, {"deq_scale1", deqScale1}, {"deq_scale2", deqScale2},
        {"antiquant_scale1", antiquantScale1}, {"antiquant_scale2", antiquantScale2},
        {"antiquant_offset1", antiquantOffset1}, {"antiquant_offset2", antiquantOffset2}};
    for (const auto& [name, t] : quant) {
      TORCH_CHECK(!hostTensor(t).defined(), op, ": ", name, " (quantized forms) is not supported on the software ",
                  "NPU: pass None");
    }
    at::Tensor xt = requiredTensor(x, "x"), w1 = requiredTensor(weight1, "weight1"), w2 = requiredTensor(weight2, "weight2");
    at::Tensor b1 = hostTensor(bias1), b2 = hostTensor(bias2), out = requiredTensor(y, "y");
    const std::string act = activation == nullptr ? "" : activation;
    TORCH_CHECK(act == "fastgelu" || act == "gelu" || act == "relu" || act == "silu" || gated(act), op,
                ": activation must be fastgelu, gelu, relu, silu, geglu, swiglu or reglu, got '", act, "'");
    const std::vector<int64_t> tokens = intArray(expertTokens);
    const bool moe = !tokens.empty();
    TORCH_CHECK(xt.dim() >= 2 && w1.dim() == (moe ? 3 : 2) && w2.dim() == w1.dim(), op, ": x must be [..., K1] and the ",
                "weights [K, N] (with experts [E, K, N]), got ", xt.sizes(), ", ", w1.sizes(), ", ", w2.sizes());
    const int64_t n1 = w1.size(-1), k2 = w2.size(-2);
    TORCH_CHECK(xt.size(-1) == w1.size(-2) && (gated(act) ? n1 == 2 * k2 : n1 == k2), op, ": x ", xt.sizes(),
                ", weight1 ", w1.sizes(), " and weight2 ", w2.sizes(), " do not chain",
                gated(act) ? " (gated activations halve weight1's outputs)" : "");
    if (moe) {
      TORCH_CHECK(static_cast<int64_t>(tokens.size()) == w1.size(0), op, ": expert_tokens has ", tokens.size(),
                  " values for ", w1.size(0), " experts");
    }
    return Prepared{{xt, w1, w2, b1, b2}, [=]() mutable {
                      const at::Tensor rows = xt.reshape({-1, xt.size(-1)}).to(at::kFloat);
                      at::Tensor result = at::zeros({rows.size(0), w2.size(-1)}, at::TensorOptions().dtype(at::kFloat));
                      if (!moe) {
                        result.copy_(ffn(rows, w1, w2, b1, b2, act));
                      } else {
                        int64_t begin = 0;
                        for (size_t e = 0; e < tokens.size(); ++e) {
                          const int64_t end = tokensIndexFlag ? tokens[e] : begin + tokens[e];
                          TORCH_CHECK(end >= begin && end <= rows.size(0), op, ": expert ", e, "'s tokens end at ",
                                      end, ", past the ", rows.size(0), " rows");
                          const auto ei = static_cast<int64_t>(e);
                          result.narrow(0, begin, end - begin)
                              .copy_(ffn(rows.narrow(0, begin, end - begin), w1[ei], w2[ei],
                                         b1.defined() ? b1[ei] : at::Tensor(), b2.defined() ? b2[ei] : at::Tensor(),
                                         act));
                          begin = end;
                        }
                      }
                      out.copy_(result.view(out.sizes()));
                    },
                    {out}};
  });
}
NPU_ATEN_OP(FFNV2, "x, weight1, weight2, expertTokens, bias1, bias2, scale, offset, deqScale1, deqScale2, antiquantScale1, antiquantScale2, antiquantOffset1, antiquantOffset2, activation, innerPrecise, tokensIndexFlag, y");
