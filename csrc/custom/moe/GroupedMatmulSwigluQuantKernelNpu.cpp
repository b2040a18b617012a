// GroupedMatmulSwigluQuantKernelNpu.cpp - npu_grouped_matmul_swiglu_quant (on aclnnGroupedMatmulSwigluQuantWeightNZ)
// and npu_grouped_matmul_swiglu_quant_v2 (on aclnnGroupedMatmulSwigluQuantV2): per MoE expert, the int8 / int4
// grouped matmul of its rows, dequantised per channel and per token, SwiGLU over the two halves of N, then dynamic
// per-token int8 quantisation. Inference ops: torch_npu defines no gradient for them.
#include <ATen/ops/empty.h>

#include <tuple>
#include <utility>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

bool isFloat8(at::ScalarType t) { return t == at::kFloat8_e4m3fn || t == at::kFloat8_e5m2; }

// The logical N of an (E, K, N) weight: int32 weights carry eight int4 values per element.
int64_t logicalN(const at::Tensor& weight) { return weight.size(2) * (weight.scalar_type() == at::kInt ? 8 : 1); }

// Checks shared by both versions; returns (M, N).
std::pair<int64_t, int64_t> checkCommon(const char* op, const at::Tensor& x, const at::Tensor& weight,
                                        const at::Tensor& weight_scale, const at::Tensor& x_scale,
                                        const at::Tensor& group_list) {
  for (const auto& [name, t] : {std::make_pair("x", &x), std::make_pair("weight", &weight),
                                std::make_pair("weight_scale", &weight_scale), std::make_pair("x_scale", &x_scale)}) {
    const char* chip = quant::chipFormatName(static_cast<int64_t>(t->scalar_type()));
    TORCH_CHECK_TYPE(chip == nullptr || isFloat8(t->scalar_type()), op, ": ", name, " is ", chip,
                     ", a chip number format the software NPU does not have");
  }
  TORCH_CHECK_VALUE(x.dim() == 2, op, ": x must be 2-D (M, K), got ", x.sizes());
  TORCH_CHECK_VALUE(weight.dim() == 3, op, ": weight must be 3-D (E, K, N) (int32: (E, K, N / 8)); 5-D FRACTAL_NZ ",
                    "views are the chip's storage layout (npu_format_cast keeps the logical 3-D shape on the software ",
                    "NPU), got ", weight.sizes());
  const int64_t xPack = x.scalar_type() == at::kInt ? 8 : 1;
  const int64_t m = x.size(0), k = x.size(1) * xPack, e = weight.size(0), n = logicalN(weight);
  TORCH_CHECK_VALUE(weight.size(1) == k, op, ": x ", x.sizes(), " and weight ", weight.sizes(),
                    " do not multiply: weight's dimension 1 must be K = ", k);
  TORCH_CHECK_VALUE(n % 2 == 0, op, ": N (", n, ") must be even: SwiGLU splits it in halves");
  TORCH_CHECK_VALUE(weight_scale.dim() >= 2 && weight_scale.size(0) == e && weight_scale.size(-1) == n, op,
                    ": weight_scale must be (", e, ", ", n, ") (or (", e, ", G, ", n, ") per k group), got ",
                    weight_scale.sizes());
  TORCH_CHECK_TYPE(x_scale.scalar_type() == at::kFloat, op, ": x_scale must be float32, got ",
                   x_scale.scalar_type());
  TORCH_CHECK_VALUE(x_scale.dim() == 1 && x_scale.size(0) == m, op, ": x_scale must be (", m, ",), got ",
                    x_scale.sizes());
  TORCH_CHECK_TYPE(group_list.scalar_type() == at::kLong, op, ": group_list must be int64, got ",
                   group_list.scalar_type());
  TORCH_CHECK_VALUE(group_list.dim() == 1 && group_list.size(0) == e, op, ": group_list must be 1-D with one entry ",
                    "per expert (", e, "), got ", group_list.sizes());
  return {m, n};
}

// --- npu_grouped_matmul_swiglu_quant ----------------------------------------------------------------------------

constexpr const char* kV1 = "npu_grouped_matmul_swiglu_quant";

