// GroupedMatmulAutogradKernelNpu.cpp - gradients of npu_grouped_matmul (both overloads) for its float path: per
// group dx = dy @ w^T, dw = x^T @ dy, dbias = the group's summed dy. derivatives.yaml's generator takes Tensor / int
// arguments and outputs only (this op maps Tensor[] to Tensor[]), so its AutogradPrivateUse1 kernel is written here.
// Where group sizes are device data, the gradients are npu_grouped_matmul calls themselves (an m split for dx, a k
// split for dw), so backward never waits for the device; group lists read on the host are the exception
// ([expert, size] rows, or one output per group).
#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "csrc/custom/NpuCustomOps.h"

namespace at_npu::native {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One call's arguments besides the differentiable lists (x, weight, bias); they live as long as the call.
struct GmmCall {
  bool list_form = false;
  std::optional<at::TensorList> bias, scale, offset, antiquant_scale, antiquant_offset, per_token_scale;
  std::optional<at::Tensor> group_list;  // tensor form
  at::OptionalIntArrayRef group_ints;    // list form: cumulative row ends
  std::optional<at::TensorList> activation_input, activation_quant_scale, activation_quant_offset;
  std::optional<int64_t> split_item, group_type, group_list_type, act_type;
  at::OptionalIntArrayRef tuning_config;
  std::optional<int64_t> output_dtype, x_dtype, weight_dtype, scale_dtype, per_token_scale_dtype;
  std::optional<at::ScalarType> list_output_dtype;
};

bool present(const std::optional<at::TensorList>& list) { return list.has_value() && !list->empty(); }

std::vector<at::Tensor> runForward(at::TensorList x, at::TensorList weight, const GmmCall& c) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  if (c.list_form) {
    return at_npu::ops::npu_grouped_matmul_List(x, weight, c.bias, c.scale, c.offset, c.antiquant_scale,
                                                c.antiquant_offset, c.per_token_scale, c.group_ints,
                                                c.activation_input, c.activation_quant_scale,
                                                c.activation_quant_offset, c.split_item, c.group_type,
                                                c.group_list_type, c.act_type, c.list_output_dtype);
  }
  return at_npu::ops::npu_grouped_matmul(x, weight, c.bias, c.scale, c.offset, c.antiquant_scale, c.antiquant_offset,
                                         c.per_token_scale, c.group_list, c.activation_input,
                                         c.activation_quant_scale, c.activation_quant_offset, c.split_item,
                                         c.group_type, c.group_list_type, c.act_type, c.tuning_config, c.output_dtype,
                                         c.x_dtype, c.weight_dtype, c.scale_dtype, c.per_token_scale_dtype);
}

// Gradients exist for float x and weight of one dtype, without quantization parameters or an activation.
bool floatPath(at::TensorList x, at::TensorList weight, const GmmCall& c) {
  const at::ScalarType t = x[0].scalar_type();
  return at::isFloatingType(t) && weight[0].scalar_type() == t && !present(c.scale) && !present(c.offset) &&
         !present(c.antiquant_scale) && !present(c.antiquant_offset) && !present(c.per_token_scale) &&
         c.act_type.value_or(0) == 0;
}

// What backward reads: the forward's lists, its group list and how the op split.
struct GmmGradInput {
  std::vector<at::Tensor> x, weight, bias;
  at::Tensor group_list;            // tensor form (undefined: none or list form)
  std::vector<int64_t> group_ints;  // list form
  int64_t split_item = 0, group_type = -1, group_list_type = 0;

  bool single_weight() const { return weight.size() == 1 && weight[0].dim() == 3; }
  int64_t experts() const { return single_weight() ? weight[0].size(0) : static_cast<int64_t>(weight.size()); }
  at::Tensor expert_weight(int64_t e) const { return single_weight() ? weight[0][e] : weight[e]; }
  bool grouped() const { return group_list.defined() || !group_ints.empty(); }
  bool one_output() const { return split_item >= 2; }
  at::ScalarType dtype() const { return x[0].scalar_type(); }
};

struct GmmGrads {
  std::vector<at::Tensor> dx;
  std::vector<at::Tensor> dw, db;  // per expert (undefined: no rows reached it)
};

struct Segment {
  int64_t expert, start, size;
};

