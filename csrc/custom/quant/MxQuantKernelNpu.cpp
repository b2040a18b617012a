// MxQuantKernelNpu.cpp - MX (microscaling) quantisation: npu_dynamic_mx_quant (blocks along an axis, on
// aclnnDynamicMxQuantV2), npu_grouped_dynamic_mx_quant (row blocks restarting at each group, on
// aclnnGroupedDynamicMxQuantV2), npu_dynamic_block_mx_quant (32 x 32 blocks, on aclnnDynamicBlockMxQuant) and
// npu_anti_mx_quant (dequantisation, on aclnnAntiMxQuant), rms norm with MX output: npu_rms_norm_dynamic_mx_quant
// and npu_add_rms_norm_dynamic_mx_quant (on aclnn(Add)RmsNormDynamicMxQuant), npu_dynamic_mx_quant_with_dual_axis
// (on aclnnDynamicMxQuantWithDualAxisV2) and npu_dynamic_dual_level_mx_quant (on aclnnDynamicDualLevelMxQuant). As
// upstream, float8 elements come as float8 tensors,
// float4 ones two to a uint8 (the even element in the low nibble), and e8m0 block scales as uint8 codes paired
// along the blocked axis. Inference ops: no gradient upstream.
#include <ATen/ops/empty.h>

#include <string>
#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/NpuDtypeCodes.h"
#include "csrc/framework/AclTensorAs.h"
#include "csrc/framework/OpCommand.h"
#include "opslib/aten/Float8Dtypes.h"

