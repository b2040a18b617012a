// MoeDistributeKernelNpu.cpp - expert-parallel token exchange: npu_moe_distribute_dispatch(_v2) sends each token's
// top-k copies (optionally int8-quantised per row) to the ranks holding those experts, grouped by expert on arrival;
// npu_moe_distribute_combine(_v2, _add_rms_norm) sends the experts' outputs back and sums each token's k results
// weighted by its expert scales (then adds the residual and RMS-normalises, for _add_rms_norm). Both are all_to_all_v exchanges on the hccl group `group_ep`. The message sizes depend on the
// routing, so the adapters read the per-expert counts on the host (a synchronisation, as a data-dependent split is).
//
// Layouts passed from dispatch to combine (opaque to callers, as upstream says): expand_idx[t * K + k] is the row
// of token t's k-th copy in this rank's send order (sorted by expert, so by destination rank); ep_recv_counts holds
// prefix sums of the rows received, ordered (local expert, source rank) as expand_x is.
#include <ATen/ops/arange.h>
#include <ATen/ops/argsort.h>
#include <ATen/ops/bincount.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <numeric>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/comm_matmul/CommGroup.h"
#include "csrc/custom/moe/MoeDistributeUtils.h"

namespace at_npu::native {
namespace {

using namespace moe_distribute;

ExpertLayout checkLayout(const char* op, int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num,
                         int64_t tp_world_size, int64_t shared_expert_rank_num, int64_t expert_shard_type) {
  const ExpertLayout layout = expertLayout(op, ep_world_size, ep_rank_id, moe_expert_num);
  TORCH_CHECK_VALUE(tp_world_size == 0 || tp_world_size == 1, op,
                    ": tp_world_size must be 0 or 1 (no TP-domain exchange, as upstream), got ", tp_world_size);
  TORCH_CHECK_VALUE(shared_expert_rank_num == 0 && expert_shard_type == 0, op,
                    ": ranks dedicated to shared experts (shared_expert_rank_num > 0) are not supported; run the "
                    "shared expert on every rank and pass its output to combine as shared_expert_x");
  return layout;
}

// Rows this rank sends to each rank: its tokens' copies per expert, summed over each rank's experts.
std::vector<int64_t> perRank(const std::vector<int64_t>& per_expert, const ExpertLayout& layout) {
  std::vector<int64_t> counts(layout.world, 0);
  for (int64_t e = 0; e < layout.experts; ++e) counts[e / layout.local] += per_expert[e];
  return counts;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
npu_moe_distribute_dispatch(const at::Tensor& x, const at::Tensor& expert_ids, c10::string_view group_ep,
                            int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num,
                            const std::optional<at::Tensor>& scales, const std::optional<at::Tensor>& x_active_mask,
                            const std::optional<at::Tensor>& expert_scales, c10::string_view group_tp,
                            int64_t tp_world_size, int64_t tp_rank_id, int64_t expert_shard_type,
                            int64_t shared_expert_num, int64_t shared_expert_rank_num, int64_t quant_mode,
                            int64_t global_bs, int64_t expert_token_nums_type) {
  const char* op = "npu_moe_distribute_dispatch";
  const ExpertLayout layout = checkLayout(op, ep_world_size, ep_rank_id, moe_expert_num, tp_world_size,
                                          shared_expert_rank_num, expert_shard_type);
  TORCH_CHECK_VALUE(x.dim() == 2, op, ": x must be (BS, H), got ", x.sizes());
  TORCH_CHECK_TYPE(at::isFloatingType(x.scalar_type()), op, ": x must be float16, bfloat16 or float32, got ",
                   x.scalar_type());
  checkRouting(op, expert_ids, x.size(0));
  TORCH_CHECK_VALUE(quant_mode == 0 || quant_mode == 2, op, ": quant_mode must be 0 (none) or 2 (dynamic int8), got ",
                    quant_mode);
  TORCH_CHECK_VALUE(expert_token_nums_type == 0 || expert_token_nums_type == 1, op,
                    ": expert_token_nums_type must be 0 (prefix sums) or 1 (counts), got ", expert_token_nums_type);
  TORCH_CHECK_VALUE(!scales.has_value() || (scales->dim() == 2 && scales->size(0) == moe_expert_num &&
                                            scales->size(1) == x.size(1)),
                    op, ": scales must be (moe_expert_num, H) = (", moe_expert_num, ", ", x.size(1), ")");
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = comm::groupNamed(op, group_ep);
  comm::checkWorldSize(op, ep_world_size, group.get());
  TORCH_CHECK_VALUE(ep_rank_id == group->getRank(), op, ": ep_rank_id ", ep_rank_id, " is not this rank's (",
                    group->getRank(), ") in the named group");
  const int64_t tokens = x.size(0), k = expert_ids.size(1), hidden = x.size(1);

  // Send order: the token copies sorted by expert (stable), so by destination rank.
  const at::Tensor flat_ids = expert_ids.reshape({-1}).to(at::kLong);
  const std::vector<int64_t> ids = hostValues(flat_ids);
  for (int64_t e : ids) {
    TORCH_CHECK_VALUE(e >= 0 && e < moe_expert_num, op, ": expert_ids must be in [0, ", moe_expert_num, "), got ", e);
  }
  const at::Tensor order = at::argsort(flat_ids, /*stable=*/true);
  at::Tensor expand_idx = at::empty_like(order);
  expand_idx.index_put_({order}, at::arange(order.numel(), order.options()));
  at::Tensor rows = x.index_select(0, at::floor_divide(order, k));
  const at::Tensor sorted_ids = flat_ids.index_select(0, order);
  at::Tensor row_scales;  // dynamic quantisation: one float scale per row
  if (quant_mode == 2) {
    at::Tensor values = rows.to(at::kFloat);
    if (scales.has_value()) values = values * scales->to(at::kFloat).index_select(0, sorted_ids);
    row_scales = values.abs().amax(-1).div(127.0).clamp_min(1e-12);
    rows = values.div(row_scales.unsqueeze(-1)).round().clamp(-128, 127).to(at::kChar);
  }

  std::vector<int64_t> per_expert(moe_expert_num, 0);
  for (int64_t e : ids) ++per_expert[e];
  const std::vector<int64_t> send_counts = perRank(per_expert, layout);
  // Every rank learns how many rows each rank sends to each of its experts: counts[s][j].
  at::Tensor my_counts = indexTensor(per_expert, x).view({layout.world, layout.local});
  const std::vector<int64_t> counts =
      hostValues(exchange(*group, my_counts, std::vector<int64_t>(layout.world, 1),
                          std::vector<int64_t>(layout.world, 1)));
  std::vector<int64_t> recv_counts(layout.world, 0);
  for (int64_t s = 0; s < layout.world; ++s) {
    for (int64_t j = 0; j < layout.local; ++j) recv_counts[s] += counts[s * layout.local + j];
  }
  const int64_t received_rows = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
  const int64_t capacity = receiveCapacity(tokens, k, global_bs, layout);
  TORCH_CHECK_VALUE(received_rows <= capacity, op, ": this rank receives ", received_rows, " rows but expand_x holds ",
                    capacity, "; when ranks have different BS, pass global_bs = max BS * ep_world_size");

  // Received rows come source-major; expand_x groups them by local expert, then source rank.
  std::vector<int64_t> source_start(layout.world, 0);
  std::partial_sum(recv_counts.begin(), recv_counts.end() - 1, source_start.begin() + 1);
  std::vector<int64_t> regroup;
  std::vector<int64_t> recv_prefix;
  regroup.reserve(received_rows);
  for (int64_t j = 0; j < layout.local; ++j) {
    for (int64_t s = 0; s < layout.world; ++s) {
      int64_t start = source_start[s];
      for (int64_t i = 0; i < j; ++i) start += counts[s * layout.local + i];
      for (int64_t r = 0; r < counts[s * layout.local + j]; ++r) regroup.push_back(start + r);
      recv_prefix.push_back(static_cast<int64_t>(regroup.size()));
    }
  }
  const at::Tensor where = indexTensor(regroup, x);
  auto place = [&](const at::Tensor& sent, std::vector<int64_t> shape) {
    at::Tensor got = exchange(*group, sent, send_counts, recv_counts).index_select(0, where);
    shape[0] = capacity;
    at::Tensor out = at::zeros(shape, sent.options());
    out.narrow(0, 0, received_rows).copy_(got);
    return out;
  };
  at::Tensor expand_x = place(rows, {capacity, hidden});
  at::Tensor dynamic_scales = quant_mode == 2 ? place(row_scales, {capacity}) : at::empty({0}, x.options().dtype(at::kFloat));
  at::Tensor expand_scales =
      expert_scales.has_value()
          ? place(expert_scales->to(at::kFloat).reshape({-1}).index_select(0, order), {capacity})
          : at::empty({0}, x.options().dtype(at::kFloat));

  std::vector<int64_t> per_local(layout.local, 0);
  for (int64_t s = 0; s < layout.world; ++s) {
    for (int64_t j = 0; j < layout.local; ++j) per_local[j] += counts[s * layout.local + j];
  }
  if (expert_token_nums_type == 0) std::partial_sum(per_local.begin(), per_local.end(), per_local.begin());
  at::Tensor expert_token_nums = indexTensor(per_local, x);
  at::Tensor ep_recv_counts = indexTensor(recv_prefix, x).to(at::kInt);
  at::Tensor tp_recv_counts = at::zeros({tp_world_size}, x.options().dtype(at::kInt));
  return {expand_x, dynamic_scales, expand_idx.to(at::kInt), expert_token_nums, ep_recv_counts, tp_recv_counts,
          expand_scales};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
npu_moe_distribute_dispatch_meta(const at::Tensor& x, const at::Tensor& expert_ids, c10::string_view group_ep,
                                 int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num,
                                 const std::optional<at::Tensor>& scales,
                                 const std::optional<at::Tensor>& x_active_mask,
                                 const std::optional<at::Tensor>& expert_scales, c10::string_view group_tp,
                                 int64_t tp_world_size, int64_t tp_rank_id, int64_t expert_shard_type,
                                 int64_t shared_expert_num, int64_t shared_expert_rank_num, int64_t quant_mode,
                                 int64_t global_bs, int64_t expert_token_nums_type) {
  const char* op = "npu_moe_distribute_dispatch";
  const ExpertLayout layout = checkLayout(op, ep_world_size, ep_rank_id, moe_expert_num, tp_world_size,
                                          shared_expert_rank_num, expert_shard_type);
  TORCH_CHECK_VALUE(x.dim() == 2, op, ": x must be (BS, H), got ", x.sizes());
  checkRouting(op, expert_ids, x.size(0));
  const int64_t capacity = receiveCapacity(x.size(0), expert_ids.size(1), global_bs, layout);
  const auto f32 = x.options().dtype(at::kFloat);
  return {at::empty({capacity, x.size(1)}, quant_mode == 2 ? x.options().dtype(at::kChar) : x.options()),
          at::empty({quant_mode == 2 ? capacity : 0}, f32),
          at::empty({expert_ids.numel()}, x.options().dtype(at::kInt)),
          at::empty({layout.local}, x.options().dtype(at::kLong)),
          at::empty({layout.world * layout.local}, x.options().dtype(at::kInt)),
          at::empty({tp_world_size}, x.options().dtype(at::kInt)),
          at::empty({expert_scales.has_value() ? capacity : 0}, f32)};
}

at::Tensor npu_moe_distribute_combine(
    const at::Tensor& expand_x, const at::Tensor& expert_ids, const at::Tensor& expand_idx,
    const at::Tensor& ep_send_counts, const at::Tensor& expert_scales, c10::string_view group_ep,
    int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num, const std::optional<at::Tensor>& tp_send_counts,
    const std::optional<at::Tensor>& x_active_mask, const std::optional<at::Tensor>& activation_scale,
    const std::optional<at::Tensor>& weight_scale, const std::optional<at::Tensor>& group_list,
    const std::optional<at::Tensor>& expand_scales, const std::optional<at::Tensor>& shared_expert_x,
    c10::string_view group_tp, int64_t tp_world_size, int64_t tp_rank_id, int64_t expert_shard_type,
    int64_t shared_expert_num, int64_t shared_expert_rank_num, int64_t global_bs, int64_t out_dtype,
    int64_t comm_quant_mode, int64_t group_list_type) {
  const char* op = "npu_moe_distribute_combine";
  const ExpertLayout layout = checkLayout(op, ep_world_size, ep_rank_id, moe_expert_num, tp_world_size,
                                          shared_expert_rank_num, expert_shard_type);
  TORCH_CHECK_VALUE(expand_x.dim() == 2, op, ": expand_x must be (A, H), got ", expand_x.sizes());
  TORCH_CHECK_TYPE(at::isFloatingType(expand_x.scalar_type()), op, ": expand_x must be the experts' float16, "
                   "bfloat16 or float32 output (int8 expand_x with activation/weight scales is not supported), got ",
                   expand_x.scalar_type());
  TORCH_CHECK_VALUE(!activation_scale.has_value() && !weight_scale.has_value() && comm_quant_mode == 0, op,
                    ": activation_scale, weight_scale and comm_quant_mode quantise the exchange, which is not "
                    "supported; pass the experts' float output");
  const int64_t tokens = expert_ids.size(0), k = expert_ids.dim() == 2 ? expert_ids.size(1) : 0;
  checkRouting(op, expert_ids, tokens);
  TORCH_CHECK_VALUE(expert_scales.sizes() == expert_ids.sizes(), op, ": expert_scales must have expert_ids' shape ",
                    expert_ids.sizes(), ", got ", expert_scales.sizes());
  TORCH_CHECK_VALUE(expand_idx.numel() == tokens * k, op, ": expand_idx must have BS * K = ", tokens * k,
                    " values (dispatch's output), got ", expand_idx.numel());
  TORCH_CHECK_VALUE(ep_send_counts.numel() == layout.world * layout.local, op, ": ep_send_counts must be dispatch's ",
                    "ep_recv_counts (", layout.world * layout.local, " values), got ", ep_send_counts.numel());
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = comm::groupNamed(op, group_ep);
  comm::checkWorldSize(op, ep_world_size, group.get());

  // Rows go back to their source ranks in the order each source sent them (by expert).
  const std::vector<int64_t> prefix = hostValues(ep_send_counts);
  std::vector<int64_t> block(prefix.size());
  for (size_t i = 0; i < prefix.size(); ++i) block[i] = prefix[i] - (i == 0 ? 0 : prefix[i - 1]);
  std::vector<int64_t> back_order;
  std::vector<int64_t> send_counts(layout.world, 0);
  for (int64_t s = 0; s < layout.world; ++s) {
    for (int64_t j = 0; j < layout.local; ++j) {
      const int64_t at_block = j * layout.world + s;
      const int64_t start = at_block == 0 ? 0 : prefix[at_block - 1];
      for (int64_t r = 0; r < block[at_block]; ++r) back_order.push_back(start + r);
      send_counts[s] += block[at_block];
    }
  }
  TORCH_CHECK_VALUE(back_order.empty() || prefix.back() <= expand_x.size(0), op, ": ep_send_counts says ",
                    prefix.back(), " rows but expand_x has ", expand_x.size(0));
  std::vector<int64_t> per_expert(moe_expert_num, 0);
  for (int64_t e : hostValues(expert_ids.reshape({-1}))) {
    TORCH_CHECK_VALUE(e >= 0 && e < moe_expert_num, op, ": expert_ids must be in [0, ", moe_expert_num, "), got ", e);
    ++per_expert[e];
  }
  const std::vector<int64_t> recv_counts = perRank(per_expert, layout);
  at::Tensor sent = expand_x.index_select(0, indexTensor(back_order, expand_x));
  at::Tensor back = exchange(*group, sent, send_counts, recv_counts);
  // back is in this rank's dispatch send order: token t's k-th copy is row expand_idx[t * K + k].
  at::Tensor copies = back.index_select(0, expand_idx.reshape({-1}).to(at::kLong)).to(at::kFloat);
  at::Tensor out = (copies.view({tokens, k, expand_x.size(1)}) * expert_scales.to(at::kFloat).unsqueeze(-1)).sum(1);
  if (shared_expert_x.has_value()) out = out + shared_expert_x->to(at::kFloat);
  return out.to(expand_x.scalar_type());
}

at::Tensor npu_moe_distribute_combine_meta(
    const at::Tensor& expand_x, const at::Tensor& expert_ids, const at::Tensor& expand_idx,
    const at::Tensor& ep_send_counts, const at::Tensor& expert_scales, c10::string_view group_ep,
    int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num, const std::optional<at::Tensor>& tp_send_counts,
    const std::optional<at::Tensor>& x_active_mask, const std::optional<at::Tensor>& activation_scale,
    const std::optional<at::Tensor>& weight_scale, const std::optional<at::Tensor>& group_list,
    const std::optional<at::Tensor>& expand_scales, const std::optional<at::Tensor>& shared_expert_x,
    c10::string_view group_tp, int64_t tp_world_size, int64_t tp_rank_id, int64_t expert_shard_type,
    int64_t shared_expert_num, int64_t shared_expert_rank_num, int64_t global_bs, int64_t out_dtype,
    int64_t comm_quant_mode, int64_t group_list_type) {
  const char* op = "npu_moe_distribute_combine";
  checkLayout(op, ep_world_size, ep_rank_id, moe_expert_num, tp_world_size, shared_expert_rank_num,
              expert_shard_type);
  checkRouting(op, expert_ids, expert_ids.size(0));
  return at::empty({expert_ids.size(0), expand_x.size(1)}, expand_x.options());
}

namespace {

// v2's special experts (zero / copy / constant experts, elastic scaling) and dtype selectors for chip formats.
void checkV2Extras(const char* op, int64_t zero_expert_num, int64_t copy_expert_num, int64_t const_expert_num,
                   bool elastic, std::initializer_list<std::pair<const char*, bool>> formats) {
  TORCH_CHECK_VALUE(zero_expert_num == 0 && copy_expert_num == 0 && const_expert_num == 0, op,
                    ": zero, copy and constant experts are not supported; route to real experts only");
  TORCH_CHECK_VALUE(!elastic, op, ": elastic_info (elastic expert-parallel scaling) is not supported; leave it None");
  for (const auto& [name, given] : formats) {
    TORCH_CHECK_VALUE(!given, op, ": ", name, " selects a chip number format (float8 / hifloat8 / mx); leave it None");
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
npu_moe_distribute_dispatch_v2(const at::Tensor& x, const at::Tensor& expert_ids, c10::string_view group_ep,
                               int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num,
                               const std::optional<at::Tensor>& scales, const std::optional<at::Tensor>& x_active_mask,
                               const std::optional<at::Tensor>& expert_scales,
                               const std::optional<at::Tensor>& elastic_info,
                               const std::optional<at::Tensor>& performance_info, c10::string_view group_tp,
                               int64_t tp_world_size, int64_t tp_rank_id, int64_t expert_shard_type,
                               int64_t shared_expert_num, int64_t shared_expert_rank_num, int64_t quant_mode,
                               int64_t global_bs, int64_t expert_token_nums_type, c10::string_view comm_alg,
                               int64_t zero_expert_num, int64_t copy_expert_num, int64_t const_expert_num,
                               std::optional<int64_t> y_dtype, std::optional<int64_t> x_dtype,
                               std::optional<int64_t> scales_dtype) {
  checkV2Extras("npu_moe_distribute_dispatch_v2", zero_expert_num, copy_expert_num, const_expert_num,
                elastic_info.has_value(), {{"y_dtype", y_dtype.has_value()}, {"x_dtype", x_dtype.has_value()},
                                           {"scales_dtype", scales_dtype.has_value()}});
  // The third output (assist_info_for_combine) is dispatch's expand_idx: combine_v2 takes it back.
  return npu_moe_distribute_dispatch(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, scales,
                                     x_active_mask, expert_scales, group_tp, tp_world_size, tp_rank_id,
                                     expert_shard_type, shared_expert_num, shared_expert_rank_num, quant_mode,
                                     global_bs, expert_token_nums_type);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
npu_moe_distribute_dispatch_v2_meta(const at::Tensor& x, const at::Tensor& expert_ids, c10::string_view group_ep,
                                    int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num,
                                    const std::optional<at::Tensor>& scales,
                                    const std::optional<at::Tensor>& x_active_mask,
                                    const std::optional<at::Tensor>& expert_scales,
                                    const std::optional<at::Tensor>& elastic_info,
                                    const std::optional<at::Tensor>& performance_info, c10::string_view group_tp,
                                    int64_t tp_world_size, int64_t tp_rank_id, int64_t expert_shard_type,
                                    int64_t shared_expert_num, int64_t shared_expert_rank_num, int64_t quant_mode,
                                    int64_t global_bs, int64_t expert_token_nums_type, c10::string_view comm_alg,
                                    int64_t zero_expert_num, int64_t copy_expert_num, int64_t const_expert_num,
                                    std::optional<int64_t> y_dtype, std::optional<int64_t> x_dtype,
                                    std::optional<int64_t> scales_dtype) {
  return npu_moe_distribute_dispatch_meta(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, scales,
                                          x_active_mask, expert_scales, group_tp, tp_world_size, tp_rank_id,
                                          expert_shard_type, shared_expert_num, shared_expert_rank_num, quant_mode,
                                          global_bs, expert_token_nums_type);
}

at::Tensor npu_moe_distribute_combine_v2(
    const at::Tensor& expand_x, const at::Tensor& expert_ids, const at::Tensor& assist_info_for_combine,
    const at::Tensor& ep_send_counts, const at::Tensor& expert_scales, c10::string_view group_ep,
    int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num, const std::optional<at::Tensor>& tp_send_counts,
    const std::optional<at::Tensor>& x_active_mask, const std::optional<at::Tensor>& expand_scales,
    const std::optional<at::Tensor>& shared_expert_x, const std::optional<at::Tensor>& elastic_info,
    const std::optional<at::Tensor>& ori_x, const std::optional<at::Tensor>& const_expert_alpha_1,
    const std::optional<at::Tensor>& const_expert_alpha_2, const std::optional<at::Tensor>& const_expert_v,
    const std::optional<at::Tensor>& performance_info, c10::string_view group_tp, int64_t tp_world_size,
    int64_t tp_rank_id, int64_t expert_shard_type, int64_t shared_expert_num, int64_t shared_expert_rank_num,
    int64_t global_bs, int64_t comm_quant_mode, c10::string_view comm_alg, int64_t zero_expert_num,
    int64_t copy_expert_num, int64_t const_expert_num) {
  checkV2Extras("npu_moe_distribute_combine_v2", zero_expert_num, copy_expert_num, const_expert_num,
                elastic_info.has_value(), {});
  return npu_moe_distribute_combine(expand_x, expert_ids, assist_info_for_combine, ep_send_counts, expert_scales,
                                    group_ep, ep_world_size, ep_rank_id, moe_expert_num, tp_send_counts,
                                    x_active_mask, std::nullopt, std::nullopt, std::nullopt, expand_scales,
                                    shared_expert_x, group_tp, tp_world_size, tp_rank_id, expert_shard_type,
                                    shared_expert_num, shared_expert_rank_num, global_bs, 0, comm_quant_mode, 0);
}

at::Tensor npu_moe_distribute_combine_v2_meta(
    const at::Tensor& expand_x, const at::Tensor& expert_ids, const at::Tensor& assist_info_for_combine,
    const at::Tensor& ep_send_counts, const at::Tensor& expert_scales, c10::string_view group_ep,
    int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num, const std::optional<at::Tensor>& tp_send_counts,
    const std::optional<at::Tensor>& x_active_mask, const std::optional<at::Tensor>& expand_scales,
    const std::optional<at::Tensor>& shared_expert_x, const std::optional<at::Tensor>& elastic_info,
    const std::optional<at::Tensor>& ori_x, const std::optional<at::Tensor>& const_expert_alpha_1,
    const std::optional<at::Tensor>& const_expert_alpha_2, const std::optional<at::Tensor>& const_expert_v,
    const std::optional<at::Tensor>& performance_info, c10::string_view group_tp, int64_t tp_world_size,
    int64_t tp_rank_id, int64_t expert_shard_type, int64_t shared_expert_num, int64_t shared_expert_rank_num,
    int64_t global_bs, int64_t comm_quant_mode, c10::string_view comm_alg, int64_t zero_expert_num,
    int64_t copy_expert_num, int64_t const_expert_num) {
  return at::empty({expert_ids.size(0), expand_x.size(1)}, expand_x.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_distribute_combine_add_rms_norm(
    const at::Tensor& expand_x, const at::Tensor& expert_ids, const at::Tensor& expand_idx,
    const at::Tensor& ep_send_counts, const at::Tensor& expert_scales, const at::Tensor& residual_x,
    const at::Tensor& gamma, c10::string_view group_ep, int64_t ep_world_size, int64_t ep_rank_id,
    int64_t moe_expert_num, const std::optional<at::Tensor>& tp_send_counts,
    const std::optional<at::Tensor>& x_active_mask, const std::optional<at::Tensor>& activation_scale,
    const std::optional<at::Tensor>& weight_scale, const std::optional<at::Tensor>& group_list,
    const std::optional<at::Tensor>& expand_scales, const std::optional<at::Tensor>& shared_expert_x,
    const std::optional<at::Tensor>& elastic_info, const std::optional<at::Tensor>& ori_x,
    const std::optional<at::Tensor>& const_expert_alpha_1, const std::optional<at::Tensor>& const_expert_alpha_2,
    const std::optional<at::Tensor>& const_expert_v, c10::string_view group_tp, int64_t tp_world_size,
    int64_t tp_rank_id, int64_t expert_shard_type, int64_t shared_expert_num, int64_t shared_expert_rank_num,
    int64_t global_bs, int64_t out_dtype, int64_t comm_quant_mode, int64_t group_list_type,
    c10::string_view comm_alg, double norm_eps, int64_t zero_expert_num, int64_t copy_expert_num,
    int64_t const_expert_num) {
  const char* op = "npu_moe_distribute_combine_add_rms_norm";
  checkV2Extras(op, zero_expert_num, copy_expert_num, const_expert_num, elastic_info.has_value(), {});
  const int64_t tokens = expert_ids.size(0), hidden = expand_x.size(-1);
  TORCH_CHECK_VALUE(residual_x.numel() == tokens * hidden && residual_x.size(-1) == hidden, op,
                    ": residual_x must be (BS, 1, H) = (", tokens, ", 1, ", hidden, "), got ", residual_x.sizes());
  TORCH_CHECK_VALUE(gamma.dim() == 1 && gamma.size(0) == hidden, op, ": gamma must be (H,) = (", hidden, ",), got ",
                    gamma.sizes());
  at::Tensor combined = npu_moe_distribute_combine(
      expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, group_ep, ep_world_size, ep_rank_id,
      moe_expert_num, tp_send_counts, x_active_mask, activation_scale, weight_scale, group_list, expand_scales,
      shared_expert_x, group_tp, tp_world_size, tp_rank_id, expert_shard_type, shared_expert_num,
      shared_expert_rank_num, global_bs, out_dtype, comm_quant_mode, group_list_type);
  at::Tensor sum = combined.to(at::kFloat).view({tokens, 1, hidden}) + residual_x.to(at::kFloat).view({tokens, 1, hidden});
  at::Tensor rstd = at::rsqrt(sum.pow(2).mean(-1, /*keepdim=*/true) + norm_eps);
  at::Tensor y = sum * rstd * gamma.to(at::kFloat);
  return {y.to(residual_x.scalar_type()), rstd, sum.to(residual_x.scalar_type())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_distribute_combine_add_rms_norm_meta(
    const at::Tensor& expand_x, const at::Tensor& expert_ids, const at::Tensor& expand_idx,
    const at::Tensor& ep_send_counts, const at::Tensor& expert_scales, const at::Tensor& residual_x,
    const at::Tensor& gamma, c10::string_view group_ep, int64_t ep_world_size, int64_t ep_rank_id,
    int64_t moe_expert_num, const std::optional<at::Tensor>& tp_send_counts,
    const std::optional<at::Tensor>& x_active_mask, const std::optional<at::Tensor>& activation_scale,
    const std::optional<at::Tensor>& weight_scale, const std::optional<at::Tensor>& group_list,
    const std::optional<at::Tensor>& expand_scales, const std::optional<at::Tensor>& shared_expert_x,
    const std::optional<at::Tensor>& elastic_info, const std::optional<at::Tensor>& ori_x,
    const std::optional<at::Tensor>& const_expert_alpha_1, const std::optional<at::Tensor>& const_expert_alpha_2,
    const std::optional<at::Tensor>& const_expert_v, c10::string_view group_tp, int64_t tp_world_size,
    int64_t tp_rank_id, int64_t expert_shard_type, int64_t shared_expert_num, int64_t shared_expert_rank_num,
    int64_t global_bs, int64_t out_dtype, int64_t comm_quant_mode, int64_t group_list_type,
    c10::string_view comm_alg, double norm_eps, int64_t zero_expert_num, int64_t copy_expert_num,
    int64_t const_expert_num) {
  const int64_t tokens = expert_ids.size(0), hidden = expand_x.size(-1);
  return {at::empty({tokens, 1, hidden}, residual_x.options()),
          at::empty({tokens, 1, 1}, residual_x.options().dtype(at::kFloat)),
          at::empty({tokens, 1, hidden}, residual_x.options())};
}

}  // namespace at_npu::native