std::vector<Segment> segmentsOf(const std::vector<int64_t>& values, int64_t list_type) {
  std::vector<Segment> segments;
  const size_t count = list_type == 2 ? values.size() / 2 : values.size();
  int64_t start = 0;
  for (size_t i = 0; i < count; ++i) {
    Segment s{static_cast<int64_t>(i), start, list_type == 0 ? values[i] - start : values[i]};
    if (list_type == 2) s = {values[2 * i], start, values[2 * i + 1]};
    segments.push_back(s);
    start += s.size;
  }
  return segments;
}

std::vector<int64_t> deviceValues(const at::Tensor& t) {
  const at::Tensor v = t.cpu().to(at::kLong).contiguous();
  const int64_t* p = v.const_data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + v.numel());
}

void accumulate(std::vector<at::Tensor>& parts, int64_t e, const at::Tensor& v) {
  parts[e] = parts[e].defined() ? parts[e] + v : v;
}

at::Tensor columnSum(const at::Tensor& dy) { return dy.sum(at::IntArrayRef{0}); }

// One npu_grouped_matmul with one output (split_item 3) and no quantization.
at::Tensor groupedProduct(const std::vector<at::Tensor>& x, const std::vector<at::Tensor>& w,
                          const at::Tensor& group_list, int64_t group_type, int64_t group_list_type) {
  return at_npu::ops::npu_grouped_matmul(x, w, std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                                         std::nullopt, group_list, std::nullopt, std::nullopt, std::nullopt,
                                         /*split_item=*/3, group_type, group_list_type, /*act_type=*/0, std::nullopt,
                                         std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt)[0];
}

// x[i] @ weight[i]: each pair on its own.
GmmGrads pairGrads(const GmmGradInput& in, const variable_list& grads) {
  GmmGrads g{{}, std::vector<at::Tensor>(in.experts()), std::vector<at::Tensor>(in.experts())};
  int64_t row = 0;
  for (size_t i = 0; i < in.x.size(); ++i) {
    const at::Tensor& x = in.x[i];
    const at::Tensor w = in.expert_weight(static_cast<int64_t>(i));
    const at::Tensor dy_full = in.one_output() ? grads[0].narrow(0, row, x.size(0)) : grads[i];
    row += x.size(0);
    const at::Tensor dy = dy_full.reshape({-1, w.size(-1)}).to(in.dtype());
    g.dx.push_back(at::matmul(dy, w.t()).reshape(x.sizes()));
    g.dw[i] = at::matmul(x.reshape({-1, x.size(-1)}).t(), dy);
    g.db[i] = columnSum(dy);
  }
  return g;
}

// x's rows split over the experts.
GmmGrads splitMGrads(const GmmGradInput& in, const variable_list& grads) {
  const at::Tensor& x = in.x[0];
  GmmGrads g{{}, std::vector<at::Tensor>(in.experts()), std::vector<at::Tensor>(in.experts())};
  if (in.group_list.defined() && in.group_list_type != 2 && in.one_output()) {
    // dx: dy's rows through the transposed experts; dw (and dbias, with a row of ones for x): a k split over rows.
    const std::vector<at::Tensor> dy{grads[0].to(in.dtype())};
    std::vector<at::Tensor> wt;
    if (in.single_weight()) {
      wt.push_back(in.weight[0].transpose(1, 2));
    } else {
      for (const at::Tensor& w : in.weight) wt.push_back(w.t());
    }
    g.dx.push_back(groupedProduct(dy, wt, in.group_list, 0, in.group_list_type));
    const at::Tensor dw = groupedProduct({x.t()}, dy, in.group_list, 2, in.group_list_type);
    const at::Tensor db = in.bias.empty() ? at::Tensor()
                                          : groupedProduct({at::ones({1, x.size(0)}, dy[0].options())}, dy,
                                                           in.group_list, 2, in.group_list_type);
    for (int64_t e = 0; e < std::min<int64_t>(dw.size(0), in.experts()); ++e) {
      g.dw[e] = dw[e];
      if (db.defined()) g.db[e] = db[e].reshape({-1});
    }
    return g;
  }
  std::vector<Segment> segs;
  if (!in.group_ints.empty()) {
    segs = segmentsOf(in.group_ints, 0);
  } else if (in.group_list_type != 2 && !in.one_output()) {  // one output per group: its rows are the group's
    int64_t start = 0;
    for (size_t i = 0; i < grads.size(); ++i) {
      segs.push_back({static_cast<int64_t>(i), start, grads[i].size(0)});
      start += grads[i].size(0);
    }
  } else {
    segs = segmentsOf(deviceValues(in.group_list), in.group_list_type);
  }
  std::vector<at::Tensor> pieces;
  int64_t covered = 0;
  for (size_t i = 0; i < segs.size(); ++i) {
    const Segment& s = segs[i];
    const at::Tensor dy = (in.one_output() ? grads[0].narrow(0, s.start, s.size) : grads[i]).to(in.dtype());
    pieces.push_back(at::matmul(dy, in.expert_weight(s.expert).t()));
    accumulate(g.dw, s.expert, at::matmul(x.narrow(0, s.start, s.size).t(), dy));
    accumulate(g.db, s.expert, columnSum(dy));
    covered = s.start + s.size;
  }
  if (covered < x.size(0)) pieces.push_back(at::zeros({x.size(0) - covered, x.size(1)}, x.options()));
  g.dx.push_back(pieces.empty() ? at::zeros_like(x) : at::cat(pieces, 0));
  return g;
}

