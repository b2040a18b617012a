// GeluQuantKernelNpu.cpp - npu_gelu_quant: GELU, then int8 quantization, static (given scale and offset per channel)
// or dynamic (per-token scale, returned), on aclnnGeluQuant. Inference only: no gradient upstream.
#include <ATen/ops/empty.h>

#include <string>
#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kGeluQuantOp = "npu_gelu_quant";
constexpr int64_t kAclInt8 = 2;  // the device op's dstType code for int8

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// Checks the arguments; returns y and, in dynamic mode, the per-token scale (undefined in static mode, as upstream).
std::tuple<at::Tensor, at::Tensor> geluQuantOutputs(const at::Tensor& self, const std::optional<at::Tensor>& scale,
                                                    const std::optional<at::Tensor>& offset,
                                                    c10::string_view approximate, c10::string_view quant_mode,
                                                    std::optional<int64_t> dst_type, c10::string_view round_mode) {
  TORCH_CHECK_TYPE(self.scalar_type() == at::kFloat || self.scalar_type() == at::kHalf ||
                       self.scalar_type() == at::kBFloat16,
                   kGeluQuantOp, ": self must be float32, float16 or bfloat16, got ", self.scalar_type());
  TORCH_CHECK_VALUE(self.dim() >= 1, kGeluQuantOp, ": self must have at least one dimension");
  TORCH_CHECK_VALUE(approximate == "none" || approximate == "tanh", kGeluQuantOp,
                    ": approximate must be 'none' or 'tanh', got '", approximate, "'");
  TORCH_CHECK_VALUE(quant_mode == "static" || quant_mode == "dynamic", kGeluQuantOp,
                    ": quant_mode must be 'static' or 'dynamic', got '", quant_mode, "'");
  TORCH_CHECK_VALUE(round_mode == "rint" || round_mode == "round" || round_mode == "floor" || round_mode == "ceil" ||
                        round_mode == "trunc",
                    kGeluQuantOp, ": round_mode must be 'rint', 'round', 'floor', 'ceil' or 'trunc', got '",
                    round_mode, "'");
  const int64_t target = dst_type.value_or(static_cast<int64_t>(at::kChar));
  TORCH_CHECK_VALUE(target == static_cast<int64_t>(at::kChar), kGeluQuantOp,
                    ": dst_type must be torch.int8; the float8 / hifloat8 targets are chip number formats the software "
                    "NPU does not have; got ", target);
  const int64_t channels = self.size(-1);
  for (const auto& [name, t] : {std::make_pair("input_scale", &scale), std::make_pair("input_offset", &offset)}) {
    if (!present(*t)) continue;
    TORCH_CHECK_VALUE((*t)->dim() == 1 && ((*t)->size(0) == channels || (*t)->size(0) == 1), kGeluQuantOp, ": ",
                      name, " must have shape (", channels, ",) (self's last dimension) or (1,), got ", (*t)->sizes());
  }
  TORCH_CHECK_VALUE(quant_mode == "dynamic" || present(scale), kGeluQuantOp, ": static quantization needs input_scale");
  at::Tensor y = at::empty(self.sizes(), self.options().dtype(at::kChar));
  at::Tensor out_scale;
  if (quant_mode == "dynamic") {
    out_scale = at::empty(self.sizes().slice(0, self.dim() - 1), self.options().dtype(at::kFloat));
  }
  return std::make_tuple(y, out_scale);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_gelu_quant(const at::Tensor& self, const std::optional<at::Tensor>& input_scale,
                                                  const std::optional<at::Tensor>& input_offset,
                                                  c10::string_view approximate, c10::string_view quant_mode,
                                                  std::optional<int64_t> dst_type, c10::string_view round_mode) {
  std::tuple<at::Tensor, at::Tensor> outs =
      geluQuantOutputs(self, input_scale, input_offset, approximate, quant_mode, dst_type, round_mode);
  at::Tensor y = std::get<0>(outs);
  // Static mode has no scale output: the device op receives it absent.
  const std::optional<at::Tensor> out_scale =
      std::get<1>(outs).defined() ? std::optional<at::Tensor>(std::get<1>(outs)) : std::nullopt;
  const std::string approximate_str(approximate), mode_str(quant_mode), round_str(round_mode);
  const int64_t dst_code = kAclInt8;
  EXEC_NPU_CMD(aclnnGeluQuant, self, input_scale, input_offset, approximate_str, mode_str, round_str, dst_code, y,
               out_scale);
  return outs;
}

std::tuple<at::Tensor, at::Tensor> npu_gelu_quant_meta(const at::Tensor& self,
                                                       const std::optional<at::Tensor>& input_scale,
                                                       const std::optional<at::Tensor>& input_offset,
                                                       c10::string_view approximate, c10::string_view quant_mode,
                                                       std::optional<int64_t> dst_type, c10::string_view round_mode) {
  return geluQuantOutputs(self, input_scale, input_offset, approximate, quant_mode, dst_type, round_mode);
}

}  // namespace at_npu::native
