// CommQuantMatmulKernelNpu.cpp - the quantised communication-fused matmuls: npu_all_gather_quant_mm,
// npu_quant_mm_reduce_scatter (tensor parallel), npu_quant_matmul_all_to_all and npu_all_to_all_quant_matmul
// (all_to_all around the matmul). Each is the unfused quant matmul (int8 on aclnnQuantMatmulV4 with exact int32
// accumulation; torch float8 widened exactly to float32 for aclnnMm; float16 / bfloat16 as they are), dequantised
// per tensor / channel / token in float32, and the collective on the hccl group named `hcom`, in stream order.
// hifloat8, float4 and the MX block formats are chip number formats the software NPU does not have: a clear error.
#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/where.h>

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/NpuCustomOps.h"
#include "csrc/custom/comm_matmul/CommGroup.h"
#include "csrc/custom/quant/QuantizeUtils.h"

namespace at_npu::native {
namespace {

using comm::checkWorldSize;
using comm::groupNamed;

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }
bool isFloat8(at::ScalarType t) { return t == at::kFloat8_e4m3fn || t == at::kFloat8_e5m2; }
bool isHalfFloat(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }
at::Tensor orUndefined(const std::optional<at::Tensor>& t) { return present(t) ? *t : at::Tensor(); }

// An `int` dtype argument: a torch dtype, or torch_npu's spelling (aclDataType + 256) for dtypes torch lacks.
at::ScalarType dtypeArg(const char* op, const char* arg, int64_t code) {
  if (code >= quant::kNpuDtypeOffset) {
    const auto type = dtype_codes::torchTypeOfNpuCode(code);
    if (type && (isFloat8(*type) || quant::chipFormatName(static_cast<int64_t>(*type)) == nullptr)) return *type;
  } else if (code >= 0 && code < static_cast<int64_t>(at::ScalarType::NumOptions)) {
    const auto type = static_cast<at::ScalarType>(code);
    if (isFloat8(type) || quant::chipFormatName(code) == nullptr) return type;
  }
  const char* chip = quant::chipFormatName(code);
  TORCH_CHECK_VALUE(chip == nullptr, op, ": ", arg, " selects ", chip,
                    ", a chip number format the software NPU does not have; use int8 or torch.float8_e4m3fn / "
                    "torch.float8_e5m2 tensors");
  TORCH_CHECK_VALUE(false, op, ": ", arg, " = ", code, " names no dtype");
  return at::kFloat;  // not reached
}

// x1_dtype-like arguments reinterpret a tensor's bytes as a chip format; the only value meaning anything here is
// the tensor's own dtype (a chip format raises the chip error).
void checkViewDtype(const char* op, const char* arg, std::optional<int64_t> code, const at::Tensor& t) {
  if (!code.has_value()) return;
  const at::ScalarType want = dtypeArg(op, arg, *code);
  TORCH_CHECK_VALUE(!t.defined() || want == t.scalar_type(), op, ": ", arg, " (", want, ") would reinterpret a ",
                    t.scalar_type(), " tensor; leave it None (the tensor's dtype is used)");
}

// block_size / group_sizes select block-wise (MX / per-group) scales.
void checkNoBlocks(const char* op, int64_t block_size, at::OptionalIntArrayRef group_sizes) {
  bool blocks = block_size != 0;
  if (group_sizes.has_value()) {
    for (int64_t g : *group_sizes) blocks = blocks || g != 0;
  }
  TORCH_CHECK_VALUE(!blocks, op, ": block_size / group_sizes select block-wise (MX / per-group) quantisation, a chip "
                    "number format the software NPU does not have; leave them 0 / None (per-tensor, per-channel and "
                    "per-token scales are supported)");
}

at::ScalarType floatOutput(const char* op, const char* arg, int64_t code) {
  const at::ScalarType t = dtypeArg(op, arg, code);
  TORCH_CHECK_VALUE(t == at::kHalf || t == at::kBFloat16 || t == at::kFloat, op, ": ", arg,
                    " must be torch.float16, torch.bfloat16 or torch.float32, got ", t);
  return t;
}

// A scale of one value or one per index along a dimension of `extent`.
void checkScale(const char* op, const char* name, const at::Tensor& s, int64_t extent, const char* what) {
  TORCH_CHECK_TYPE(s.scalar_type() == at::kFloat || s.scalar_type() == at::kBFloat16, op, ": ", name,
                   " must be float32 or bfloat16, got ", s.scalar_type());
  TORCH_CHECK_VALUE(s.numel() == 1 || s.numel() == extent, op, ": ", name, " must have 1 value (per tensor) or ",
                    extent, " (", what, "), got ", s.sizes());
}

void checkBias(const char* op, const std::optional<at::Tensor>& bias, int64_t n, bool int8) {
  if (!present(bias)) return;
  TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == n, op, ": bias must be (n,) = (", n, ",), got ",
                    bias->sizes());
  const at::ScalarType t = bias->scalar_type();
  TORCH_CHECK_TYPE(t == at::kFloat || isHalfFloat(t) || (int8 && t == at::kInt), op,
                   ": bias must be float32, float16 or bfloat16", int8 ? " or int32" : "", ", got ", t);
}

