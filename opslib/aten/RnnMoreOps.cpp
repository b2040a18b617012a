// RnnMoreOps.cpp - DynamicRNN / DynamicRNNGrad (whole-sequence LSTM, gate columns i, f, j, o) and DynamicGRUV2 /
// DynamicGRUV2Grad (whole-sequence GRU, gate columns r, z, n, reset applied after the hidden matmul).
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/zeros.h>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

// Every step is computed in float32 and rounded once when stored, as a fused kernel would.
at::Tensor asFloat(const at::Tensor& t) { return t.to(at::kFloat); }

// Steps in the order the recurrence visits them: 0..T-1, or T-1..0 for the reverse direction.
int64_t stepAt(int64_t k, int64_t steps, bool reverse) { return reverse ? steps - 1 - k : k; }

// An optional [T, batch, hidden] (or [T, batch]) validity mask as float32 [T, batch, 1] of 0/1; undefined = all valid.
at::Tensor stepMask(const at::Tensor& mask, int64_t steps, int64_t batch, int64_t hidden) {
  if (!mask.defined()) {
    return at::Tensor();
  }
  at::Tensor valid = at::ne(mask, 0).to(at::kFloat);
  if (valid.numel() == steps * batch * hidden) {
    // one value per element: torch_npu repeats the step's validity over hidden, so one column says it all
    valid = valid.reshape({steps, batch, hidden}).narrow(2, 0, 1);
  }
  return valid.reshape({steps, batch, 1});
}

// A missing incoming gradient counts as zeros.
at::Tensor gradOrZeros(const at::Tensor& grad, const std::vector<int64_t>& shape) {
  return grad.defined() ? asFloat(grad).reshape(shape) : at::zeros(shape, at::TensorOptions().dtype(at::kFloat));
}

void checkLstmOperands(const char* op, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                       const at::Tensor& h0, const at::Tensor& c0, const at::Tensor& mask) {
  TORCH_CHECK(x.dim() == 3 && x.size(0) > 0, op, ": x must be 3-D time-major [T, batch, input_size], got ",
              x.sizes());
  TORCH_CHECK(b.dim() == 1 && b.size(0) % 4 == 0 && b.size(0) > 0, op, ": b must be [4 * hidden], got ", b.sizes());
  const int64_t hidden = b.size(0) / 4;
  TORCH_CHECK(w.dim() == 2 && w.size(0) == x.size(2) + hidden && w.size(1) == 4 * hidden, op,
              ": w must be [input_size + hidden, 4 * hidden], got ", w.sizes());
  TORCH_CHECK(h0.numel() == x.size(1) * hidden && c0.numel() == h0.numel(), op,
              ": init_h and init_c must hold [batch, hidden] values, got ", h0.sizes(), " and ", c0.sizes());
  TORCH_CHECK(!mask.defined() || mask.numel() == x.size(0) * x.size(1) * hidden ||
                  mask.numel() == x.size(0) * x.size(1),
              op, ": seq_mask must hold [T, batch, hidden] values, got ", mask.sizes());
}

