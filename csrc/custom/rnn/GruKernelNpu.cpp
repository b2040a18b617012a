// GruKernelNpu.cpp - npu_gru and npu_gru_backward: a whole single-layer GRU sequence on the aclnnDynamicGRUV2 /
// aclnnDynamicGRUV2Grad device ops, with torch_npu's transposed weights (gate columns r, z, n).
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using GruOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// input is time-major [T, batch, input_size]; weight_input = w_ih.t() [input_size, 3 * hidden], weight_hidden =
// w_hh.t() [hidden, 3 * hidden]; bias_input / bias_hidden [3 * hidden]; hx holds [batch, hidden]. Returns hidden.
int64_t checkGruShapes(const char* op, const at::Tensor& input, const at::Tensor& hx, const at::Tensor& weight_input,
                       const at::Tensor& weight_hidden, const at::Tensor& bias_input,
                       const at::Tensor& bias_hidden) {
  const auto dtype = input.scalar_type();
  TORCH_CHECK_TYPE(at::isFloatingType(dtype) && dtype != at::kDouble, op,
                   ": input must be float16, bfloat16 or float32, got ", dtype);
  for (const at::Tensor* t : {&hx, &weight_input, &weight_hidden, &bias_input, &bias_hidden}) {
    TORCH_CHECK_TYPE(t->scalar_type() == dtype, op, ": hx, weights and biases must have the input's dtype ", dtype,
                     ", got ", t->scalar_type());
  }
  TORCH_CHECK_VALUE(input.dim() == 3 && input.size(0) > 0,
                    op, ": input must be 3-D time-major [T, batch, input_size] with T > 0, got ", input.sizes());
  TORCH_CHECK_VALUE(bias_input.dim() == 1 && bias_input.size(0) % 3 == 0 && bias_input.size(0) > 0,
                    op, ": bias_input must be 1-D [3 * hidden], got ", bias_input.sizes());
  const int64_t hidden = bias_input.size(0) / 3;
  TORCH_CHECK_VALUE(bias_hidden.dim() == 1 && bias_hidden.size(0) == 3 * hidden,
                    op, ": bias_hidden must be [3 * hidden] = [", 3 * hidden, "], got ", bias_hidden.sizes());
  TORCH_CHECK_VALUE(weight_input.dim() == 2 && weight_input.size(0) == input.size(2) &&
                        weight_input.size(1) == 3 * hidden,
                    op, ": weight_input must be [input_size, 3 * hidden] = [", input.size(2), ", ", 3 * hidden,
                    "] (w_ih transposed), got ", weight_input.sizes());
  TORCH_CHECK_VALUE(weight_hidden.dim() == 2 && weight_hidden.size(0) == hidden && weight_hidden.size(1) == 3 * hidden,
                    op, ": weight_hidden must be [hidden, 3 * hidden] = [", hidden, ", ", 3 * hidden,
                    "] (w_hh transposed), got ", weight_hidden.sizes());
  TORCH_CHECK_VALUE(hx.numel() == input.size(1) * hidden,
                    op, ": hx must hold [batch, hidden] = [", input.size(1), ", ", hidden, "] values, got ",
                    hx.sizes());
  return hidden;
}

GruOutputs emptyGruOutputs(const at::Tensor& input, const at::Tensor& bias_input, int64_t hidden) {
  // torch_npu allocates every output with the bias's options
  const auto options = bias_input.options();
  const std::vector<int64_t> shape{input.size(0), input.size(1), hidden};
  return {at::empty(shape, options), at::empty(shape, options), at::empty(shape, options),
          at::empty(shape, options), at::empty(shape, options), at::empty(shape, options)};
}

// Gradients in upstream's order: weight_input, weight_hidden, input, bias_input, bias_hidden, hx.
GruOutputs emptyGruGrads(const at::Tensor& input, const at::Tensor& hx, const at::Tensor& weight_input,
                         const at::Tensor& weight_hidden, const at::Tensor& bias_input,
                         const at::Tensor& bias_hidden) {
  const auto options = input.options();
  return {at::empty(weight_input.sizes(), options), at::empty(weight_hidden.sizes(), options),
          at::empty(input.sizes(), options),        at::empty(bias_input.sizes(), options),
          at::empty(bias_hidden.sizes(), options),  at::empty(hx.sizes(), options)};
}

}  // namespace