// The quantised product in float32: (x1 @ x2) * x2_scale (per tensor / column) * x1_scale (per tensor / row), plus
// bias. An int32 bias joins the integer accumulator; a float one is added after dequantising, or before it with
// bias_first (the all_to_all pair, as upstream's goldens define it).
at::Tensor quantProduct(const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& x1_scale,
                        const at::Tensor& x2_scale, const std::optional<at::Tensor>& bias, bool bias_first) {
  const bool int_bias = present(bias) && bias->scalar_type() == at::kInt;
  at::Tensor acc;
  if (x1.scalar_type() == at::kChar) {
    // int32 output with a unit scale: the device op's exact integer accumulation; dequantising follows in float32.
    at::Tensor unit = at::ones({1}, x1.options().dtype(at::kFloat));
    std::optional<at::Tensor> int_bias_arg;
    if (int_bias) int_bias_arg = *bias;
    acc = at_npu::ops::npu_quant_matmul(x1.contiguous(), x2.contiguous(), unit, std::nullopt, std::nullopt,
                                        int_bias_arg, static_cast<int64_t>(at::kInt), std::nullopt, std::nullopt,
                                        std::nullopt, std::nullopt, std::nullopt, std::nullopt)
              .to(at::kFloat);
  } else {
    // float8 -> float32 widening is exact; float16 / bfloat16 accumulate in float32 too.
    acc = at::matmul(x1.to(at::kFloat), x2.to(at::kFloat));
    if (int_bias) acc = acc + bias->to(at::kFloat);
  }
  const bool float_bias = present(bias) && !int_bias;
  if (float_bias && bias_first) acc = acc + bias->to(at::kFloat);
  if (x2_scale.defined()) acc = acc * x2_scale.to(at::kFloat).reshape({1, -1});
  if (x1_scale.defined()) acc = acc * x1_scale.to(at::kFloat).reshape({-1, 1});
  if (float_bias && !bias_first) acc = acc + bias->to(at::kFloat);
  return acc;
}

// Collectives move 1-byte dtypes (int8, float8) as bytes: the transport need not know float8.
at::Tensor wire(const at::Tensor& t) { return at::elementSize(t.scalar_type()) == 1 ? t.view(at::kByte) : t; }

// Rank r's block r of `blocks` (dim 0) goes to rank r; block i of the result came from rank i.
at::Tensor allToAll(c10d_npu::ProcessGroupHCCL& group, const at::Tensor& blocks) {
  at::Tensor send = blocks.contiguous();
  at::Tensor received = at::empty_like(send);
  at::Tensor send_wire = wire(send), received_wire = wire(received);
  std::vector<int64_t> even;
  group.alltoall_base(received_wire, send_wire, even, even)->wait();
  return received;
}

// ---- the tensor-parallel pair: npu_all_gather_quant_mm, npu_quant_mm_reduce_scatter ----

struct TpArgs {
  const std::optional<at::Tensor>& bias;
  const std::optional<at::Tensor>& x1_scale;
  const std::optional<at::Tensor>& x2_scale;
  const std::optional<at::Tensor>& quant_scale;
  int64_t block_size;
  at::OptionalIntArrayRef group_sizes;
  bool amax_output;
  std::optional<int64_t> y_dtype, x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype;
};

