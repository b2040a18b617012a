// LstmKernelNpu.cpp - npu_lstm / npu_lstm_data and their backward ops: a whole single-layer LSTM sequence on the
// aclnnDynamicRNN / aclnnDynamicRNNGrad device ops, with torch_npu's fused weight [input + hidden, 4 * hidden].
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gt.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using LstmOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                               at::Tensor>;
using LstmGrads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// input is time-major [T, batch, input_size] (torch_npu's callers transpose batch_first inputs themselves);
// weight is cat(w_ih, w_hh, dim=1).t() = [input_size + hidden, 4 * hidden] with gate columns i, f, j, o;
// bias [4 * hidden]; h and c hold [1, batch, hidden]. Returns hidden.
int64_t checkLstmShapes(const char* op, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                        const at::Tensor& h, const at::Tensor& c) {
  TORCH_CHECK_TYPE(at::isFloatingType(input.scalar_type()) && input.scalar_type() != at::kDouble, op,
                   ": input must be float16, bfloat16 or float32, got ", input.scalar_type());
  TORCH_CHECK_TYPE(weight.scalar_type() == input.scalar_type() && bias.scalar_type() == input.scalar_type() &&
                       h.scalar_type() == input.scalar_type() && c.scalar_type() == input.scalar_type(),
                   op, ": weight, bias, h and c must have the input's dtype ", input.scalar_type(), ", got ",
                   weight.scalar_type(), ", ", bias.scalar_type(), ", ", h.scalar_type(), " and ", c.scalar_type());
  TORCH_CHECK_VALUE(input.dim() == 3 && input.size(0) > 0,
                    op, ": input must be 3-D time-major [T, batch, input_size] with T > 0, got ", input.sizes());
  TORCH_CHECK_VALUE(bias.dim() == 1 && bias.size(0) % 4 == 0 && bias.size(0) > 0,
                    op, ": bias must be 1-D [4 * hidden], got ", bias.sizes());
  const int64_t hidden = bias.size(0) / 4;
  TORCH_CHECK_VALUE(weight.dim() == 2 && weight.size(0) == input.size(2) + hidden && weight.size(1) == 4 * hidden,
                    op, ": weight must be [input_size + hidden, 4 * hidden] = [", input.size(2) + hidden, ", ",
                    4 * hidden, "] (cat(w_ih, w_hh, dim=1).t()), got ", weight.sizes());
  TORCH_CHECK_VALUE(h.numel() == input.size(1) * hidden && c.numel() == input.size(1) * hidden,
                    op, ": h and c must hold [1, batch, hidden] = [1, ", input.size(1), ", ", hidden,
                    "] values, got ", h.sizes(), " and ", c.sizes());
  return hidden;
}

// A packed-sequence mask has one value per [T, batch, hidden] element (or per [T, batch] step); non-zero = valid.
void checkSeqMask(const char* op, const at::Tensor& input, const at::Tensor& seq_mask, int64_t hidden) {
  const int64_t steps = input.size(0) * input.size(1);
  TORCH_CHECK_VALUE(seq_mask.numel() == steps * hidden || seq_mask.numel() == steps,
                    op, ": with flag_seq=True seq_mask must hold [T, batch, hidden] = [", input.size(0), ", ",
                    input.size(1), ", ", hidden, "] values, got ", seq_mask.sizes());
}

LstmOutputs emptyLstmOutputs(const at::Tensor& input, int64_t hidden) {
  const auto options = input.options();
  const std::vector<int64_t> shape{input.size(0), input.size(1), hidden};
  return {at::empty(shape, options), at::empty(shape, options), at::empty(shape, options), at::empty(shape, options),
          at::empty(shape, options), at::empty(shape, options), at::empty(shape, options), at::empty(shape, options)};
}

LstmGrads emptyLstmGrads(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                         const at::Tensor& hx, const at::Tensor& cx) {
  return {at::empty(input.sizes(), input.options()), at::empty(weight.sizes(), weight.options()),
          at::empty(bias.sizes(), bias.options()), at::empty(hx.sizes(), hx.options()),
          at::empty(cx.sizes(), cx.options())};
}

// Autograd passes an undefined gradient for an unused output: the device op reads a missing one as zeros.
std::optional<at::Tensor> definedOrNone(const std::optional<at::Tensor>& grad) {
  return grad.has_value() && grad->defined() ? grad : std::optional<at::Tensor>();
}

void checkLstmGrads(const char* op, const at::Tensor& input, int64_t hidden,
                    std::initializer_list<std::optional<at::Tensor>> grads) {
  for (const auto& grad : grads) {
    TORCH_CHECK_VALUE(!grad.has_value() || grad->numel() == input.size(0) * input.size(1) * hidden,
                      op, ": grady, gradh and gradc must be [T, batch, hidden] = [", input.size(0), ", ",
                      input.size(1), ", ", hidden, "], got ", grad->sizes());
  }
}

