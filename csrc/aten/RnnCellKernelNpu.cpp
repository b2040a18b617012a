// RnnCellKernelNpu.cpp - the fused LSTM / GRU cell kernels that PyTorch's RNN modules call on
// accelerators (nn.LSTM, nn.GRU, LSTMCell, GRUCell), composed of device ops. Gate layouts and the
// saved workspace follow the CUDA kernels, so PyTorch's backward formulas apply unchanged:
// LSTM workspace [i, f, g, o] (activated), GRU workspace [r, z, n, hx, hn + b_hn].
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/zeros_like.h>

#include "csrc/aten/NpuNativeFunctions.h"

namespace at_npu::native {
namespace {

void checkGates(const char* op, const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                const at::Tensor& state, int64_t gates) {
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(), op, ": input_gates and hidden_gates must ",
              "have the same shape, got ", input_gates.sizes(), " and ", hidden_gates.sizes());
  TORCH_CHECK(input_gates.dim() == 2 && input_gates.size(1) == gates * state.size(-1), op,
              ": expected gates of shape (batch, ", gates, " * hidden_size) = (", state.size(0), ", ",
              gates * state.size(-1), "), got ", input_gates.sizes());
  TORCH_CHECK(state.dim() == 2 && state.size(0) == input_gates.size(0), op, ": expected a state of ",
              "shape (batch, hidden_size) matching the gates' batch, got ", state.sizes());
}

at::Tensor biased(const at::Tensor& gates, const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined() ? gates + *bias : gates;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> _thnn_fused_lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  checkGates("_thnn_fused_lstm_cell", input_gates, hidden_gates, cx, 4);
  at::Tensor gates = biased(biased(input_gates + hidden_gates, input_bias), hidden_bias);
  auto chunks = gates.chunk(4, 1);
  at::Tensor i = at::sigmoid(chunks[0]), f = at::sigmoid(chunks[1]);
  at::Tensor g = at::tanh(chunks[2]), o = at::sigmoid(chunks[3]);
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * at::tanh(cy);
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> _thnn_fused_lstm_cell_backward_impl(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy,
    const at::Tensor& cx, const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  const bool has_ghy = grad_hy.has_value() && grad_hy->defined();
  const bool has_gcy = grad_cy.has_value() && grad_cy->defined();
  if (!has_ghy && !has_gcy) return {at::Tensor(), at::Tensor(), at::Tensor()};
  checkGates("_thnn_fused_lstm_cell_backward", workspace, workspace, cx, 4);
  auto w = workspace.chunk(4, 1);
  const at::Tensor &i = w[0], &f = w[1], &g = w[2], &o = w[3];
  at::Tensor tanh_cy = at::tanh(cy);
  at::Tensor ghy = has_ghy ? *grad_hy : at::zeros_like(cx);
  // Gradient reaching the cell state: through hy = o * tanh(cy), plus the one given for cy.
  at::Tensor gc = ghy * o * (1 - tanh_cy * tanh_cy);
  if (has_gcy) gc = gc + *grad_cy;
  at::Tensor gi = gc * g * (1 - i) * i;
  at::Tensor gf = gc * cx * (1 - f) * f;
  at::Tensor gg = gc * i * (1 - g * g);
  at::Tensor go = ghy * tanh_cy * (1 - o) * o;
  at::Tensor grad_gates = at::cat({gi, gf, gg, go}, 1);
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, gc * f, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> _thnn_fused_gru_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& hx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  checkGates("_thnn_fused_gru_cell", input_gates, hidden_gates, hx, 3);
  auto in = biased(input_gates, input_bias).chunk(3, 1);
  auto hid = biased(hidden_gates, hidden_bias).chunk(3, 1);
  at::Tensor r = at::sigmoid(in[0] + hid[0]);
  at::Tensor z = at::sigmoid(in[1] + hid[1]);
  at::Tensor n = at::tanh(in[2] + r * hid[2]);
  at::Tensor hy = n + z * (hx - n);
  return {hy, at::cat({r, z, n, hx, hid[2]}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> _thnn_fused_gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  TORCH_CHECK(workspace.dim() == 2 && workspace.size(1) == 5 * grad_hy.size(-1),
              "_thnn_fused_gru_cell_backward: expected a workspace of shape (batch, 5 * hidden_size), got ",
              workspace.sizes());
  auto w = workspace.chunk(5, 1);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  at::Tensor gz = grad_hy * (hx - n) * (1 - z) * z;
  at::Tensor gn = grad_hy * (1 - z) * (1 - n * n);
  at::Tensor gr = gn * hn * (1 - r) * r;
  at::Tensor grad_input_gates = at::cat({gr, gz, gn}, 1);
  at::Tensor grad_hidden_gates = at::cat({gr, gz, gn * r}, 1);
  at::Tensor grad_hx = grad_hy * z;
  at::Tensor gib = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor ghb = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, gib, ghb};
}

}  // namespace at_npu::native