// Checks x1 (m, k) @ x2 (k, n) in one of the forms the pair takes; returns the output dtype. Needs no group.
at::ScalarType checkTp(const char* op, const at::Tensor& x1, const at::Tensor& x2, const TpArgs& a) {
  checkViewDtype(op, "x1_dtype", a.x1_dtype, x1);
  checkViewDtype(op, "x2_dtype", a.x2_dtype, x2);
  checkViewDtype(op, "x1_scale_dtype", a.x1_scale_dtype, orUndefined(a.x1_scale));
  checkViewDtype(op, "x2_scale_dtype", a.x2_scale_dtype, orUndefined(a.x2_scale));
  checkNoBlocks(op, a.block_size, a.group_sizes);
  TORCH_CHECK_VALUE(!present(a.quant_scale) && !a.amax_output, op, ": quant_scale / amax_output quantise the output "
                    "to float8 / hifloat8 (and report its amax), a chip number format the software NPU does not have; "
                    "leave them unset");
  TORCH_CHECK_VALUE(x1.dim() == 2 && x2.dim() == 2, op, ": x1 and x2 must be 2-D (m, k) and (k, n), got ", x1.sizes(),
                    " and ", x2.sizes());
  TORCH_CHECK_VALUE(x1.size(1) == x2.size(0), op, ": x1 ", x1.sizes(), " and x2 ", x2.sizes(),
                    " do not multiply: x1's last dimension must equal x2's first");
  const at::ScalarType t1 = x1.scalar_type(), t2 = x2.scalar_type();
  if (isHalfFloat(t1)) {
    TORCH_CHECK_TYPE(t2 == t1, op, ": x2 must have x1's dtype (", t1, "), got ", t2);
    TORCH_CHECK_VALUE(!present(a.x1_scale) && !present(a.x2_scale), op, ": ", t1,
                      " operands take no x1_scale / x2_scale (there is nothing to dequantise)");
    checkBias(op, a.bias, x2.size(1), false);
    if (a.y_dtype.has_value()) {
      const at::ScalarType y = dtypeArg(op, "y_dtype", *a.y_dtype);
      TORCH_CHECK_VALUE(y == t1, op, ": with ", t1, " operands the output keeps their dtype; y_dtype must be None or ",
                        t1, ", got ", y);
    }
    return t1;
  }
  TORCH_CHECK_TYPE((t1 == at::kChar && t2 == at::kChar) || (isFloat8(t1) && isFloat8(t2)), op,
                   ": x1 and x2 must be both float16, both bfloat16, both int8 or both torch.float8_e4m3fn / "
                   "torch.float8_e5m2, got ", t1, " and ", t2);
  TORCH_CHECK_VALUE(present(a.x2_scale), op, ": quantised operands need x2_scale (per tensor (1,) or per channel (n,))");
  checkScale(op, "x2_scale", *a.x2_scale, x2.size(1), "per channel");
  if (present(a.x1_scale)) checkScale(op, "x1_scale", *a.x1_scale, x1.size(0), "per token");
  checkBias(op, a.bias, x2.size(1), t1 == at::kChar);
  TORCH_CHECK_VALUE(a.y_dtype.has_value(), op, ": quantised (", t1, ") operands need y_dtype (torch.float16, "
                    "torch.bfloat16 or torch.float32)");
  return floatOutput(op, "y_dtype", *a.y_dtype);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_all_gather_quant_mm(
    const at::Tensor& self, const at::Tensor& x2, c10::string_view hcom, int64_t world_size,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& x1_scale,
    const std::optional<at::Tensor>& x2_scale, const std::optional<at::Tensor>& quant_scale, int64_t block_size,
    int64_t gather_index, bool gather_output, int64_t comm_turn, at::OptionalIntArrayRef group_sizes,
    bool amax_output, std::optional<int64_t> y_dtype, std::optional<int64_t> x1_dtype,
    std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype, std::optional<int64_t> x2_scale_dtype,
    std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_all_gather_quant_mm";
  const TpArgs args{bias, x1_scale, x2_scale, quant_scale, block_size, group_sizes, amax_output,
                    y_dtype, x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype};
  const at::ScalarType out_type = checkTp(op, self, x2, args);
  TORCH_CHECK_VALUE(gather_index == 0, op, ": gather_index must be 0 (x1 is gathered), got ", gather_index);
  checkWorldSize(op, world_size, nullptr);
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = groupNamed(op, hcom);
  checkWorldSize(op, world_size, group.get());
  const int64_t m = self.size(0);
  at::Tensor mine = self.contiguous();
  at::Tensor gathered = at::empty({world_size * m, self.size(1)}, self.options());
  at::Tensor mine_wire = wire(mine), gathered_wire = wire(gathered);
  group->_allgather_base(gathered_wire, mine_wire)->wait();
  at::Tensor row_scales;
  if (present(x1_scale)) {  // one scale per row travels with its row (a per-tensor scale may differ between ranks)
    at::Tensor rows = x1_scale->to(at::kFloat).reshape({-1}).expand({m}).contiguous();
    row_scales = at::empty({world_size * m}, rows.options());
    group->_allgather_base(row_scales, rows)->wait();
  }
  at::Tensor y = quantProduct(gathered, x2, row_scales, orUndefined(x2_scale), bias, false).to(out_type);
  return {y, gather_output ? gathered : at::empty({0}, self.options()),
          at::empty({0}, self.options().dtype(at::kFloat))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_all_gather_quant_mm_meta(
    const at::Tensor& self, const at::Tensor& x2, c10::string_view hcom, int64_t world_size,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& x1_scale,
    const std::optional<at::Tensor>& x2_scale, const std::optional<at::Tensor>& quant_scale, int64_t block_size,
    int64_t gather_index, bool gather_output, int64_t comm_turn, at::OptionalIntArrayRef group_sizes,
    bool amax_output, std::optional<int64_t> y_dtype, std::optional<int64_t> x1_dtype,
    std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype, std::optional<int64_t> x2_scale_dtype,
    std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_all_gather_quant_mm";
  const TpArgs args{bias, x1_scale, x2_scale, quant_scale, block_size, group_sizes, amax_output,
                    y_dtype, x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype};
  const at::ScalarType out_type = checkTp(op, self, x2, args);
  TORCH_CHECK_VALUE(gather_index == 0, op, ": gather_index must be 0 (x1 is gathered), got ", gather_index);
  checkWorldSize(op, world_size, nullptr);
  const int64_t rows = world_size * self.size(0);
  return {at::empty({rows, x2.size(1)}, self.options().dtype(out_type)),
          gather_output ? at::empty({rows, self.size(1)}, self.options()) : at::empty({0}, self.options()),
          at::empty({0}, self.options().dtype(at::kFloat))};
}

namespace {

void checkReduceScatter(const char* op, const at::Tensor& x1, int64_t world_size, c10::string_view reduce_op) {
  TORCH_CHECK_VALUE(reduce_op == "sum", op, ": reduce_op must be 'sum' (the only reduction the fused op has), got '",
                    reduce_op, "'");
  checkWorldSize(op, world_size, nullptr);
  TORCH_CHECK_VALUE(x1.size(0) % world_size == 0, op, ": x1's rows (", x1.size(0),
                    ") must divide evenly among world_size ", world_size, " ranks");
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_quant_mm_reduce_scatter(
    const at::Tensor& self, const at::Tensor& x2, c10::string_view hcom, int64_t world_size,
    c10::string_view reduce_op, const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& x1_scale,
    const std::optional<at::Tensor>& x2_scale, const std::optional<at::Tensor>& quant_scale, int64_t block_size,
    int64_t comm_turn, at::OptionalIntArrayRef group_sizes, bool amax_output, std::optional<int64_t> y_dtype,
    std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype,
    std::optional<int64_t> x2_scale_dtype, std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_quant_mm_reduce_scatter";
  const TpArgs args{bias, x1_scale, x2_scale, quant_scale, block_size, group_sizes, amax_output,
                    y_dtype, x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype};
  const at::ScalarType out_type = checkTp(op, self, x2, args);
  checkReduceScatter(op, self, world_size, reduce_op);
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = groupNamed(op, hcom);
  checkWorldSize(op, world_size, group.get());
  // The ranks' float32 products are summed in float32 and rounded to the output dtype once.
  at::Tensor y = quantProduct(self, x2, orUndefined(x1_scale), orUndefined(x2_scale), bias, false).contiguous();
  at::Tensor out = at::empty({self.size(0) / world_size, x2.size(1)}, y.options());
  c10d::ReduceScatterOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  group->_reduce_scatter_base(out, y, opts)->wait();
  return {out.to(out_type), at::empty({0}, self.options().dtype(at::kFloat))};
}

std::tuple<at::Tensor, at::Tensor> npu_quant_mm_reduce_scatter_meta(
    const at::Tensor& self, const at::Tensor& x2, c10::string_view hcom, int64_t world_size,
    c10::string_view reduce_op, const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& x1_scale,
    const std::optional<at::Tensor>& x2_scale, const std::optional<at::Tensor>& quant_scale, int64_t block_size,
    int64_t comm_turn, at::OptionalIntArrayRef group_sizes, bool amax_output, std::optional<int64_t> y_dtype,
    std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype,
    std::optional<int64_t> x2_scale_dtype, std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_quant_mm_reduce_scatter";
  const TpArgs args{bias, x1_scale, x2_scale, quant_scale, block_size, group_sizes, amax_output,
                    y_dtype, x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype};
  const at::ScalarType out_type = checkTp(op, self, x2, args);
  checkReduceScatter(op, self, world_size, reduce_op);
  return {at::empty({self.size(0) / world_size, x2.size(1)}, self.options().dtype(out_type)),
          at::empty({0}, self.options().dtype(at::kFloat))};
}

namespace {

// ---- the all_to_all pair ----

// Upstream's quant modes: 1 per tensor, 2 per channel, 3 per token, 7 dynamic per token; the others (per group,
// MX) need the chip's block formats.
constexpr int64_t kPerTensor = 1, kPerChannel = 2, kPerToken = 3, kDynamicPerToken = 7;

struct A2aArgs {
  const std::optional<at::Tensor>& bias;
  const std::optional<at::Tensor>& x1_scale;
  const std::optional<at::Tensor>& x2_scale;
  const std::optional<at::Tensor>& common_scale;
  const std::optional<at::Tensor>& x1_offset;
  const std::optional<at::Tensor>& x2_offset;
  std::optional<int64_t> common_quant_mode;
  at::OptionalIntArrayRef group_sizes;
  std::optional<int64_t> comm_quant_dtype, x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype, output_scale_dtype,
      comm_scale_dtype, y_dtype;
};

void checkAxes(const char* op, at::OptionalIntArrayRef all2all_axes, std::vector<int64_t> allowed) {
  TORCH_CHECK_VALUE(!all2all_axes.has_value() || all2all_axes->empty() ||
                        std::vector<int64_t>(all2all_axes->begin(), all2all_axes->end()) == allowed,
                    op, ": all2all_axes must be None or ", allowed, ", got ", *all2all_axes);
}

// What both all_to_all ops refuse or check alike; returns the output dtype (float32 unless y_dtype says otherwise).
at::ScalarType checkA2aCommon(const char* op, const A2aArgs& a, const at::Tensor& x2) {
  checkViewDtype(op, "x2_dtype", a.x2_dtype, x2);
  checkViewDtype(op, "x1_scale_dtype", a.x1_scale_dtype, orUndefined(a.x1_scale));
  checkViewDtype(op, "x2_scale_dtype", a.x2_scale_dtype, orUndefined(a.x2_scale));
  for (const auto& [name, code] : {std::pair<const char*, std::optional<int64_t>>{"output_scale_dtype",
                                                                                   a.output_scale_dtype},
                                   {"comm_scale_dtype", a.comm_scale_dtype}}) {
    if (code.has_value() && *code != -1) dtypeArg(op, name, *code);  // a chip format names itself
    TORCH_CHECK_VALUE(!code.has_value() || *code == -1, op, ": ", name, " belongs to a quantised exchange / output, "
                      "which the software NPU does not do; leave it None");
  }
  if (a.comm_quant_dtype.has_value() && *a.comm_quant_dtype != -1) dtypeArg(op, "comm_quant_dtype", *a.comm_quant_dtype);
  TORCH_CHECK_VALUE(!a.comm_quant_dtype.has_value() || *a.comm_quant_dtype == -1, op,
                    ": comm_quant_dtype (quantising the exchange) is not supported; leave it None");
  checkNoBlocks(op, 0, a.group_sizes);
  TORCH_CHECK_VALUE(!present(a.common_scale) && a.common_quant_mode.value_or(0) == 0, op,
                    ": common_scale / common_quant_mode are not supported; pass x1_scale and x2_scale");
  TORCH_CHECK_VALUE(!present(a.x1_offset) && !present(a.x2_offset), op,
                    ": x1_offset / x2_offset (asymmetric quantisation) are not supported; leave them None");
  TORCH_CHECK_VALUE(x2.dim() == 2, op, ": x2 must be 2-D, got ", x2.sizes());
  const at::ScalarType t2 = x2.scalar_type();
  TORCH_CHECK_TYPE(t2 == at::kChar || isFloat8(t2), op, ": x2 must be int8, torch.float8_e4m3fn or "
                   "torch.float8_e5m2 (the float forms are npu_all_to_all_matmul / npu_matmul_all_to_all), got ", t2);
  return a.y_dtype.has_value() && *a.y_dtype != -1 ? floatOutput(op, "y_dtype", *a.y_dtype) : at::kFloat;
}

void checkX2Scale(const char* op, const A2aArgs& a, const at::Tensor& x2, std::optional<int64_t> x2_quant_mode) {
  const int64_t mode = x2_quant_mode.value_or(kPerChannel);
  TORCH_CHECK_VALUE(mode == kPerTensor || mode == kPerChannel, op, ": x2_quant_mode must be 1 (per tensor) or 2 "
                    "(per channel); ", mode, " (per group / MX) needs a chip number format the software NPU does not "
                    "have");
  TORCH_CHECK_VALUE(present(a.x2_scale), op, ": x2_scale is required (x2_quant_mode ", mode, ")");
  checkScale(op, "x2_scale", *a.x2_scale, x2.size(1), "per channel");
  TORCH_CHECK_VALUE(mode == kPerChannel || a.x2_scale->numel() == 1, op,
                    ": per-tensor x2_quant_mode takes a one-value x2_scale, got ", a.x2_scale->sizes());
  checkBias(op, a.bias, x2.size(1), x2.scalar_type() == at::kChar);
}

// npu_quant_matmul_all_to_all: x1 (m, k) quantised like x2 (k, n); returns the output dtype.
at::ScalarType checkQuantMatmulAllToAll(const char* op, const at::Tensor& x1, const at::Tensor& x2,
                                        int64_t world_size, const A2aArgs& a, std::optional<int64_t> x1_quant_mode,
                                        std::optional<int64_t> x2_quant_mode, at::OptionalIntArrayRef all2all_axes) {
  checkViewDtype(op, "x1_dtype", a.x1_dtype, x1);
  const at::ScalarType out_type = checkA2aCommon(op, a, x2);
  checkAxes(op, all2all_axes, {-1, -2});
  TORCH_CHECK_VALUE(x1.dim() == 2, op, ": x1 must be 2-D (m, k), got ", x1.sizes());
  TORCH_CHECK_TYPE((x1.scalar_type() == at::kChar && x2.scalar_type() == at::kChar) ||
                       (isFloat8(x1.scalar_type()) && isFloat8(x2.scalar_type())),
                   op, ": x1 must be quantised like x2 (both int8, or both float8), got ", x1.scalar_type(), " and ",
                   x2.scalar_type());
  TORCH_CHECK_VALUE(x1.size(1) == x2.size(0), op, ": x1 ", x1.sizes(), " and x2 ", x2.sizes(), " do not multiply");
  const int64_t mode = x1_quant_mode.value_or(kPerToken);
  TORCH_CHECK_VALUE(mode == kPerTensor || mode == kPerToken, op, ": x1_quant_mode must be 1 (per tensor) or 3 (per "
                    "token); ", mode, " (per group / MX) needs a chip number format the software NPU does not have");
  TORCH_CHECK_VALUE(present(a.x1_scale), op, ": x1_scale is required (x1_quant_mode ", mode, ")");
  checkScale(op, "x1_scale", *a.x1_scale, x1.size(0), "per token");
  TORCH_CHECK_VALUE(mode == kPerToken || a.x1_scale->numel() == 1, op,
                    ": per-tensor x1_quant_mode takes a one-value x1_scale, got ", a.x1_scale->sizes());
  checkX2Scale(op, a, x2, x2_quant_mode);
  checkWorldSize(op, world_size, nullptr);
  TORCH_CHECK_VALUE(x2.size(1) % world_size == 0, op, ": x2's columns (", x2.size(1), ") must divide by world_size ",
                    world_size);
  return out_type;
}

}  // namespace

at::Tensor npu_quant_matmul_all_to_all(
    const at::Tensor& x1, const at::Tensor& x2, c10::string_view hcom, int64_t world_size,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& x1_scale,
    const std::optional<at::Tensor>& x2_scale, const std::optional<at::Tensor>& common_scale,
    const std::optional<at::Tensor>& x1_offset, const std::optional<at::Tensor>& x2_offset,
    std::optional<int64_t> x1_quant_mode, std::optional<int64_t> x2_quant_mode,
    std::optional<int64_t> common_quant_mode, at::OptionalIntArrayRef group_sizes,
    at::OptionalIntArrayRef all2all_axes, std::optional<int64_t> comm_quant_dtype, std::optional<int64_t> x1_dtype,
    std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype, std::optional<int64_t> x2_scale_dtype,
    std::optional<int64_t> output_scale_dtype, std::optional<int64_t> comm_scale_dtype,
    std::optional<int64_t> y_dtype, std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_quant_matmul_all_to_all";
  const A2aArgs args{bias, x1_scale, x2_scale, common_scale, x1_offset, x2_offset, common_quant_mode, group_sizes,
                     comm_quant_dtype, x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype, output_scale_dtype,
                     comm_scale_dtype, y_dtype};
  const at::ScalarType out_type =
      checkQuantMatmulAllToAll(op, x1, x2, world_size, args, x1_quant_mode, x2_quant_mode, all2all_axes);
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = groupNamed(op, hcom);
  checkWorldSize(op, world_size, group.get());
  const int64_t m = x1.size(0), n = x2.size(1);
  at::Tensor y = quantProduct(x1, x2, *x1_scale, *x2_scale, bias, true).to(out_type);
  at::Tensor blocks = y.view({m, world_size, n / world_size}).permute({1, 0, 2});
  return allToAll(*group, blocks).view({world_size * m, n / world_size});
}

at::Tensor npu_quant_matmul_all_to_all_meta(
    const at::Tensor& x1, const at::Tensor& x2, c10::string_view hcom, int64_t world_size,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& x1_scale,
    const std::optional<at::Tensor>& x2_scale, const std::optional<at::Tensor>& common_scale,
    const std::optional<at::Tensor>& x1_offset, const std::optional<at::Tensor>& x2_offset,
    std::optional<int64_t> x1_quant_mode, std::optional<int64_t> x2_quant_mode,
    std::optional<int64_t> common_quant_mode, at::OptionalIntArrayRef group_sizes,
    at::OptionalIntArrayRef all2all_axes, std::optional<int64_t> comm_quant_dtype, std::optional<int64_t> x1_dtype,
    std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype, std::optional<int64_t> x2_scale_dtype,
    std::optional<int64_t> output_scale_dtype, std::optional<int64_t> comm_scale_dtype,
    std::optional<int64_t> y_dtype, std::optional<c10::string_view> comm_mode) {
  const A2aArgs args{bias, x1_scale, x2_scale, common_scale, x1_offset, x2_offset, common_quant_mode, group_sizes,
                     comm_quant_dtype, x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype, output_scale_dtype,
                     comm_scale_dtype, y_dtype};
  const at::ScalarType out_type = checkQuantMatmulAllToAll("npu_quant_matmul_all_to_all", x1, x2, world_size, args,
                                                           x1_quant_mode, x2_quant_mode, all2all_axes);
  return at::empty({world_size * x1.size(0), x2.size(1) / world_size}, x1.options().dtype(out_type));
}

namespace {

// npu_all_to_all_quant_matmul: float x1 (m, k) is exchanged, then quantised per row to `quant` (x1_quant_dtype,
// float8_e5m2 by default as upstream); x2 is (world * k, n). Returns the quantised dtype.
at::ScalarType checkAllToAllQuantMatmul(const char* op, const at::Tensor& x1, const at::Tensor& x2,
                                        int64_t world_size, const A2aArgs& a, std::optional<int64_t> x1_quant_mode,
                                        std::optional<int64_t> x2_quant_mode, std::optional<int64_t> x1_quant_dtype,
                                        at::OptionalIntArrayRef all2all_axes, at::ScalarType* out_type) {
  checkViewDtype(op, "x1_dtype", a.x1_dtype, x1);
  *out_type = checkA2aCommon(op, a, x2);
  checkAxes(op, all2all_axes, {-2, -1});
  TORCH_CHECK_VALUE(x1.dim() == 2, op, ": x1 must be 2-D (m, k), got ", x1.sizes());
  TORCH_CHECK_TYPE(isHalfFloat(x1.scalar_type()) || x1.scalar_type() == at::kFloat, op,
                   ": x1 must be float16, bfloat16 or float32 (it is quantised after the exchange), got ",
                   x1.scalar_type());
  const int64_t mode = x1_quant_mode.value_or(kDynamicPerToken);
  TORCH_CHECK_VALUE(mode == kDynamicPerToken, op, ": x1_quant_mode must be 7 (dynamic per token), got ", mode);
  const at::ScalarType quant =
      x1_quant_dtype.has_value() ? dtypeArg(op, "x1_quant_dtype", *x1_quant_dtype) : at::kFloat8_e5m2;
  TORCH_CHECK_VALUE(quant == at::kChar || isFloat8(quant), op, ": x1_quant_dtype must be torch.float8_e5m2, "
                    "torch.float8_e4m3fn or torch.int8, got ", quant);
  TORCH_CHECK_TYPE((quant == at::kChar) == (x2.scalar_type() == at::kChar), op, ": x1 is quantised to ", quant,
                   " but x2 is ", x2.scalar_type(), "; both must be int8 or both float8");
  checkWorldSize(op, world_size, nullptr);
  TORCH_CHECK_VALUE(x1.size(0) % world_size == 0, op, ": x1's rows (", x1.size(0), ") must divide by world_size ",
                    world_size);
  TORCH_CHECK_VALUE(x2.size(0) == x1.size(1) * world_size, op, ": x2 must have k * world_size = ",
                    x1.size(1) * world_size, " rows, got ", x2.sizes());
  if (present(a.x1_scale)) {  // the smoothing scale of the exchanged rows' columns
    TORCH_CHECK_TYPE(a.x1_scale->scalar_type() == at::kFloat || isHalfFloat(a.x1_scale->scalar_type()), op,
                     ": x1_scale (smoothing) must be floating, got ", a.x1_scale->scalar_type());
    TORCH_CHECK_VALUE(a.x1_scale->numel() == x2.size(0), op, ": x1_scale (smoothing) must have k * world_size = ",
                      x2.size(0), " values, got ", a.x1_scale->sizes());
  }
  checkX2Scale(op, a, x2, x2_quant_mode);
  return quant;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_all_to_all_quant_matmul(
    const at::Tensor& x1, const at::Tensor& x2, c10::string_view hcom, int64_t world_size, bool all2all_out_flag,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& x1_scale,
    const std::optional<at::Tensor>& x2_scale, const std::optional<at::Tensor>& common_scale,
    const std::optional<at::Tensor>& x1_offset, const std::optional<at::Tensor>& x2_offset,
    std::optional<int64_t> x1_quant_mode, std::optional<int64_t> x2_quant_mode,
    std::optional<int64_t> common_quant_mode, at::OptionalIntArrayRef group_sizes,
    at::OptionalIntArrayRef all2all_axes, std::optional<int64_t> comm_quant_dtype,
    std::optional<int64_t> x1_quant_dtype, std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype,
    std::optional<int64_t> x1_scale_dtype, std::optional<int64_t> x2_scale_dtype,
    std::optional<int64_t> output_scale_dtype, std::optional<int64_t> comm_scale_dtype,
    std::optional<int64_t> y_dtype, std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_all_to_all_quant_matmul";
  const A2aArgs args{bias, x1_scale, x2_scale, common_scale, x1_offset, x2_offset, common_quant_mode, group_sizes,
                     comm_quant_dtype, x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype, output_scale_dtype,
                     comm_scale_dtype, y_dtype};
  at::ScalarType out_type = at::kFloat;
  const at::ScalarType quant = checkAllToAllQuantMatmul(op, x1, x2, world_size, args, x1_quant_mode, x2_quant_mode,
                                                        x1_quant_dtype, all2all_axes, &out_type);
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = groupNamed(op, hcom);
  checkWorldSize(op, world_size, group.get());
  const int64_t rows = x1.size(0) / world_size, hidden = x1.size(1);
  at::Tensor received = allToAll(*group, x1.view({world_size, rows, hidden}));
  at::Tensor permuted = received.permute({1, 0, 2}).reshape({rows, world_size * hidden});
  // Dynamic per-row quantisation: scale = max|x * smooth| / max(quant), 1 for an all-zero row.
  at::Tensor x = permuted.to(at::kFloat);
  if (present(x1_scale)) x = x * x1_scale->to(at::kFloat).reshape({1, -1});
  const double qmax = quant == at::kChar ? 127.0 : (quant == at::kFloat8_e4m3fn ? 448.0 : 57344.0);
  at::Tensor scale = x.abs().amax({1}, true) / qmax;
  scale = at::where(scale == 0, at::ones_like(scale), scale);
  at::Tensor v = x / scale;
  at::Tensor q = quant == at::kChar ? v.round().clamp_min(-128).clamp_max(127).to(at::kChar) : v.to(quant);
  at::Tensor y = quantProduct(q, x2, scale, *x2_scale, bias, true).to(out_type);
  return {y, all2all_out_flag ? permuted : at::empty({0}, x1.options())};
}

std::tuple<at::Tensor, at::Tensor> npu_all_to_all_quant_matmul_meta(
    const at::Tensor& x1, const at::Tensor& x2, c10::string_view hcom, int64_t world_size, bool all2all_out_flag,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& x1_scale,
    const std::optional<at::Tensor>& x2_scale, const std::optional<at::Tensor>& common_scale,
    const std::optional<at::Tensor>& x1_offset, const std::optional<at::Tensor>& x2_offset,
    std::optional<int64_t> x1_quant_mode, std::optional<int64_t> x2_quant_mode,
    std::optional<int64_t> common_quant_mode, at::OptionalIntArrayRef group_sizes,
    at::OptionalIntArrayRef all2all_axes, std::optional<int64_t> comm_quant_dtype,
    std::optional<int64_t> x1_quant_dtype, std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype,
    std::optional<int64_t> x1_scale_dtype, std::optional<int64_t> x2_scale_dtype,
    std::optional<int64_t> output_scale_dtype, std::optional<int64_t> comm_scale_dtype,
    std::optional<int64_t> y_dtype, std::optional<c10::string_view> comm_mode) {
  const A2aArgs args{bias, x1_scale, x2_scale, common_scale, x1_offset, x2_offset, common_quant_mode, group_sizes,
                     comm_quant_dtype, x1_dtype, x2_dtype, x1_scale_dtype, x2_scale_dtype, output_scale_dtype,
                     comm_scale_dtype, y_dtype};
  at::ScalarType out_type = at::kFloat;
  checkAllToAllQuantMatmul("npu_all_to_all_quant_matmul", x1, x2, world_size, args, x1_quant_mode, x2_quant_mode,
                           x1_quant_dtype, all2all_axes, &out_type);
  const int64_t rows = x1.size(0) / world_size;
  return {at::empty({rows, x2.size(1)}, x1.options().dtype(out_type)),
          all2all_out_flag ? at::empty({rows, x1.size(1) * world_size}, x1.options()) : at::empty({0}, x1.options())};
}

}  // namespace at_npu::native