void checkSequenceOutputs(const char* op, const std::vector<at::Tensor>& tensors, int64_t count) {
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.numel() == count, op, ": every sequence tensor must hold [T, batch, hidden] values, got ",
                t.sizes());
  }
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnDynamicRNNGetWorkspaceSize(
    const aclTensor* x, const aclTensor* w, const aclTensor* b, const aclTensor* seqMaskOptional,
    const aclTensor* initH, const aclTensor* initC, bool reverse, aclTensor* yOut, aclTensor* hOut, aclTensor* cOut,
    aclTensor* iOut, aclTensor* jOut, aclTensor* fOut, aclTensor* oOut, aclTensor* tanhcOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnDynamicRNN", workspaceSize, executor, [&] {
    const char* op = "aclnnDynamicRNN";
    at::Tensor xt = requiredTensor(x, "x"), wt = requiredTensor(w, "w"), bt = requiredTensor(b, "b");
    at::Tensor mask = hostTensor(seqMaskOptional);
    at::Tensor h0 = requiredTensor(initH, "init_h"), c0 = requiredTensor(initC, "init_c");
    std::vector<at::Tensor> outs;
    for (aclTensor* out : {yOut, hOut, cOut, iOut, jOut, fOut, oOut, tanhcOut}) {
      outs.push_back(requiredTensor(out, "output"));
    }
    checkLstmOperands(op, xt, wt, bt, h0, c0, mask);
    const int64_t steps = xt.size(0), batch = xt.size(1), input_size = xt.size(2), hidden = bt.size(0) / 4;
    checkSequenceOutputs(op, outs, steps * batch * hidden);
    std::vector<at::Tensor> inputs{xt, wt, bt, mask, h0, c0};
    return Prepared{inputs, [=]() mutable {
                      const at::Tensor weight = asFloat(wt);
                      const at::Tensor w_x = weight.narrow(0, 0, input_size);
                      const at::Tensor w_h = weight.narrow(0, input_size, hidden);
                      const at::Tensor bias = asFloat(bt);
                      const at::Tensor valid = stepMask(mask, steps, batch, hidden);
                      // the input projection of every step at once: [T, batch, 4 * hidden]
                      const at::Tensor x_proj = at::matmul(asFloat(xt), w_x) + bias;
                      at::Tensor h = asFloat(h0).reshape({batch, hidden});
                      at::Tensor c = asFloat(c0).reshape({batch, hidden});
                      std::vector<std::vector<at::Tensor>> per_output(8, std::vector<at::Tensor>(steps));
                      for (int64_t k = 0; k < steps; ++k) {
                        const int64_t t = stepAt(k, steps, reverse);
                        const auto gates = (x_proj[t] + at::matmul(h, w_h)).chunk(4, -1);
                        const at::Tensor i = at::sigmoid(gates[0]), f = at::sigmoid(gates[1]);
                        const at::Tensor j = at::tanh(gates[2]), o = at::sigmoid(gates[3]);
                        at::Tensor c_new = f * c + i * j;
                        const at::Tensor tanhc = at::tanh(c_new);
                        at::Tensor h_new = o * tanhc;
                        at::Tensor y = h_new;
                        if (valid.defined()) {
                          // a finished sequence keeps its state and emits zeros (packed-sequence padding)
                          const at::Tensor m = valid[t];
                          y = h_new * m;
                          h_new = y + h * (1 - m);
                          c_new = c_new * m + c * (1 - m);
                        }
                        h = h_new;
                        c = c_new;
                        const at::Tensor values[] = {y, h, c, i, j, f, o, tanhc};
                        for (size_t n = 0; n < 8; ++n) {
                          per_output[n][t] = values[n];
                        }
                      }
                      for (size_t n = 0; n < 8; ++n) {
                        outs[n].copy_(at::stack(per_output[n]).reshape(outs[n].sizes()));
                      }
                    },
                    outs};
  });
}
NPU_ATEN_OP(DynamicRNN, "x, w, b, seqMaskOptional, initH, initC, reverse, yOut, hOut, cOut, iOut, jOut, fOut, oOut, "
                        "tanhcOut");

