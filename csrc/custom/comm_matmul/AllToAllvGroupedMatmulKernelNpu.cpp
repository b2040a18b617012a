// AllToAllvGroupedMatmulKernelNpu.cpp - the expert-parallel grouped matmuls fused with all_to_all_v:
// npu_alltoallv_gmm (exchange tokens, group them by local expert, one matmul per expert) and npu_gmm_alltoallv (one
// matmul per expert, regroup by source rank, exchange back), each with an optional shared-expert matmul. The counts
// are host lists (send_counts[r * e + j]: rows for rank r's expert j), so nothing waits for the device.
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

// One matmul per local expert over its consecutive rows (expert-major layout).
at::Tensor groupedMatmul(const at::Tensor& rows, const at::Tensor& weight, const std::vector<int64_t>& counts,
                         int64_t experts, bool trans_weight) {
  const int64_t world = static_cast<int64_t>(counts.size()) / experts;
  const int64_t out_cols = trans_weight ? weight.size(1) : weight.size(2);
  std::vector<at::Tensor> outs;
  int64_t at = 0;
  for (int64_t j = 0; j < experts; ++j) {
    int64_t n = 0;
    for (int64_t r = 0; r < world; ++r) n += counts[r * experts + j];
    const at::Tensor w = trans_weight ? weight[j].t() : weight[j];
    outs.push_back(at::matmul(rows.narrow(0, at, n), w));
    at += n;
  }
  return outs.empty() ? at::empty({0, out_cols}, rows.options()) : at::cat(outs);
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
  at::Tensor input = rows.contiguous();
  at::Tensor output = at::empty({total(recv), rows.size(1)}, rows.options());
  group.alltoall_base(output, input, recv, send)->wait();
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

}  // namespace at_npu::native
