// MoeDistributeUtils.h - what the one-phase and split-phase expert-parallel exchanges share: the expert layout
// over the EP group and its checks, the routing check, and the all_to_all_v exchange with its host-side counts.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "csrc/distributed/ProcessGroupHCCL.h"

namespace at_npu::native::moe_distribute {

struct ExpertLayout {
  int64_t world;    // ranks of the EP group
  int64_t experts;  // moe_expert_num
  int64_t local;    // experts per rank (expert e lives on rank e / local)
};

// The EP group's size and this rank's place in it, and the experts spread evenly over its ranks.
inline ExpertLayout expertLayout(const char* op, int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num) {
  TORCH_CHECK_VALUE(ep_world_size >= 1, op, ": ep_world_size must be at least 1, got ", ep_world_size);
  TORCH_CHECK_VALUE(ep_rank_id >= 0 && ep_rank_id < ep_world_size, op, ": ep_rank_id must be in [0, ", ep_world_size,
                    "), got ", ep_rank_id);
  TORCH_CHECK_VALUE(moe_expert_num >= 1 && moe_expert_num % ep_world_size == 0, op, ": moe_expert_num (",
                    moe_expert_num, ") must be a positive multiple of ep_world_size (", ep_world_size, ")");
  return {ep_world_size, moe_expert_num, moe_expert_num / ep_world_size};
}

inline void checkRouting(const char* op, const at::Tensor& expert_ids, int64_t tokens) {
  TORCH_CHECK_VALUE(expert_ids.dim() == 2 && expert_ids.size(0) == tokens, op,
                    ": expert_ids must be (BS, K) with BS = ", tokens, ", got ", expert_ids.sizes());
  TORCH_CHECK_TYPE(expert_ids.scalar_type() == at::kInt, op, ": expert_ids must be int32, got ",
                   expert_ids.scalar_type());
}

// Rows a rank can receive: every token of every rank, min(local experts, K) times.
inline int64_t receiveCapacity(int64_t tokens, int64_t k, int64_t global_bs, const ExpertLayout& layout) {
  return (global_bs > 0 ? global_bs : tokens * layout.world) * std::min(layout.local, k);
}

// A small tensor's values on the host (the exchange's counts are sized there).
inline std::vector<int64_t> hostValues(const at::Tensor& t) {
  at::Tensor cpu = t.to(at::kLong).cpu().contiguous();
  return std::vector<int64_t>(cpu.const_data_ptr<int64_t>(), cpu.const_data_ptr<int64_t>() + cpu.numel());
}

inline at::Tensor indexTensor(const std::vector<int64_t>& index, const at::Tensor& like) {
  at::Tensor host = at::empty({static_cast<int64_t>(index.size())}, at::TensorOptions().dtype(at::kLong));
  std::copy(index.begin(), index.end(), host.mutable_data_ptr<int64_t>());
  return host.to(like.device());
}

// all_to_all_v of `send`'s rows: send_counts[r] rows go to rank r, recv_counts[r] rows come from it.
inline at::Tensor exchange(c10d_npu::ProcessGroupHCCL& group, const at::Tensor& send, std::vector<int64_t> send_counts,
                           std::vector<int64_t> recv_counts) {
  std::vector<int64_t> shape = send.sizes().vec();
  shape[0] = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
  at::Tensor received = at::empty(shape, send.options());
  at::Tensor input = send.contiguous();
  group.alltoall_base(received, input, recv_counts, send_counts)->wait();
  return received;
}

}  // namespace at_npu::native::moe_distribute
