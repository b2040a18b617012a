// MoeDistributeSplitKernelNpu.cpp - split-phase expert-parallel exchange: npu_moe_distribute_dispatch_setup /
// _teardown and npu_moe_distribute_combine_setup / _teardown give the same results as the one-phase
// npu_moe_distribute_dispatch / npu_moe_distribute_combine (MoeDistributeKernelNpu.cpp), in two calls over the hccl
// group `group_ep`, so callers can overlap other work between them.
//
// How the work is split (the buffers between the calls have upstream's shapes, their contents are this file's):
//  - dispatch_setup sorts the token copies by expert (the send order), quantises them (quant_mode 2), packs them into
//    y and swaps per-expert row counts with every rank; comm_cmd_info carries per send row (destination rank, expert,
//    token, row scale bits) and per (source rank, local expert) the counts both ways.
//  - dispatch_teardown exchanges y's rows (all_to_all_v) and groups them by local expert, as dispatch does;
//    assist_info_for_combine records, per received row, its source rank and its place in that rank's block.
//  - combine_setup turns assist_info_for_combine into the return layout (comm_cmd_info) without communicating;
//  - combine_teardown sends expand_x's rows back (all_to_all_v) and sums each token's K results, as combine does.
// The data move in the teardowns because the setups' outputs (upstream's sizes) cannot hold a received expand_x.
#include <ATen/ops/arange.h>
#include <ATen/ops/argsort.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <numeric>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/comm_matmul/CommGroup.h"
#include "csrc/custom/moe/MoeDistributeUtils.h"