extern "C" NOP_API aclnnStatus aclnnDynamicRNNGradGetWorkspaceSize(
    const aclTensor* dyOptional, const aclTensor* dhOptional, const aclTensor* dcOptional, const aclTensor* x,
    const aclTensor* w, const aclTensor* b, const aclTensor* initH, const aclTensor* initC, const aclTensor* h,
    const aclTensor* c, const aclTensor* iGate, const aclTensor* jGate, const aclTensor* fGate, const aclTensor* oGate,
    const aclTensor* tanhc, const aclTensor* seqMaskOptional, bool reverse, aclTensor* dxOut, aclTensor* dwOut,
    aclTensor* dbOut, aclTensor* dhPrevOut, aclTensor* dcPrevOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnDynamicRNNGrad", workspaceSize, executor, [&] {
    const char* op = "aclnnDynamicRNNGrad";
    at::Tensor gy = hostTensor(dyOptional), gh = hostTensor(dhOptional), gc = hostTensor(dcOptional);
    at::Tensor xt = requiredTensor(x, "x"), wt = requiredTensor(w, "w"), bt = requiredTensor(b, "b");
    at::Tensor h0 = requiredTensor(initH, "init_h"), c0 = requiredTensor(initC, "init_c");
    at::Tensor hs = requiredTensor(h, "h"), cs = requiredTensor(c, "c");
    at::Tensor ig = requiredTensor(iGate, "i"), jg = requiredTensor(jGate, "j"), fg = requiredTensor(fGate, "f");
    at::Tensor og = requiredTensor(oGate, "o"), tc = requiredTensor(tanhc, "tanhc");
    at::Tensor mask = hostTensor(seqMaskOptional);
    at::Tensor dx = requiredTensor(dxOut, "dx"), dw = requiredTensor(dwOut, "dw"), db = requiredTensor(dbOut, "db");
    at::Tensor dh0 = requiredTensor(dhPrevOut, "dh_prev"), dc0 = requiredTensor(dcPrevOut, "dc_prev");
    checkLstmOperands(op, xt, wt, bt, h0, c0, mask);
    const int64_t steps = xt.size(0), batch = xt.size(1), input_size = xt.size(2), hidden = bt.size(0) / 4;
    std::vector<at::Tensor> seq{hs, cs, ig, jg, fg, og, tc};
    for (const at::Tensor& grad : {gy, gh, gc}) {
      if (grad.defined()) {
        seq.push_back(grad);
      }
    }
    checkSequenceOutputs(op, seq, steps * batch * hidden);
    std::vector<at::Tensor> inputs{gy, gh, gc, xt, wt, bt, h0, c0, hs, cs, ig, jg, fg, og, tc, mask};
    return Prepared{inputs, [=]() mutable {
                      const std::vector<int64_t> shape{steps, batch, hidden};
                      auto saved = [&](const at::Tensor& t) { return asFloat(t).reshape(shape); };
                      const at::Tensor I = saved(ig), J = saved(jg), F = saved(fg), O = saved(og), TC = saved(tc);
                      const at::Tensor H = saved(hs), C = saved(cs), X = asFloat(xt);
                      const at::Tensor dY = gradOrZeros(gy, shape), dH = gradOrZeros(gh, shape);
                      const at::Tensor dC = gradOrZeros(gc, shape);
                      const at::Tensor weight = asFloat(wt);
                      const at::Tensor w_x = weight.narrow(0, 0, input_size);
                      const at::Tensor w_h = weight.narrow(0, input_size, hidden);
                      const at::Tensor valid = stepMask(mask, steps, batch, hidden);
                      const at::Tensor h_init = asFloat(h0).reshape({batch, hidden});
                      const at::Tensor c_init = asFloat(c0).reshape({batch, hidden});
                      at::Tensor carry_h = at::zeros({batch, hidden}, X.options());
                      at::Tensor carry_c = at::zeros({batch, hidden}, X.options());
                      std::vector<at::Tensor> d_gates(steps), prev_h(steps);
                      for (int64_t k = steps - 1; k >= 0; --k) {
                        const int64_t t = stepAt(k, steps, reverse);
                        const at::Tensor h_prev = k == 0 ? h_init : H[stepAt(k - 1, steps, reverse)];
                        const at::Tensor c_prev = k == 0 ? c_init : C[stepAt(k - 1, steps, reverse)];
                        // gradient reaching the state h[t] / c[t]: from later steps and from the h / c outputs
                        const at::Tensor d_state_h = carry_h + dH[t], d_state_c = carry_c + dC[t];
                        at::Tensor d_h_new = d_state_h + dY[t], d_c_new = d_state_c;
                        at::Tensor pass_h, pass_c;
                        if (valid.defined()) {
                          const at::Tensor m = valid[t];
                          d_h_new = d_h_new * m;
                          d_c_new = d_c_new * m;
                          pass_h = d_state_h * (1 - m);  // a finished sequence hands its state on unchanged
                          pass_c = d_state_c * (1 - m);
                        }
                        const at::Tensor i = I[t], j = J[t], f = F[t], o = O[t], th = TC[t];
                        const at::Tensor d_c = d_c_new + d_h_new * o * (1 - th * th);
                        const at::Tensor d_i = d_c * j * i * (1 - i);
                        const at::Tensor d_f = d_c * c_prev * f * (1 - f);
                        const at::Tensor d_j = d_c * i * (1 - j * j);
                        const at::Tensor d_o = d_h_new * th * o * (1 - o);
                        const at::Tensor dg = at::cat({d_i, d_f, d_j, d_o}, -1);
                        d_gates[t] = dg;
                        prev_h[t] = h_prev;
                        carry_h = at::matmul(dg, w_h.t());
                        carry_c = d_c * f;
                        if (pass_h.defined()) {
                          carry_h = carry_h + pass_h;
                          carry_c = carry_c + pass_c;
                        }
                      }
                      const at::Tensor DG = at::stack(d_gates);      // [T, batch, 4 * hidden]
                      const at::Tensor HP = at::stack(prev_h);       // [T, batch, hidden]
                      dx.copy_(at::matmul(DG, w_x.t()).reshape(dx.sizes()));
                      const at::Tensor flat_dg = DG.reshape({-1, 4 * hidden});
                      const at::Tensor dw_x = at::matmul(X.reshape({-1, input_size}).t(), flat_dg);
                      const at::Tensor dw_h = at::matmul(HP.reshape({-1, hidden}).t(), flat_dg);
                      dw.copy_(at::cat({dw_x, dw_h}, 0).reshape(dw.sizes()));
                      db.copy_(flat_dg.sum(0).reshape(db.sizes()));
                      dh0.copy_(carry_h.reshape(dh0.sizes()));
                      dc0.copy_(carry_c.reshape(dc0.sizes()));
                    },
                    {dx, dw, db, dh0, dc0}};
  });
}
NPU_ATEN_OP(DynamicRNNGrad, "dyOptional, dhOptional, dcOptional, x, w, b, initH, initC, h, c, iGate, jGate, fGate, "
                            "oGate, tanhc, seqMaskOptional, reverse, dxOut, dwOut, dbOut, dhPrevOut, dcPrevOut");

