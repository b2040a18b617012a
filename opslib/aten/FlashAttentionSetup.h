// FlashAttentionSetup.h - what the FlashAttention device ops (training and inference) share: the
// sizes and row layouts of torch_npu's input layouts (BSH, SBH, BSND, BNSD, TND), and the attention
// problem a call describes (mask rule of its sparse mode, bias, sinks, dropout, statistics layout).
#pragma once

#include <string>
#include <vector>

#include "AtenOpSupport.h"
#include "FlashAttentionKernel.h"

namespace npu::opslib::aten::fa {

struct Shapes {
  int64_t batch = 0, q_heads = 0, kv_heads = 0, d = 0, dv = 0;
  std::vector<int64_t> q_len, kv_len, q_start, kv_start;  // per batch (TND: from the cumulative lengths)
  int64_t q_pad = 0;  // the query's sequence dimension in padded layouts
};

// Where the rows of `t` (holding heads of `head_size` values) live in `layout`; `starts` are the
// per-batch token offsets of TND.
RowLayout rowsOf(const std::string& layout, const at::Tensor& t, int64_t head_size, int64_t batch,
                 const std::vector<int64_t>& starts);

struct Args {
  const char* op;
  std::string layout;
  at::Tensor q, k, v, pse, drop, mask, sink;
  std::vector<int64_t> prefix, cum_q, cum_kv;
  double scale = 1.0, keep_prob = 1.0;
  int64_t pre_tokens = 0, next_tokens = 0, head_num = 0, sparse_mode = 0, pse_type = 1;
  std::string softmax_layout;  // "" (TND: N-major statistics) or "same_as_input"
  // Valid lengths of padded batches (inference ops): empty, one for all, or one per batch.
  std::vector<int64_t> actual_q, actual_kv;
  int64_t stats_lanes = 8;  // floats per statistic (torch_npu's training ops keep 8)
};

// Everything but the operands' memory: shapes, layouts, the mask rule of the sparse mode, bias and dropout.
struct Setup {
  AttentionProblem problem;
  StatsLayout stats;
  Shapes shapes;
  std::string layout;
  at::Tensor sink_src, sink_float;
  int64_t pse_rows_full = 0;  // rows of the bias gradient's work buffer
};

Setup setUp(const Args& a);

// When the kernel runs (not before: earlier work on the stream may still write them): reads the
// mask, bias and sinks in the forms the kernel takes (bytes, float32).
void bind(Setup& setup);

// The output's (and the output gradient's) row layout: the query's sizes with the value's head size.
RowLayout outputRows(const Setup& setup, const at::Tensor& q, const at::Tensor& out, const char* what);

std::string stringOf(const char* value, const char* what);

// An optional operand given as an empty tensor counts as absent (torch_npu passes empty outputs).
at::Tensor optionalTensor(const aclTensor* t);
at::Tensor optionalTensor(aclTensor* t);

}  // namespace npu::opslib::aten::fa