GruOutputs npu_gru(const at::Tensor& input, const at::Tensor& hx, const at::Tensor& weight_input,
                   const at::Tensor& weight_hidden, const at::Tensor& bias_input, const at::Tensor& bias_hidden,
                   const at::Tensor& seq_length, bool has_biases, int64_t num_layers, double dropout, bool train,
                   bool bidirectional, bool batch_first) {
  // Like torch_npu, the op runs one forward-direction, time-major layer over every step: seq_length and the
  // nn.GRU description (has_biases, num_layers, dropout, train, bidirectional, batch_first) are not read.
  const int64_t hidden = checkGruShapes("npu_gru", input, hx, weight_input, weight_hidden, bias_input, bias_hidden);
  auto outputs = emptyGruOutputs(input, bias_input, hidden);
  auto& [y, h, update, reset, new_gate, hidden_new] = outputs;
  EXEC_NPU_CMD(aclnnDynamicGRUV2, input, weight_input, weight_hidden, bias_input, bias_hidden, hx, y, h, update,
               reset, new_gate, hidden_new);
  return outputs;
}

GruOutputs npu_gru_meta(const at::Tensor& input, const at::Tensor& hx, const at::Tensor& weight_input,
                        const at::Tensor& weight_hidden, const at::Tensor& bias_input, const at::Tensor& bias_hidden,
                        const at::Tensor& seq_length, bool has_biases, int64_t num_layers, double dropout, bool train,
                        bool bidirectional, bool batch_first) {
  const int64_t hidden = checkGruShapes("npu_gru", input, hx, weight_input, weight_hidden, bias_input, bias_hidden);
  return emptyGruOutputs(input, bias_input, hidden);
}

GruOutputs npu_gru_backward(const std::optional<at::Tensor>& grady, const std::optional<at::Tensor>& gradh,
                            const at::Tensor& input, const at::Tensor& weight_input, const at::Tensor& weight_hidden,
                            const at::Tensor& bias_input, const at::Tensor& bias_hidden, const at::Tensor& seq_length,
                            const at::Tensor& hx, const at::Tensor& y_output, const at::Tensor& h_output,
                            const at::Tensor& output_updata, const at::Tensor& output_reset,
                            const at::Tensor& output_new, const at::Tensor& hidden_new) {
  const char* op = "npu_gru_backward";
  const int64_t hidden = checkGruShapes(op, input, hx, weight_input, weight_hidden, bias_input, bias_hidden);
  // Autograd passes an undefined gradient for an unused output: the device op reads a missing one as zeros.
  auto defined_or_none = [&](const std::optional<at::Tensor>& grad) {
    const bool present = grad.has_value() && grad->defined();
    TORCH_CHECK_VALUE(!present || grad->numel() == input.size(0) * input.size(1) * hidden,
                      op, ": grady and gradh must be [T, batch, hidden] = [", input.size(0), ", ", input.size(1),
                      ", ", hidden, "], got ", grad->sizes());
    return present ? grad : std::optional<at::Tensor>();
  };
  const std::optional<at::Tensor> gy = defined_or_none(grady), gh = defined_or_none(gradh);
  auto grads = emptyGruGrads(input, hx, weight_input, weight_hidden, bias_input, bias_hidden);
  auto& [grad_w_input, grad_w_hidden, grad_x, grad_b_input, grad_b_hidden, grad_hx] = grads;
  EXEC_NPU_CMD(aclnnDynamicGRUV2Grad, gy, gh, input, weight_input, weight_hidden, hx, h_output, output_updata,
               output_reset, output_new, hidden_new, grad_w_input, grad_w_hidden, grad_b_input, grad_b_hidden, grad_x,
               grad_hx);
  return grads;
}

GruOutputs npu_gru_backward_meta(const std::optional<at::Tensor>& grady, const std::optional<at::Tensor>& gradh,
                                 const at::Tensor& input, const at::Tensor& weight_input,
                                 const at::Tensor& weight_hidden, const at::Tensor& bias_input,
                                 const at::Tensor& bias_hidden, const at::Tensor& seq_length, const at::Tensor& hx,
                                 const at::Tensor& y_output, const at::Tensor& h_output,
                                 const at::Tensor& output_updata, const at::Tensor& output_reset,
                                 const at::Tensor& output_new, const at::Tensor& hidden_new) {
  checkGruShapes("npu_gru_backward", input, hx, weight_input, weight_hidden, bias_input, bias_hidden);
  return emptyGruGrads(input, hx, weight_input, weight_hidden, bias_input, bias_hidden);
}

}  // namespace at_npu::native
