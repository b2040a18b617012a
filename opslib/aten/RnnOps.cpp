// RnnOps.cpp - LstmCell / LstmCellBackward: one LSTM time step (gate order input, forget, cell, output in the
// 4 * hidden columns) with torch_npu's transposed weights and its saved gate activations for the backward.
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

// Every step is computed in float32 and rounded once when stored, as a fused cell would.
at::Tensor asFloat(const at::Tensor& t) { return t.to(at::kFloat); }

void checkCellOperands(const char* op, const at::Tensor& x, const at::Tensor& w_ih, const at::Tensor& w_hh,
                       const at::Tensor& h, const at::Tensor& c) {
  TORCH_CHECK(x.dim() == 2, op, ": input must be 2-D [batch, input_size], got ", x.sizes());
  TORCH_CHECK(w_hh.dim() == 2 && w_hh.size(1) == 4 * w_hh.size(0), op, ": w_hh must be [hidden, 4 * hidden], got ",
              w_hh.sizes());
  TORCH_CHECK(w_ih.dim() == 2 && w_ih.size(0) == x.size(1) && w_ih.size(1) == w_hh.size(1), op,
              ": w_ih must be [input_size, 4 * hidden], got ", w_ih.sizes());
  TORCH_CHECK(h.numel() == x.size(0) * w_hh.size(0) && c.numel() == h.numel(), op,
              ": h and c must hold [batch, hidden] values, got ", h.sizes(), " and ", c.sizes());
}

// A missing incoming gradient counts as zeros; present ones may be [1, batch, hidden] or [batch, hidden].
at::Tensor gradOrZeros(const at::Tensor& grad, const at::Tensor& like) {
  return grad.defined() ? asFloat(grad).reshape(like.sizes()) : at::zeros_like(like);
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnLstmCellGetWorkspaceSize(
    const aclTensor* input, const aclTensor* wIh, const aclTensor* wHh, const aclTensor* h, const aclTensor* c,
    const aclTensor* bIh, const aclTensor* bHh, aclTensor* yOut, aclTensor* hOut, aclTensor* cOut, aclTensor* iOut,
    aclTensor* jOut, aclTensor* fOut, aclTensor* oOut, aclTensor* tanhcOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnLstmCell", workspaceSize, executor, [&] {
    const char* op = "aclnnLstmCell";
    at::Tensor x = requiredTensor(input, "input"), wi = requiredTensor(wIh, "w_ih"), wh = requiredTensor(wHh, "w_hh");
    at::Tensor h0 = requiredTensor(h, "h"), c0 = requiredTensor(c, "c");
    at::Tensor bi = hostTensor(bIh), bh = hostTensor(bHh);
    std::vector<at::Tensor> outs;
    for (aclTensor* out : {yOut, hOut, cOut, iOut, jOut, fOut, oOut, tanhcOut}) {
      outs.push_back(requiredTensor(out, "output"));
    }
    checkCellOperands(op, x, wi, wh, h0, c0);
    TORCH_CHECK(bi.defined() == bh.defined(), op, ": b_ih and b_hh must be given together");
    const int64_t hidden = wh.size(0);
    for (const at::Tensor& out : outs) {
      TORCH_CHECK(out.numel() == x.size(0) * hidden, op, ": every output must hold [1, batch, hidden] values");
    }
    std::vector<at::Tensor> inputs{x, wi, wh, h0, c0, bi, bh};
    return Prepared{inputs, [=]() mutable {
                      const at::Tensor state = asFloat(h0).reshape({x.size(0), hidden});
                      at::Tensor gates = at::matmul(asFloat(x), asFloat(wi)) + at::matmul(state, asFloat(wh));
                      if (bi.defined()) {
                        gates = gates + asFloat(bi).reshape({-1}) + asFloat(bh).reshape({-1});
                      }
                      const auto chunks = gates.chunk(4, -1);
                      const at::Tensor i = at::sigmoid(chunks[0]), f = at::sigmoid(chunks[1]);
                      const at::Tensor j = at::tanh(chunks[2]), o = at::sigmoid(chunks[3]);
                      const at::Tensor c_new = f * asFloat(c0).reshape({x.size(0), hidden}) + i * j;
                      const at::Tensor tanhc = at::tanh(c_new);
                      const at::Tensor h_new = o * tanhc;
                      const std::vector<at::Tensor> values{h_new, h_new, c_new, i, j, f, o, tanhc};
                      for (size_t k = 0; k < outs.size(); ++k) {
                        outs[k].copy_(values[k].reshape(outs[k].sizes()));
                      }
                    },
                    outs};
  });
}
NPU_ATEN_OP(LstmCell, "input, wIh, wHh, h, c, bIh, bHh, yOut, hOut, cOut, iOut, jOut, fOut, oOut, tanhcOut");