namespace at_npu::native {
namespace {

namespace acl = npu::opslib::aten;

// The MX element format a dtype code names (torch_npu's codes or torch's float8 / float4 dtypes) as its
// aclDataType.
aclDataType mxElementType(const char* op, const char* arg, int64_t code) {
  using dtype_codes::kNpuDtypeOffset;
  if (code == kNpuDtypeOffset + 35 || code == static_cast<int64_t>(at::ScalarType::Float8_e5m2)) {
    return acl::kAclFloat8E5M2;
  }
  if (code == kNpuDtypeOffset + 36 || code == static_cast<int64_t>(at::ScalarType::Float8_e4m3fn)) {
    return acl::kAclFloat8E4M3FN;
  }
  if (code == kNpuDtypeOffset + 40 || code == static_cast<int64_t>(at::ScalarType::Float4_e2m1fn_x2)) {
    return acl::kAclFloat4E2M1;
  }
  if (code == kNpuDtypeOffset + 41) return acl::kAclFloat4E1M2;
  TORCH_CHECK_VALUE(false, op, ": ", arg, " must be torch_npu.float8_e5m2, torch_npu.float8_e4m3fn, ",
                    "torch_npu.float4_e2m1fn_x2 or torch_npu.float4_e1m2fn_x2 (torch's float8 / float4 dtypes work ",
                    "too), got ", code);
  return acl::kAclFloat8E4M3FN;  // not reached
}

bool isFloat4(aclDataType type) { return type == acl::kAclFloat4E2M1 || type == acl::kAclFloat4E1M2; }

void checkHalfInput(const char* op, const at::Tensor& x) {
  TORCH_CHECK_TYPE(x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kFloat,
                   op, ": input must be float16, bfloat16 or float32, got ", x.scalar_type());
}

// y: float8 elements as a float8 tensor of x's shape, float4 ones two to a uint8 (last dimension halved).
at::Tensor mxElements(const char* op, const at::Tensor& x, aclDataType type) {
  std::vector<int64_t> shape = x.sizes().vec();
  if (isFloat4(type)) {
    TORCH_CHECK_VALUE(!shape.empty() && shape.back() % 2 == 0, op, ": float4 output packs two values to a byte, so ",
                      "the input's last dimension must be even, got ", x.sizes());
    shape.back() /= 2;
    return at::empty(shape, x.options().dtype(at::kByte));
  }
  return at::empty(shape, x.options().dtype(*acl::float8HolderOf(type)));
}

int64_t pairsOf(int64_t length, int64_t block) { return ((length + block - 1) / block + 1) / 2; }

// e8m0 codes in uint8: `shape` with dimension `axis` turned into block pairs and a trailing 2.
at::Tensor pairedScales(const at::Tensor& x, at::IntArrayRef shape, int64_t axis, int64_t block) {
  std::vector<int64_t> s = shape.vec();
  s[axis] = pairsOf(shape[axis], block);
  s.push_back(2);
  return at::empty(s, x.options().dtype(at::kByte));
}

int64_t checkedAxis(const char* op, int64_t axis, int64_t dims) {
  TORCH_CHECK_VALUE(axis >= -dims && axis < dims, op, ": axis must be in [", -dims, ", ", dims, "), got ", axis);
  return axis < 0 ? axis + dims : axis;
}

void checkRoundMode(const char* op, c10::string_view mode) {
  TORCH_CHECK_VALUE(mode == "rint" || mode == "round" || mode == "floor", op,
                    ": round_mode must be 'rint', 'round' or 'floor', got '", std::string(mode), "'");
}

// Which block-scale algorithm the element type takes (0 for all, 1 for float8, 2 for float4_e2m1) and what
// dst_type_max means for it.
void checkScaleAlg(const char* op, aclDataType type, int64_t scale_alg, double dst_type_max) {
  TORCH_CHECK_VALUE(scale_alg >= 0 && scale_alg <= 2, op, ": scale_alg must be 0, 1 or 2, got ", scale_alg);
  TORCH_CHECK_VALUE(scale_alg != 1 || !isFloat4(type), op, ": scale_alg 1 is for float8 outputs");
  TORCH_CHECK_VALUE(scale_alg != 2 || type == acl::kAclFloat4E2M1, op, ": scale_alg 2 is for float4_e2m1 outputs");
  TORCH_CHECK_VALUE(scale_alg != 0 || dst_type_max == 0.0, op, ": dst_type_max tunes scale_alg 1 and 2; scale_alg 0 ",
                    "takes 0.0, got ", dst_type_max);
  TORCH_CHECK_VALUE(scale_alg != 2 || dst_type_max == 0.0 || dst_type_max == 6.0 || dst_type_max == 7.0, op,
                    ": with scale_alg 2 dst_type_max must be 0.0, 6.0 or 7.0, got ", dst_type_max);
  TORCH_CHECK_VALUE(dst_type_max >= 0.0, op, ": dst_type_max must not be negative, got ", dst_type_max);
}

// The element type of an MX quantiser's dst_type, with its round mode and block-scale algorithm checked.
aclDataType checkedMxTarget(const char* op, c10::string_view round_mode, int64_t dst_type, int64_t scale_alg,
                            double dst_type_max) {
  checkRoundMode(op, round_mode);
  const aclDataType type = mxElementType(op, "dst_type", dst_type);
  checkScaleAlg(op, type, scale_alg, dst_type_max);
  return type;
}

struct DynamicMx {
  at::Tensor y, mxscale;
  aclDataType type;
};

DynamicMx dynamicMxOutputs(const at::Tensor& input, int64_t axis, c10::string_view round_mode, int64_t dst_type,
                           int64_t block_size, std::optional<int64_t> scale_alg, double dst_type_max,
                           double max_low_bound) {
  const char* op = "npu_dynamic_mx_quant";
  checkHalfInput(op, input);
  TORCH_CHECK_VALUE(input.dim() >= 1 && input.dim() <= 7, op, ": input must have 1 to 7 dimensions, got ",
                    input.sizes());
  const int64_t ax = checkedAxis(op, axis, input.dim());
  TORCH_CHECK_VALUE(block_size > 0 && block_size % 32 == 0 && block_size <= 1024, op,
                    ": block_size must be a multiple of 32 up to 1024, got ", block_size);
  const aclDataType type = checkedMxTarget(op, round_mode, dst_type, scale_alg.value_or(0), dst_type_max);
  TORCH_CHECK_VALUE(max_low_bound == 0.0, op, ": max_low_bound is not provided; pass 0.0, got ", max_low_bound);
  return {mxElements(op, input, type), pairedScales(input, input.sizes(), ax, block_size), type};
}

}  // namespace

// --- npu_dynamic_mx_quant --------------------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> npu_dynamic_mx_quant(const at::Tensor& input, int64_t axis,
                                                        c10::string_view round_mode, int64_t dst_type,
                                                        int64_t block_size, std::optional<int64_t> scale_alg,
                                                        double dst_type_max, double max_low_bound) {
  DynamicMx out =
      dynamicMxOutputs(input, axis, round_mode, dst_type, block_size, scale_alg, dst_type_max, max_low_bound);
  const std::string mode(round_mode);
  const int64_t dst_code = out.type, alg = scale_alg.value_or(0);
  const AclTensorAs y{out.y, out.type}, mxscale{out.mxscale, acl::kAclFloat8E8M0};
  EXEC_NPU_CMD(aclnnDynamicMxQuantV2, input, axis, mode, dst_code, block_size, alg, dst_type_max, y, mxscale);
  return {out.y, out.mxscale};
}