namespace at_npu::native {
namespace {

// int32 words per send-row record in comm_cmd_info and per received-row record in assist_info_for_combine
// (upstream's sizes); only the first few words carry data here, the rest stay zero.
constexpr int64_t kCmdWords = 16;
constexpr int64_t kAssistWords = 128;

int64_t alignUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

using namespace moe_distribute;
using Layout = ExpertLayout;

// The same restrictions as the one-phase ops.
Layout checkLayout(const char* op, int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num,
                   int64_t shared_expert_rank_num, int64_t expert_shard_type) {
  const Layout layout = expertLayout(op, ep_world_size, ep_rank_id, moe_expert_num);
  TORCH_CHECK_VALUE(shared_expert_rank_num == 0 && expert_shard_type == 0, op,
                    ": ranks dedicated to shared experts (shared_expert_rank_num > 0) are not supported; run the "
                    "shared expert on every rank and pass its output to combine_teardown as shared_expert_x");
  return layout;
}

void checkQuantMode(const char* op, int64_t quant_mode) {
  TORCH_CHECK_VALUE(quant_mode == 0 || quant_mode == 2, op,
                    ": quant_mode must be 0 (none) or 2 (dynamic per-token int8), got ", quant_mode,
                    " (static, per-group and mx quantisation are not supported)");
}

// Row width of y (upstream's packing: the row plus its scale, aligned for the chip's DMA).
int64_t sendRowWidth(int64_t hidden, int64_t quant_mode) {
  return quant_mode == 2 ? alignUp(alignUp(hidden, 32) + 4, 512) : alignUp(alignUp(hidden * 2, 32), 512) / 2;
}

int64_t combineRowWidth(int64_t hidden) { return alignUp(alignUp(hidden, 32) + alignUp(hidden, 8) / 8 * 4, 512); }

c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> checkedGroup(const char* op, c10::string_view group_ep,
                                                            int64_t ep_world_size, int64_t ep_rank_id) {
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = comm::groupNamed(op, group_ep);
  comm::checkWorldSize(op, ep_world_size, group.get());
  TORCH_CHECK_VALUE(ep_rank_id == group->getRank(), op, ": ep_rank_id ", ep_rank_id, " is not this rank's (",
                    group->getRank(), ") in the named group");
  return group;
}

// What combine_setup and combine_teardown both take: the experts' (A, H) float output, the routing, and the
// unquantised exchange (`quant_note` ends the comm_quant_mode message).
void checkCombineInput(const char* op, const at::Tensor& expand_x, const at::Tensor& expert_ids,
                       int64_t comm_quant_mode, const char* quant_note) {
  TORCH_CHECK_VALUE(expand_x.dim() == 2, op, ": expand_x must be (A, H), got ", expand_x.sizes());
  TORCH_CHECK_TYPE(at::isFloatingType(expand_x.scalar_type()), op, ": expand_x must be the experts' float16, "
                   "bfloat16 or float32 output, got ", expand_x.scalar_type());
  checkRouting(op, expert_ids, expert_ids.dim() == 2 ? expert_ids.size(0) : -1);
  TORCH_CHECK_VALUE(comm_quant_mode == 0, op, ": comm_quant_mode ", comm_quant_mode,
                    " quantises the exchange, which is not supported; pass 0", quant_note);
}

// comm_cmd_info of dispatch_setup: BS * (K + shared_expert_num) send-row records, then world * local count records.
int64_t dispatchCmdRows(int64_t tokens, int64_t k, int64_t shared_expert_num, const Layout& layout) {
  return tokens * (k + shared_expert_num) + layout.world * layout.local;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_distribute_dispatch_setup_meta(
    const at::Tensor& x, const at::Tensor& expert_ids, c10::string_view group_ep, int64_t ep_world_size,
    int64_t ep_rank_id, int64_t moe_expert_num, const std::optional<at::Tensor>& scales,
    const std::optional<at::Tensor>& x_active_mask, int64_t expert_shard_type, int64_t shared_expert_num,
    int64_t shared_expert_rank_num, int64_t quant_mode, int64_t global_bs, int64_t comm_type,
    c10::string_view comm_alg, std::optional<int64_t> y_dtype) {
  const char* op = "npu_moe_distribute_dispatch_setup";
  const Layout layout = checkLayout(op, ep_world_size, ep_rank_id, moe_expert_num, shared_expert_rank_num,
                                    expert_shard_type);
  TORCH_CHECK_VALUE(x.dim() == 2, op, ": x must be (BS, H), got ", x.sizes());
  TORCH_CHECK_TYPE(at::isFloatingType(x.scalar_type()), op, ": x must be float16, bfloat16 or float32, got ",
                   x.scalar_type());
  checkRouting(op, expert_ids, x.size(0));
  checkQuantMode(op, quant_mode);
  TORCH_CHECK_VALUE(shared_expert_num >= 0, op, ": shared_expert_num must be >= 0, got ", shared_expert_num);
  TORCH_CHECK_VALUE(!y_dtype.has_value(), op, ": y_dtype selects the chip's packed send-buffer format; leave it None "
                    "(y then has x's dtype, which holds quant_mode 2's int8 values exactly)");
  TORCH_CHECK_VALUE(!x_active_mask.has_value(), op,
                    ": x_active_mask (inactive tokens) is not supported; leave it None and route every token");
  const int64_t tokens = x.size(0), k = expert_ids.size(1);
  return {at::empty({tokens * (k + shared_expert_num), sendRowWidth(x.size(1), quant_mode)}, x.options()),
          at::empty({tokens * k}, x.options().dtype(at::kInt)),
          at::empty({dispatchCmdRows(tokens, k, shared_expert_num, layout) * kCmdWords}, x.options().dtype(at::kInt))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_distribute_dispatch_setup(
    const at::Tensor& x, const at::Tensor& expert_ids, c10::string_view group_ep, int64_t ep_world_size,
    int64_t ep_rank_id, int64_t moe_expert_num, const std::optional<at::Tensor>& scales,
    const std::optional<at::Tensor>& x_active_mask, int64_t expert_shard_type, int64_t shared_expert_num,
    int64_t shared_expert_rank_num, int64_t quant_mode, int64_t global_bs, int64_t comm_type,
    c10::string_view comm_alg, std::optional<int64_t> y_dtype) {
  const char* op = "npu_moe_distribute_dispatch_setup";
  // The shape checks are the Meta kernel's; comm_type / comm_alg choose the chip's transport, not the result.
  auto [y, expand_idx, cmd] = npu_moe_distribute_dispatch_setup_meta(
      x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, scales, x_active_mask, expert_shard_type,
      shared_expert_num, shared_expert_rank_num, quant_mode, global_bs, comm_type, comm_alg, y_dtype);
  const Layout layout = checkLayout(op, ep_world_size, ep_rank_id, moe_expert_num, shared_expert_rank_num,
                                    expert_shard_type);
  TORCH_CHECK_VALUE(!scales.has_value() || (scales->dim() == 2 && scales->size(0) == moe_expert_num &&
                                            scales->size(1) == x.size(1)),
                    op, ": scales must be (moe_expert_num, H) = (", moe_expert_num, ", ", x.size(1), ")");
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = checkedGroup(op, group_ep, ep_world_size, ep_rank_id);
  const int64_t tokens = x.size(0), k = expert_ids.size(1), hidden = x.size(1), copies = tokens * k;

  // Send order: the token copies sorted by expert (stable), so by destination rank - dispatch's order.
  const at::Tensor flat_ids = expert_ids.reshape({-1}).to(at::kLong);
  const std::vector<int64_t> ids = hostValues(flat_ids);
  for (int64_t e : ids) {
    TORCH_CHECK_VALUE(e >= 0 && e < moe_expert_num, op, ": expert_ids must be in [0, ", moe_expert_num, "), got ", e);
  }
  const at::Tensor order = at::argsort(flat_ids, /*stable=*/true);
  expand_idx = at::empty_like(order);
  expand_idx.index_put_({order}, at::arange(order.numel(), order.options()));
  at::Tensor rows = x.index_select(0, at::floor_divide(order, k));
  const at::Tensor sorted_ids = flat_ids.index_select(0, order);
  at::Tensor row_scales = at::zeros({copies}, x.options().dtype(at::kFloat));
  if (quant_mode == 2) {  // dynamic quantisation: one float scale per row, as dispatch computes it
    at::Tensor values = rows.to(at::kFloat);
    if (scales.has_value()) values = values * scales->to(at::kFloat).index_select(0, sorted_ids);
    row_scales = values.abs().amax(-1).div(127.0).clamp_min(1e-12);
    rows = values.div(row_scales.unsqueeze(-1)).round().clamp(-128, 127);  // integers: exact in y's float dtype
  }
  y.zero_();
  y.narrow(0, 0, copies).narrow(1, 0, hidden).copy_(rows);

  // Every rank learns how many rows each rank sends to each of its experts: counts[s][j].
  std::vector<int64_t> per_expert(moe_expert_num, 0);
  for (int64_t e : ids) ++per_expert[e];
  at::Tensor my_counts = indexTensor(per_expert, x).view({layout.world, layout.local});
  const std::vector<int64_t> counts = hostValues(exchange(*group, my_counts, std::vector<int64_t>(layout.world, 1),
                                                          std::vector<int64_t>(layout.world, 1)));

  // comm_cmd_info, viewed as records of kCmdWords int32: send row r = [destination rank, expert, token, scale bits];
  // count record (s, j) = [rows rank s sends to my expert j, rows I send to rank s's expert j].
  at::Tensor records = at::zeros({dispatchCmdRows(tokens, k, shared_expert_num, layout), kCmdWords},
                                 x.options().dtype(at::kInt));
  at::Tensor send_rows = records.narrow(0, 0, copies);
  send_rows.select(1, 0).copy_(at::floor_divide(sorted_ids, layout.local));
  send_rows.select(1, 1).copy_(sorted_ids);
  send_rows.select(1, 2).copy_(at::floor_divide(order, k));
  send_rows.select(1, 3).copy_(row_scales.to(at::kFloat).contiguous().view(at::kInt));
  std::vector<int64_t> count_words;
  for (int64_t i = 0; i < layout.world * layout.local; ++i) {
    count_words.push_back(counts[i]);
    count_words.push_back(per_expert[i]);
  }
  records.narrow(0, records.size(0) - layout.world * layout.local, layout.world * layout.local)
      .narrow(1, 0, 2)
      .copy_(indexTensor(count_words, x).view({layout.world * layout.local, 2}));
  cmd = records.view({-1});
  return {y, expand_idx.to(at::kInt), cmd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_moe_distribute_dispatch_teardown_meta(
    const at::Tensor& x, const at::Tensor& y, const at::Tensor& expert_ids, const at::Tensor& comm_cmd_info,
    c10::string_view group_ep, int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num,
    int64_t expert_shard_type, int64_t shared_expert_num, int64_t shared_expert_rank_num, int64_t quant_mode,
    int64_t global_bs, int64_t expert_token_nums_type, int64_t comm_type, c10::string_view comm_alg) {
  const char* op = "npu_moe_distribute_dispatch_teardown";
  const Layout layout = checkLayout(op, ep_world_size, ep_rank_id, moe_expert_num, shared_expert_rank_num,
                                    expert_shard_type);
  TORCH_CHECK_VALUE(x.dim() == 2, op, ": x must be (BS, H), got ", x.sizes());
  checkRouting(op, expert_ids, x.size(0));
  checkQuantMode(op, quant_mode);
  TORCH_CHECK_VALUE(expert_token_nums_type == 0 || expert_token_nums_type == 1, op,
                    ": expert_token_nums_type must be 0 (prefix sums) or 1 (counts), got ", expert_token_nums_type);
  const int64_t tokens = x.size(0), k = expert_ids.size(1), hidden = x.size(1);
  TORCH_CHECK_VALUE(y.dim() == 2 && y.size(0) >= tokens * k && y.size(1) >= hidden, op,
                    ": y must be dispatch_setup's y for these x and expert_ids (at least (", tokens * k, ", ", hidden,
                    ")), got ", y.sizes());
  TORCH_CHECK_TYPE(comm_cmd_info.scalar_type() == at::kInt, op,
                   ": comm_cmd_info must be dispatch_setup's int32 comm_cmd_info, got ", comm_cmd_info.scalar_type());
  TORCH_CHECK_VALUE(comm_cmd_info.numel() == dispatchCmdRows(tokens, k, shared_expert_num, layout) * kCmdWords, op,
                    ": comm_cmd_info must be dispatch_setup's comm_cmd_info for the same x, expert_ids and "
                    "shared_expert_num (", dispatchCmdRows(tokens, k, shared_expert_num, layout) * kCmdWords,
                    " values), got ", comm_cmd_info.numel(), " values");
  const int64_t capacity = receiveCapacity(tokens, k, global_bs, layout);
  return {at::empty({capacity, hidden}, quant_mode == 2 ? y.options().dtype(at::kChar) : y.options()),
          at::empty({capacity}, x.options().dtype(at::kFloat)),
          at::empty({capacity * kAssistWords}, x.options().dtype(at::kInt)),
          at::empty({layout.local}, x.options().dtype(at::kLong))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_moe_distribute_dispatch_teardown(
    const at::Tensor& x, const at::Tensor& y, const at::Tensor& expert_ids, const at::Tensor& comm_cmd_info,
    c10::string_view group_ep, int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num,
    int64_t expert_shard_type, int64_t shared_expert_num, int64_t shared_expert_rank_num, int64_t quant_mode,
    int64_t global_bs, int64_t expert_token_nums_type, int64_t comm_type, c10::string_view comm_alg) {
  const char* op = "npu_moe_distribute_dispatch_teardown";
  auto [expand_x, dynamic_scales, assist, token_nums] = npu_moe_distribute_dispatch_teardown_meta(
      x, y, expert_ids, comm_cmd_info, group_ep, ep_world_size, ep_rank_id, moe_expert_num, expert_shard_type,
      shared_expert_num, shared_expert_rank_num, quant_mode, global_bs, expert_token_nums_type, comm_type, comm_alg);
  const Layout layout = checkLayout(op, ep_world_size, ep_rank_id, moe_expert_num, shared_expert_rank_num,
                                    expert_shard_type);
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = checkedGroup(op, group_ep, ep_world_size, ep_rank_id);
  const int64_t tokens = x.size(0), k = expert_ids.size(1), hidden = x.size(1), copies = tokens * k;
  const int64_t pairs = layout.world * layout.local;

  const at::Tensor records = comm_cmd_info.reshape({-1, kCmdWords});
  const std::vector<int64_t> count_words =
      hostValues(records.narrow(0, records.size(0) - pairs, pairs).narrow(1, 0, 2));
  std::vector<int64_t> counts(pairs), send_counts(layout.world, 0), recv_counts(layout.world, 0);
  for (int64_t i = 0; i < pairs; ++i) {
    counts[i] = count_words[2 * i];
    send_counts[i / layout.local] += count_words[2 * i + 1];
    recv_counts[i / layout.local] += counts[i];
  }
  TORCH_CHECK_VALUE(std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0}) == copies, op,
                    ": comm_cmd_info does not describe BS * K = ", copies,
                    " rows; pass dispatch_setup's comm_cmd_info for the same x and expert_ids");
  const int64_t received_rows = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
  const int64_t capacity = expand_x.size(0);
  TORCH_CHECK_VALUE(received_rows <= capacity, op, ": this rank receives ", received_rows, " rows but expand_x holds ",
                    capacity, "; when ranks have different BS, pass global_bs = max BS * ep_world_size");

  // Received rows come source-major; expand_x groups them by local expert, then source rank (as dispatch does).
  std::vector<int64_t> source_start(layout.world, 0);
  std::partial_sum(recv_counts.begin(), recv_counts.end() - 1, source_start.begin() + 1);
  std::vector<int64_t> regroup, assist_words, per_local(layout.local, 0);
  regroup.reserve(received_rows);
  for (int64_t j = 0; j < layout.local; ++j) {
    for (int64_t s = 0; s < layout.world; ++s) {
      int64_t offset = 0;  // place within the block rank s sends to this rank
      for (int64_t i = 0; i < j; ++i) offset += counts[s * layout.local + i];
      for (int64_t r = 0; r < counts[s * layout.local + j]; ++r) {
        regroup.push_back(source_start[s] + offset + r);
        assist_words.insert(assist_words.end(), {s, offset + r, j});
      }
      per_local[j] += counts[s * layout.local + j];
    }
  }
  const at::Tensor where = indexTensor(regroup, x);
  auto place = [&](const at::Tensor& sent, at::Tensor& out) {
    out.zero_();
    out.narrow(0, 0, received_rows).copy_(exchange(*group, sent, send_counts, recv_counts).index_select(0, where));
  };
  const at::Tensor sent_rows = y.narrow(0, 0, copies).narrow(1, 0, hidden);
  place(quant_mode == 2 ? sent_rows.to(at::kChar) : sent_rows, expand_x);
  if (quant_mode == 2) {
    place(records.narrow(0, 0, copies).select(1, 3).contiguous().view(at::kFloat), dynamic_scales);
  } else {
    dynamic_scales.zero_();  // no quantisation: no scales (upstream's buffer shape is kept)
  }
  // assist_info_for_combine, as records of kAssistWords int32: [source rank, place in its block, local expert];
  // unused rows have source -1.
  at::Tensor assist_records = assist.view({capacity, kAssistWords});
  assist_records.zero_();
  assist_records.select(1, 0).fill_(-1);
  if (received_rows > 0) {
    assist_records.narrow(0, 0, received_rows).narrow(1, 0, 3)
        .copy_(indexTensor(assist_words, x).view({received_rows, 3}));
  }
  if (expert_token_nums_type == 0) std::partial_sum(per_local.begin(), per_local.end(), per_local.begin());
  token_nums.copy_(indexTensor(per_local, x));
  return {expand_x, dynamic_scales, assist, token_nums};
}

std::tuple<at::Tensor, at::Tensor> npu_moe_distribute_combine_setup_meta(
    const at::Tensor& expand_x, const at::Tensor& expert_ids, const at::Tensor& assist_info_for_combine,
    c10::string_view group_ep, int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num,
    int64_t expert_shard_type, int64_t shared_expert_num, int64_t shared_expert_rank_num, int64_t global_bs,
    int64_t comm_quant_mode, int64_t comm_type, c10::string_view comm_alg) {
  const char* op = "npu_moe_distribute_combine_setup";
  checkLayout(op, ep_world_size, ep_rank_id, moe_expert_num, shared_expert_rank_num, expert_shard_type);
  checkCombineInput(op, expand_x, expert_ids, comm_quant_mode, " (quant_expand_x is then unused)");
  TORCH_CHECK_TYPE(assist_info_for_combine.scalar_type() == at::kInt, op,
                   ": assist_info_for_combine must be dispatch_teardown's int32 output, got ",
                   assist_info_for_combine.scalar_type());
  TORCH_CHECK_VALUE(assist_info_for_combine.numel() == expand_x.size(0) * kAssistWords, op,
                    ": assist_info_for_combine must be dispatch_teardown's output (A * 128 = ",
                    expand_x.size(0) * kAssistWords, " values for expand_x's A = ", expand_x.size(0), "), got ",
                    assist_info_for_combine.numel(), " values");
  const int64_t rows = expand_x.size(0);
  return {at::empty({rows, combineRowWidth(expand_x.size(1))}, expand_x.options().dtype(at::kChar)),
          at::empty({(rows + ep_world_size) * kCmdWords}, expand_x.options().dtype(at::kInt))};
}

std::tuple<at::Tensor, at::Tensor> npu_moe_distribute_combine_setup(
    const at::Tensor& expand_x, const at::Tensor& expert_ids, const at::Tensor& assist_info_for_combine,
    c10::string_view group_ep, int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num,
    int64_t expert_shard_type, int64_t shared_expert_num, int64_t shared_expert_rank_num, int64_t global_bs,
    int64_t comm_quant_mode, int64_t comm_type, c10::string_view comm_alg) {
  const char* op = "npu_moe_distribute_combine_setup";
  auto [quant_expand_x, cmd] = npu_moe_distribute_combine_setup_meta(
      expand_x, expert_ids, assist_info_for_combine, group_ep, ep_world_size, ep_rank_id, moe_expert_num,
      expert_shard_type, shared_expert_num, shared_expert_rank_num, global_bs, comm_quant_mode, comm_type, comm_alg);
  const Layout layout = checkLayout(op, ep_world_size, ep_rank_id, moe_expert_num, shared_expert_rank_num,
                                    expert_shard_type);
  checkedGroup(op, group_ep, ep_world_size, ep_rank_id);  // named group and rank checked now, not at teardown
  const int64_t rows = expand_x.size(0);

  // Rows this rank gets back from each rank: its own copies routed to that rank's experts.
  std::vector<int64_t> back_counts(layout.world, 0);
  for (int64_t e : hostValues(expert_ids.reshape({-1}))) {
    TORCH_CHECK_VALUE(e >= 0 && e < moe_expert_num, op, ": expert_ids must be in [0, ", moe_expert_num, "), got ", e);
    ++back_counts[e / layout.local];
  }
  // Rows this rank returns to each source rank, from assist_info_for_combine's source column.
  const at::Tensor assist = assist_info_for_combine.reshape({rows, kAssistWords});
  const std::vector<int64_t> sources = hostValues(assist.select(1, 0));
  std::vector<int64_t> return_counts(layout.world, 0);
  for (int64_t s : sources) {
    TORCH_CHECK_VALUE(s >= -1 && s < layout.world, op,
                      ": assist_info_for_combine is not dispatch_teardown's output (source rank ", s, ")");
    if (s >= 0) ++return_counts[s];
  }
  // comm_cmd_info, as records of kCmdWords int32: row i = [destination rank or -1, place in the destination's block];
  // then per rank s = [rows sent back to s, rows received from s].
  at::Tensor records = at::zeros({rows + layout.world, kCmdWords}, expand_x.options().dtype(at::kInt));
  records.narrow(0, 0, rows).narrow(1, 0, 2).copy_(assist.narrow(1, 0, 2));
  std::vector<int64_t> count_words;
  for (int64_t s = 0; s < layout.world; ++s) count_words.insert(count_words.end(), {return_counts[s], back_counts[s]});
  records.narrow(0, rows, layout.world).narrow(1, 0, 2)
      .copy_(indexTensor(count_words, expand_x).view({layout.world, 2}));
  quant_expand_x.zero_();  // comm_quant_mode 0: the exchange carries expand_x itself
  cmd = records.view({-1});
  return {quant_expand_x, cmd};
}

at::Tensor npu_moe_distribute_combine_teardown_meta(
    const at::Tensor& expand_x, const at::Tensor& quant_expand_x, const at::Tensor& expert_ids,
    const at::Tensor& expand_idx, const at::Tensor& expert_scales, const at::Tensor& comm_cmd_info,
    c10::string_view group_ep, int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num,
    const std::optional<at::Tensor>& x_active_mask, const std::optional<at::Tensor>& shared_expert_x,
    int64_t expert_shard_type, int64_t shared_expert_num, int64_t shared_expert_rank_num, int64_t global_bs,
    int64_t comm_quant_mode, int64_t comm_type, c10::string_view comm_alg) {
  const char* op = "npu_moe_distribute_combine_teardown";
  checkLayout(op, ep_world_size, ep_rank_id, moe_expert_num, shared_expert_rank_num, expert_shard_type);
  checkCombineInput(op, expand_x, expert_ids, comm_quant_mode, "");
  TORCH_CHECK_VALUE(!x_active_mask.has_value(), op,
                    ": x_active_mask (inactive tokens) is not supported; leave it None");
  const int64_t tokens = expert_ids.size(0), k = expert_ids.size(1), hidden = expand_x.size(1);
  TORCH_CHECK_VALUE(expert_scales.sizes() == expert_ids.sizes(), op, ": expert_scales must have expert_ids' shape ",
                    expert_ids.sizes(), ", got ", expert_scales.sizes());
  TORCH_CHECK_VALUE(expand_idx.numel() == tokens * k, op, ": expand_idx must have BS * K = ", tokens * k,
                    " values (dispatch_setup's output), got ", expand_idx.numel());
  TORCH_CHECK_TYPE(comm_cmd_info.scalar_type() == at::kInt, op,
                   ": comm_cmd_info must be combine_setup's int32 comm_cmd_info, got ", comm_cmd_info.scalar_type());
  TORCH_CHECK_VALUE(comm_cmd_info.numel() == (expand_x.size(0) + ep_world_size) * kCmdWords, op,
                    ": comm_cmd_info must be combine_setup's comm_cmd_info for this expand_x ((A + ep_world_size)"
                    " * 16 = ",
                    (expand_x.size(0) + ep_world_size) * kCmdWords, " values), got ", comm_cmd_info.numel(), " values");
  TORCH_CHECK_VALUE(!shared_expert_x.has_value() || shared_expert_x->numel() == tokens * hidden, op,
                    ": shared_expert_x must be (BS, H) = (", tokens, ", ", hidden, "), got ",
                    shared_expert_x.has_value() ? shared_expert_x->sizes() : at::IntArrayRef{});
  return at::empty({tokens, hidden}, expand_x.options());
}

at::Tensor npu_moe_distribute_combine_teardown(
    const at::Tensor& expand_x, const at::Tensor& quant_expand_x, const at::Tensor& expert_ids,
    const at::Tensor& expand_idx, const at::Tensor& expert_scales, const at::Tensor& comm_cmd_info,
    c10::string_view group_ep, int64_t ep_world_size, int64_t ep_rank_id, int64_t moe_expert_num,
    const std::optional<at::Tensor>& x_active_mask, const std::optional<at::Tensor>& shared_expert_x,
    int64_t expert_shard_type, int64_t shared_expert_num, int64_t shared_expert_rank_num, int64_t global_bs,
    int64_t comm_quant_mode, int64_t comm_type, c10::string_view comm_alg) {
  const char* op = "npu_moe_distribute_combine_teardown";
  npu_moe_distribute_combine_teardown_meta(expand_x, quant_expand_x, expert_ids, expand_idx, expert_scales,
                                           comm_cmd_info, group_ep, ep_world_size, ep_rank_id, moe_expert_num,
                                           x_active_mask, shared_expert_x, expert_shard_type, shared_expert_num,
                                           shared_expert_rank_num, global_bs, comm_quant_mode, comm_type, comm_alg);
  const Layout layout = checkLayout(op, ep_world_size, ep_rank_id, moe_expert_num, shared_expert_rank_num,
                                    expert_shard_type);
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = checkedGroup(op, group_ep, ep_world_size, ep_rank_id);
  const int64_t rows = expand_x.size(0), tokens = expert_ids.size(0), k = expert_ids.size(1);
  const int64_t hidden = expand_x.size(1);

  const at::Tensor records = comm_cmd_info.reshape({rows + layout.world, kCmdWords});
  const std::vector<int64_t> dest = hostValues(records.narrow(0, 0, rows).narrow(1, 0, 2));
  const std::vector<int64_t> count_words = hostValues(records.narrow(0, rows, layout.world).narrow(1, 0, 2));
  std::vector<int64_t> send_counts(layout.world), recv_counts(layout.world);
  for (int64_t s = 0; s < layout.world; ++s) {
    send_counts[s] = count_words[2 * s];
    recv_counts[s] = count_words[2 * s + 1];
  }
  TORCH_CHECK_VALUE(std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0}) == tokens * k, op,
                    ": comm_cmd_info does not match expert_ids (BS * K = ", tokens * k,
                    " rows); pass combine_setup's comm_cmd_info for the same expert_ids");
  // Each row goes back to its source rank at its place in the block that rank sent, so every source receives its
  // rows in its own send order - the order expand_idx indexes.
  std::vector<std::vector<int64_t>> by_dest(layout.world);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t s = dest[2 * i], place = dest[2 * i + 1];
    if (s < 0) continue;
    TORCH_CHECK_VALUE(s < layout.world && place >= 0 && place < send_counts[s], op,
                      ": comm_cmd_info is not combine_setup's output (row ", i, ")");
    if (by_dest[s].empty()) by_dest[s].assign(send_counts[s], -1);
    by_dest[s][place] = i;
  }
  std::vector<int64_t> back_order;
  for (int64_t s = 0; s < layout.world; ++s) {
    TORCH_CHECK_VALUE(static_cast<int64_t>(by_dest[s].size()) == send_counts[s] &&
                          std::find(by_dest[s].begin(), by_dest[s].end(), -1) == by_dest[s].end(),
                      op, ": comm_cmd_info is not combine_setup's output (rows for rank ", s, ")");
    back_order.insert(back_order.end(), by_dest[s].begin(), by_dest[s].end());
  }
  at::Tensor sent = expand_x.index_select(0, indexTensor(back_order, expand_x));
  at::Tensor back = exchange(*group, sent, send_counts, recv_counts);
  // back is this rank's dispatch send order: token t's k-th copy is row expand_idx[t * K + k].
  at::Tensor copies = back.index_select(0, expand_idx.reshape({-1}).to(at::kLong)).to(at::kFloat);
  at::Tensor out = (copies.view({tokens, k, hidden}) * expert_scales.to(at::kFloat).unsqueeze(-1)).sum(1);
  if (shared_expert_x.has_value()) out = out + shared_expert_x->to(at::kFloat).reshape({tokens, hidden});
  return out.to(expand_x.scalar_type());
}

}  // namespace at_npu::native