std::tuple<at::Tensor, at::Tensor, at::Tensor> v1Outputs(const at::Tensor& x, const at::Tensor& weight,
                                                         const at::Tensor& group_list, const at::Tensor& weight_scale,
                                                         const at::Tensor& x_scale,
                                                         const std::optional<at::Tensor>& bias,
                                                         const std::optional<at::Tensor>& offset) {
  TORCH_CHECK_TYPE(x.scalar_type() == at::kChar, kV1, ": x must be int8, got ", x.scalar_type());
  TORCH_CHECK_TYPE(weight.scalar_type() == at::kChar || weight.scalar_type() == at::kInt, kV1,
                   ": weight must be int8 (A8W8) or int32 carrying eight int4 (A8W4), got ", weight.scalar_type());
  const auto [m, n] = checkCommon(kV1, x, weight, weight_scale, x_scale, group_list);
  const bool a8w4 = weight.scalar_type() == at::kInt;
  TORCH_CHECK_VALUE(!present(offset), kV1, ": offset is not supported (symmetric quantisation only); leave it None");
  TORCH_CHECK_VALUE(a8w4 || weight_scale.dim() == 2, kV1, ": an int8 weight takes a per-channel weight_scale (E, N), ",
                    "got ", weight_scale.sizes());
  if (a8w4) {
    // Upstream's first version passes A8W4's weight assist matrix as bias.
    TORCH_CHECK_VALUE(present(bias), kV1, ": an int4 weight (A8W4) needs bias, the weight assist matrix (E, N) ",
                      "float32 (8 * the column sums of the scaled weight)");
  } else {
    TORCH_CHECK_VALUE(!present(bias), kV1, ": bias is the A8W4 weight assist matrix; an int8 weight takes none");
  }
  return {at::empty({m, n / 2}, x.options().dtype(at::kChar)), at::empty({m}, x.options().dtype(at::kFloat)),
          at::empty({}, x.options().dtype(at::kFloat))};
}

// --- npu_grouped_matmul_swiglu_quant_v2 ------------------------------------------------------------------------

constexpr const char* kV2 = "npu_grouped_matmul_swiglu_quant_v2";

struct V2Plan {
  int64_t m = 0, n = 0;
  int64_t dequant_mode = 0, dequant_code = 0, group_list_type = 0;
};

void refuseDtypeArg(const char* arg, std::optional<int64_t> code) {
  if (!code.has_value()) return;
  const char* chip = quant::chipFormatName(*code);
  TORCH_CHECK_VALUE(chip == nullptr, kV2, ": ", arg, " selects ", chip, ", a chip number format the software NPU ",
                    "does not have; leave ", arg, " None");
  TORCH_CHECK_VALUE(false, kV2, ": ", arg, " only names chip number formats (hifloat8 / float4 / float8_e8m0) ",
                    "upstream; leave it None, got ", *code);
}