std::tuple<at::Tensor, at::Tensor> npu_dynamic_mx_quant_meta(const at::Tensor& input, int64_t axis,
                                                             c10::string_view round_mode, int64_t dst_type,
                                                             int64_t block_size, std::optional<int64_t> scale_alg,
                                                             double dst_type_max, double max_low_bound) {
  DynamicMx out =
      dynamicMxOutputs(input, axis, round_mode, dst_type, block_size, scale_alg, dst_type_max, max_low_bound);
  return {out.y, out.mxscale};
}

// --- npu_grouped_dynamic_mx_quant ------------------------------------------------------------------------------

namespace {

DynamicMx groupedMxOutputs(const at::Tensor& x, const at::Tensor& group_index, c10::string_view round_mode,
                           int64_t dst_type, int64_t blocksize, std::optional<int64_t> scale_alg,
                           std::optional<double> dst_type_max) {
  const char* op = "npu_grouped_dynamic_mx_quant";
  checkHalfInput(op, x);
  TORCH_CHECK_VALUE(x.dim() == 2, op, ": x must be 2-d [M, N], got ", x.sizes());
  TORCH_CHECK_VALUE(group_index.dim() == 1, op, ": group_index must be 1-d (cumulative row ends), got ",
                    group_index.sizes());
  TORCH_CHECK_TYPE(group_index.scalar_type() == at::kInt || group_index.scalar_type() == at::kLong, op,
                   ": group_index must be int32 or int64, got ", group_index.scalar_type());
  TORCH_CHECK_VALUE(blocksize == 32, op, ": blocksize must be 32, got ", blocksize);
  const aclDataType type =
      checkedMxTarget(op, round_mode, dst_type, scale_alg.value_or(0), dst_type_max.value_or(0.0));
  const at::Tensor y = mxElements(op, x, type);
  const at::Tensor mxscale =
      at::empty({x.size(0) / 64 + group_index.size(0), x.size(1), 2}, x.options().dtype(at::kByte));
  return {y, mxscale, type};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_grouped_dynamic_mx_quant(const at::Tensor& x, const at::Tensor& group_index,
                                                                c10::string_view round_mode, int64_t dst_type,
                                                                int64_t blocksize, std::optional<int64_t> scale_alg,
                                                                std::optional<double> dst_type_max) {
  DynamicMx out = groupedMxOutputs(x, group_index, round_mode, dst_type, blocksize, scale_alg, dst_type_max);
  const std::string mode(round_mode);
  const int64_t dst_code = out.type, alg = scale_alg.value_or(0);
  const double top = dst_type_max.value_or(0.0);
  const AclTensorAs y{out.y, out.type}, mxscale{out.mxscale, acl::kAclFloat8E8M0};
  EXEC_NPU_CMD(aclnnGroupedDynamicMxQuantV2, x, group_index, mode, dst_code, blocksize, alg, top, y, mxscale);
  return {out.y, out.mxscale};
}

std::tuple<at::Tensor, at::Tensor> npu_grouped_dynamic_mx_quant_meta(const at::Tensor& x,
                                                                     const at::Tensor& group_index,
                                                                     c10::string_view round_mode, int64_t dst_type,
                                                                     int64_t blocksize,
                                                                     std::optional<int64_t> scale_alg,
                                                                     std::optional<double> dst_type_max) {
  DynamicMx out = groupedMxOutputs(x, group_index, round_mode, dst_type, blocksize, scale_alg, dst_type_max);
  return {out.y, out.mxscale};
}

// --- npu_dynamic_block_mx_quant --------------------------------------------------------------------------------

namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor, aclDataType> blockMxOutputs(const at::Tensor& input,
                                                                          c10::string_view round_mode,
                                                                          int64_t dst_type, int64_t scale_alg,
                                                                          double dst_type_max) {
  const char* op = "npu_dynamic_block_mx_quant";
  checkHalfInput(op, input);
  TORCH_CHECK_VALUE(input.dim() >= 2 && input.dim() <= 7, op, ": input must have 2 to 7 dimensions, got ",
                    input.sizes());
  const aclDataType type = checkedMxTarget(op, round_mode, dst_type, scale_alg, dst_type_max);
  const int64_t d = input.dim();
  return {mxElements(op, input, type), pairedScales(input, input.sizes(), d - 1, 32),
          pairedScales(input, input.sizes(), d - 2, 32), type};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_dynamic_block_mx_quant(const at::Tensor& input,
                                                                          c10::string_view round_mode,
                                                                          int64_t dst_type, int64_t scale_alg,
                                                                          double dst_type_max) {
  auto [y, scale1, scale2, type] = blockMxOutputs(input, round_mode, dst_type, scale_alg, dst_type_max);
  const std::string mode(round_mode);
  const int64_t dst_code = type;
  const AclTensorAs y_out{y, type}, s1{scale1, acl::kAclFloat8E8M0}, s2{scale2, acl::kAclFloat8E8M0};
  EXEC_NPU_CMD(aclnnDynamicBlockMxQuant, input, mode, dst_code, scale_alg, dst_type_max, y_out, s1, s2);
  return {y, scale1, scale2};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_dynamic_block_mx_quant_meta(const at::Tensor& input,
                                                                               c10::string_view round_mode,
                                                                               int64_t dst_type, int64_t scale_alg,
                                                                               double dst_type_max) {
  auto [y, scale1, scale2, type] = blockMxOutputs(input, round_mode, dst_type, scale_alg, dst_type_max);
  return {y, scale1, scale2};
}

// --- npu_anti_mx_quant -----------------------------------------------------------------------------------------

namespace {

struct AntiMx {
  at::Tensor y, x_bytes, scale_bytes;  // x and mxscale as the device op reads them
  aclDataType x_type;
  int64_t axis;
  at::ScalarType y_type;
};

AntiMx antiMxPlan(const at::Tensor& x, const at::Tensor& mxscale, std::optional<int64_t> axis,
                  std::optional<int64_t> dst_type, std::optional<int64_t> src_type) {
  const char* op = "npu_anti_mx_quant";
  const aclDataType x_type = mxElementType(op, "src_type", src_type.value_or(dtype_codes::kNpuDtypeOffset + 36));
  AntiMx plan;
  plan.x_type = x_type;
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.dim() <= 7, op, ": x must have 1 to 7 dimensions, got ", x.sizes());
  TORCH_CHECK_VALUE(mxscale.dim() >= 2 && mxscale.dim() <= 8, op, ": mxscale must have 2 to 8 dimensions, got ",
                    mxscale.sizes());
  std::vector<int64_t> shape = x.sizes().vec();
  if (isFloat4(x_type)) {
    TORCH_CHECK_TYPE(x.scalar_type() == at::kByte || x.scalar_type() == at::ScalarType::Float4_e2m1fn_x2, op,
                     ": float4 x holds two values to a byte (uint8 or torch.float4_e2m1fn_x2), got ", x.scalar_type());
    shape.back() *= 2;
    plan.x_bytes = x.view(at::kByte);
  } else {
    TORCH_CHECK_TYPE(x.scalar_type() == *acl::float8HolderOf(x_type), op, ": src_type says x holds ",
                     *acl::float8HolderOf(x_type), ", but x is ", x.scalar_type());
    plan.x_bytes = x;
  }
  TORCH_CHECK_TYPE(mxscale.scalar_type() == at::kByte || mxscale.scalar_type() == at::ScalarType::Float8_e8m0fnu, op,
                   ": mxscale holds e8m0 codes (uint8 or torch.float8_e8m0fnu), got ", mxscale.scalar_type());
  plan.scale_bytes = mxscale.view(at::kByte);
  plan.axis = checkedAxis(op, axis.value_or(-1), x.dim());
  std::vector<int64_t> scale_shape = shape;
  scale_shape[plan.axis] = pairsOf(shape[plan.axis], 32);
  scale_shape.push_back(2);
  TORCH_CHECK_VALUE(mxscale.sizes().equals(scale_shape), op, ": mxscale must be ", at::IntArrayRef(scale_shape),
                    " (blocks of 32 along axis, paired), got ", mxscale.sizes());
  plan.y_type = dtype_codes::scalarTypeOfCode(op, "dst_type", dst_type.value_or(15), "dequantise to");
  TORCH_CHECK_VALUE(plan.y_type == at::kHalf || plan.y_type == at::kBFloat16 || plan.y_type == at::kFloat, op,
                    ": dst_type must be float16, bfloat16 or float32, got ", plan.y_type);
  plan.y = at::empty(shape, x.options().dtype(plan.y_type));
  return plan;
}

}  // namespace

at::Tensor npu_anti_mx_quant(const at::Tensor& x, const at::Tensor& mxscale, std::optional<int64_t> axis,
                             std::optional<int64_t> dst_type, std::optional<int64_t> src_type) {
  AntiMx plan = antiMxPlan(x, mxscale, axis, dst_type, src_type);
  const AclTensorAs x_in{plan.x_bytes, plan.x_type}, scale_in{plan.scale_bytes, acl::kAclFloat8E8M0};
  const int64_t ax = plan.axis, y_code = static_cast<int64_t>(toAclDataType(plan.y_type));
  EXEC_NPU_CMD(aclnnAntiMxQuant, x_in, scale_in, ax, y_code, plan.y);
  return plan.y;
}

at::Tensor npu_anti_mx_quant_meta(const at::Tensor& x, const at::Tensor& mxscale, std::optional<int64_t> axis,
                                  std::optional<int64_t> dst_type, std::optional<int64_t> src_type) {
  return antiMxPlan(x, mxscale, axis, dst_type, src_type).y;
}

// --- npu_rms_norm_dynamic_mx_quant / npu_add_rms_norm_dynamic_mx_quant ----------------------------------------

namespace {

struct MxNorm {
  at::Tensor y, mxscale, rstd;
  aclDataType type;
  bool output_rstd;
};

// y and mxscale of the last axis in blocks of 32, rstd [..., 1] float32 when the input requires grad (else an empty
// [0] tensor), as upstream.
MxNorm mxNormOutputs(const char* op, const at::Tensor& x, const at::Tensor& gamma, int64_t scale_alg,
                     c10::string_view round_mode, int64_t dst_type, bool output_rstd) {
  checkHalfInput(op, x);
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.dim() <= 7, op, ": x must have 1 to 7 dimensions, got ", x.sizes());
  TORCH_CHECK_VALUE(gamma.numel() == x.size(-1), op, ": gamma must hold x's last dimension (", x.size(-1),
                    ") values, got ", gamma.sizes());
  const aclDataType type = checkedMxTarget(op, round_mode, dst_type, scale_alg, 0.0);
  std::vector<int64_t> rstd_shape{0};
  if (output_rstd) {
    rstd_shape = x.sizes().vec();
    rstd_shape.back() = 1;
  }
  return {mxElements(op, x, type), pairedScales(x, x.sizes(), x.dim() - 1, 32),
          at::empty(rstd_shape, x.options().dtype(at::kFloat)), type, output_rstd};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_rms_norm_dynamic_mx_quant(const at::Tensor& x,
                                                                             const at::Tensor& gamma,
                                                                             const std::optional<at::Tensor>& beta,
                                                                             double epsilon, int64_t scale_alg,
                                                                             c10::string_view round_mode,
                                                                             int64_t dst_type) {
  MxNorm out = mxNormOutputs("npu_rms_norm_dynamic_mx_quant", x, gamma, scale_alg, round_mode, dst_type,
                             x.requires_grad());
  const std::string mode(round_mode);
  const int64_t dst_code = out.type;
  const bool output_rstd = out.output_rstd;
  const AclTensorAs y{out.y, out.type}, mxscale{out.mxscale, acl::kAclFloat8E8M0};
  const at::Tensor rstd = output_rstd ? out.rstd : at::Tensor();
  EXEC_NPU_CMD(aclnnRmsNormDynamicMxQuant, x, gamma, beta, epsilon, scale_alg, mode, dst_code, output_rstd, y, mxscale,
               rstd);
  return {out.y, out.mxscale, out.rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_rms_norm_dynamic_mx_quant_meta(
    const at::Tensor& x, const at::Tensor& gamma, const std::optional<at::Tensor>& beta, double epsilon,
    int64_t scale_alg, c10::string_view round_mode, int64_t dst_type) {
  MxNorm out = mxNormOutputs("npu_rms_norm_dynamic_mx_quant", x, gamma, scale_alg, round_mode, dst_type,
                             x.requires_grad());
  return {out.y, out.mxscale, out.rstd};
}

namespace {

MxNorm addMxNormOutputs(const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& gamma, int64_t scale_alg,
                        c10::string_view round_mode, int64_t dst_type) {
  const char* op = "npu_add_rms_norm_dynamic_mx_quant";
  TORCH_CHECK_VALUE(x1.sizes() == x2.sizes() && x1.scalar_type() == x2.scalar_type(), op,
                    ": x1 and x2 must have one shape and dtype, got ", x1.sizes(), " ", x1.scalar_type(), " and ",
                    x2.sizes(), " ", x2.scalar_type());
  TORCH_CHECK_VALUE(x1.requires_grad() == x2.requires_grad(), op, ": x1 and x2 must agree on requires_grad");
  return mxNormOutputs(op, x1, gamma, scale_alg, round_mode, dst_type, x1.requires_grad() && x2.requires_grad());
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_add_rms_norm_dynamic_mx_quant(
    const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& gamma, const std::optional<at::Tensor>& beta,
    double epsilon, int64_t scale_alg, c10::string_view round_mode, int64_t dst_type) {
  MxNorm out = addMxNormOutputs(x1, x2, gamma, scale_alg, round_mode, dst_type);
  at::Tensor x = at::empty(x1.sizes(), x1.options());
  const std::string mode(round_mode);
  const int64_t dst_code = out.type;
  const bool output_rstd = out.output_rstd;
  const AclTensorAs y{out.y, out.type}, mxscale{out.mxscale, acl::kAclFloat8E8M0};
  const at::Tensor rstd = output_rstd ? out.rstd : at::Tensor();
  EXEC_NPU_CMD(aclnnAddRmsNormDynamicMxQuant, x1, x2, gamma, beta, epsilon, scale_alg, mode, dst_code, output_rstd, y,
               x, mxscale, rstd);
  return {out.y, x, out.mxscale, out.rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_add_rms_norm_dynamic_mx_quant_meta(
    const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& gamma, const std::optional<at::Tensor>& beta,
    double epsilon, int64_t scale_alg, c10::string_view round_mode, int64_t dst_type) {
  MxNorm out = addMxNormOutputs(x1, x2, gamma, scale_alg, round_mode, dst_type);
  return {out.y, at::empty(x1.sizes(), x1.options()), out.mxscale, out.rstd};
}

// --- npu_dynamic_mx_quant_with_dual_axis ----------------------------------------------------------------------

namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, aclDataType> dualAxisOutputs(
    const at::Tensor& input, c10::string_view round_mode, int64_t dst_type, int64_t scale_alg, double dst_type_max) {
  const char* op = "npu_dynamic_mx_quant_with_dual_axis";
  checkHalfInput(op, input);
  TORCH_CHECK_VALUE(input.dim() >= 2 && input.dim() <= 7, op, ": input must have 2 to 7 dimensions, got ",
                    input.sizes());
  const aclDataType type = checkedMxTarget(op, round_mode, dst_type, scale_alg, dst_type_max);
  const int64_t d = input.dim();
  return {mxElements(op, input, type), pairedScales(input, input.sizes(), d - 1, 32), mxElements(op, input, type),
          pairedScales(input, input.sizes(), d - 2, 32), type};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_dynamic_mx_quant_with_dual_axis(
    const at::Tensor& input, c10::string_view round_mode, int64_t dst_type, int64_t scale_alg,
    std::optional<double> dst_type_max) {
  const double top = dst_type_max.value_or(0.0);
  auto [y1, s1, y2, s2, type] = dualAxisOutputs(input, round_mode, dst_type, scale_alg, top);
  const std::string mode(round_mode);
  const int64_t dst_code = type;
  const AclTensorAs y1_out{y1, type}, s1_out{s1, acl::kAclFloat8E8M0}, y2_out{y2, type},
      s2_out{s2, acl::kAclFloat8E8M0};
  EXEC_NPU_CMD(aclnnDynamicMxQuantWithDualAxisV2, input, mode, dst_code, scale_alg, top, y1_out, s1_out, y2_out,
               s2_out);
  return {y1, s1, y2, s2};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_dynamic_mx_quant_with_dual_axis_meta(
    const at::Tensor& input, c10::string_view round_mode, int64_t dst_type, int64_t scale_alg,
    std::optional<double> dst_type_max) {
  auto [y1, s1, y2, s2, type] = dualAxisOutputs(input, round_mode, dst_type, scale_alg, dst_type_max.value_or(0.0));
  return {y1, s1, y2, s2};
}

// --- npu_dynamic_dual_level_mx_quant ---------------------------------------------------------------------------

namespace {

constexpr int64_t kLevel0Block = 512;
constexpr int64_t kLevel1Block = 32;

std::tuple<at::Tensor, at::Tensor, at::Tensor> dualLevelOutputs(const at::Tensor& input,
                                                                const std::optional<at::Tensor>& smooth_scale,
                                                                c10::string_view round_mode) {
  const char* op = "npu_dynamic_dual_level_mx_quant";
  TORCH_CHECK_TYPE(input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16, op,
                   ": input must be float16 or bfloat16, got ", input.scalar_type());
  TORCH_CHECK_VALUE(input.dim() >= 1 && input.dim() <= 7, op, ": input must have 1 to 7 dimensions, got ",
                    input.sizes());
  TORCH_CHECK_VALUE(!smooth_scale.has_value() || !smooth_scale->defined(), op,
                    ": smooth_scale is not supported (upstream takes only None); pass None");
  checkRoundMode(op, round_mode);
  std::vector<int64_t> level0 = input.sizes().vec();
  level0.back() = (level0.back() + kLevel0Block - 1) / kLevel0Block;
  return {mxElements(op, input, acl::kAclFloat4E2M1), at::empty(level0, input.options().dtype(at::kFloat)),
          pairedScales(input, input.sizes(), input.dim() - 1, kLevel1Block)};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_dynamic_dual_level_mx_quant(
    const at::Tensor& input, const std::optional<at::Tensor>& smooth_scale, c10::string_view round_mode) {
  auto [y, level0, level1] = dualLevelOutputs(input, smooth_scale, round_mode);
  const std::string mode(round_mode);
  const AclTensorAs y_out{y, acl::kAclFloat4E2M1}, level1_out{level1, acl::kAclFloat8E8M0};
  EXEC_NPU_CMD(aclnnDynamicDualLevelMxQuant, input, smooth_scale, mode, kLevel0Block, kLevel1Block, y_out, level0,
               level1_out);
  return {y, level0, level1};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_dynamic_dual_level_mx_quant_meta(
    const at::Tensor& input, const std::optional<at::Tensor>& smooth_scale, c10::string_view round_mode) {
  return dualLevelOutputs(input, smooth_scale, round_mode);
}

}  // namespace at_npu::native
