// QuantizeKernelNpu.cpp - static quantization with given scales: npu_quantize (dividing, on aclnnQuantize, or
// multiplying, on aclnnAscendQuantV3), npu_anti_quant (back to float16 / bfloat16, on aclnnAscendAntiQuant) and
// npu_group_quant (one scale row per MoE group, on aclnnGroupQuant). Inference ops: no gradient upstream.
#include <ATen/ops/empty.h>

#include <algorithm>
#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

// --- npu_quantize ---------------------------------------------------------------------------------------------

namespace {

struct QuantizePlan {
  std::vector<int64_t> shape;
  at::ScalarType type = at::kChar;
  int64_t dst_code = 0;  // the device op's dtype attribute (aclDataType)
  int64_t axis = 0;
};

at::ScalarType storageOf(quant::Target target) {
  switch (target) {
    case quant::Target::kUInt8: return at::kByte;
    case quant::Target::kInt32: return at::kInt;
    default: return at::kChar;
  }
}

// div_mode=True divides (aclnnQuantize: int8 / uint8 / int32 outputs); div_mode=False multiplies
// (aclnnAscendQuantV3: int8, or int4 packed eight to an int32 as torch.quint4x2 asks; torch_npu gives torch.int32
// the same packed meaning there).
QuantizePlan planQuantize(const at::Tensor& self, int64_t dtype, int64_t axis, bool div_mode) {
  const char* op = "npu_quantize";
  quant::checkFloatInput(op, "input", self);
  const std::optional<quant::Target> target = quant::targetOf(op, "dtype", dtype);
  QuantizePlan plan;
  plan.shape = self.sizes().vec();
  if (div_mode) {
    TORCH_CHECK_VALUE(target.has_value() && target != quant::Target::kInt4, op,
                      ": with div_mode=True dtype must be torch.qint8 / torch.int8, torch.quint8 / torch.uint8 or ",
                      "torch.qint32 / torch.int32, got ", dtype,
                      target == quant::Target::kInt4 ? " (torch.quint4x2 needs div_mode=False)" : "");
    plan.type = storageOf(*target);
    const int64_t dims = std::max<int64_t>(self.dim(), 1);
    TORCH_CHECK_VALUE(axis >= -dims && axis < dims, op, ": axis ", axis, " is out of range for a ", self.dim(),
                      "-d input");
    plan.axis = axis;
  } else {
    TORCH_CHECK_VALUE(target == quant::Target::kInt8 || target == quant::Target::kInt4 ||
                          target == quant::Target::kInt32,
                      op, ": with div_mode=False dtype must be torch.qint8 / torch.int8 or torch.quint4x2 (int4 ",
                      "packed eight to an int32), got ", dtype);
    if (target == quant::Target::kInt8) {
      plan.type = at::kChar;
    } else {
      plan.shape = quant::packedShape(op, "input", self.sizes(), 8);
      plan.type = at::kInt;
    }
    plan.axis = axis < -1 ? axis : -1;  // as torch_npu: -2 (or below) names a row axis, anything else the last
  }
  plan.dst_code = quant::aclCode(plan.type);  // int8 2, uint8 4, int32 3 (with div_mode=False: int4 in int32)
  return plan;
}

}  // namespace

at::Tensor npu_quantize(const at::Tensor& self, const at::Tensor& scales, const std::optional<at::Tensor>& zero_points,
                        int64_t dtype, int64_t axis, bool div_mode) {
  const QuantizePlan plan = planQuantize(self, dtype, axis, div_mode);
  at::Tensor out = at::empty(plan.shape, self.options().dtype(plan.type));
  if (div_mode) {
    EXEC_NPU_CMD(aclnnQuantize, self, scales, zero_points, plan.dst_code, plan.axis, out);
  } else {
    const bool sqrt_mode = false;
    const std::string round_mode = "round";  // the device op's CAST_RINT
    EXEC_NPU_CMD(aclnnAscendQuantV3, self, scales, zero_points, sqrt_mode, round_mode, plan.dst_code, plan.axis, out);
  }
  return out;
}

at::Tensor npu_quantize_meta(const at::Tensor& self, const at::Tensor& scales,
                             const std::optional<at::Tensor>& zero_points, int64_t dtype, int64_t axis,
                             bool div_mode) {
  const QuantizePlan plan = planQuantize(self, dtype, axis, div_mode);
  return at::empty(plan.shape, self.options().dtype(plan.type));
}

// --- npu_anti_quant -------------------------------------------------------------------------------------------