V2Plan planV2(const at::Tensor& x, at::TensorList weight, at::TensorList weight_scale, const at::Tensor& x_scale,
              const at::Tensor& group_list, const std::optional<at::Tensor>& smooth_scale,
              const std::optional<at::TensorList>& weight_assist_matrix, const std::optional<at::Tensor>& bias,
              std::optional<int64_t> dequant_mode, std::optional<int64_t> dequant_dtype,
              std::optional<int64_t> quant_mode, std::optional<int64_t> quant_dtype,
              std::optional<int64_t> group_list_type, at::OptionalIntArrayRef tuning_config,
              std::optional<int64_t> x_dtype, std::optional<int64_t> weight_dtype,
              std::optional<int64_t> weight_scale_dtype, std::optional<int64_t> x_scale_dtype) {
  refuseDtypeArg("x_dtype", x_dtype);
  refuseDtypeArg("weight_dtype", weight_dtype);
  refuseDtypeArg("weight_scale_dtype", weight_scale_dtype);
  refuseDtypeArg("x_scale_dtype", x_scale_dtype);
  TORCH_CHECK_VALUE(weight.size() == 1 && weight_scale.size() == 1, kV2, ": weight and weight_scale must each hold ",
                    "one tensor (the experts stacked: (E, K, N) and (E, N)); got ", weight.size(), " and ",
                    weight_scale.size());
  const at::Tensor& w = weight[0];
  const at::Tensor& ws = weight_scale[0];
  V2Plan plan;
  std::tie(plan.m, plan.n) = checkCommon(kV2, x, w, ws, x_scale, group_list);
  const at::ScalarType xt = x.scalar_type(), wt = w.scalar_type();
  const bool ok = (xt == at::kChar && (wt == at::kChar || wt == at::kInt)) || (xt == at::kInt && wt == at::kInt) ||
                  (isFloat8(xt) && isFloat8(wt));
  TORCH_CHECK_TYPE(ok, kV2, ": x / weight must be int8 / int8 (A8W8), int8 / int32 carrying int4 (A8W4), int32 / ",
                   "int32 carrying int4 (A4W4) or float8 / float8, got ", xt, " / ", wt);
  TORCH_CHECK_TYPE(!isFloat8(xt) || ws.scalar_type() != at::kLong, kV2, ": float8 operands take a float32, float16 ",
                   "or bfloat16 weight_scale, got int64");
  plan.dequant_mode = dequant_mode.value_or(0);
  TORCH_CHECK_VALUE(plan.dequant_mode != 2, kV2, ": dequant_mode 2 is mx quantisation, a chip number format the ",
                    "software NPU does not have");
  TORCH_CHECK_VALUE(plan.dequant_mode == 0 || plan.dequant_mode == 1, kV2, ": dequant_mode must be 0 (per channel) ",
                    "or 1 (per k group), got ", plan.dequant_mode);
  const bool a8w4 = xt == at::kChar && wt == at::kInt;
  TORCH_CHECK_VALUE(plan.dequant_mode == 0 || a8w4, kV2, ": dequant_mode 1 (per k group) applies to A8W4 only");
  TORCH_CHECK_VALUE(ws.dim() == (plan.dequant_mode == 1 ? 3 : 2), kV2, ": dequant_mode ", plan.dequant_mode,
                    " takes a ", plan.dequant_mode == 1 ? "(E, G, N)" : "(E, N)", " weight_scale, got ", ws.sizes());
  // torch dtype codes of the dequantised value -> the device op's codes (0 float32, 1 float16, 27 bfloat16).
  const int64_t dd = dequant_dtype.value_or(0);
  if (dd == 0 || dd == static_cast<int64_t>(at::kFloat)) {
    plan.dequant_code = 0;
  } else if (dd == static_cast<int64_t>(at::kHalf)) {
    plan.dequant_code = 1;
  } else if (dd == static_cast<int64_t>(at::kBFloat16)) {
    plan.dequant_code = 27;
  } else {
    TORCH_CHECK_VALUE(false, kV2, ": dequant_dtype must be 0 / torch.float32, torch.float16 or torch.bfloat16, got ",
                      dd);
  }
  const int64_t qm = quant_mode.value_or(0);
  TORCH_CHECK_VALUE(qm != 2, kV2, ": quant_mode 2 is mx quantisation, a chip number format the software NPU does ",
                    "not have");
  TORCH_CHECK_VALUE(qm == 0, kV2, ": quant_mode must be 0 (per token), got ", qm);
  // The output is int8: torch.int8 (1, the default), 0 (the documented int8 code) or torch_npu's int8 code.
  const int64_t qd = quant_dtype.value_or(static_cast<int64_t>(at::kChar));
  if (qd != 0) {
    TORCH_CHECK_VALUE(quant::targetOf(kV2, "quant_dtype", qd) == quant::Target::kInt8, kV2,
                      ": quant_dtype must be torch.int8, got ", qd);
  }
  plan.group_list_type = group_list_type.value_or(0);
  TORCH_CHECK_VALUE(plan.group_list_type == 0 || plan.group_list_type == 1, kV2, ": group_list_type must be 0 ",
                    "(cumsum) or 1 (count), got ", plan.group_list_type);
  if (tuning_config.has_value()) {
    for (int64_t v : *tuning_config) {
      TORCH_CHECK_VALUE(v >= 0, kV2, ": tuning_config values must not be negative, got ", v);
    }
  }
  TORCH_CHECK_VALUE(!present(bias), kV2, ": bias is not supported (as documented); leave it None");
  const int64_t e = w.size(0);
  const bool assist = weight_assist_matrix.has_value() && !weight_assist_matrix->empty();
  if (a8w4) {
    TORCH_CHECK_VALUE(assist && weight_assist_matrix->size() == 1, kV2, ": A8W4 (int8 x, int4 weight) needs ",
                      "weight_assist_matrix, one float32 (E, N) tensor (8 * the column sums of the scaled weight)");
    const at::Tensor& am = (*weight_assist_matrix)[0];
    TORCH_CHECK_TYPE(am.scalar_type() == at::kFloat, kV2, ": weight_assist_matrix must be float32, got ",
                     am.scalar_type());
    TORCH_CHECK_VALUE(am.dim() == 2 && am.size(0) == e && am.size(1) == plan.n, kV2,
                      ": weight_assist_matrix must be (", e, ", ", plan.n, "), got ", am.sizes());
  } else {
    TORCH_CHECK_VALUE(!assist, kV2, ": weight_assist_matrix applies to A8W4 (int8 x, int4 weight) only");
  }
  if (present(smooth_scale)) {
    TORCH_CHECK_TYPE(smooth_scale->scalar_type() == at::kFloat, kV2, ": smooth_scale must be float32, got ",
                     smooth_scale->scalar_type());
    TORCH_CHECK_VALUE(smooth_scale->size(0) == e &&
                          (smooth_scale->dim() == 1 || (smooth_scale->dim() == 2 && smooth_scale->size(1) == plan.n / 2)),
                      kV2, ": smooth_scale must be (", e, ", ", plan.n / 2, ") or (", e, ",), got ",
                      smooth_scale->sizes());
  }
  return plan;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_grouped_matmul_swiglu_quant(
    const at::Tensor& x, const at::Tensor& weight, const at::Tensor& group_list, const at::Tensor& weight_scale,
    const at::Tensor& x_scale, const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& offset) {
  auto outs = v1Outputs(x, weight, group_list, weight_scale, x_scale, bias, offset);
  at::Tensor output = std::get<0>(outs), output_scale = std::get<1>(outs), output_offset = std::get<2>(outs);
  EXEC_NPU_CMD(aclnnGroupedMatmulSwigluQuantWeightNZ, x, weight, bias, offset, weight_scale, x_scale, group_list,
               output, output_scale, output_offset);
  return outs;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_grouped_matmul_swiglu_quant_meta(
    const at::Tensor& x, const at::Tensor& weight, const at::Tensor& group_list, const at::Tensor& weight_scale,
    const at::Tensor& x_scale, const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& offset) {
  return v1Outputs(x, weight, group_list, weight_scale, x_scale, bias, offset);
}

std::tuple<at::Tensor, at::Tensor> npu_grouped_matmul_swiglu_quant_v2(
    const at::Tensor& x, at::TensorList weight, at::TensorList weight_scale, const at::Tensor& x_scale,
    const at::Tensor& group_list, const std::optional<at::Tensor>& smooth_scale,
    std::optional<at::TensorList> weight_assist_matrix, const std::optional<at::Tensor>& bias,
    std::optional<int64_t> dequant_mode, std::optional<int64_t> dequant_dtype, std::optional<int64_t> quant_mode,
    std::optional<int64_t> quant_dtype, std::optional<int64_t> group_list_type, at::OptionalIntArrayRef tuning_config,
    std::optional<int64_t> x_dtype, std::optional<int64_t> weight_dtype, std::optional<int64_t> weight_scale_dtype,
    std::optional<int64_t> x_scale_dtype) {
  const V2Plan plan = planV2(x, weight, weight_scale, x_scale, group_list, smooth_scale, weight_assist_matrix, bias,
                             dequant_mode, dequant_dtype, quant_mode, quant_dtype, group_list_type, tuning_config,
                             x_dtype, weight_dtype, weight_scale_dtype, x_scale_dtype);
  at::Tensor output = at::empty({plan.m, plan.n / 2}, x.options().dtype(at::kChar));
  at::Tensor output_scale = at::empty({plan.m}, x.options().dtype(at::kFloat));
  // float8 values are exact in float16: the device op computes on them widened.
  const bool fp8 = isFloat8(x.scalar_type());
  const at::Tensor xv = fp8 ? x.to(at::kHalf) : x;
  std::vector<at::Tensor> wv{fp8 ? weight[0].to(at::kHalf) : weight[0]};
  const at::TensorList none;
  const at::TensorList assist = weight_assist_matrix.value_or(none);
  const int64_t quant_mode_code = 0;
  EXEC_NPU_CMD(aclnnGroupedMatmulSwigluQuantV2, xv, at::TensorList(wv), weight_scale, assist, bias, x_scale,
               smooth_scale, group_list, plan.dequant_mode, plan.dequant_code, quant_mode_code, plan.group_list_type,
               tuning_config, output, output_scale);
  return {output, output_scale};
}

std::tuple<at::Tensor, at::Tensor> npu_grouped_matmul_swiglu_quant_v2_meta(
    const at::Tensor& x, at::TensorList weight, at::TensorList weight_scale, const at::Tensor& x_scale,
    const at::Tensor& group_list, const std::optional<at::Tensor>& smooth_scale,
    std::optional<at::TensorList> weight_assist_matrix, const std::optional<at::Tensor>& bias,
    std::optional<int64_t> dequant_mode, std::optional<int64_t> dequant_dtype, std::optional<int64_t> quant_mode,
    std::optional<int64_t> quant_dtype, std::optional<int64_t> group_list_type, at::OptionalIntArrayRef tuning_config,
    std::optional<int64_t> x_dtype, std::optional<int64_t> weight_dtype, std::optional<int64_t> weight_scale_dtype,
    std::optional<int64_t> x_scale_dtype) {
  const V2Plan plan = planV2(x, weight, weight_scale, x_scale, group_list, smooth_scale, weight_assist_matrix, bias,
                             dequant_mode, dequant_dtype, quant_mode, quant_dtype, group_list_type, tuning_config,
                             x_dtype, weight_dtype, weight_scale_dtype, x_scale_dtype);
  return {at::empty({plan.m, plan.n / 2}, x.options().dtype(at::kChar)),
          at::empty({plan.m}, x.options().dtype(at::kFloat))};
}

}  // namespace at_npu::native