// k split: x [m, k] and the weights' rows split alike.
GmmGrads splitKGrads(const GmmGradInput& in, const variable_list& grads) {
  const at::Tensor& x = in.x[0];
  const bool shared = in.weight.size() == 1 && in.weight[0].dim() == 2;  // one [k, n] weight split like x
  GmmGrads g{{}, std::vector<at::Tensor>(in.experts()), std::vector<at::Tensor>(in.experts())};
  if (in.group_list.defined() && in.group_list_type != 2 && in.one_output() && shared) {
    // dx^T = w's rows through dy^T per group, dw = x^T's rows through dy per group: both m splits over k.
    const at::Tensor dy = grads[0].to(in.dtype());  // [groups, m, n]
    g.dx.push_back(groupedProduct({in.weight[0]}, {dy.transpose(1, 2)}, in.group_list, 0, in.group_list_type).t());
    g.dw[0] = groupedProduct({x.t()}, {dy}, in.group_list, 0, in.group_list_type);
    return g;
  }
  std::vector<Segment> segs;
  if (in.group_list.defined()) {
    segs = segmentsOf(deviceValues(in.group_list), in.group_list_type);
  } else {
    int64_t start = 0;
    for (int64_t e = 0; e < in.experts(); ++e) {
      segs.push_back({e, start, in.expert_weight(e).size(0)});
      start += segs.back().size;
    }
  }
  std::vector<at::Tensor> dx_pieces, dw_pieces;
  int64_t covered = 0;
  for (size_t i = 0; i < segs.size(); ++i) {
    const Segment& s = segs[i];
    const at::Tensor dy = (in.one_output() ? grads[0][static_cast<int64_t>(i)] : grads[i]).to(in.dtype());
    const at::Tensor w = shared ? in.weight[0].narrow(0, s.start, s.size) : in.expert_weight(s.expert);
    dx_pieces.push_back(at::matmul(dy, w.t()));
    const at::Tensor dw = at::matmul(x.narrow(1, s.start, s.size).t(), dy);
    if (shared) {
      dw_pieces.push_back(dw);
    } else {
      accumulate(g.dw, s.expert, dw);
    }
    covered = s.start + s.size;
  }
  if (covered < x.size(1)) dx_pieces.push_back(at::zeros({x.size(0), x.size(1) - covered}, x.options()));
  g.dx.push_back(dx_pieces.empty() ? at::zeros_like(x) : at::cat(dx_pieces, 1));
  if (shared) {
    const at::Tensor& w = in.weight[0];
    if (covered < w.size(0)) dw_pieces.push_back(at::zeros({w.size(0) - covered, w.size(1)}, w.options()));
    g.dw[0] = dw_pieces.empty() ? at::zeros_like(w) : at::cat(dw_pieces, 0);
  }
  return g;
}

// Per-expert weight gradients in the weights' layout: one [experts, k, n] tensor, or one per weight.
std::vector<at::Tensor> weightGrads(const GmmGradInput& in, std::vector<at::Tensor> parts) {
  for (int64_t e = 0; e < static_cast<int64_t>(parts.size()); ++e) {
    if (!parts[e].defined()) parts[e] = at::zeros_like(in.expert_weight(e));
  }
  if (in.single_weight()) return {at::stack(parts).to(in.weight[0].scalar_type())};
  for (size_t e = 0; e < parts.size(); ++e) {
    parts[e] = parts[e].reshape(in.weight[e].sizes()).to(in.weight[e].scalar_type());
  }
  return parts;
}