extern "C" NOP_API aclnnStatus aclnnLstmCellBackwardGetWorkspaceSize(
    const aclTensor* gradY, const aclTensor* gradH, const aclTensor* gradC, const aclTensor* input,
    const aclTensor* wIh, const aclTensor* wHh, const aclTensor* h, const aclTensor* c, const aclTensor* cOutput,
    const aclTensor* iGate, const aclTensor* jGate, const aclTensor* fGate, const aclTensor* oGate,
    const aclTensor* tanhc, aclTensor* gradInput, aclTensor* gradWIh, aclTensor* gradWHh, aclTensor* gradBIh,
    aclTensor* gradBHh, aclTensor* gradHx, aclTensor* gradCx, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnLstmCellBackward", workspaceSize, executor, [&] {
    const char* op = "aclnnLstmCellBackward";
    at::Tensor gy = hostTensor(gradY), gh = hostTensor(gradH), gc = hostTensor(gradC);
    at::Tensor x = requiredTensor(input, "input"), wi = requiredTensor(wIh, "w_ih"), wh = requiredTensor(wHh, "w_hh");
    at::Tensor h0 = requiredTensor(h, "h"), c0 = requiredTensor(c, "c"), c1 = requiredTensor(cOutput, "c_output");
    at::Tensor ig = requiredTensor(iGate, "i"), jg = requiredTensor(jGate, "j"), fg = requiredTensor(fGate, "f");
    at::Tensor og = requiredTensor(oGate, "o"), tc = requiredTensor(tanhc, "tanhc");
    at::Tensor dx = requiredTensor(gradInput, "grad_input"), dwi = requiredTensor(gradWIh, "grad_w_ih");
    at::Tensor dwh = requiredTensor(gradWHh, "grad_w_hh"), dbi = requiredTensor(gradBIh, "grad_b_ih");
    at::Tensor dbh = requiredTensor(gradBHh, "grad_b_hh"), dh = requiredTensor(gradHx, "grad_h");
    at::Tensor dc = requiredTensor(gradCx, "grad_c");
    checkCellOperands(op, x, wi, wh, h0, c0);
    const int64_t hidden = wh.size(0);
    for (const at::Tensor& saved : {c1, ig, jg, fg, og, tc}) {
      TORCH_CHECK(saved.numel() == x.size(0) * hidden, op,
                  ": saved forward outputs must hold [1, batch, hidden] values");
    }
    std::vector<at::Tensor> inputs{gy, gh, gc, x, wi, wh, h0, c0, c1, ig, jg, fg, og, tc};
    return Prepared{inputs, [=]() mutable {
                      const std::vector<int64_t> state_shape{x.size(0), hidden};
                      auto saved = [&](const at::Tensor& t) { return asFloat(t).reshape(state_shape); };
                      const at::Tensor i = saved(ig), j = saved(jg), f = saved(fg), o = saved(og), th = saved(tc);
                      const at::Tensor zeros = at::zeros(state_shape, x.options().dtype(at::kFloat));
                      // y and h are the same tensor in the forward, so their gradients add up.
                      const at::Tensor d_h = gradOrZeros(gy, zeros) + gradOrZeros(gh, zeros);
                      const at::Tensor d_c = gradOrZeros(gc, zeros) + d_h * o * (1 - th * th);
                      const at::Tensor d_i = d_c * j * i * (1 - i);
                      const at::Tensor d_f = d_c * saved(c0) * f * (1 - f);
                      const at::Tensor d_j = d_c * i * (1 - j * j);
                      const at::Tensor d_o = d_h * th * o * (1 - o);
                      const at::Tensor d_gates = at::cat({d_i, d_f, d_j, d_o}, -1);
                      dx.copy_(at::matmul(d_gates, asFloat(wi).t()));
                      dwi.copy_(at::matmul(asFloat(x).t(), d_gates));
                      dwh.copy_(at::matmul(saved(h0).t(), d_gates));
                      const at::Tensor d_bias = d_gates.sum(0);
                      dbi.copy_(d_bias.reshape(dbi.sizes()));
                      dbh.copy_(d_bias.reshape(dbh.sizes()));
                      dh.copy_(at::matmul(d_gates, asFloat(wh).t()).reshape(dh.sizes()));
                      dc.copy_((d_c * f).reshape(dc.sizes()));
                    },
                    {dx, dwi, dwh, dbi, dbh, dh, dc}};
  });
}
NPU_ATEN_OP(LstmCellBackward, "gradY, gradH, gradC, input, wIh, wHh, h, c, cOutput, iGate, jGate, fGate, oGate, "
                              "tanhc, gradInput, gradWIh, gradWHh, gradBIh, gradBHh, gradHx, gradCx");
