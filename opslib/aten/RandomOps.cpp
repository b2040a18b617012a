// RandomOps.cpp - random fills (uniform, normal, bernoulli, exponential), dropout, and arange. Random ops take
// the seed the adapter drew from the npu generator at launch, so results do not depend on when
// the stream runs them.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/arange_cpu_dispatch.h>
#include <ATen/ops/bernoulli_cpu_dispatch.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/exponential_cpu_dispatch.h>
#include <ATen/ops/mul_cpu_dispatch.h>
#include <ATen/ops/native_dropout_backward_cpu_dispatch.h>
#include <ATen/ops/normal_cpu_dispatch.h>
#include <ATen/ops/uniform_cpu_dispatch.h>

#include "AtenOpSupport.h"
#include "npu/graph.h"

using namespace npu::opslib::aten;

namespace {
// `offset` selects an independent stream for the same seed (several draws in one launch). In a graph
// replay the seed is mixed with the replay's (npu/graph.h): each replay draws fresh numbers.
at::Generator engine(int64_t seed, int64_t offset) {
  return at::make_generator<at::CPUGeneratorImpl>(nrtReplaySeeded(static_cast<uint64_t>(seed)) +
                                                  0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(offset));
}
}  // namespace

extern "C" NOP_API aclnnStatus aclnnInplaceUniformGetWorkspaceSize(
    aclTensor* self, double from, double to, int64_t seed, int64_t offset, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnInplaceUniform", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self");
    return Prepared{{a}, [=]() mutable { at::cpu::uniform_(a, from, to, engine(seed, offset)); }, {a}};
  });
}
NPU_ATEN_OP(InplaceUniform, "self, from, to, seed, offset");

extern "C" NOP_API aclnnStatus aclnnInplaceNormalGetWorkspaceSize(
    aclTensor* self, double mean, double std, int64_t seed, int64_t offset, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnInplaceNormal", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self");
    return Prepared{{a}, [=]() mutable { at::cpu::normal_(a, mean, std, engine(seed, offset)); }, {a}};
  });
}
NPU_ATEN_OP(InplaceNormal, "self, mean, std, seed, offset");

extern "C" NOP_API aclnnStatus aclnnInplaceBernoulliGetWorkspaceSize(
    aclTensor* self, double p, int64_t seed, int64_t offset, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnInplaceBernoulli", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self");
    return Prepared{{a}, [=]() mutable { at::cpu::bernoulli_(a, p, engine(seed, offset)); }, {a}};
  });
}
NPU_ATEN_OP(InplaceBernoulli, "self, p, seed, offset");

// The first `count` elements of self (all of them, as torch_npu launches it) drawn from Exp(lambd).
extern "C" NOP_API aclnnStatus aclnnSimThreadExponentialGetWorkspaceSize(
    aclTensor* self, int64_t count, double lambd, int64_t seed, int64_t offset, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnSimThreadExponential", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self");
    TORCH_CHECK(lambd > 0, "aclnnSimThreadExponential: lambd must be > 0, got ", lambd);
    TORCH_CHECK(count >= 0 && count <= a.numel(), "aclnnSimThreadExponential: count ", count, " must be in [0, ",
                a.numel(), "]");
    return Prepared{{a}, [=]() mutable {
                      at::Tensor head = a.reshape(-1).narrow(0, 0, count);
                      if (a.is_contiguous()) {
                        at::cpu::exponential_(head, lambd, engine(seed, offset));
                      } else {  // a strided self: draw into a contiguous copy, then write it back
                        at::Tensor flat = a.contiguous().reshape(-1);
                        at::Tensor drawn = flat.narrow(0, 0, count);
                        at::cpu::exponential_(drawn, lambd, engine(seed, offset));
                        a.copy_(flat.reshape(a.sizes()));
                      }
                    },
                    {a}};
  });
}
NPU_ATEN_OP(SimThreadExponential, "self, count, lambd, seed, offset");

