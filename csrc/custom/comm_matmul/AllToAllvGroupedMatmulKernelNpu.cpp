// AllToAllvGroupedMatmulKernelNpu.cpp - the expert-parallel grouped matmuls fused with all_to_all_v:
// npu_alltoallv_gmm (exchange tokens, group them by local expert, one matmul per expert) and npu_gmm_alltoallv (one
// matmul per expert, regroup by source rank, exchange back), each with an optional shared-expert matmul; and their
// per-tensor quantised forms npu_alltoallv_quant_gmm / npu_quant_gmm_alltoallv (float8 operands, float32 scales). The counts
// are host lists (send_counts[r * e + j]: rows for rank r's expert j), so nothing waits for the device.
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>

#include <numeric>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/comm_matmul/CommGroup.h"

namespace at_npu::native {
namespace {

struct Counts {
  int64_t experts;                  // local experts e
  std::vector<int64_t> send, recv;  // e * world entries
};

Counts checkCounts(const char* op, const at::Tensor& gmm_weight, int64_t world, at::IntArrayRef send_counts,
                   at::IntArrayRef recv_counts, bool trans_weight) {
  TORCH_CHECK_VALUE(gmm_weight.dim() == 3, op, ": gmm_weight must be (e, H, N), got ", gmm_weight.sizes());
  const int64_t experts = gmm_weight.size(0);
  for (const auto& [name, counts] : {std::pair<const char*, at::IntArrayRef>{"send_counts", send_counts},
                                     {"recv_counts", recv_counts}}) {
    TORCH_CHECK_VALUE(static_cast<int64_t>(counts.size()) == experts * world, op, ": ", name,
                      " must have e * ep_world_size = ", experts * world, " entries, got ", counts.size());
    for (int64_t c : counts) TORCH_CHECK_VALUE(c >= 0, op, ": ", name, " must not be negative, got ", c);
  }
  return {experts, send_counts.vec(), recv_counts.vec()};
}

int64_t total(const std::vector<int64_t>& counts) { return std::accumulate(counts.begin(), counts.end(), int64_t{0}); }

// Rows per rank: the sum of its e entries.
std::vector<int64_t> perRank(const std::vector<int64_t>& counts, int64_t experts) {
  std::vector<int64_t> ranks(counts.size() / experts, 0);
  for (size_t i = 0; i < counts.size(); ++i) ranks[i / experts] += counts[i];
  return ranks;
}

// Row blocks of `rows` laid out (rank r, expert j) -> the same blocks laid out (expert j, rank r), or back.
at::Tensor regroup(const at::Tensor& rows, const std::vector<int64_t>& counts, int64_t experts, bool to_expert_major) {
  const int64_t world = static_cast<int64_t>(counts.size()) / experts;
  std::vector<int64_t> start(counts.size(), 0);  // start of block (r, j) in rank-major order
  for (size_t i = 1; i < counts.size(); ++i) start[i] = start[i - 1] + counts[i - 1];
  std::vector<at::Tensor> blocks;
  if (to_expert_major) {
    for (int64_t j = 0; j < experts; ++j) {
      for (int64_t r = 0; r < world; ++r) blocks.push_back(rows.narrow(0, start[r * experts + j], counts[r * experts + j]));
    }
  } else {
    std::vector<int64_t> expert_start(counts.size(), 0);  // start of block (j, r) in expert-major order
    int64_t at = 0;
    for (int64_t j = 0; j < experts; ++j) {
      for (int64_t r = 0; r < world; ++r) {
        expert_start[r * experts + j] = at;
        at += counts[r * experts + j];
      }
    }
    for (size_t i = 0; i < counts.size(); ++i) blocks.push_back(rows.narrow(0, expert_start[i], counts[i]));
  }
  return blocks.empty() ? rows : at::cat(blocks);
}

// x @ w, or for quantised operands x_scale * w_scale * (x @ w) in float32, cast to `out_type`.
at::Tensor product(const at::Tensor& x, const at::Tensor& w, const at::Tensor& x_scale, const at::Tensor& w_scale,
                   std::optional<at::ScalarType> out_type) {
  if (!x_scale.defined()) return at::matmul(x, w);
  at::Tensor y = at::matmul(x.to(at::kFloat), w.to(at::kFloat)) * (x_scale.to(at::kFloat) * w_scale.to(at::kFloat));
  return y.to(*out_type);
}

// One matmul per local expert over its consecutive rows (expert-major layout).
at::Tensor groupedMatmul(const at::Tensor& rows, const at::Tensor& weight, const std::vector<int64_t>& counts,
                         int64_t experts, bool trans_weight, const at::Tensor& x_scale = {},
                         const at::Tensor& w_scale = {}, std::optional<at::ScalarType> out_type = std::nullopt) {
  const int64_t world = static_cast<int64_t>(counts.size()) / experts;
  const int64_t out_cols = trans_weight ? weight.size(1) : weight.size(2);
  std::vector<at::Tensor> outs;
  int64_t at = 0;
  for (int64_t j = 0; j < experts; ++j) {
    int64_t n = 0;
    for (int64_t r = 0; r < world; ++r) n += counts[r * experts + j];
    const at::Tensor w = trans_weight ? weight[j].t() : weight[j];
    outs.push_back(product(rows.narrow(0, at, n), w, x_scale, w_scale, out_type));
    at += n;
  }
  return outs.empty() ? at::empty({0, out_cols}, rows.options().dtype(out_type.value_or(rows.scalar_type())))
                      : at::cat(outs);
}

at::Tensor sharedExpert(const char* op, const std::optional<at::Tensor>& mm_x, const std::optional<at::Tensor>& mm_weight,
                        bool trans_mm_weight, const at::Tensor& like) {
  TORCH_CHECK_VALUE(mm_x.has_value() == mm_weight.has_value(), op, ": mm_x and mm_weight go together (the shared "
                    "expert's matmul); pass both or neither");
  if (!mm_x.has_value()) return at::empty({0}, like.options());
  return at::matmul(*mm_x, trans_mm_weight ? mm_weight->t() : *mm_weight);
}

at::Tensor exchange(c10d_npu::ProcessGroupHCCL& group, const at::Tensor& rows, std::vector<int64_t> send,
                    std::vector<int64_t> recv) {
  at::Tensor output = at::empty({total(recv), rows.size(1)}, rows.options());
  // As bytes: the transport moves rows of any dtype (float8 included) unchanged.
  const bool as_bytes = at::elementSize(rows.scalar_type()) == 1;
  at::Tensor input = as_bytes ? rows.contiguous().view(at::kByte) : rows.contiguous();
  at::Tensor received = as_bytes ? output.view(at::kByte) : output;
  group.alltoall_base(received, input, recv, send)->wait();
  return output;
}

void checkTensorCounts(const char* op, const std::optional<at::Tensor>& send, const std::optional<at::Tensor>& recv) {
  TORCH_CHECK_VALUE(!send.has_value() && !recv.has_value(), op, ": send_counts_tensor / recv_counts_tensor are not "
                    "supported (as upstream); pass the counts as lists");
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_alltoallv_gmm(
    const at::Tensor& gmm_x, const at::Tensor& gmm_weight, c10::string_view hcom, int64_t ep_world_size,
    at::IntArrayRef send_counts, at::IntArrayRef recv_counts, const std::optional<at::Tensor>& send_counts_tensor,
    const std::optional<at::Tensor>& recv_counts_tensor, const std::optional<at::Tensor>& mm_x,
    const std::optional<at::Tensor>& mm_weight, bool trans_gmm_weight, bool trans_mm_weight, bool permute_out_flag,
    std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_alltoallv_gmm";
  checkTensorCounts(op, send_counts_tensor, recv_counts_tensor);
  const Counts counts = checkCounts(op, gmm_weight, ep_world_size, send_counts, recv_counts, trans_gmm_weight);
  TORCH_CHECK_VALUE(gmm_x.dim() == 2 && gmm_x.size(0) == total(counts.send), op, ": gmm_x must be (BSK, H) with BSK = ",
                    "sum(send_counts) = ", total(counts.send), ", got ", gmm_x.sizes());
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = comm::groupNamed(op, hcom);
  comm::checkWorldSize(op, ep_world_size, group.get());
  at::Tensor arrived = exchange(*group, gmm_x, perRank(counts.send, counts.experts), perRank(counts.recv, counts.experts));
  at::Tensor permuted = regroup(arrived, counts.recv, counts.experts, /*to_expert_major=*/true);
  at::Tensor gmm_y = groupedMatmul(permuted, gmm_weight, counts.recv, counts.experts, trans_gmm_weight);
  return {gmm_y, sharedExpert(op, mm_x, mm_weight, trans_mm_weight, gmm_x),
          permute_out_flag ? permuted : at::empty({0}, gmm_x.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_alltoallv_gmm_meta(
    const at::Tensor& gmm_x, const at::Tensor& gmm_weight, c10::string_view hcom, int64_t ep_world_size,
    at::IntArrayRef send_counts, at::IntArrayRef recv_counts, const std::optional<at::Tensor>& send_counts_tensor,
    const std::optional<at::Tensor>& recv_counts_tensor, const std::optional<at::Tensor>& mm_x,
    const std::optional<at::Tensor>& mm_weight, bool trans_gmm_weight, bool trans_mm_weight, bool permute_out_flag,
    std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_alltoallv_gmm";
  const Counts counts = checkCounts(op, gmm_weight, ep_world_size, send_counts, recv_counts, trans_gmm_weight);
  const int64_t rows = total(counts.recv);
  const int64_t n1 = trans_gmm_weight ? gmm_weight.size(1) : gmm_weight.size(2);
  at::Tensor mm_y = at::empty({0}, gmm_x.options());
  if (mm_x.has_value() && mm_weight.has_value()) {
    mm_y = at::empty({mm_x->size(0), trans_mm_weight ? mm_weight->size(0) : mm_weight->size(1)}, mm_x->options());
  }
  return {at::empty({rows, n1}, gmm_x.options()), mm_y,
          permute_out_flag ? at::empty({rows, gmm_x.size(1)}, gmm_x.options()) : at::empty({0}, gmm_x.options())};
}

std::tuple<at::Tensor, at::Tensor> npu_gmm_alltoallv(
    const at::Tensor& gmm_x, const at::Tensor& gmm_weight, c10::string_view hcom, int64_t ep_world_size,
    at::IntArrayRef send_counts, at::IntArrayRef recv_counts, const std::optional<at::Tensor>& send_counts_tensor,
    const std::optional<at::Tensor>& recv_counts_tensor, const std::optional<at::Tensor>& mm_x,
    const std::optional<at::Tensor>& mm_weight, bool trans_gmm_weight, bool trans_mm_weight,
    std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_gmm_alltoallv";
  checkTensorCounts(op, send_counts_tensor, recv_counts_tensor);
  const Counts counts = checkCounts(op, gmm_weight, ep_world_size, send_counts, recv_counts, trans_gmm_weight);
  TORCH_CHECK_VALUE(gmm_x.dim() == 2 && gmm_x.size(0) == total(counts.send), op, ": gmm_x must be (A, H) with A = ",
                    "sum(send_counts) = ", total(counts.send), ", got ", gmm_x.sizes());
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = comm::groupNamed(op, hcom);
  comm::checkWorldSize(op, ep_world_size, group.get());
  // gmm_x's rows are grouped by local expert, then by the rank they go back to.
  at::Tensor gmm_y = groupedMatmul(gmm_x, gmm_weight, counts.send, counts.experts, trans_gmm_weight);
  at::Tensor unpermuted = regroup(gmm_y, counts.send, counts.experts, /*to_expert_major=*/false);
  at::Tensor y = exchange(*group, unpermuted, perRank(counts.send, counts.experts), perRank(counts.recv, counts.experts));
  return {y, sharedExpert(op, mm_x, mm_weight, trans_mm_weight, gmm_x)};
}

std::tuple<at::Tensor, at::Tensor> npu_gmm_alltoallv_meta(
    const at::Tensor& gmm_x, const at::Tensor& gmm_weight, c10::string_view hcom, int64_t ep_world_size,
    at::IntArrayRef send_counts, at::IntArrayRef recv_counts, const std::optional<at::Tensor>& send_counts_tensor,
    const std::optional<at::Tensor>& recv_counts_tensor, const std::optional<at::Tensor>& mm_x,
    const std::optional<at::Tensor>& mm_weight, bool trans_gmm_weight, bool trans_mm_weight,
    std::optional<c10::string_view> comm_mode) {
  const Counts counts = checkCounts("npu_gmm_alltoallv", gmm_weight, ep_world_size, send_counts, recv_counts,
                                    trans_gmm_weight);
  const int64_t n1 = trans_gmm_weight ? gmm_weight.size(1) : gmm_weight.size(2);
  at::Tensor mm_y = at::empty({0}, gmm_x.options());
  if (mm_x.has_value() && mm_weight.has_value()) {
    mm_y = at::empty({mm_x->size(0), trans_mm_weight ? mm_weight->size(0) : mm_weight->size(1)}, mm_x->options());
  }
  return {at::empty({total(counts.recv), n1}, gmm_x.options()), mm_y};
}

namespace {

// The quantised forms: per-tensor float8 (or int8) operands with float32 scales of shape (1,); the MX block formats,
// hifloat8 and float4 are chip number formats the software NPU does not have.
struct QuantForm {
  at::Tensor x_scale, w_scale;
  at::ScalarType out_type;
};

QuantForm checkQuant(const char* op, const at::Tensor& x, const at::Tensor& w, const at::Tensor& x_scale,
                     const at::Tensor& w_scale, int64_t y_dtype, std::optional<int64_t> x_mode,
                     std::optional<int64_t> w_mode, std::initializer_list<std::pair<const char*, bool>> formats) {
  for (const auto& [name, given] : formats) {
    TORCH_CHECK_VALUE(!given, op, ": ", name, " selects a chip number format (hifloat8 / float4 / MX); leave it None");
  }
  TORCH_CHECK_VALUE(x_mode.value_or(1) == 1 && w_mode.value_or(1) == 1, op,
                    ": only per-tensor quantisation (quant mode 1) is supported; MX quantisation (6) needs the chip's "
                    "MX block formats");
  const auto quantised = [](at::ScalarType t) {
    return t == at::kFloat8_e4m3fn || t == at::kFloat8_e5m2 || t == at::kChar;
  };
  TORCH_CHECK_TYPE(quantised(x.scalar_type()) && quantised(w.scalar_type()), op,
                   ": gmm_x and gmm_weight must be float8_e4m3fn, float8_e5m2 or int8, got ", x.scalar_type(),
                   " and ", w.scalar_type());
  TORCH_CHECK_VALUE(x_scale.numel() == 1 && w_scale.numel() == 1, op, ": per-tensor scales have one value each, got ",
                    x_scale.sizes(), " and ", w_scale.sizes());
  const auto out_type = static_cast<at::ScalarType>(y_dtype);
  TORCH_CHECK_VALUE(out_type == at::kHalf || out_type == at::kBFloat16 || out_type == at::kFloat, op,
                    ": gmm_y_dtype must be float16, bfloat16 or float32, got ", out_type);
  return {x_scale.reshape({}), w_scale.reshape({}), out_type};
}

at::Tensor quantSharedExpert(const char* op, const std::optional<at::Tensor>& mm_x,
                             const std::optional<at::Tensor>& mm_weight, const std::optional<at::Tensor>& mm_x_scale,
                             const std::optional<at::Tensor>& mm_weight_scale, std::optional<int64_t> mm_y_dtype,
                             const QuantForm& routed, const at::Tensor& like) {
  TORCH_CHECK_VALUE(mm_x.has_value() == mm_weight.has_value(), op, ": mm_x and mm_weight go together (the shared "
                    "expert's matmul); pass both or neither");
  if (!mm_x.has_value()) return at::empty({0}, like.options().dtype(routed.out_type));
  TORCH_CHECK_VALUE(mm_x_scale.has_value() && mm_weight_scale.has_value(), op,
                    ": the shared expert's quantised matmul needs mm_x_scale and mm_weight_scale");
  const auto out_type = mm_y_dtype ? static_cast<at::ScalarType>(*mm_y_dtype) : routed.out_type;
  return product(*mm_x, *mm_weight, mm_x_scale->reshape({}), mm_weight_scale->reshape({}), out_type);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_alltoallv_quant_gmm(
    const at::Tensor& gmm_x, const at::Tensor& gmm_weight, const at::Tensor& gmm_x_scale,
    const at::Tensor& gmm_weight_scale, c10::string_view hcom, int64_t ep_world_size, at::IntArrayRef send_counts,
    at::IntArrayRef recv_counts, int64_t gmm_y_dtype, const std::optional<at::Tensor>& send_counts_tensor,
    const std::optional<at::Tensor>& recv_counts_tensor, const std::optional<at::Tensor>& mm_x,
    const std::optional<at::Tensor>& mm_weight, const std::optional<at::Tensor>& mm_x_scale,
    const std::optional<at::Tensor>& mm_weight_scale, std::optional<int64_t> gmm_x_quant_mode,
    std::optional<int64_t> gmm_weight_quant_mode, std::optional<int64_t> mm_x_quant_mode,
    std::optional<int64_t> mm_weight_quant_mode, bool permute_out_flag, at::OptionalIntArrayRef group_size,
    std::optional<int64_t> gmm_x_dtype, std::optional<int64_t> gmm_weight_dtype,
    std::optional<int64_t> gmm_x_scale_dtype, std::optional<int64_t> gmm_weight_scale_dtype,
    std::optional<int64_t> mm_x_dtype, std::optional<int64_t> mm_weight_dtype, std::optional<int64_t> mm_x_scale_dtype,
    std::optional<int64_t> mm_weight_scale_dtype, std::optional<int64_t> mm_y_dtype,
    std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_alltoallv_quant_gmm";
  checkTensorCounts(op, send_counts_tensor, recv_counts_tensor);
  const QuantForm form = checkQuant(
      op, gmm_x, gmm_weight, gmm_x_scale, gmm_weight_scale, gmm_y_dtype, gmm_x_quant_mode, gmm_weight_quant_mode,
      {{"gmm_x_dtype", gmm_x_dtype.has_value()}, {"gmm_weight_dtype", gmm_weight_dtype.has_value()},
       {"gmm_x_scale_dtype", gmm_x_scale_dtype.has_value()}, {"gmm_weight_scale_dtype", gmm_weight_scale_dtype.has_value()},
       {"mm_x_dtype", mm_x_dtype.has_value()}, {"mm_weight_dtype", mm_weight_dtype.has_value()},
       {"mm_x_scale_dtype", mm_x_scale_dtype.has_value()}, {"mm_weight_scale_dtype", mm_weight_scale_dtype.has_value()},
       {"mm_x_quant_mode", mm_x_quant_mode.value_or(1) != 1}, {"mm_weight_quant_mode", mm_weight_quant_mode.value_or(1) != 1}});
  const Counts counts = checkCounts(op, gmm_weight, ep_world_size, send_counts, recv_counts, false);
  TORCH_CHECK_VALUE(gmm_x.dim() == 2 && gmm_x.size(0) == total(counts.send), op, ": gmm_x must be (BSK, H) with BSK = ",
                    "sum(send_counts) = ", total(counts.send), ", got ", gmm_x.sizes());
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = comm::groupNamed(op, hcom);
  comm::checkWorldSize(op, ep_world_size, group.get());
  at::Tensor arrived = exchange(*group, gmm_x, perRank(counts.send, counts.experts), perRank(counts.recv, counts.experts));
  at::Tensor permuted = regroup(arrived, counts.recv, counts.experts, /*to_expert_major=*/true);
  at::Tensor gmm_y = groupedMatmul(permuted, gmm_weight, counts.recv, counts.experts, false, form.x_scale,
                                   form.w_scale, form.out_type);
  return {gmm_y, quantSharedExpert(op, mm_x, mm_weight, mm_x_scale, mm_weight_scale, mm_y_dtype, form, gmm_x),
          permute_out_flag ? permuted : at::empty({0}, gmm_x.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_alltoallv_quant_gmm_meta(
    const at::Tensor& gmm_x, const at::Tensor& gmm_weight, const at::Tensor& gmm_x_scale,
    const at::Tensor& gmm_weight_scale, c10::string_view hcom, int64_t ep_world_size, at::IntArrayRef send_counts,
    at::IntArrayRef recv_counts, int64_t gmm_y_dtype, const std::optional<at::Tensor>& send_counts_tensor,
    const std::optional<at::Tensor>& recv_counts_tensor, const std::optional<at::Tensor>& mm_x,
    const std::optional<at::Tensor>& mm_weight, const std::optional<at::Tensor>& mm_x_scale,
    const std::optional<at::Tensor>& mm_weight_scale, std::optional<int64_t> gmm_x_quant_mode,
    std::optional<int64_t> gmm_weight_quant_mode, std::optional<int64_t> mm_x_quant_mode,
    std::optional<int64_t> mm_weight_quant_mode, bool permute_out_flag, at::OptionalIntArrayRef group_size,
    std::optional<int64_t> gmm_x_dtype, std::optional<int64_t> gmm_weight_dtype,
    std::optional<int64_t> gmm_x_scale_dtype, std::optional<int64_t> gmm_weight_scale_dtype,
    std::optional<int64_t> mm_x_dtype, std::optional<int64_t> mm_weight_dtype, std::optional<int64_t> mm_x_scale_dtype,
    std::optional<int64_t> mm_weight_scale_dtype, std::optional<int64_t> mm_y_dtype,
    std::optional<c10::string_view> comm_mode) {
  const Counts counts = checkCounts("npu_alltoallv_quant_gmm", gmm_weight, ep_world_size, send_counts, recv_counts,
                                    false);
  const auto out_type = static_cast<at::ScalarType>(gmm_y_dtype);
  const int64_t rows = total(counts.recv);
  at::Tensor mm_y = at::empty({0}, gmm_x.options().dtype(out_type));
  if (mm_x.has_value() && mm_weight.has_value()) {
    mm_y = at::empty({mm_x->size(0), mm_weight->size(1)},
                     mm_x->options().dtype(mm_y_dtype ? static_cast<at::ScalarType>(*mm_y_dtype) : out_type));
  }
  return {at::empty({rows, gmm_weight.size(2)}, gmm_x.options().dtype(out_type)), mm_y,
          permute_out_flag ? at::empty({rows, gmm_x.size(1)}, gmm_x.options()) : at::empty({0}, gmm_x.options())};
}

std::tuple<at::Tensor, at::Tensor> npu_quant_gmm_alltoallv(
    const at::Tensor& gmm_x, const at::Tensor& gmm_weight, const at::Tensor& gmm_x_scale,
    const at::Tensor& gmm_weight_scale, c10::string_view hcom, int64_t ep_world_size, at::IntArrayRef send_counts,
    at::IntArrayRef recv_counts, int64_t gmm_y_dtype, const std::optional<at::Tensor>& send_counts_tensor,
    const std::optional<at::Tensor>& recv_counts_tensor, const std::optional<at::Tensor>& mm_x,
    const std::optional<at::Tensor>& mm_weight, const std::optional<at::Tensor>& mm_x_scale,
    const std::optional<at::Tensor>& mm_weight_scale, const std::optional<at::Tensor>& comm_quant_scale,
    std::optional<int64_t> gmm_x_quant_mode, std::optional<int64_t> gmm_weight_quant_mode,
    std::optional<int64_t> mm_x_quant_mode, std::optional<int64_t> mm_weight_quant_mode,
    std::optional<int64_t> comm_quant_mode, at::OptionalIntArrayRef group_size, std::optional<int64_t> gmm_x_dtype,
    std::optional<int64_t> gmm_weight_dtype, std::optional<int64_t> gmm_x_scale_dtype,
    std::optional<int64_t> gmm_weight_scale_dtype, std::optional<int64_t> mm_x_dtype,
    std::optional<int64_t> mm_weight_dtype, std::optional<int64_t> mm_x_scale_dtype,
    std::optional<int64_t> mm_weight_scale_dtype, std::optional<int64_t> comm_quant_dtype,
    std::optional<int64_t> mm_y_dtype, std::optional<c10::string_view> comm_mode) {
  const char* op = "npu_quant_gmm_alltoallv";
  checkTensorCounts(op, send_counts_tensor, recv_counts_tensor);
  TORCH_CHECK_VALUE(!comm_quant_scale.has_value() && comm_quant_mode.value_or(0) == 0 && !comm_quant_dtype.has_value(),
                    op, ": quantising the exchange (comm_quant_*) is not supported; leave it unset");
  const QuantForm form = checkQuant(
      op, gmm_x, gmm_weight, gmm_x_scale, gmm_weight_scale, gmm_y_dtype, gmm_x_quant_mode, gmm_weight_quant_mode,
      {{"gmm_x_dtype", gmm_x_dtype.has_value()}, {"gmm_weight_dtype", gmm_weight_dtype.has_value()},
       {"gmm_x_scale_dtype", gmm_x_scale_dtype.has_value()}, {"gmm_weight_scale_dtype", gmm_weight_scale_dtype.has_value()},
       {"mm_x_dtype", mm_x_dtype.has_value()}, {"mm_weight_dtype", mm_weight_dtype.has_value()},
       {"mm_x_scale_dtype", mm_x_scale_dtype.has_value()}, {"mm_weight_scale_dtype", mm_weight_scale_dtype.has_value()},
       {"mm_x_quant_mode", mm_x_quant_mode.value_or(1) != 1}, {"mm_weight_quant_mode", mm_weight_quant_mode.value_or(1) != 1}});
  const Counts counts = checkCounts(op, gmm_weight, ep_world_size, send_counts, recv_counts, false);
  TORCH_CHECK_VALUE(gmm_x.dim() == 2 && gmm_x.size(0) == total(counts.send), op, ": gmm_x must be (A, H) with A = ",
                    "sum(send_counts) = ", total(counts.send), ", got ", gmm_x.sizes());
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = comm::groupNamed(op, hcom);
  comm::checkWorldSize(op, ep_world_size, group.get());
  at::Tensor gmm_y = groupedMatmul(gmm_x, gmm_weight, counts.send, counts.experts, false, form.x_scale, form.w_scale,
                                   form.out_type);
  at::Tensor unpermuted = regroup(gmm_y, counts.send, counts.experts, /*to_expert_major=*/false);
  at::Tensor y = exchange(*group, unpermuted, perRank(counts.send, counts.experts), perRank(counts.recv, counts.experts));
  return {y, quantSharedExpert(op, mm_x, mm_weight, mm_x_scale, mm_weight_scale, mm_y_dtype, form, gmm_x)};
}

std::tuple<at::Tensor, at::Tensor> npu_quant_gmm_alltoallv_meta(
    const at::Tensor& gmm_x, const at::Tensor& gmm_weight, const at::Tensor& gmm_x_scale,
    const at::Tensor& gmm_weight_scale, c10::string_view hcom, int64_t ep_world_size, at::IntArrayRef send_counts,
    at::IntArrayRef recv_counts, int64_t gmm_y_dtype, const std::optional<at::Tensor>& send_counts_tensor,
    const std::optional<at::Tensor>& recv_counts_tensor, const std::optional<at::Tensor>& mm_x,
    const std::optional<at::Tensor>& mm_weight, const std::optional<at::Tensor>& mm_x_scale,
    const std::optional<at::Tensor>& mm_weight_scale, const std::optional<at::Tensor>& comm_quant_scale,
    std::optional<int64_t> gmm_x_quant_mode, std::optional<int64_t> gmm_weight_quant_mode,
    std::optional<int64_t> mm_x_quant_mode, std::optional<int64_t> mm_weight_quant_mode,
    std::optional<int64_t> comm_quant_mode, at::OptionalIntArrayRef group_size, std::optional<int64_t> gmm_x_dtype,
    std::optional<int64_t> gmm_weight_dtype, std::optional<int64_t> gmm_x_scale_dtype,
    std::optional<int64_t> gmm_weight_scale_dtype, std::optional<int64_t> mm_x_dtype,
    std::optional<int64_t> mm_weight_dtype, std::optional<int64_t> mm_x_scale_dtype,
    std::optional<int64_t> mm_weight_scale_dtype, std::optional<int64_t> comm_quant_dtype,
    std::optional<int64_t> mm_y_dtype, std::optional<c10::string_view> comm_mode) {
  const Counts counts = checkCounts("npu_quant_gmm_alltoallv", gmm_weight, ep_world_size, send_counts, recv_counts,
                                    false);
  const auto out_type = static_cast<at::ScalarType>(gmm_y_dtype);
  at::Tensor mm_y = at::empty({0}, gmm_x.options().dtype(out_type));
  if (mm_x.has_value() && mm_weight.has_value()) {
    mm_y = at::empty({mm_x->size(0), mm_weight->size(1)},
                     mm_x->options().dtype(mm_y_dtype ? static_cast<at::ScalarType>(*mm_y_dtype) : out_type));
  }
  return {at::empty({total(counts.recv), gmm_weight.size(2)}, gmm_x.options().dtype(out_type)), mm_y};
}

}  // namespace at_npu::native