// Per-expert bias gradients in the bias layout: one per expert, one [experts, n] tensor, or one shared [n].
std::vector<at::Tensor> biasGrads(const GmmGradInput& in, std::vector<at::Tensor> parts) {
  if (in.bias.empty()) return {};
  const int64_t experts = in.experts();
  for (int64_t e = 0; e < experts; ++e) {
    if (!parts[e].defined()) parts[e] = at::zeros({in.expert_weight(e).size(-1)}, in.bias[0].options());
  }
  if (in.bias.size() > 1) {
    for (int64_t e = 0; e < experts; ++e) parts[e] = parts[e].reshape(in.bias[e].sizes()).to(in.bias[e].scalar_type());
    return parts;
  }
  const at::Tensor& b = in.bias[0];
  const at::Tensor stacked = at::stack(parts);
  const at::Tensor grad = b.dim() >= 2 && b.size(0) == experts ? stacked : stacked.sum(at::IntArrayRef{0});
  return {grad.reshape(b.sizes()).to(b.scalar_type())};
}

struct GroupedMatmulFunction : public torch::autograd::Function<GroupedMatmulFunction> {
  static variable_list forward(AutogradContext* ctx, at::TensorList x, at::TensorList weight, at::TensorList bias,
                               const GmmCall* call) {
    std::vector<at::Tensor> y = runForward(x, weight, *call);
    ctx->saved_data["n_x"] = static_cast<int64_t>(x.size());
    ctx->saved_data["n_weight"] = static_cast<int64_t>(weight.size());
    ctx->saved_data["n_bias"] = static_cast<int64_t>(bias.size());
    ctx->saved_data["float_path"] = floatPath(x, weight, *call);
    ctx->saved_data["split_item"] = call->split_item.value_or(0);
    const bool list_grouped = call->list_form && call->group_ints.has_value() && !call->group_ints->empty();
    ctx->saved_data["group_type"] = call->list_form ? (list_grouped ? 0 : -1) : call->group_type.value_or(-1);
    ctx->saved_data["group_list_type"] = call->list_form ? 0 : call->group_list_type.value_or(0);
    ctx->saved_data["group_ints"] = list_grouped ? call->group_ints->vec() : std::vector<int64_t>();
    variable_list saved(x.begin(), x.end());
    saved.insert(saved.end(), weight.begin(), weight.end());
    saved.insert(saved.end(), bias.begin(), bias.end());
    saved.push_back(call->list_form || !call->group_list.has_value() ? at::Tensor() : *call->group_list);
    ctx->save_for_backward(saved);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK_VALUE(ctx->saved_data["float_path"].toBool(), "npu_grouped_matmul: gradients exist for float x and ",
                      "weight of one dtype without scale, offset, antiquant_*, per_token_scale or act_type (torch_npu ",
                      "defines no gradient for the op at all); compute quantized products without autograd");
    const int64_t n_x = ctx->saved_data["n_x"].toInt(), n_w = ctx->saved_data["n_weight"].toInt();
    const int64_t n_b = ctx->saved_data["n_bias"].toInt();
    const variable_list saved = ctx->get_saved_variables();
    GmmGradInput in;
    in.x.assign(saved.begin(), saved.begin() + n_x);
    in.weight.assign(saved.begin() + n_x, saved.begin() + n_x + n_w);
    in.bias.assign(saved.begin() + n_x + n_w, saved.begin() + n_x + n_w + n_b);
    in.group_list = saved[n_x + n_w + n_b];
    in.group_ints = ctx->saved_data["group_ints"].toIntVector();
    in.split_item = ctx->saved_data["split_item"].toInt();
    in.group_type = ctx->saved_data["group_type"].toInt();
    in.group_list_type = ctx->saved_data["group_list_type"].toInt();
    GmmGrads g;
    if (in.group_type == 2) {
      g = splitKGrads(in, grads);
    } else if (in.group_type == 0 && in.x.size() == 1 && in.x[0].dim() == 2 && (in.experts() > 1 || in.grouped())) {
      g = splitMGrads(in, grads);
    } else {
      g = pairGrads(in, grads);
    }
    variable_list result;
    for (size_t i = 0; i < g.dx.size(); ++i) result.push_back(g.dx[i].to(in.x[i].scalar_type()));
    for (const at::Tensor& dw : weightGrads(in, g.dw)) result.push_back(dw);
    for (const at::Tensor& db : biasGrads(in, g.db)) result.push_back(db);
    result.push_back(at::Tensor());  // the call's other arguments
    return result;
  }
};