// out = input * mask / (1 - p) with mask ~ Bernoulli(1 - p) (bool).
extern "C" NOP_API aclnnStatus aclnnDropoutGetWorkspaceSize(const aclTensor* input, double p,
                                                            int64_t seed, int64_t offset,
                                                            aclTensor* out, aclTensor* mask,
                                                            uint64_t* workspaceSize,
                                                            aclOpExecutor** executor) {
  return prepareOp("aclnnDropout", workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(input, "input"), o = requiredTensor(out, "out");
    at::Tensor m = requiredTensor(mask, "mask");
    if (!(p >= 0 && p <= 1)) throw std::invalid_argument("p must be in [0, 1]");
    return Prepared{{x}, [=]() mutable {
                      const double keep = 1.0 - p;
                      at::Tensor draw = at::empty_like(x);
                      at::cpu::bernoulli_(draw, keep, engine(seed, offset));
                      m.copy_(draw);
                      at::cpu::mul_out(o, x, draw);
                      o.mul_(keep == 0 ? 0.0 : 1.0 / keep);
                    }, {o, m}};
  });
}
NPU_ATEN_OP(Dropout, "input, p, seed, offset, out, mask");

extern "C" NOP_API aclnnStatus aclnnDropoutBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* mask, double scale, aclTensor* gradInput,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnDropoutBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), m = requiredTensor(mask, "mask");
    at::Tensor gi = requiredTensor(gradInput, "gradInput");
    return Prepared{{g, m}, [=]() mutable {
                      gi.copy_(at::cpu::native_dropout_backward(g, m, scale));
                    }, {gi}};
  });
}
NPU_ATEN_OP(DropoutBackward, "gradOutput, mask, scale, gradInput");

// out = [start, start + step, ...) below end; out already has the element count.
extern "C" NOP_API aclnnStatus aclnnArangeGetWorkspaceSize(const aclScalar* start,
                                                           const aclScalar* end,
                                                           const aclScalar* step, aclTensor* out,
                                                           uint64_t* workspaceSize,
                                                           aclOpExecutor** executor) {
  return prepareOp("aclnnArange", workspaceSize, executor, [&] {
    at::Scalar s = hostScalar(start), e = hostScalar(end), st = hostScalar(step);
    at::Tensor o = requiredTensor(out, "out");
    return Prepared{{}, [=]() mutable { at::cpu::arange_out(o, s, e, st); }, {o}};
  });
}
NPU_ATEN_OP(Arange, "start, end, step, out");

// out = self * bit / (1 - p): the dropout of a bit mask (element i in bit i % 8 of byte i / 8, 1 =
// kept, as aclnnDropoutGenMaskV2 makes it); p = 1 drops everything.
extern "C" NOP_API aclnnStatus aclnnDropoutDoMaskGetWorkspaceSize(const aclTensor* self, const aclTensor* mask,
                                                                  double prob, aclTensor* out,
                                                                  uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnDropoutDoMask", workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(self, "self"), m = requiredTensor(mask, "mask"), o = requiredTensor(out, "out");
    TORCH_CHECK(m.scalar_type() == at::kByte && m.is_contiguous() && m.numel() * 8 >= x.numel(),
                "aclnnDropoutDoMask: mask must be contiguous uint8 with a bit per element of self");
    TORCH_CHECK(prob >= 0.0 && prob <= 1.0, "aclnnDropoutDoMask: prob must be in [0, 1], got ", prob);
    return Prepared{{x, m}, [=]() mutable {
                      const int64_t n = x.numel();
                      const at::Tensor bytes = m.narrow(0, 0, (n + 7) / 8).to(at::kInt);
                      const at::Tensor shifts = at::arange(8, bytes.options());
                      const at::Tensor bits = bytes.unsqueeze(1).bitwise_right_shift(shifts).bitwise_and(1)
                                                  .flatten().narrow(0, 0, n).view(x.sizes());
                      const double scale = prob >= 1.0 ? 0.0 : 1.0 / (1.0 - prob);
                      o.copy_(x.to(at::kFloat) * bits.to(at::kFloat) * scale);
                    },
                    {o}};
  });
}
NPU_ATEN_OP(DropoutDoMask, "self, mask, prob, out");