namespace {

void checkGruOperands(const char* op, const at::Tensor& x, const at::Tensor& w_x, const at::Tensor& w_h,
                      const at::Tensor& b_x, const at::Tensor& b_h, const at::Tensor& h0) {
  TORCH_CHECK(x.dim() == 3 && x.size(0) > 0, op, ": x must be 3-D time-major [T, batch, input_size], got ",
              x.sizes());
  TORCH_CHECK(w_h.dim() == 2 && w_h.size(1) == 3 * w_h.size(0) && w_h.size(0) > 0, op,
              ": weight_hidden must be [hidden, 3 * hidden], got ", w_h.sizes());
  const int64_t hidden = w_h.size(0);
  TORCH_CHECK(w_x.dim() == 2 && w_x.size(0) == x.size(2) && w_x.size(1) == 3 * hidden, op,
              ": weight_input must be [input_size, 3 * hidden], got ", w_x.sizes());
  TORCH_CHECK(b_x.numel() == 3 * hidden && b_h.numel() == 3 * hidden, op,
              ": bias_input and bias_hidden must be [3 * hidden], got ", b_x.sizes(), " and ", b_h.sizes());
  TORCH_CHECK(h0.numel() == x.size(1) * hidden, op, ": init_h must hold [batch, hidden] values, got ", h0.sizes());
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnDynamicGRUV2GetWorkspaceSize(
    const aclTensor* x, const aclTensor* weightInput, const aclTensor* weightHidden, const aclTensor* biasInput,
    const aclTensor* biasHidden, const aclTensor* initH, aclTensor* yOut, aclTensor* outputHOut, aclTensor* updateOut,
    aclTensor* resetOut, aclTensor* newOut, aclTensor* hiddenNewOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnDynamicGRUV2", workspaceSize, executor, [&] {
    const char* op = "aclnnDynamicGRUV2";
    at::Tensor xt = requiredTensor(x, "x"), wx = requiredTensor(weightInput, "weight_input");
    at::Tensor wh = requiredTensor(weightHidden, "weight_hidden"), bx = requiredTensor(biasInput, "bias_input");
    at::Tensor bh = requiredTensor(biasHidden, "bias_hidden"), h0 = requiredTensor(initH, "init_h");
    std::vector<at::Tensor> outs;
    for (aclTensor* out : {yOut, outputHOut, updateOut, resetOut, newOut, hiddenNewOut}) {
      outs.push_back(requiredTensor(out, "output"));
    }
    checkGruOperands(op, xt, wx, wh, bx, bh, h0);
    const int64_t steps = xt.size(0), batch = xt.size(1), hidden = wh.size(0);
    checkSequenceOutputs(op, outs, steps * batch * hidden);
    std::vector<at::Tensor> inputs{xt, wx, wh, bx, bh, h0};
    return Prepared{inputs, [=]() mutable {
                      const at::Tensor x_proj = at::matmul(asFloat(xt), asFloat(wx)) + asFloat(bx).reshape({-1});
                      const at::Tensor w_hid = asFloat(wh), b_hid = asFloat(bh).reshape({-1});
                      at::Tensor h = asFloat(h0).reshape({batch, hidden});
                      std::vector<std::vector<at::Tensor>> per_output(6);
                      for (int64_t t = 0; t < steps; ++t) {
                        const auto xg = x_proj[t].chunk(3, -1);
                        const auto hg = (at::matmul(h, w_hid) + b_hid).chunk(3, -1);
                        const at::Tensor r = at::sigmoid(xg[0] + hg[0]), z = at::sigmoid(xg[1] + hg[1]);
                        // reset applies after the hidden matmul (torch.nn.GRU); hg[2] is saved as hidden_new
                        const at::Tensor n = at::tanh(xg[2] + r * hg[2]);
                        h = (1 - z) * n + z * h;
                        const at::Tensor values[] = {h, h, z, r, n, hg[2]};
                        for (size_t k = 0; k < 6; ++k) {
                          per_output[k].push_back(values[k]);
                        }
                      }
                      for (size_t k = 0; k < 6; ++k) {
                        outs[k].copy_(at::stack(per_output[k]).reshape(outs[k].sizes()));
                      }
                    },
                    outs};
  });
}
NPU_ATEN_OP(DynamicGRUV2, "x, weightInput, weightHidden, biasInput, biasHidden, initH, yOut, outputHOut, updateOut, "
                          "resetOut, newOut, hiddenNewOut");