// torch_npu derives the packed-sequence mask from batch_sizes (one per time step, non-increasing): sequence b
// is valid at step t when batch_sizes[t] > b.
void checkBatchSizes(const char* op, const at::Tensor& input, const at::Tensor& batch_sizes) {
  TORCH_CHECK_TYPE(!at::isFloatingType(batch_sizes.scalar_type()) && batch_sizes.scalar_type() != at::kBool,
                   op, ": batch_sizes must be an integer tensor, got ", batch_sizes.scalar_type());
  TORCH_CHECK_VALUE(batch_sizes.dim() == 1 && batch_sizes.size(0) == input.size(0),
                    op, ": batch_sizes must be 1-D with one entry per time step (", input.size(0), "), got ",
                    batch_sizes.sizes());
}

}  // namespace

LstmOutputs npu_lstm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                     const at::Tensor& seq_mask, const at::Tensor& h, const at::Tensor& c, bool has_biases,
                     int64_t num_layers, double dropout, bool train, bool bidirectional, bool batch_first,
                     bool flag_seq, bool direction) {
  // has_biases, num_layers, dropout, train, bidirectional and batch_first only describe the nn.LSTM the caller
  // splits into single-layer, single-direction, time-major calls (a zero bias when it has none): the op runs one.
  const int64_t hidden = checkLstmShapes("npu_lstm", input, weight, bias, h, c);
  std::optional<at::Tensor> mask;
  if (flag_seq) {
    checkSeqMask("npu_lstm", input, seq_mask, hidden);
    mask = seq_mask;
  }
  auto outputs = emptyLstmOutputs(input, hidden);
  auto& [y, h_out, c_out, i, j, f, o, tanhc] = outputs;
  EXEC_NPU_CMD(aclnnDynamicRNN, input, weight, bias, mask, h, c, direction, y, h_out, c_out, i, j, f, o, tanhc);
  return outputs;
}

LstmOutputs npu_lstm_meta(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                          const at::Tensor& seq_mask, const at::Tensor& h, const at::Tensor& c, bool has_biases,
                          int64_t num_layers, double dropout, bool train, bool bidirectional, bool batch_first,
                          bool flag_seq, bool direction) {
  const int64_t hidden = checkLstmShapes("npu_lstm", input, weight, bias, h, c);
  if (flag_seq) {
    checkSeqMask("npu_lstm", input, seq_mask, hidden);
  }
  return emptyLstmOutputs(input, hidden);
}

LstmOutputs npu_lstm_data(const at::Tensor& input, const at::Tensor& batch_sizes, const at::Tensor& weight,
                          const at::Tensor& bias, const at::Tensor& seq_mask, const at::Tensor& h, const at::Tensor& c,
                          bool has_biases, int64_t num_layers, double dropout, bool train, bool bidirectional,
                          bool batch_first, bool flag_seq, bool direction) {
  // The padded [T, batch, input_size] form of a packed sequence: the forward masks with seq_mask, as torch_npu
  // does (it builds that mask from batch_sizes); the backward rebuilds the mask from batch_sizes.
  const int64_t hidden = checkLstmShapes("npu_lstm_data", input, weight, bias, h, c);
  checkBatchSizes("npu_lstm_data", input, batch_sizes);
  std::optional<at::Tensor> mask;
  if (flag_seq) {
    checkSeqMask("npu_lstm_data", input, seq_mask, hidden);
    mask = seq_mask;
  }
  auto outputs = emptyLstmOutputs(input, hidden);
  auto& [y, h_out, c_out, i, j, f, o, tanhc] = outputs;
  EXEC_NPU_CMD(aclnnDynamicRNN, input, weight, bias, mask, h, c, direction, y, h_out, c_out, i, j, f, o, tanhc);
  return outputs;
}

LstmOutputs npu_lstm_data_meta(const at::Tensor& input, const at::Tensor& batch_sizes, const at::Tensor& weight,
                               const at::Tensor& bias, const at::Tensor& seq_mask, const at::Tensor& h,
                               const at::Tensor& c, bool has_biases, int64_t num_layers, double dropout, bool train,
                               bool bidirectional, bool batch_first, bool flag_seq, bool direction) {
  const int64_t hidden = checkLstmShapes("npu_lstm_data", input, weight, bias, h, c);
  checkBatchSizes("npu_lstm_data", input, batch_sizes);
  if (flag_seq) {
    checkSeqMask("npu_lstm_data", input, seq_mask, hidden);
  }
  return emptyLstmOutputs(input, hidden);
}