namespace {

// float16 (the default), bfloat16 or float32, as a torch dtype or torch_npu's code (aclDataType + 256).
at::ScalarType antiQuantOutputType(const char* op, std::optional<int64_t> dst_dtype) {
  if (!dst_dtype.has_value()) return at::kHalf;
  quant::refuseChipFormat(op, "dst_dtype", *dst_dtype);
  int64_t code = *dst_dtype;
  if (code >= quant::kNpuDtypeOffset) {  // torch_npu's codes of float32 / float16 / bfloat16
    const int64_t acl = code - quant::kNpuDtypeOffset;
    code = acl == 0 ? static_cast<int64_t>(at::kFloat) : acl == 1 ? static_cast<int64_t>(at::kHalf)
         : acl == 27 ? static_cast<int64_t>(at::kBFloat16) : -1;
  }
  // A code that names no dtype at all gets upstream's wording too (scripts match on it).
  const bool named = *dst_dtype >= 0 && (*dst_dtype < static_cast<int64_t>(at::ScalarType::NumOptions) ||
                                         *dst_dtype >= quant::kNpuDtypeOffset);
  TORCH_CHECK_VALUE(named, op, ": Input dst_type must be valid, but got UNKNOWN_SCALAR (", *dst_dtype, "); ",
                    "dst_dtype must be torch.float16, torch.bfloat16 or torch.float32");
  TORCH_CHECK_VALUE(code == static_cast<int64_t>(at::kHalf) || code == static_cast<int64_t>(at::kBFloat16) ||
                        code == static_cast<int64_t>(at::kFloat),
                    op, ": dst_dtype must be torch.float16, torch.bfloat16 or torch.float32, got ", *dst_dtype);
  return static_cast<at::ScalarType>(code);
}

// x is int8, or int32 carrying eight int4 values each (src_dtype, when given, must say so).
std::vector<int64_t> antiQuantShape(const char* op, const at::Tensor& x, std::optional<int64_t> src_dtype) {
  TORCH_CHECK_VALUE(x.scalar_type() != at::kByte, op, ": torch_npu reads a uint8 x as hifloat8, a chip number ",
                    "format the software NPU does not have; pass int8, or int32 carrying int4");
  quant::refuseChipFormat(op, "x's dtype", static_cast<int64_t>(x.scalar_type()));
  TORCH_CHECK_TYPE(x.scalar_type() == at::kChar || x.scalar_type() == at::kInt, op,
                   ": x must be int8, or int32 carrying eight int4 values each, got ", x.scalar_type());
  const bool int4 = x.scalar_type() == at::kInt;
  if (src_dtype.has_value()) {
    const std::optional<quant::Target> source = quant::targetOf(op, "src_dtype", *src_dtype);
    const bool says_int4 = source == quant::Target::kInt4 || *src_dtype == quant::kNpuDtypeOffset + quant::kAclInt4;
    TORCH_CHECK_VALUE(int4 ? says_int4 : source == quant::Target::kInt8, op, ": src_dtype must describe x (",
                      int4 ? "torch.quint4x2 for an int32 x carrying int4" : "torch.int8", "), got ", *src_dtype);
  }
  std::vector<int64_t> shape = x.sizes().vec();
  if (int4) {
    TORCH_CHECK_VALUE(!shape.empty(), op, ": an int32 x (int4 data) needs at least one dimension");
    shape.back() *= 8;
  }
  return shape;
}

}  // namespace

at::Tensor npu_anti_quant(const at::Tensor& x, const at::Tensor& scale, const std::optional<at::Tensor>& offset,
                          std::optional<int64_t> dst_dtype, std::optional<int64_t> src_dtype) {
  const char* op = "npu_anti_quant";
  const at::ScalarType type = antiQuantOutputType(op, dst_dtype);
  at::Tensor out = at::empty(antiQuantShape(op, x, src_dtype), x.options().dtype(type));
  const bool sqrt_mode = false;
  EXEC_NPU_CMD(aclnnAscendAntiQuant, x, scale, offset, quant::aclCode(type), sqrt_mode, out);
  return out;
}

at::Tensor npu_anti_quant_meta(const at::Tensor& x, const at::Tensor& scale, const std::optional<at::Tensor>& offset,
                               std::optional<int64_t> dst_dtype, std::optional<int64_t> src_dtype) {
  const char* op = "npu_anti_quant";
  const at::ScalarType type = antiQuantOutputType(op, dst_dtype);
  return at::empty(antiQuantShape(op, x, src_dtype), x.options().dtype(type));
}

// --- npu_group_quant ------------------------------------------------------------------------------------------

namespace {

// int8 (also torch.qint8, the default) or int4 packed eight to an int32 (torch.quint4x2).
std::tuple<std::vector<int64_t>, at::ScalarType> groupQuantLayout(const at::Tensor& x,
                                                                 std::optional<at::ScalarType> dst_dtype) {
  const char* op = "npu_group_quant";
  quant::checkFloatInput(op, "x", x);
  TORCH_CHECK_VALUE(x.dim() == 2, op, ": x must be 2-d [rows, H], got ", x.sizes());
  const std::optional<int64_t> code =
      dst_dtype.has_value() ? std::optional<int64_t>(static_cast<int64_t>(*dst_dtype)) : std::nullopt;
  if (quant::int8OrInt4(op, "dst_dtype", code) == quant::Target::kInt4) {
    return {quant::packedShape(op, "x", x.sizes(), 8), at::kInt};
  }
  return {x.sizes().vec(), at::kChar};
}

}  // namespace

at::Tensor npu_group_quant(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& group_index,
                           const std::optional<at::Tensor>& offset, std::optional<at::ScalarType> dst_dtype) {
  const auto [shape, type] = groupQuantLayout(x, dst_dtype);
  at::Tensor out = at::empty(shape, x.options().dtype(type));
  const int64_t dst_code = quant::aclCode(type);  // int8 2; int32 3 (eight int4 values each)
  EXEC_NPU_CMD(aclnnGroupQuant, x, scale, group_index, offset, dst_code, out);
  return out;
}

at::Tensor npu_group_quant_meta(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& group_index,
                                const std::optional<at::Tensor>& offset, std::optional<at::ScalarType> dst_dtype) {
  const auto [shape, type] = groupQuantLayout(x, dst_dtype);
  return at::empty(shape, x.options().dtype(type));
}

}  // namespace at_npu::native