extern "C" NOP_API aclnnStatus aclnnDynamicGRUV2GradGetWorkspaceSize(
    const aclTensor* dyOptional, const aclTensor* dhOptional, const aclTensor* x, const aclTensor* weightInput,
    const aclTensor* weightHidden, const aclTensor* initH, const aclTensor* h, const aclTensor* update,
    const aclTensor* reset, const aclTensor* newGate, const aclTensor* hiddenNew, aclTensor* dwInputOut,
    aclTensor* dwHiddenOut, aclTensor* dbInputOut, aclTensor* dbHiddenOut, aclTensor* dxOut, aclTensor* dhPrevOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnDynamicGRUV2Grad", workspaceSize, executor, [&] {
    const char* op = "aclnnDynamicGRUV2Grad";
    at::Tensor gy = hostTensor(dyOptional), gh = hostTensor(dhOptional);
    at::Tensor xt = requiredTensor(x, "x"), wx = requiredTensor(weightInput, "weight_input");
    at::Tensor wh = requiredTensor(weightHidden, "weight_hidden"), h0 = requiredTensor(initH, "init_h");
    at::Tensor hs = requiredTensor(h, "h"), zs = requiredTensor(update, "update");
    at::Tensor rs = requiredTensor(reset, "reset"), ns = requiredTensor(newGate, "new");
    at::Tensor hn = requiredTensor(hiddenNew, "hidden_new");
    at::Tensor dwx = requiredTensor(dwInputOut, "dw_input"), dwh = requiredTensor(dwHiddenOut, "dw_hidden");
    at::Tensor dbx = requiredTensor(dbInputOut, "db_input"), dbh = requiredTensor(dbHiddenOut, "db_hidden");
    at::Tensor dx = requiredTensor(dxOut, "dx"), dh0 = requiredTensor(dhPrevOut, "dh_prev");
    TORCH_CHECK(wh.dim() == 2 && wh.size(1) == 3 * wh.size(0) && wh.size(0) > 0, op,
                ": weight_hidden must be [hidden, 3 * hidden], got ", wh.sizes());
    const int64_t hidden = wh.size(0);
    checkGruOperands(op, xt, wx, wh, dbx, dbh, h0);
    const int64_t steps = xt.size(0), batch = xt.size(1), input_size = xt.size(2);
    std::vector<at::Tensor> seq{hs, zs, rs, ns, hn};
    for (const at::Tensor& grad : {gy, gh}) {
      if (grad.defined()) {
        seq.push_back(grad);
      }
    }
    checkSequenceOutputs(op, seq, steps * batch * hidden);
    std::vector<at::Tensor> inputs{gy, gh, xt, wx, wh, h0, hs, zs, rs, ns, hn};
    return Prepared{inputs, [=]() mutable {
                      const std::vector<int64_t> shape{steps, batch, hidden};
                      auto saved = [&](const at::Tensor& t) { return asFloat(t).reshape(shape); };
                      const at::Tensor H = saved(hs), Z = saved(zs), R = saved(rs), N = saved(ns), HN = saved(hn);
                      const at::Tensor dY = gradOrZeros(gy, shape), dH = gradOrZeros(gh, shape);
                      const at::Tensor w_x = asFloat(wx), w_h = asFloat(wh), X = asFloat(xt);
                      const at::Tensor h_init = asFloat(h0).reshape({batch, hidden});
                      at::Tensor carry = at::zeros({batch, hidden}, X.options());
                      std::vector<at::Tensor> d_x_gates(steps), d_h_gates(steps), prev_h(steps);
                      for (int64_t t = steps - 1; t >= 0; --t) {
                        const at::Tensor h_prev = t == 0 ? h_init : H[t - 1];
                        const at::Tensor d_h = carry + dH[t] + dY[t];  // y and h are the same values
                        const at::Tensor z = Z[t], r = R[t], n = N[t];
                        const at::Tensor d_z = d_h * (h_prev - n) * z * (1 - z);
                        const at::Tensor d_n = d_h * (1 - z) * (1 - n * n);
                        const at::Tensor d_r = d_n * HN[t] * r * (1 - r);
                        d_x_gates[t] = at::cat({d_r, d_z, d_n}, -1);
                        d_h_gates[t] = at::cat({d_r, d_z, d_n * r}, -1);
                        prev_h[t] = h_prev;
                        carry = at::matmul(d_h_gates[t], w_h.t()) + d_h * z;
                      }
                      const at::Tensor DX = at::stack(d_x_gates).reshape({-1, 3 * hidden});
                      const at::Tensor DH = at::stack(d_h_gates).reshape({-1, 3 * hidden});
                      const at::Tensor HP = at::stack(prev_h).reshape({-1, hidden});
                      dx.copy_(at::matmul(DX, w_x.t()).reshape(dx.sizes()));
                      dwx.copy_(at::matmul(X.reshape({-1, input_size}).t(), DX).reshape(dwx.sizes()));
                      dwh.copy_(at::matmul(HP.t(), DH).reshape(dwh.sizes()));
                      dbx.copy_(DX.sum(0).reshape(dbx.sizes()));
                      dbh.copy_(DH.sum(0).reshape(dbh.sizes()));
                      dh0.copy_(carry.reshape(dh0.sizes()));
                    },
                    {dwx, dwh, dbx, dbh, dx, dh0}};
  });
}
NPU_ATEN_OP(DynamicGRUV2Grad, "dyOptional, dhOptional, x, weightInput, weightHidden, initH, h, update, reset, "
                              "newGate, hiddenNew, dwInputOut, dwHiddenOut, dbInputOut, dbHiddenOut, dxOut, "
                              "dhPrevOut");