LstmGrads npu_lstm_backward(const std::optional<at::Tensor>& grady, const std::optional<at::Tensor>& gradh,
                            const std::optional<at::Tensor>& gradc, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& hx, const at::Tensor& cx,
                            const at::Tensor& y_output, const at::Tensor& h_output, const at::Tensor& c_output,
                            const at::Tensor& i, const at::Tensor& j, const at::Tensor& f, const at::Tensor& o,
                            const at::Tensor& tanhc) {
  // The schema carries neither seq_mask nor direction: this is the gradient of an unmasked forward-direction run.
  const int64_t hidden = checkLstmShapes("npu_lstm_backward", input, weight, bias, hx, cx);
  const auto gy = definedOrNone(grady), gh = definedOrNone(gradh), gc = definedOrNone(gradc);
  checkLstmGrads("npu_lstm_backward", input, hidden, {gy, gh, gc});
  const std::optional<at::Tensor> no_mask;
  const bool forward_direction = false;
  auto grads = emptyLstmGrads(input, weight, bias, hx, cx);
  auto& [grad_input, grad_weight, grad_bias, grad_h, grad_c] = grads;
  EXEC_NPU_CMD(aclnnDynamicRNNGrad, gy, gh, gc, input, weight, bias, hx, cx, h_output, c_output, i, j, f, o, tanhc,
               no_mask, forward_direction, grad_input, grad_weight, grad_bias, grad_h, grad_c);
  return grads;
}

LstmGrads npu_lstm_backward_meta(const std::optional<at::Tensor>& grady, const std::optional<at::Tensor>& gradh,
                                 const std::optional<at::Tensor>& gradc, const at::Tensor& input,
                                 const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& hx,
                                 const at::Tensor& cx, const at::Tensor& y_output, const at::Tensor& h_output,
                                 const at::Tensor& c_output, const at::Tensor& i, const at::Tensor& j,
                                 const at::Tensor& f, const at::Tensor& o, const at::Tensor& tanhc) {
  checkLstmShapes("npu_lstm_backward", input, weight, bias, hx, cx);
  return emptyLstmGrads(input, weight, bias, hx, cx);
}

LstmGrads npu_lstm_data_backward(const std::optional<at::Tensor>& grady_opt,
                                 const std::optional<at::Tensor>& gradh_opt,
                                 const std::optional<at::Tensor>& gradc_opt, const at::Tensor& input,
                                 const at::Tensor& batch_sizes, const at::Tensor& weight, const at::Tensor& bias,
                                 const at::Tensor& init_h, const at::Tensor& init_c, const at::Tensor& y,
                                 const at::Tensor& h, const at::Tensor& c, const at::Tensor& i, const at::Tensor& j,
                                 const at::Tensor& f, const at::Tensor& o, const at::Tensor& tanhc,
                                 bool flag_direction) {
  const int64_t hidden = checkLstmShapes("npu_lstm_data_backward", input, weight, bias, init_h, init_c);
  checkBatchSizes("npu_lstm_data_backward", input, batch_sizes);
  const auto gy = definedOrNone(grady_opt), gh = definedOrNone(gradh_opt), gc = definedOrNone(gradc_opt);
  checkLstmGrads("npu_lstm_data_backward", input, hidden, {gy, gh, gc});
  // The step mask [T, batch] of the packed sequence, built on the host (batch_sizes is small, as in torch_npu).
  const at::Tensor sizes = batch_sizes.to(at::kCPU, at::kLong).reshape({-1, 1});
  const at::Tensor columns = at::arange(input.size(1), sizes.options()).reshape({1, -1});
  const std::optional<at::Tensor> mask = at::gt(sizes, columns).to(input.scalar_type()).to(input.device());
  auto grads = emptyLstmGrads(input, weight, bias, init_h, init_c);
  auto& [grad_input, grad_weight, grad_bias, grad_h, grad_c] = grads;
  EXEC_NPU_CMD(aclnnDynamicRNNGrad, gy, gh, gc, input, weight, bias, init_h, init_c, h, c, i, j, f, o, tanhc, mask,
               flag_direction, grad_input, grad_weight, grad_bias, grad_h, grad_c);
  return grads;
}

LstmGrads npu_lstm_data_backward_meta(const std::optional<at::Tensor>& grady_opt,
                                      const std::optional<at::Tensor>& gradh_opt,
                                      const std::optional<at::Tensor>& gradc_opt, const at::Tensor& input,
                                      const at::Tensor& batch_sizes, const at::Tensor& weight, const at::Tensor& bias,
                                      const at::Tensor& init_h, const at::Tensor& init_c, const at::Tensor& y,
                                      const at::Tensor& h, const at::Tensor& c, const at::Tensor& i,
                                      const at::Tensor& j, const at::Tensor& f, const at::Tensor& o,
                                      const at::Tensor& tanhc, bool flag_direction) {
  checkLstmShapes("npu_lstm_data_backward", input, weight, bias, init_h, init_c);
  checkBatchSizes("npu_lstm_data_backward", input, batch_sizes);
  return emptyLstmGrads(input, weight, bias, init_h, init_c);
}

}  // namespace at_npu::native
