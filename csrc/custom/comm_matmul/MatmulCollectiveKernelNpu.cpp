// MatmulCollectiveKernelNpu.cpp - the communication-fused matmuls of tensor parallelism: npu_mm_all_reduce_base,
// npu_all_gather_base_mm, npu_mm_reduce_scatter_base, npu_all_to_all_matmul, npu_matmul_all_to_all. Each is the matmul (float, weight-dequantised or int8) and
// the collective on the hccl group named `hcom` (ProcessGroupHCCL.get_hccl_comm_name), queued in stream order: the
// result is ready on the caller's stream, as on a chip where the fused kernel overlaps the two.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/matmul.h>

#include <torch/csrc/distributed/c10d/Types.hpp>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/NpuCustomOps.h"
#include "csrc/custom/comm_matmul/CommGroup.h"

namespace at_npu::native {
namespace {

using comm::checkWorldSize;
using comm::groupNamed;

void checkReduceOp(const char* op, c10::string_view reduce_op) {
  TORCH_CHECK_VALUE(reduce_op == "sum", op, ": reduce_op must be 'sum' (the only reduction the fused op has), got '",
                    reduce_op, "'");
}

// Chip number formats and pipelining knobs that change nothing here but must not be silently taken.
void checkPlain(const char* op, std::initializer_list<std::pair<const char*, bool>> given) {
  for (const auto& [name, present] : given) {
    TORCH_CHECK_VALUE(!present, op, ": ", name, " selects a chip number format (float8 / hifloat8 / float4 / mx) or "
                      "a communication quantization the software NPU does not have; leave it unset");
  }
}

int64_t dtypeCode(at::ScalarType type) { return static_cast<int64_t>(type); }

// The matmul of the three ops: x1 (..., k) @ x2 (k, n), with bias, in one of the three forms the ops take.
struct MatmulArgs {
  const std::optional<at::Tensor>& bias;
  const std::optional<at::Tensor>& antiquant_scale;
  const std::optional<at::Tensor>& antiquant_offset;
  int64_t antiquant_group_size;
  const std::optional<at::Tensor>& dequant_scale;  // int8 x int8: the scale (x2_scale)
  const std::optional<at::Tensor>& pertoken_scale;  // int8 x int8: per-row scale of x1 (x1_scale)
  std::optional<at::ScalarType> out_dtype;
};

void checkOperands(const char* op, const at::Tensor& x1, const at::Tensor& x2, bool allow_3d) {
  TORCH_CHECK_VALUE(x1.dim() == 2 || (allow_3d && x1.dim() == 3), op, ": x1 must be (m, k)",
                    allow_3d ? " or (b, s, k)" : "", ", got ", x1.sizes());
  TORCH_CHECK_VALUE(x2.dim() == 2, op, ": x2 must be (k, n), got ", x2.sizes());
  TORCH_CHECK_VALUE(x1.size(-1) == x2.size(0), op, ": x1 ", x1.sizes(), " and x2 ", x2.sizes(),
                    " do not multiply: x1's last dimension must equal x2's first");
}

bool quantized(const at::Tensor& x1) { return x1.scalar_type() == at::kChar; }

at::ScalarType resultType(const char* op, const at::Tensor& x1, const at::Tensor& x2, const MatmulArgs& args) {
  if (!quantized(x1)) {
    TORCH_CHECK_TYPE(x1.scalar_type() == at::kHalf || x1.scalar_type() == at::kBFloat16 ||
                         x1.scalar_type() == at::kFloat,
                     op, ": x1 must be float16, bfloat16, float32 or int8, got ", x1.scalar_type());
    TORCH_CHECK_TYPE(x2.scalar_type() == x1.scalar_type() || (args.antiquant_scale && x2.scalar_type() == at::kChar),
                     op, ": x2 must have x1's dtype (", x1.scalar_type(), "), or be int8 with antiquant_scale, got ",
                     x2.scalar_type());
    return x1.scalar_type();
  }
  TORCH_CHECK_TYPE(x2.scalar_type() == at::kChar, op, ": with an int8 x1, x2 must be int8 too, got ", x2.scalar_type());
  TORCH_CHECK_VALUE(args.dequant_scale.has_value(), op, ": int8 x1 and x2 need their dequantisation scale (",
                    "dequant_scale / x2_scale)");
  if (args.out_dtype) return *args.out_dtype;
  return args.dequant_scale->scalar_type() == at::kBFloat16 ? at::kBFloat16 : at::kHalf;
}

std::vector<int64_t> productShape(const at::Tensor& x1, const at::Tensor& x2) {
  std::vector<int64_t> shape = x1.sizes().vec();
  shape.back() = x2.size(1);
  return shape;
}

at::Tensor matmul(const char* op, const at::Tensor& x1, const at::Tensor& x2, const MatmulArgs& args) {
  const at::ScalarType out_type = resultType(op, x1, x2, args);
  if (quantized(x1)) {
    at::Tensor scale = *args.dequant_scale;
    if (scale.scalar_type() == at::kBFloat16) scale = scale.to(at::kFloat);
    std::optional<at::Tensor> pertoken;
    if (args.pertoken_scale) pertoken = args.pertoken_scale->reshape({-1});
    at::Tensor flat = x1.reshape({-1, x1.size(-1)});
    at::Tensor y = at_npu::ops::npu_quant_matmul(flat, x2, scale.reshape({-1}), std::nullopt, pertoken, args.bias,
                                                 dtypeCode(out_type), std::nullopt, std::nullopt, std::nullopt,
                                                 std::nullopt, std::nullopt, std::nullopt);
    return y.reshape(productShape(x1, x2));
  }
  if (args.antiquant_scale) {
    return at_npu::ops::npu_weight_quant_batchmatmul(x1, x2, *args.antiquant_scale, args.antiquant_offset,
                                                     std::nullopt, std::nullopt, args.bias,
                                                     args.antiquant_group_size, 0, std::nullopt);
  }
  at::Tensor y = at::matmul(x1, x2);
  if (args.bias && args.bias->defined()) y = y + *args.bias;
  return y.scalar_type() == out_type ? y : y.to(out_type);
}

}  // namespace

at::Tensor npu_mm_all_reduce_base(const at::Tensor& x1, const at::Tensor& x2, c10::string_view hcom,
                                  c10::string_view reduce_op, const std::optional<at::Tensor>& bias,
                                  const std::optional<at::Tensor>& antiquant_scale,
                                  const std::optional<at::Tensor>& antiquant_offset,
                                  const std::optional<at::Tensor>& x3, const std::optional<at::Tensor>& dequant_scale,
                                  const std::optional<at::Tensor>& pertoken_scale,
                                  const std::optional<at::Tensor>& comm_quant_scale_1,
                                  const std::optional<at::Tensor>& comm_quant_scale_2, int64_t antiquant_group_size,
                                  int64_t comm_turn, at::OptionalIntArrayRef group_sizes,
                                  std::optional<int64_t> y_dtype, std::optional<int64_t> x1_dtype,
                                  std::optional<int64_t> x2_dtype, std::optional<int64_t> dequant_scale_dtype,
                                  std::optional<int64_t> pertoken_scale_dtype, int64_t comm_quant_mode,
                                  std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_mm_all_reduce_base";
  checkReduceOp(op, reduce_op);
  checkOperands(op, x1, x2, true);
  checkPlain(op, {{"comm_quant_scale_1", comm_quant_scale_1.has_value()},
                  {"comm_quant_scale_2", comm_quant_scale_2.has_value()}, {"group_sizes", group_sizes.has_value()},
                  {"x1_dtype", x1_dtype.has_value()}, {"x2_dtype", x2_dtype.has_value()},
                  {"dequant_scale_dtype", dequant_scale_dtype.has_value()},
                  {"pertoken_scale_dtype", pertoken_scale_dtype.has_value()}, {"comm_quant_mode", comm_quant_mode != 0}});
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = groupNamed(op, hcom);
  std::optional<at::ScalarType> out_dtype;
  if (y_dtype) out_dtype = static_cast<at::ScalarType>(*y_dtype);
  else if (quantized(x1) && x3) out_dtype = x3->scalar_type();
  const MatmulArgs args{bias, antiquant_scale, antiquant_offset, antiquant_group_size, dequant_scale, pertoken_scale,
                        out_dtype};
  at::Tensor y = matmul(op, x1, x2, args);
  if (x3.has_value()) {
    TORCH_CHECK_VALUE(x3->sizes() == y.sizes(), op, ": x3 must have the output's shape ", y.sizes(), ", got ",
                      x3->sizes());
    y = y + x3->to(y.scalar_type());
  }
  y = y.contiguous();
  std::vector<at::Tensor> tensors{y};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  group->allreduce(tensors, opts)->wait();
  return y;
}

at::Tensor npu_mm_all_reduce_base_meta(
    const at::Tensor& x1, const at::Tensor& x2, c10::string_view hcom, c10::string_view reduce_op,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& antiquant_scale,
    const std::optional<at::Tensor>& antiquant_offset, const std::optional<at::Tensor>& x3,
    const std::optional<at::Tensor>& dequant_scale, const std::optional<at::Tensor>& pertoken_scale,
    const std::optional<at::Tensor>& comm_quant_scale_1, const std::optional<at::Tensor>& comm_quant_scale_2,
    int64_t antiquant_group_size, int64_t comm_turn, at::OptionalIntArrayRef group_sizes,
    std::optional<int64_t> y_dtype, std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype,
    std::optional<int64_t> dequant_scale_dtype, std::optional<int64_t> pertoken_scale_dtype, int64_t comm_quant_mode,
    std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_mm_all_reduce_base";
  checkReduceOp(op, reduce_op);
  checkOperands(op, x1, x2, true);
  std::optional<at::ScalarType> out_dtype;
  if (y_dtype) out_dtype = static_cast<at::ScalarType>(*y_dtype);
  else if (quantized(x1) && x3) out_dtype = x3->scalar_type();
  const MatmulArgs args{bias, antiquant_scale, antiquant_offset, antiquant_group_size, dequant_scale, pertoken_scale,
                        out_dtype};
  return at::empty(productShape(x1, x2), x1.options().dtype(resultType(op, x1, x2, args)));
}

std::tuple<at::Tensor, at::Tensor> npu_all_gather_base_mm(
    const at::Tensor& self, const at::Tensor& x2, c10::string_view hcom, int64_t world_size,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& x1_scale,
    const std::optional<at::Tensor>& x2_scale, int64_t gather_index, bool gather_output, int64_t comm_turn,
    std::optional<at::ScalarType> output_dtype, std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_all_gather_base_mm";
  checkOperands(op, self, x2, false);
  TORCH_CHECK_VALUE(gather_index == 0, op, ": gather_index must be 0 (x1 is gathered), got ", gather_index);
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = groupNamed(op, hcom);
  checkWorldSize(op, world_size, group.get());
  const MatmulArgs args{bias, std::nullopt, std::nullopt, 0, x2_scale, std::nullopt, output_dtype};
  resultType(op, self, x2, args);
  at::Tensor gathered = at::empty({world_size * self.size(0), self.size(1)}, self.options());
  at::Tensor mine = self.contiguous();
  group->_allgather_base(gathered, mine)->wait();
  std::optional<at::Tensor> gathered_scale;
  if (x1_scale.has_value()) {  // per-row scales travel with their rows
    at::Tensor rows = x1_scale->reshape({-1}).contiguous();
    TORCH_CHECK_VALUE(rows.numel() == self.size(0), op, ": x1_scale must have one value per row of x1 (",
                      self.size(0), "), got ", x1_scale->sizes());
    at::Tensor all_rows = at::empty({world_size * rows.numel()}, rows.options());
    group->_allgather_base(all_rows, rows)->wait();
    gathered_scale = all_rows;
  }
  const MatmulArgs gathered_args{bias, std::nullopt, std::nullopt, 0, x2_scale, gathered_scale, output_dtype};
  at::Tensor out = matmul(op, gathered, x2, gathered_args);
  return {out, gather_output ? gathered : at::empty({0}, self.options())};
}

std::tuple<at::Tensor, at::Tensor> npu_all_gather_base_mm_meta(
    const at::Tensor& self, const at::Tensor& x2, c10::string_view hcom, int64_t world_size,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& x1_scale,
    const std::optional<at::Tensor>& x2_scale, int64_t gather_index, bool gather_output, int64_t comm_turn,
    std::optional<at::ScalarType> output_dtype, std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_all_gather_base_mm";
  checkOperands(op, self, x2, false);
  checkWorldSize(op, world_size, nullptr);
  const MatmulArgs args{bias, std::nullopt, std::nullopt, 0, x2_scale, std::nullopt, output_dtype};
  at::Tensor out = at::empty({world_size * self.size(0), x2.size(1)}, self.options().dtype(resultType(op, self, x2, args)));
  at::Tensor gathered = gather_output ? at::empty({world_size * self.size(0), self.size(1)}, self.options())
                                      : at::empty({0}, self.options());
  return {out, gathered};
}

at::Tensor npu_mm_reduce_scatter_base(const at::Tensor& self, const at::Tensor& x2, c10::string_view hcom,
                                      int64_t world_size, c10::string_view reduce_op,
                                      const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& x1_scale,
                                      const std::optional<at::Tensor>& x2_scale, int64_t comm_turn,
                                      std::optional<at::ScalarType> output_dtype,
                                      std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_mm_reduce_scatter_base";
  checkReduceOp(op, reduce_op);
  checkOperands(op, self, x2, false);
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = groupNamed(op, hcom);
  checkWorldSize(op, world_size, group.get());
  TORCH_CHECK_VALUE(self.size(0) % world_size == 0, op, ": x1's rows (", self.size(0),
                    ") must divide evenly among world_size ", world_size, " ranks");
  const MatmulArgs args{bias, std::nullopt, std::nullopt, 0, x2_scale, x1_scale, output_dtype};
  at::Tensor y = matmul(op, self, x2, args).contiguous();
  at::Tensor out = at::empty({self.size(0) / world_size, x2.size(1)}, y.options());
  c10d::ReduceScatterOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  group->_reduce_scatter_base(out, y, opts)->wait();
  return out;
}

at::Tensor npu_mm_reduce_scatter_base_meta(const at::Tensor& self, const at::Tensor& x2, c10::string_view hcom,
                                           int64_t world_size, c10::string_view reduce_op,
                                           const std::optional<at::Tensor>& bias,
                                           const std::optional<at::Tensor>& x1_scale,
                                           const std::optional<at::Tensor>& x2_scale, int64_t comm_turn,
                                           std::optional<at::ScalarType> output_dtype,
                                           std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_mm_reduce_scatter_base";
  checkReduceOp(op, reduce_op);
  checkOperands(op, self, x2, false);
  checkWorldSize(op, world_size, nullptr);
  TORCH_CHECK_VALUE(self.size(0) % world_size == 0, op, ": x1's rows (", self.size(0),
                    ") must divide evenly among world_size ", world_size, " ranks");
  const MatmulArgs args{bias, std::nullopt, std::nullopt, 0, x2_scale, x1_scale, output_dtype};
  return at::empty({self.size(0) / world_size, x2.size(1)}, self.options().dtype(resultType(op, self, x2, args)));
}

namespace {

// Rank r's block `r` of `input` (blocks along dim 0) goes to rank r; block i of the result came from rank i.
at::Tensor allToAll(c10d_npu::ProcessGroupHCCL& group, const at::Tensor& input) {
  at::Tensor send = input.contiguous();
  at::Tensor received = at::empty_like(send);
  std::vector<int64_t> even;  // equal blocks
  group.alltoall_base(received, send, even, even)->wait();
  return received;
}

void checkAllToAll(const char* op, const at::Tensor& x1, const at::Tensor& x2, int64_t world_size,
                   at::OptionalIntArrayRef all2all_axes, std::initializer_list<int64_t> allowed_axes) {
  TORCH_CHECK_VALUE(x1.dim() == 2 && x2.dim() == 2, op, ": x1 and x2 must be 2-D, got ", x1.sizes(), " and ",
                    x2.sizes());
  TORCH_CHECK_TYPE((x1.scalar_type() == at::kHalf || x1.scalar_type() == at::kBFloat16 ||
                    x1.scalar_type() == at::kFloat) && x2.scalar_type() == x1.scalar_type(),
                   op, ": x1 and x2 must both be float16, bfloat16 or float32, got ", x1.scalar_type(), " and ",
                   x2.scalar_type());
  TORCH_CHECK_VALUE(!all2all_axes.has_value() || all2all_axes->empty() ||
                        std::vector<int64_t>(all2all_axes->begin(), all2all_axes->end()) ==
                            std::vector<int64_t>(allowed_axes),
                    op, ": all2all_axes must be None or ", std::vector<int64_t>(allowed_axes), ", got ", *all2all_axes);
  checkWorldSize(op, world_size, nullptr);
}

// bias: float32 with bfloat16 operands (as upstream takes it), the operands' dtype otherwise.
at::Tensor addBias(const at::Tensor& y, const std::optional<at::Tensor>& bias) {
  if (!bias.has_value() || !bias->defined()) return y;
  return (y.to(at::kFloat) + bias->to(at::kFloat)).to(y.scalar_type());
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_all_to_all_matmul(const at::Tensor& x1, const at::Tensor& x2,
                                                         c10::string_view hcom, int64_t world_size,
                                                         const std::optional<at::Tensor>& bias,
                                                         at::OptionalIntArrayRef all2all_axes, bool all2all_out_flag,
                                                         std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_all_to_all_matmul";
  checkAllToAll(op, x1, x2, world_size, all2all_axes, {-2, -1});
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = groupNamed(op, hcom);
  checkWorldSize(op, world_size, group.get());
  const int64_t rows = x1.size(0), hidden = x1.size(1);
  TORCH_CHECK_VALUE(rows % world_size == 0, op, ": x1's rows (", rows, ") must divide by world_size ", world_size);
  TORCH_CHECK_VALUE(x2.size(0) == hidden * world_size, op, ": x2 must have H * world_size = ", hidden * world_size,
                    " rows, got ", x2.sizes());
  at::Tensor received = allToAll(*group, x1.view({world_size, rows / world_size, hidden}));
  at::Tensor permuted = received.permute({1, 0, 2}).reshape({rows / world_size, world_size * hidden});
  at::Tensor out = addBias(at::matmul(permuted, x2), bias);
  return {out, all2all_out_flag ? permuted : at::empty({0}, x1.options())};
}

std::tuple<at::Tensor, at::Tensor> npu_all_to_all_matmul_meta(const at::Tensor& x1, const at::Tensor& x2,
                                                              c10::string_view hcom, int64_t world_size,
                                                              const std::optional<at::Tensor>& bias,
                                                              at::OptionalIntArrayRef all2all_axes,
                                                              bool all2all_out_flag,
                                                              std::optional<c10::string_view> comm_mode) {
  checkAllToAll("npu_all_to_all_matmul", x1, x2, world_size, all2all_axes, {-2, -1});
  const int64_t rows = x1.size(0) / world_size;
  return {at::empty({rows, x2.size(1)}, x1.options()),
          all2all_out_flag ? at::empty({rows, x1.size(1) * world_size}, x1.options()) : at::empty({0}, x1.options())};
}

at::Tensor npu_matmul_all_to_all(const at::Tensor& x1, const at::Tensor& x2, c10::string_view hcom,
                                 int64_t world_size, const std::optional<at::Tensor>& bias,
                                 at::OptionalIntArrayRef all2all_axes, std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_matmul_all_to_all";
  checkAllToAll(op, x1, x2, world_size, all2all_axes, {-1, -2});
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = groupNamed(op, hcom);
  checkWorldSize(op, world_size, group.get());
  TORCH_CHECK_VALUE(x1.size(1) == x2.size(0), op, ": x1 ", x1.sizes(), " and x2 ", x2.sizes(), " do not multiply");
  const int64_t rows = x1.size(0), cols = x2.size(1);
  TORCH_CHECK_VALUE(cols % world_size == 0, op, ": x2's columns (", cols, ") must divide by world_size ", world_size);
  at::Tensor computed = addBias(at::matmul(x1, x2), bias);
  at::Tensor blocks = computed.view({rows, world_size, cols / world_size}).permute({1, 0, 2});
  return allToAll(*group, blocks).view({world_size * rows, cols / world_size});
}

at::Tensor npu_matmul_all_to_all_meta(const at::Tensor& x1, const at::Tensor& x2, c10::string_view hcom,
                                      int64_t world_size, const std::optional<at::Tensor>& bias,
                                      at::OptionalIntArrayRef all2all_axes,
                                      std::optional<c10::string_view> comm_mode) {
  checkAllToAll("npu_matmul_all_to_all", x1, x2, world_size, all2all_axes, {-1, -2});
  return at::empty({world_size * x1.size(0), x2.size(1) / world_size}, x1.options());
}

}  // namespace at_npu::native