bool anyRequiresGrad(std::initializer_list<at::TensorList> lists) {
  for (const at::TensorList list : lists) {
    for (const at::Tensor& t : list) {
      if (t.requires_grad()) return true;
    }
  }
  return false;
}

std::vector<at::Tensor> gmmAutograd(at::TensorList x, at::TensorList weight, const GmmCall& call) {
  const at::TensorList bias = call.bias.value_or(at::TensorList());
  if (!at::GradMode::is_enabled() || !anyRequiresGrad({x, weight, bias})) return runForward(x, weight, call);
  return GroupedMatmulFunction::apply(x, weight, bias, &call);
}

std::vector<at::Tensor> npu_grouped_matmul_autograd(
    at::TensorList x, at::TensorList weight, std::optional<at::TensorList> bias, std::optional<at::TensorList> scale,
    std::optional<at::TensorList> offset, std::optional<at::TensorList> antiquant_scale,
    std::optional<at::TensorList> antiquant_offset, std::optional<at::TensorList> per_token_scale,
    const std::optional<at::Tensor>& group_list, std::optional<at::TensorList> activation_input,
    std::optional<at::TensorList> activation_quant_scale, std::optional<at::TensorList> activation_quant_offset,
    std::optional<int64_t> split_item, std::optional<int64_t> group_type, std::optional<int64_t> group_list_type,
    std::optional<int64_t> act_type, at::OptionalIntArrayRef tuning_config, std::optional<int64_t> output_dtype,
    std::optional<int64_t> x_dtype, std::optional<int64_t> weight_dtype, std::optional<int64_t> scale_dtype,
    std::optional<int64_t> per_token_scale_dtype) {
  GmmCall c;
  c.bias = bias;
  c.scale = scale;
  c.offset = offset;
  c.antiquant_scale = antiquant_scale;
  c.antiquant_offset = antiquant_offset;
  c.per_token_scale = per_token_scale;
  c.group_list = group_list;
  c.activation_input = activation_input;
  c.activation_quant_scale = activation_quant_scale;
  c.activation_quant_offset = activation_quant_offset;
  c.split_item = split_item;
  c.group_type = group_type;
  c.group_list_type = group_list_type;
  c.act_type = act_type;
  c.tuning_config = tuning_config;
  c.output_dtype = output_dtype;
  c.x_dtype = x_dtype;
  c.weight_dtype = weight_dtype;
  c.scale_dtype = scale_dtype;
  c.per_token_scale_dtype = per_token_scale_dtype;
  return gmmAutograd(x, weight, c);
}

std::vector<at::Tensor> npu_grouped_matmul_List_autograd(
    at::TensorList x, at::TensorList weight, std::optional<at::TensorList> bias, std::optional<at::TensorList> scale,
    std::optional<at::TensorList> offset, std::optional<at::TensorList> antiquant_scale,
    std::optional<at::TensorList> antiquant_offset, std::optional<at::TensorList> per_token_scale,
    at::OptionalIntArrayRef group_list, std::optional<at::TensorList> activation_input,
    std::optional<at::TensorList> activation_quant_scale, std::optional<at::TensorList> activation_quant_offset,
    std::optional<int64_t> split_item, std::optional<int64_t> group_type, std::optional<int64_t> group_list_type,
    std::optional<int64_t> act_type, std::optional<at::ScalarType> output_dtype) {
  GmmCall c;
  c.list_form = true;
  c.bias = bias;
  c.scale = scale;
  c.offset = offset;
  c.antiquant_scale = antiquant_scale;
  c.antiquant_offset = antiquant_offset;
  c.per_token_scale = per_token_scale;
  c.group_ints = group_list;
  c.activation_input = activation_input;
  c.activation_quant_scale = activation_quant_scale;
  c.activation_quant_offset = activation_quant_offset;
  c.split_item = split_item;
  c.group_type = group_type;
  c.group_list_type = group_list_type;
  c.act_type = act_type;
  c.list_output_dtype = output_dtype;
  return gmmAutograd(x, weight, c);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu, AutogradPrivateUse1, m) {
  m.impl("npu_grouped_matmul", TORCH_FN(npu_grouped_matmul_autograd));
  m.impl("npu_grouped_matmul.List", TORCH_FN(npu_grouped_matmul_List_autograd));
}

}  // namespace at_npu::native
