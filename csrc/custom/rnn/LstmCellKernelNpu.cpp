// LstmCellKernelNpu.cpp - npu_lstm_cell and npu_lstm_cell_backward: one LSTM time step on the aclnnLstmCell /
// aclnnLstmCellBackward device ops, with torch_npu's layout (transposed weights, eight [1, batch, hidden] outputs).
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using LstmCellOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                                   at::Tensor>;
using LstmCellGrads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// torch_npu takes the weights already transposed: w_ih [input_size, 4 * hidden], w_hh [hidden, 4 * hidden].
int64_t checkLstmCellShapes(const at::Tensor& input, const at::Tensor& w_ih, const at::Tensor& w_hh,
                            const at::Tensor& h, const at::Tensor& c, const std::optional<at::Tensor>& b_ih,
                            const std::optional<at::Tensor>& b_hh) {
  TORCH_CHECK_TYPE(at::isFloatingType(input.scalar_type()),
                   "npu_lstm_cell: input must be float16, bfloat16 or float32, got ", input.scalar_type());
  TORCH_CHECK_VALUE(input.dim() == 2, "npu_lstm_cell: input must be 2-D [batch, input_size], got ", input.sizes());
  TORCH_CHECK_VALUE(w_hh.dim() == 2 && w_hh.size(1) % 4 == 0 && w_hh.size(0) * 4 == w_hh.size(1),
                    "npu_lstm_cell: w_hh must be [hidden, 4 * hidden] (transposed), got ", w_hh.sizes());
  const int64_t hidden = w_hh.size(0);
  TORCH_CHECK_VALUE(w_ih.dim() == 2 && w_ih.size(0) == input.size(1) && w_ih.size(1) == 4 * hidden,
                    "npu_lstm_cell: w_ih must be [input_size, 4 * hidden] = [", input.size(1), ", ", 4 * hidden,
                    "] (transposed), got ", w_ih.sizes());
  TORCH_CHECK_VALUE(h.numel() == input.size(0) * hidden && c.numel() == input.size(0) * hidden,
                    "npu_lstm_cell: h and c must hold [batch, hidden] = [", input.size(0), ", ", hidden,
                    "] values, got ", h.sizes(), " and ", c.sizes());
  TORCH_CHECK_VALUE(b_ih.has_value() == b_hh.has_value(),
                    "npu_lstm_cell: b_ih and b_hh must be given together or both left out");
  if (b_ih.has_value()) {
    TORCH_CHECK_VALUE(b_ih->numel() == 4 * hidden && b_hh->numel() == 4 * hidden,
                      "npu_lstm_cell: b_ih and b_hh must be [4 * hidden] = [", 4 * hidden, "], got ", b_ih->sizes(),
                      " and ", b_hh->sizes());
  }
  return hidden;
}

LstmCellOutputs emptyLstmCellOutputs(const at::Tensor& input, int64_t hidden) {
  const auto options = input.options();
  const std::vector<int64_t> shape{1, input.size(0), hidden};
  return {at::empty(shape, options), at::empty(shape, options), at::empty(shape, options), at::empty(shape, options),
          at::empty(shape, options), at::empty(shape, options), at::empty(shape, options), at::empty(shape, options)};
}

LstmCellGrads emptyLstmCellGrads(const at::Tensor& input, const at::Tensor& w_ih, const at::Tensor& w_hh,
                                 const at::Tensor& h, const at::Tensor& c) {
  const int64_t hidden = w_hh.size(0);
  // b_ih and b_hh get the same gradient (the cell only uses their sum); two tensors so that neither aliases.
  return {at::empty(input.sizes(), input.options()), at::empty(w_ih.sizes(), w_ih.options()),
          at::empty(w_hh.sizes(), w_hh.options()), at::empty({4 * hidden}, input.options()),
          at::empty({4 * hidden}, input.options()),
          at::empty(h.sizes(), h.options()), at::empty(c.sizes(), c.options())};
}

}  // namespace

LstmCellOutputs npu_lstm_cell(const at::Tensor& input, const at::Tensor& w_ih, const at::Tensor& w_hh,
                              const at::Tensor& h, const at::Tensor& c, const std::optional<at::Tensor>& b_ih,
                              const std::optional<at::Tensor>& b_hh) {
  const int64_t hidden = checkLstmCellShapes(input, w_ih, w_hh, h, c, b_ih, b_hh);
  auto outputs = emptyLstmCellOutputs(input, hidden);
  auto& [y, h_out, c_out, i, j, f, o, tanhc] = outputs;
  EXEC_NPU_CMD(aclnnLstmCell, input, w_ih, w_hh, h, c, b_ih, b_hh, y, h_out, c_out, i, j, f, o, tanhc);
  return outputs;
}

LstmCellOutputs npu_lstm_cell_meta(const at::Tensor& input, const at::Tensor& w_ih, const at::Tensor& w_hh,
                                   const at::Tensor& h, const at::Tensor& c, const std::optional<at::Tensor>& b_ih,
                                   const std::optional<at::Tensor>& b_hh) {
  return emptyLstmCellOutputs(input, checkLstmCellShapes(input, w_ih, w_hh, h, c, b_ih, b_hh));
}

LstmCellGrads npu_lstm_cell_backward(const std::optional<at::Tensor>& grady, const std::optional<at::Tensor>& gradh,
                                     const std::optional<at::Tensor>& gradc, const at::Tensor& input,
                                     const at::Tensor& w_ih, const at::Tensor& w_hh, const at::Tensor& h,
                                     const at::Tensor& c, const at::Tensor& y_output, const at::Tensor& h_output,
                                     const at::Tensor& c_output, const at::Tensor& i, const at::Tensor& j,
                                     const at::Tensor& f, const at::Tensor& o, const at::Tensor& tanhc) {
  checkLstmCellShapes(input, w_ih, w_hh, h, c, std::nullopt, std::nullopt);
  // Autograd passes an undefined gradient for an unused output: the device op reads a missing one as zeros.
  auto defined_or_none = [](const std::optional<at::Tensor>& grad) {
    return grad.has_value() && grad->defined() ? grad : std::optional<at::Tensor>();
  };
  const std::optional<at::Tensor> gy = defined_or_none(grady), gh = defined_or_none(gradh), gc = defined_or_none(gradc);
  auto grads = emptyLstmCellGrads(input, w_ih, w_hh, h, c);
  auto& [grad_input, grad_w_ih, grad_w_hh, grad_b_ih, grad_b_hh, grad_h, grad_c] = grads;
  EXEC_NPU_CMD(aclnnLstmCellBackward, gy, gh, gc, input, w_ih, w_hh, h, c, c_output, i, j, f, o, tanhc,
               grad_input, grad_w_ih, grad_w_hh, grad_b_ih, grad_b_hh, grad_h, grad_c);
  return grads;
}

LstmCellGrads npu_lstm_cell_backward_meta(const std::optional<at::Tensor>& grady,
                                          const std::optional<at::Tensor>& gradh,
                                          const std::optional<at::Tensor>& gradc, const at::Tensor& input,
                                          const at::Tensor& w_ih, const at::Tensor& w_hh, const at::Tensor& h,
                                          const at::Tensor& c, const at::Tensor& y_output,
                                          const at::Tensor& h_output, const at::Tensor& c_output,
                                          const at::Tensor& i, const at::Tensor& j, const at::Tensor& f,
                                          const at::Tensor& o, const at::Tensor& tanhc) {
  checkLstmCellShapes(input, w_ih, w_hh, h, c, std::nullopt, std::nullopt);
  return emptyLstmCellGrads(input, w_ih, w_hh, h, c);
}

}  // namespace at_npu::native
