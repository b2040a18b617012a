// GroupedMatmulOps.cpp - the MoE grouped matmuls: GroupedMatmulV5 / GroupedMatmul (one matmul per expert over
// tensor lists: x[i] with weight[i], x's rows split over the experts (m split) or the shared k split (k split) by a
// group list; float, weight-only int8 / int4, A8W8, A4W4 and A8W4 forms), GroupedMatmulFinalizeRoutingV3 (expert
// matmuls on int8 rows, dequantized, weighted by logit and scatter-added into token rows with a shared expert's
// output) and GroupedMatmulAddV2 (y += x_i^T @ weight_i per k group, in place).
//
// Float products accumulate in float32 and round once; integer products are exact (float64 sums of integers stay far
// below 2^53) and dequantized in float64; weight-only weights are dequantized in x's dtype first, as the cube units
// see them. int4 operands come 8
// per int32 along the last dimension, lowest nibble first. int64 scales hold float32 bits in bits 0-31 (and, from
// npu_trans_quant_param, an int8 output offset in bits 37-45). Group lists are read when the kernel runs: they
// are device data an earlier op may still be writing when the op is prepared.
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/round.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/zeros.h>

#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "AtenOpSupport.h"
#include "QuantPacking.h"

using namespace npu::opslib::aten;

namespace {

// ---- Number forms ----

bool isFloat(at::ScalarType t) { return t == at::kFloat || t == at::kHalf || t == at::kBFloat16; }

// int8 as it is; int32 as the 8 int4 values each carries along the last dimension (lowest nibble first).
at::Tensor unpackedInt(const at::Tensor& t) { return t.scalar_type() == at::kInt ? quant::unpackInt4(t) : t; }

// The logical last-dimension length of an operand (int32 operands carry 8 int4 values per element).
int64_t logicalCols(const at::Tensor& t) { return t.size(-1) * (t.scalar_type() == at::kInt ? 8 : 1); }

// The float32 values of a scale: float32 / bfloat16 as they are, int64 from the float32 bits in bits 0-31.
at::Tensor floatScale(const at::Tensor& scale) {
  return scale.scalar_type() == at::kLong ? quant::unpackScale(scale) : scale.to(at::kFloat);
}

// act_type: 0 none, 1 relu, 2 gelu (tanh), 4 fast gelu, 5 silu (3, gelu with erf, is refused when prepared).
at::Tensor activate(const at::Tensor& v, int64_t actType) {
  switch (actType) {
    case 1: return at::relu(v);
    case 2: return at::gelu(v, "tanh");
    case 4: return v * at::sigmoid(v * 1.702);
    case 5: return at::silu(v);
    default: return v;
  }
}

// A per-column parameter of n columns ([n], [1], [1, n]) as 1-D.
at::Tensor columns(const char* op, const char* what, const at::Tensor& t, int64_t n) {
  at::Tensor flat = t.reshape({-1});
  TORCH_CHECK(flat.numel() == n || flat.numel() == 1, op, ": ", what, " must have n = ", n, " (or 1) values, got ",
              t.sizes());
  return flat;
}

// A per-channel ([n], [1, n]) or per-group ([G, n], G dividing k) parameter as rows broadcasting to [k, n].
at::Tensor rowsOfGroups(const char* op, const char* what, const at::Tensor& t, int64_t k, int64_t n) {
  if (t.dim() <= 1 || t.size(0) == 1) return columns(op, what, t, n).reshape({1, -1});
  TORCH_CHECK(t.dim() == 2 && (t.size(1) == n || t.size(1) == 1) && k % t.size(0) == 0, op, ": ", what,
              " must be per channel [n] or per group [G, n] with G dividing k = ", k, " and n = ", n, ", got ",
              t.sizes());
  return t.repeat_interleave(k / t.size(0), 0);
}

// ---- Group lists ----

// One group along the split axis: its expert (group_list_type 2 names it, else the entry's position) and range.
struct Segment {
  int64_t group;
  int64_t start;
  int64_t size;
};

std::vector<int64_t> listValues(const at::Tensor& groupList) {
  at::Tensor v = groupList.to(at::kLong).contiguous();
  const int64_t* p = v.const_data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + v.numel());
}

// Groups follow each other from 0: values are cumulative ends (type 0), sizes (1) or [expert, size] pairs (2).
std::vector<Segment> segmentsOf(const char* op, const std::vector<int64_t>& values, int64_t listType, int64_t axis) {
  std::vector<Segment> segments;
  const size_t count = listType == 2 ? values.size() / 2 : values.size();
  int64_t start = 0;
  for (size_t i = 0; i < count; ++i) {
    Segment s{static_cast<int64_t>(i), start, 0};
    if (listType == 0) {
      s.size = values[i] - start;
      TORCH_CHECK(s.size >= 0, op, ": group_list holds cumulative ends (group_list_type 0) and must not decrease, got ",
                  values[i], " after ", start);
    } else if (listType == 1) {
      s.size = values[i];
    } else {
      s.group = values[2 * i];
      s.size = values[2 * i + 1];
    }
    TORCH_CHECK(s.size >= 0, op, ": group ", i, " has a negative size ", s.size);
    TORCH_CHECK(start + s.size <= axis, op, ": group_list covers ", start + s.size,
                " entries of a split axis of only ", axis);
    segments.push_back(s);
    start += s.size;
  }
  return segments;
}

// ---- Grouped matmul ----

// The form the operand dtypes select: float x float, float x int8 / int4 (weight-only), int8 / int4 x int8 / int4.
enum class GmmForm { kFloat, kWeightOnly, kInteger };

// How x and the experts pair up: x[i] with weight[i], x's rows split over the experts, or k split.
enum class GmmLayout { kPairs, kSplitM, kSplitK };

struct GmmArgs {
  std::vector<at::Tensor> x, weight, bias, scale, offset, antiquantScale, antiquantOffset, perTokenScale, y;
  at::Tensor groupList;             // GroupedMatmulV5: read when the kernel runs (undefined: none)
  std::vector<int64_t> hostGroups;  // GroupedMatmul: cumulative ends, known when prepared
  bool groupsOnHost = false;
  int64_t splitItem = 0, groupType = -1, groupListType = 0, actType = 0;
  GmmForm form = GmmForm::kFloat;

  bool singleWeight() const { return weight.size() == 1 && weight[0].dim() == 3; }
  int64_t experts() const { return singleWeight() ? weight[0].size(0) : static_cast<int64_t>(weight.size()); }
  bool grouped() const { return groupsOnHost ? !hostGroups.empty() : groupList.defined(); }
  bool oneOutput() const { return splitItem >= 2; }
  at::Tensor expertWeight(int64_t e) const { return singleWeight() ? weight[0][e] : weight[e]; }
  GmmLayout layout() const {
    if (groupType == 2) return GmmLayout::kSplitK;
    if (groupType == 0 && x.size() == 1 && x[0].dim() == 2 && (experts() > 1 || grouped())) return GmmLayout::kSplitM;
    return GmmLayout::kPairs;
  }
};

// Expert e's part of a per-expert parameter: one list entry per expert, or one tensor whose first dimension runs
// over the experts, or one tensor for all.
at::Tensor expertParam(const std::vector<at::Tensor>& list, int64_t e, int64_t experts) {
  if (list.empty()) return at::Tensor();
  if (list.size() > 1) return list[e];
  const at::Tensor& t = list[0];
  return t.dim() >= 2 && t.size(0) == experts ? t[e] : t;
}

// A NULL or empty list is an absent optional list.
std::vector<at::Tensor> optionalTensors(const aclTensorList* list) {
  return list == nullptr ? std::vector<at::Tensor>() : hostTensors(list);
}

GmmForm formOf(const char* op, const GmmArgs& a) {
  const at::ScalarType xt = a.x[0].scalar_type(), wt = a.weight[0].scalar_type();
  for (const at::Tensor& t : a.x) {
    TORCH_CHECK(t.scalar_type() == xt, op, ": every x must have one dtype, got ", xt, " and ", t.scalar_type());
  }
  for (const at::Tensor& t : a.weight) {
    TORCH_CHECK(t.scalar_type() == wt, op, ": every weight must have one dtype, got ", wt, " and ", t.scalar_type());
  }
  if (isFloat(xt) && wt == xt) return GmmForm::kFloat;
  if ((xt == at::kHalf || xt == at::kBFloat16) && (wt == at::kChar || wt == at::kInt)) return GmmForm::kWeightOnly;
  if ((xt == at::kChar && (wt == at::kChar || wt == at::kInt)) || (xt == at::kInt && wt == at::kInt)) {
    return GmmForm::kInteger;
  }
  TORCH_CHECK(false, op, ": x ", xt, " with weight ", wt, " is not a supported pair: float32 / float16 / bfloat16 ",
              "with the same dtype, float16 / bfloat16 with int8 (or int32 carrying int4) weights, int8 with int8 or ",
              "int4 weights, or int4 (as int32) with int4 weights");
  return GmmForm::kFloat;
}

void checkForm(const char* op, const GmmArgs& a) {
  const at::ScalarType xt = a.x[0].scalar_type(), outType = a.y[0].scalar_type();
  const auto absent = [&](const std::vector<at::Tensor>& list, const char* name, const char* form) {
    TORCH_CHECK(list.empty(), op, ": ", name, " is not taken by ", form, " (x ", xt, ", weight ",
                a.weight[0].scalar_type(), ")");
  };
  if (a.form != GmmForm::kInteger) {
    absent(a.scale, "scale", "float or weight-only products");
    absent(a.offset, "offset", "float or weight-only products");
    absent(a.perTokenScale, "per_token_scale", "float or weight-only products");
    TORCH_CHECK(outType == xt, op, ": the output of a float or weight-only product has x's dtype ", xt, ", got ",
                outType);
  }
  if (a.form == GmmForm::kFloat) {
    absent(a.antiquantScale, "antiquant_scale", "float products");
    absent(a.antiquantOffset, "antiquant_offset", "float products");
  }
  if (a.form == GmmForm::kWeightOnly) {
    TORCH_CHECK(!a.antiquantScale.empty(), op, ": weight-only products (x ", xt, ", weight ",
                a.weight[0].scalar_type(), ") need antiquant_scale");
  }
  if (a.form != GmmForm::kInteger) return;
  absent(a.antiquantScale, "antiquant_scale", "integer products");
  absent(a.antiquantOffset, "antiquant_offset", "integer products");
  const bool int4 = xt == at::kInt || a.weight[0].scalar_type() == at::kInt;
  TORCH_CHECK(outType == at::kChar || outType == at::kInt || isFloat(outType), op,
              ": integer products give int8, int32, float16, bfloat16 or float32, got ", outType);
  TORCH_CHECK(!int4 || isFloat(outType), op, ": products with int4 operands give float16, bfloat16 or float32, got ",
              outType);
  if (outType == at::kInt) {
    TORCH_CHECK(a.scale.empty() && a.perTokenScale.empty() && a.offset.empty(), op,
                ": an int32 output is the raw product (plus an int32 bias): scale, offset and per_token_scale must ",
                "be absent");
  } else {
    TORCH_CHECK(!a.scale.empty(), op, ": a dequantized (", outType, ") output needs scale");
  }
  TORCH_CHECK(a.perTokenScale.empty() || isFloat(outType), op, ": per_token_scale needs a float output, got ", outType);
  TORCH_CHECK(a.offset.empty() || outType == at::kChar || a.weight[0].scalar_type() == at::kInt, op,
              ": offset is an int8 output's offset (int8 weights) or int4 weights' offset; got it for a ", outType,
              " output");
  TORCH_CHECK(xt != at::kInt || (a.bias.empty() && a.offset.empty()), op, ": int4 x takes no bias or offset");
  for (const at::Tensor& s : a.scale) {
    TORCH_CHECK(s.scalar_type() == at::kFloat || s.scalar_type() == at::kBFloat16 || s.scalar_type() == at::kLong, op,
                ": scale must be float32, bfloat16 or int64 (float32 bits in bits 0-31), got ", s.scalar_type());
  }
}

void checkGmm(const char* op, GmmArgs& a) {
  TORCH_CHECK(!a.x.empty() && !a.weight.empty() && !a.y.empty(), op, ": x, weight and out must not be empty lists");
  TORCH_CHECK(a.splitItem >= 0 && a.splitItem <= 3, op, ": splitItem must be 0 to 3, got ", a.splitItem);
  TORCH_CHECK(a.groupType == -1 || a.groupType == 0 || a.groupType == 2, op, ": groupType must be -1, 0 or 2, got ",
              a.groupType);
  TORCH_CHECK(a.groupListType >= 0 && a.groupListType <= 2, op, ": groupListType must be 0, 1 or 2, got ",
              a.groupListType);
  TORCH_CHECK(a.actType >= 0 && a.actType <= 5 && a.actType != 3, op, ": actType must be 0 (none), 1 (relu), ",
              "2 (gelu tanh), 4 (fast gelu) or 5 (silu), got ", a.actType);
  a.form = formOf(op, a);
  checkForm(op, a);
  const at::ScalarType outType = a.y[0].scalar_type();
  for (const at::Tensor& t : a.y) {
    TORCH_CHECK(t.scalar_type() == outType, op, ": every output must have one dtype");
  }
  TORCH_CHECK(a.actType == 0 || isFloat(outType), op, ": activations apply to float outputs only, got ", outType);
  for (const at::Tensor& w : a.weight) {
    TORCH_CHECK(w.dim() == 2 || (a.weight.size() == 1 && w.dim() == 3), op,
                ": weight must be [k, n] tensors or one [experts, k, n] tensor, got ", w.sizes());
  }
  const int64_t experts = a.experts();
  const std::pair<const char*, const std::vector<at::Tensor>*> params[] = {
      {"bias", &a.bias}, {"scale", &a.scale}, {"offset", &a.offset}, {"antiquant_scale", &a.antiquantScale},
      {"antiquant_offset", &a.antiquantOffset}};
  for (const auto& [name, list] : params) {
    TORCH_CHECK(list->size() <= 1 || static_cast<int64_t>(list->size()) == experts, op, ": ", name, " holds ",
                list->size(), " tensors for ", experts, " experts (give one per expert, or one tensor)");
  }
  TORCH_CHECK(a.perTokenScale.empty() || a.perTokenScale.size() == a.x.size(), op, ": per_token_scale holds ",
              a.perTokenScale.size(), " tensors for ", a.x.size(), " x tensors");
  TORCH_CHECK(a.groupType != -1 || !a.grouped(), op, ": groupType -1 (no split) takes no group list");
  if (a.groupListType == 2 && a.groupList.defined()) {
    TORCH_CHECK(a.groupList.dim() == 2 && a.groupList.size(1) == 2, op,
                ": groupListType 2 takes [groups, 2] rows of (expert, size), got ", a.groupList.sizes());
  } else if (a.groupList.defined()) {
    TORCH_CHECK(a.groupList.dim() == 1, op, ": the group list must be 1-D, got ", a.groupList.sizes());
  }
  TORCH_CHECK(!a.groupList.defined() || !isFloat(a.groupList.scalar_type()), op, ": the group list must be integer");
  switch (a.layout()) {
    case GmmLayout::kPairs:
      TORCH_CHECK(static_cast<int64_t>(a.x.size()) == experts, op, ": x[i] multiplies weight[i], but x has ",
                  a.x.size(), " tensors for ", experts, " weights");
      TORCH_CHECK(a.y.size() == (a.oneOutput() ? 1 : a.x.size()), op, ": out must hold ",
                  a.oneOutput() ? 1 : a.x.size(), " tensors, got ", a.y.size());
      break;
    case GmmLayout::kSplitM:
      TORCH_CHECK(a.grouped(), op, ": x as one tensor for ", experts, " experts needs a group list to split its rows");
      TORCH_CHECK(!a.oneOutput() || a.y.size() == 1, op, ": splitItem 2 / 3 writes one output");
      break;
    case GmmLayout::kSplitK:
      TORCH_CHECK(a.form == GmmForm::kFloat && a.bias.empty(), op,
                  ": groupType 2 (k split) takes float operands and no bias");
      TORCH_CHECK(a.x.size() == 1 && a.x[0].dim() == 2, op, ": groupType 2 takes x as one [m, k] tensor");
      TORCH_CHECK(!a.oneOutput() || (a.y.size() == 1 && a.y[0].dim() == 3 && a.grouped()), op,
                  ": groupType 2 with splitItem 2 / 3 writes one [groups, m, n] output and needs a group list");
      break;
  }
}

// One expert's matmul: rows of x, the expert's weight, the per-token scales of those rows, where the result goes.
struct GmmTask {
  at::Tensor x;         // [m, k] (int4 x: packed along k)
  at::Tensor weight;    // [k, n]
  int64_t expert;       // whose bias / scales apply
  at::Tensor perToken;  // [m] or undefined
  at::Tensor out;       // [m, n] view of an output
};

at::Tensor perTokenRows(const GmmArgs& a, size_t xIndex, int64_t start, int64_t rows) {
  if (a.perTokenScale.empty()) return at::Tensor();
  return a.perTokenScale[xIndex].reshape({-1}).narrow(0, start, rows);
}

std::vector<GmmTask> pairTasks(const char* op, const GmmArgs& a, const std::vector<int64_t>& values) {
  if (a.grouped()) {  // a group list then restates each x's rows
    const std::vector<Segment> segs = segmentsOf(op, values, a.groupListType, std::numeric_limits<int64_t>::max());
    TORCH_CHECK(a.groupListType != 2 && segs.size() == a.x.size(), op, ": with x as ", a.x.size(),
                " tensors the group list must give their row counts in order (", segs.size(), " groups)");
    for (size_t i = 0; i < segs.size(); ++i) {
      TORCH_CHECK(segs[i].size == a.x[i].size(0), op, ": group ", i, " has ", segs[i].size, " rows but x[", i,
                  "] has ", a.x[i].size(0));
    }
  }
  std::vector<GmmTask> tasks;
  int64_t row = 0;
  for (size_t i = 0; i < a.x.size(); ++i) {
    const at::Tensor rows = a.x[i].reshape({-1, a.x[i].size(-1)});
    const at::Tensor w = a.expertWeight(static_cast<int64_t>(i));
    const at::Tensor out = a.oneOutput() ? a.y[0].narrow(0, row, rows.size(0)) : a.y[i].view({-1, logicalCols(w)});
    tasks.push_back({rows, w, static_cast<int64_t>(i), perTokenRows(a, i, 0, rows.size(0)), out});
    row += rows.size(0);
  }
  return tasks;
}

std::vector<GmmTask> splitMTasks(const char* op, const GmmArgs& a, const std::vector<int64_t>& values) {
  const at::Tensor& x = a.x[0];
  const std::vector<Segment> segs = segmentsOf(op, values, a.groupListType, x.size(0));
  if (a.oneOutput()) {
    a.y[0].zero_();  // rows past the groups are not products of any expert
  } else {
    TORCH_CHECK(a.y.size() == segs.size(), op, ": out holds ", a.y.size(), " tensors for ", segs.size(), " groups");
  }
  std::vector<GmmTask> tasks;
  for (size_t i = 0; i < segs.size(); ++i) {
    const Segment& s = segs[i];
    TORCH_CHECK(s.group >= 0 && s.group < a.experts(), op, ": group ", i, " names expert ", s.group, " of ",
                a.experts());
    const at::Tensor out = a.oneOutput() ? a.y[0].narrow(0, s.start, s.size) : a.y[i];
    tasks.push_back({x.narrow(0, s.start, s.size), a.expertWeight(s.group), s.group,
                     perTokenRows(a, 0, s.start, s.size), out});
  }
  return tasks;
}

std::vector<GmmTask> splitKTasks(const char* op, const GmmArgs& a, const std::vector<int64_t>& values) {
  const at::Tensor& x = a.x[0];  // [m, k]
  const bool sharedWeight = a.weight.size() == 1 && a.weight[0].dim() == 2;  // [k, n], split like x
  std::vector<Segment> segs;
  if (a.grouped()) {
    segs = segmentsOf(op, values, a.groupListType, x.size(1));
  } else {  // each weight's rows are its group
    int64_t start = 0;
    for (int64_t e = 0; e < a.experts(); ++e) {
      const int64_t size = a.expertWeight(e).size(0);
      TORCH_CHECK(start + size <= x.size(1), op, ": the weights' k (", start + size, " so far) exceed x's k ",
                  x.size(1));
      segs.push_back({e, start, size});
      start += size;
    }
  }
  const int64_t outputs = a.oneOutput() ? a.y[0].size(0) : static_cast<int64_t>(a.y.size());
  TORCH_CHECK(outputs == static_cast<int64_t>(segs.size()), op, ": ", outputs, " outputs for ", segs.size(), " groups");
  std::vector<GmmTask> tasks;
  for (size_t i = 0; i < segs.size(); ++i) {
    const Segment& s = segs[i];
    at::Tensor w;
    if (sharedWeight) {
      TORCH_CHECK(s.start + s.size <= a.weight[0].size(0), op, ": the group list covers ", s.start + s.size,
                  " rows of a weight of ", a.weight[0].size(0));
      w = a.weight[0].narrow(0, s.start, s.size);
    } else {
      TORCH_CHECK(s.group >= 0 && s.group < a.experts(), op, ": group ", i, " names expert ", s.group);
      w = a.expertWeight(s.group);
      TORCH_CHECK(w.size(0) == s.size, op, ": group ", i, " spans ", s.size, " of k but its weight has ", w.size(0));
    }
    const at::Tensor out = a.oneOutput() ? a.y[0][static_cast<int64_t>(i)] : a.y[i];
    tasks.push_back({x.narrow(1, s.start, s.size), w, s.group, at::Tensor(), out});
  }
  return tasks;
}

at::Tensor floatProduct(const char* op, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  at::Tensor v = at::matmul(x.to(at::kFloat), w.to(at::kFloat));
  return bias.defined() ? v + columns(op, "bias", bias, w.size(1)).to(at::kFloat) : v;
}

// y = x @ ((w + antiquant_offset) * antiquant_scale) + bias, the weight dequantized in x's dtype.
at::Tensor weightOnlyProduct(const char* op, const at::Tensor& x, const at::Tensor& w, const at::Tensor& scale,
                             const at::Tensor& offset, const at::Tensor& bias) {
  const at::ScalarType dt = x.scalar_type();
  const int64_t k = x.size(1), n = logicalCols(w);
  at::Tensor wq = unpackedInt(w).to(dt);
  if (offset.defined()) wq = wq + rowsOfGroups(op, "antiquant_offset", offset, k, n).to(dt);
  const at::Tensor wd = wq * rowsOfGroups(op, "antiquant_scale", scale, k, n).to(dt);
  at::Tensor v = at::matmul(x.to(at::kFloat), wd.to(at::kFloat));
  return bias.defined() ? v + columns(op, "bias", bias, n).to(at::kFloat) : v;
}

struct QuantParams {
  at::Tensor bias, scale, offset;
};

// Integer operands (int8, or int4 carried by int32), exact in float64, dequantized in float64:
//   A8W8  (x @ w [+ int32 bias]) * scale [* per_token] [+ float bias] [+ offset, int8 output]
//   A4W4  sum over k groups of (x_g @ w_g) * scale_g [* per_token]
//   A8W4  (sum_g ((x_g - 8) @ w_g) * scale_g + bias + sum_g rowsum(x_g) * offset_g) [* per_token]
// (A8W4's bias is the offline 8 * sum_k(w * scale) that undoes the -8; its offset is antiquant_offset * scale.)
// int8 outputs come back saturated, int32 outputs raw, the rest as float64 values.
at::Tensor integerProduct(const char* op, const at::Tensor& x, const at::Tensor& w, const QuantParams& p,
                          const at::Tensor& perToken, at::ScalarType outType) {
  const bool a8w4 = x.scalar_type() == at::kChar && w.scalar_type() == at::kInt;
  const at::Tensor xi = unpackedInt(x).to(at::kDouble), wi = unpackedInt(w).to(at::kDouble);
  const at::Tensor xs = a8w4 ? xi - 8 : xi;
  const int64_t k = xi.size(1), n = wi.size(1);
  const bool intBias = p.bias.defined() && p.bias.scalar_type() == at::kInt;
  if (outType == at::kInt) {
    const at::Tensor acc = at::matmul(xs, wi);
    return (intBias ? acc + columns(op, "bias", p.bias, n).to(at::kDouble) : acc).to(at::kInt);
  }
  at::Tensor scale = floatScale(p.scale).to(at::kDouble);
  scale = scale.dim() <= 1 ? columns(op, "scale", scale, n).reshape({1, -1}) : scale.reshape({-1, scale.size(-1)});
  const int64_t groups = scale.size(0);
  TORCH_CHECK(k % groups == 0 && (scale.size(1) == n || scale.size(1) == 1), op, ": scale must be [n] or [G, n] with ",
              "G dividing k = ", k, " and n = ", n, ", got ", p.scale.sizes());
  TORCH_CHECK(!intBias || groups == 1, op, ": an int32 bias needs a per-channel scale");
  const int64_t step = k / groups;
  at::Tensor v;
  for (int64_t g = 0; g < groups; ++g) {
    at::Tensor acc = at::matmul(xs.narrow(1, g * step, step), wi.narrow(0, g * step, step));
    if (intBias) acc = acc + columns(op, "bias", p.bias, n).to(at::kDouble);
    const at::Tensor part = acc * scale[g];
    v = v.defined() ? v + part : part;
  }
  if (a8w4 && p.bias.defined()) v = v + columns(op, "bias", p.bias, n).to(at::kDouble);
  if (a8w4 && p.offset.defined()) {
    const at::Tensor off = p.offset.to(at::kDouble).reshape({-1, p.offset.size(-1)});
    TORCH_CHECK(k % off.size(0) == 0, op, ": offset's groups (", off.size(0), ") must divide k = ", k);
    const int64_t offStep = k / off.size(0);
    for (int64_t g = 0; g < off.size(0); ++g) {
      v = v + xi.narrow(1, g * offStep, offStep).sum(at::IntArrayRef{1}, /*keepdim=*/true) * off[g];
    }
  }
  if (perToken.defined()) v = v * perToken.to(at::kDouble).reshape({-1, 1});
  if (!a8w4 && p.bias.defined() && !intBias) v = v + columns(op, "bias", p.bias, n).to(at::kDouble);
  if (outType != at::kChar) return v;
  at::Tensor shift = p.offset.defined()                    ? p.offset
                     : p.scale.scalar_type() == at::kLong ? quant::unpackOffset(p.scale)
                                                          : at::Tensor();
  if (shift.defined()) v = v + columns(op, "offset", shift, n).to(at::kDouble);
  return quant::saturateInt8(v);
}

at::Tensor gmmProduct(const char* op, const GmmArgs& a, const GmmTask& t, at::ScalarType outType) {
  const int64_t experts = a.experts(), e = t.expert;
  const int64_t k = t.x.size(1) * (t.x.scalar_type() == at::kInt ? 8 : 1);
  TORCH_CHECK(k == t.weight.size(0), op, ": x's k (", k, ") does not match expert ", e, "'s weight ",
              t.weight.sizes());
  const at::Tensor bias = expertParam(a.bias, e, experts);
  at::Tensor v;
  switch (a.form) {
    case GmmForm::kFloat:
      v = floatProduct(op, t.x, t.weight, bias);
      break;
    case GmmForm::kWeightOnly:
      v = weightOnlyProduct(op, t.x, t.weight, expertParam(a.antiquantScale, e, experts),
                            expertParam(a.antiquantOffset, e, experts), bias);
      break;
    case GmmForm::kInteger:
      v = integerProduct(op, t.x, t.weight,
                         {bias, expertParam(a.scale, e, experts), expertParam(a.offset, e, experts)}, t.perToken,
                         outType);
      if (outType == at::kChar || outType == at::kInt) return v;
      break;
  }
  return activate(v, a.actType).to(at::kFloat).to(outType);
}

void runGmm(const char* op, const GmmArgs& a) {
  std::vector<int64_t> values = a.hostGroups;
  if (!a.groupsOnHost && a.groupList.defined()) values = listValues(a.groupList);
  std::vector<GmmTask> tasks;
  switch (a.layout()) {
    case GmmLayout::kPairs: tasks = pairTasks(op, a, values); break;
    case GmmLayout::kSplitM: tasks = splitMTasks(op, a, values); break;
    case GmmLayout::kSplitK: tasks = splitKTasks(op, a, values); break;
  }
  const at::ScalarType outType = a.y[0].scalar_type();
  for (const GmmTask& t : tasks) {
    const at::Tensor r = gmmProduct(op, a, t, outType);
    TORCH_CHECK(r.sizes() == t.out.sizes(), op, ": an output part is ", t.out.sizes(), " but its product is ",
                r.sizes());
    t.out.copy_(r);
  }
}

std::vector<at::Tensor> gmmInputs(const GmmArgs& a) {
  std::vector<at::Tensor> inputs;
  for (const auto* list : {&a.x, &a.weight, &a.bias, &a.scale, &a.offset, &a.antiquantScale, &a.antiquantOffset,
                           &a.perTokenScale}) {
    inputs.insert(inputs.end(), list->begin(), list->end());
  }
  inputs.push_back(a.groupList);
  return inputs;
}

// ---- Finalize routing ----

struct FinalizeArgs {
  at::Tensor x, w, scale, bias, offset, perToken, groupList, shared, logit, rowIndex, out;
  double sharedWeight;
  int64_t sharedOffset, groupListType;
};

void finalizeRouting(const char* op, const FinalizeArgs& f) {
  at::Tensor result = at::zeros(f.out.sizes(), f.out.options().dtype(at::kFloat));
  const int64_t rows = result.size(0), n = result.size(1);
  for (const Segment& s : segmentsOf(op, listValues(f.groupList), f.groupListType, f.x.size(0))) {
    const QuantParams p{f.bias.defined() ? f.bias[s.group] : at::Tensor(),
                        f.scale.defined() ? f.scale[s.group] : at::ones({n}, result.options()),
                        f.offset.defined() ? f.offset[s.group] : at::Tensor()};
    const at::Tensor tokens = f.perToken.defined() ? f.perToken.narrow(0, s.start, s.size) : at::Tensor();
    at::Tensor v = integerProduct(op, f.x.narrow(0, s.start, s.size), f.w[s.group], p, tokens, at::kFloat);
    v = v.to(at::kFloat);
    if (f.logit.defined()) v = v * f.logit.narrow(0, s.start, s.size).to(at::kFloat).unsqueeze(1);
    const at::TensorOptions longs = result.options().dtype(at::kLong);
    const at::Tensor index = f.rowIndex.defined() ? f.rowIndex.narrow(0, s.start, s.size).to(at::kLong)
                                                  : at::arange(s.start, s.start + s.size, longs);
    TORCH_CHECK(index.numel() == 0 || (index.min().item<int64_t>() >= 0 && index.max().item<int64_t>() < rows), op,
                ": row_index values must be in [0, ", rows, ")");
    result.index_add_(0, index, v);
  }
  if (f.shared.defined()) {
    result.narrow(0, f.sharedOffset, f.shared.size(0)).add_(f.shared.to(at::kFloat), f.sharedWeight);
  }
  f.out.copy_(result);
}

}  // namespace

// out = per expert x @ weight (+ bias), dequantized by the form the dtypes select, activated by actType; groupType
// -1 pairs x[i] with weight[i], 0 splits x's rows over the experts by groupList, 2 splits k. splitItem 0 / 1 give
// one output per x / group, 2 / 3 one output for all.
extern "C" NOP_API aclnnStatus aclnnGroupedMatmulV5GetWorkspaceSize(
    const aclTensorList* x, const aclTensorList* weight, const aclTensorList* biasOptional,
    const aclTensorList* scaleOptional, const aclTensorList* offsetOptional,
    const aclTensorList* antiquantScaleOptional, const aclTensorList* antiquantOffsetOptional,
    const aclTensorList* perTokenScaleOptional, const aclTensor* groupListOptional,
    const aclTensorList* activationInputOptional, const aclTensorList* activationQuantScaleOptional,
    const aclTensorList* activationQuantOffsetOptional, int64_t splitItem, int64_t groupType, int64_t groupListType,
    int64_t actType, const aclIntArray* tuningConfigOptional, const aclTensorList* out,
    const aclTensorList* activationFeatureOutOptional, const aclTensorList* dynQuantScaleOutOptional,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnGroupedMatmulV5", workspaceSize, executor, [&] {
    const char* op = "aclnnGroupedMatmulV5";
    const std::pair<const char*, const aclTensorList*> unused[] = {
        {"activation_input", activationInputOptional}, {"activation_quant_scale", activationQuantScaleOptional},
        {"activation_quant_offset", activationQuantOffsetOptional},
        {"activation_feature_out", activationFeatureOutOptional}, {"dyn_quant_scale_out", dynQuantScaleOutOptional}};
    for (const auto& [name, list] : unused) {
      TORCH_CHECK(optionalTensors(list).empty(), op, ": ", name, " is reserved; pass none");
    }
    for (int64_t v : intArray(tuningConfigOptional)) {  // a tiling hint: nothing to tile here
      TORCH_CHECK(v >= 0, op, ": tuning_config values must not be negative, got ", v);
    }
    GmmArgs a;
    a.x = hostTensors(x);
    a.weight = hostTensors(weight);
    a.bias = optionalTensors(biasOptional);
    a.scale = optionalTensors(scaleOptional);
    a.offset = optionalTensors(offsetOptional);
    a.antiquantScale = optionalTensors(antiquantScaleOptional);
    a.antiquantOffset = optionalTensors(antiquantOffsetOptional);
    a.perTokenScale = optionalTensors(perTokenScaleOptional);
    a.groupList = hostTensor(groupListOptional);
    a.y = hostTensors(out);
    a.splitItem = splitItem;
    a.groupType = groupType;
    a.groupListType = groupListType;
    a.actType = actType;
    checkGmm(op, a);
    return Prepared{gmmInputs(a), [=]() { runGmm(op, a); }, a.y};
  });
}
NPU_ATEN_OP(GroupedMatmulV5,
            "x, weight, biasOptional, scaleOptional, offsetOptional, antiquantScaleOptional, antiquantOffsetOptional, "
            "perTokenScaleOptional, groupListOptional, activationInputOptional, activationQuantScaleOptional, "
            "activationQuantOffsetOptional, splitItem, groupType, groupListType, actType, tuningConfigOptional, out, "
            "activationFeatureOutOptional, dynQuantScaleOutOptional");

// The first grouped matmul: the group list is a host array of cumulative row ends (x's rows split over the
// experts), none pairs x[i] with weight[i]; no per-token scales or activations.
extern "C" NOP_API aclnnStatus aclnnGroupedMatmulGetWorkspaceSize(
    const aclTensorList* x, const aclTensorList* weight, const aclTensorList* biasOptional,
    const aclTensorList* scaleOptional, const aclTensorList* offsetOptional,
    const aclTensorList* antiquantScaleOptional, const aclTensorList* antiquantOffsetOptional,
    const aclIntArray* groupListOptional, int64_t splitItem, const aclTensorList* y, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnGroupedMatmul", workspaceSize, executor, [&] {
    const char* op = "aclnnGroupedMatmul";
    GmmArgs a;
    a.x = hostTensors(x);
    a.weight = hostTensors(weight);
    a.bias = optionalTensors(biasOptional);
    a.scale = optionalTensors(scaleOptional);
    a.offset = optionalTensors(offsetOptional);
    a.antiquantScale = optionalTensors(antiquantScaleOptional);
    a.antiquantOffset = optionalTensors(antiquantOffsetOptional);
    a.hostGroups = intArray(groupListOptional);
    a.groupsOnHost = true;
    a.y = hostTensors(y);
    a.splitItem = splitItem;
    a.groupType = a.hostGroups.empty() ? -1 : 0;
    segmentsOf(op, a.hostGroups, 0, std::numeric_limits<int64_t>::max());  // known now: fail now
    checkGmm(op, a);
    return Prepared{gmmInputs(a), [=]() { runGmm(op, a); }, a.y};
  });
}
NPU_ATEN_OP(GroupedMatmul, "x, weight, biasOptional, scaleOptional, offsetOptional, antiquantScaleOptional, "
                           "antiquantOffsetOptional, groupListOptional, splitItem, y");

// out[rowIndex[r]] += logit[r] * dequant(x[r] @ w[expert of r]) for the rows of the groups, then
// out[sharedInputOffset + i] += sharedInputWeight * sharedInput[i]; out is float32 [rows, n], zero elsewhere.
// x int8; w int8 (scale [e, n] float32 / bfloat16, per-token scales) or int4 in int32 (A8W4: int64 scale
// [e, G, n], bias [e, n], offset [e, G, n], as npu_grouped_matmul's A8W4).
extern "C" NOP_API aclnnStatus aclnnGroupedMatmulFinalizeRoutingV3GetWorkspaceSize(
    const aclTensor* x, const aclTensor* w, const aclTensor* scaleOptional, const aclTensor* biasOptional,
    const aclTensor* offsetOptional, const aclTensor* antiquantScaleOptional, const aclTensor* antiquantOffsetOptional,
    const aclTensor* pertokenScaleOptional, const aclTensor* groupListOptional, const aclTensor* sharedInputOptional,
    const aclTensor* logitOptional, const aclTensor* rowIndexOptional, int64_t dtype, double sharedInputWeight,
    int64_t sharedInputOffset, bool transposeX, bool transposeW, int64_t groupListType,
    const aclIntArray* tuningConfigOptional, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnGroupedMatmulFinalizeRoutingV3", workspaceSize, executor, [&] {
    const char* op = "aclnnGroupedMatmulFinalizeRoutingV3";
    at::Tensor xt = requiredTensor(x, "x"), wt = requiredTensor(w, "w");
    at::Tensor gl = requiredTensor(groupListOptional, "groupList");
    at::Tensor scale = hostTensor(scaleOptional), bias = hostTensor(biasOptional), offset = hostTensor(offsetOptional);
    at::Tensor pt = hostTensor(pertokenScaleOptional), shared = hostTensor(sharedInputOptional);
    at::Tensor logit = hostTensor(logitOptional), rowIndex = hostTensor(rowIndexOptional);
    at::Tensor o = requiredTensor(out, "out");
    TORCH_CHECK(!hostTensor(antiquantScaleOptional).defined() && !hostTensor(antiquantOffsetOptional).defined(), op,
                ": antiquant_scale / antiquant_offset are reserved; pass none");
    TORCH_CHECK(!transposeX && !transposeW, op, ": transposed x / w are not taken");
    TORCH_CHECK(dtype == 0 && o.scalar_type() == at::kFloat, op, ": the output is float32 (dtype 0), got dtype ", dtype,
                " and out ", o.scalar_type());
    TORCH_CHECK(groupListType == 0 || groupListType == 1, op, ": groupListType must be 0 (cumsum) or 1 (counts), got ",
                groupListType);
    TORCH_CHECK(xt.scalar_type() == at::kChar && xt.dim() == 2, op, ": x must be int8 [m, k], got ", xt.scalar_type(),
                " ", xt.sizes());
    TORCH_CHECK((wt.scalar_type() == at::kChar || wt.scalar_type() == at::kInt) && wt.dim() == 3, op,
                ": w must be int8 (or int32 carrying int4) [e, k, n], got ", wt.scalar_type(), " ", wt.sizes());
    const bool a8w4 = wt.scalar_type() == at::kInt;
    const int64_t m = xt.size(0), e = wt.size(0), n = logicalCols(wt);
    TORCH_CHECK(xt.size(1) == wt.size(1), op, ": x ", xt.sizes(), " and w ", wt.sizes(), " do not multiply (k)");
    TORCH_CHECK(o.dim() == 2 && o.size(1) == n, op, ": out must be [rows, ", n, "], got ", o.sizes());
    TORCH_CHECK(gl.dim() == 1 && gl.size(0) <= e && !isFloat(gl.scalar_type()), op,
                ": groupList must be integer [e] with e <= ", e, ", got ", gl.sizes());
    TORCH_CHECK(a8w4 || (!bias.defined() && !offset.defined()), op,
                ": bias and offset are taken with int4 weights only");
    TORCH_CHECK(!a8w4 || (scale.defined() && scale.scalar_type() == at::kLong), op,
                ": int4 weights need an int64 scale [e, G, n]");
    TORCH_CHECK(!scale.defined() || scale.size(0) == e, op, ": scale must start with e = ", e, ", got ", scale.sizes());
    TORCH_CHECK(!bias.defined() || (bias.dim() == 2 && bias.size(0) == e), op, ": bias must be [e, n], got ",
                bias.sizes());
    TORCH_CHECK(!offset.defined() || (offset.dim() == 3 && offset.size(0) == e), op, ": offset must be [e, G, n], got ",
                offset.sizes());
    for (const auto& [name, t] : {std::make_pair("pertoken_scale", pt), std::make_pair("logit", logit),
                                  std::make_pair("row_index", rowIndex)}) {
      TORCH_CHECK(!t.defined() || (t.dim() == 1 && t.size(0) == m), op, ": ", name, " must be [m] = [", m, "], got ",
                  t.sizes());
    }
    TORCH_CHECK(!rowIndex.defined() || !isFloat(rowIndex.scalar_type()), op, ": row_index must be integer");
    TORCH_CHECK(!shared.defined() || (shared.dim() == 2 && shared.size(1) == n && sharedInputOffset >= 0 &&
                                      sharedInputOffset + shared.size(0) <= o.size(0)),
                op, ": shared_input [rows, ", n, "] must fit in out ", o.sizes(), " from row ", sharedInputOffset,
                ", got ", shared.sizes());
    for (int64_t v : intArray(tuningConfigOptional)) {
      TORCH_CHECK(v >= 0, op, ": tuning_config values must not be negative, got ", v);
    }
    const FinalizeArgs f{xt, wt, scale, bias, offset, pt, gl, shared, logit, rowIndex, o, sharedInputWeight,
                         sharedInputOffset, groupListType};
    return Prepared{{xt, wt, scale, bias, offset, pt, gl, shared, logit, rowIndex}, [=]() { finalizeRouting(op, f); },
                    {o}};
  });
}
NPU_ATEN_OP(GroupedMatmulFinalizeRoutingV3,
            "x, w, scaleOptional, biasOptional, offsetOptional, antiquantScaleOptional, antiquantOffsetOptional, "
            "pertokenScaleOptional, groupListOptional, sharedInputOptional, logitOptional, rowIndexOptional, dtype, "
            "sharedInputWeight, sharedInputOffset, transposeX, transposeW, groupListType, tuningConfigOptional, out");

// yRef[i] += x_i^T @ weight_i for the k groups of groupList (x [k, m] with transposeX, else [m, k]; weight [k, n],
// or [n, k] with transposeWeight); yRef is float32 [groups * m, n] or [groups, m, n].
extern "C" NOP_API aclnnStatus aclnnGroupedMatmulAddV2GetWorkspaceSize(const aclTensor* x, const aclTensor* weight,
                                                                      const aclTensor* groupList, aclTensor* yRef,
                                                                      bool transposeX, bool transposeWeight,
                                                                      int64_t groupType, int64_t groupListType,
                                                                      uint64_t* workspaceSize,
                                                                      aclOpExecutor** executor) {
  return prepareOp("aclnnGroupedMatmulAddV2", workspaceSize, executor, [&] {
    const char* op = "aclnnGroupedMatmulAddV2";
    at::Tensor xt = requiredTensor(x, "x"), wt = requiredTensor(weight, "weight");
    at::Tensor gl = requiredTensor(groupList, "groupList"), y = requiredTensor(yRef, "yRef");
    TORCH_CHECK(groupType == 2, op, ": only groupType 2 (k split) is taken, got ", groupType);
    TORCH_CHECK(groupListType == 0 || groupListType == 1, op, ": groupListType must be 0 (cumsum) or 1 (counts), got ",
                groupListType);
    TORCH_CHECK(xt.dim() == 2 && wt.dim() == 2 && isFloat(xt.scalar_type()) && wt.scalar_type() == xt.scalar_type(),
                op, ": x and weight must be 2-D of one float dtype, got ", xt.scalar_type(), " ", xt.sizes(), " and ",
                wt.scalar_type(), " ", wt.sizes());
    TORCH_CHECK(y.scalar_type() == at::kFloat, op, ": yRef must be float32, got ", y.scalar_type());
    TORCH_CHECK(gl.dim() == 1 && !isFloat(gl.scalar_type()), op, ": groupList must be integer [groups], got ",
                gl.sizes());
    const at::Tensor xk = transposeX ? xt : xt.t();          // [k, m]
    const at::Tensor wk = transposeWeight ? wt.t() : wt;     // [k, n]
    const int64_t groups = gl.size(0), m = xk.size(1), n = wk.size(1);
    TORCH_CHECK(xk.size(0) == wk.size(0), op, ": x and weight split different k: ", xk.size(0), " and ", wk.size(0));
    TORCH_CHECK(y.numel() == groups * m * n && y.dim() >= 2 && y.size(-1) == n, op, ": yRef must hold ", groups,
                " groups of [", m, ", ", n, "], got ", y.sizes());
    return Prepared{{xt, wt, gl, y}, [=]() {
                      at::Tensor acc = at::zeros({groups, m, n}, y.options());
                      for (const Segment& s : segmentsOf(op, listValues(gl), groupListType, xk.size(0))) {
                        acc[s.group].copy_(at::matmul(xk.narrow(0, s.start, s.size).t().to(at::kFloat),
                                                      wk.narrow(0, s.start, s.size).to(at::kFloat)));
                      }
                      y.copy_((y.to(at::kDouble) + acc.to(at::kDouble).reshape(y.sizes())).to(at::kFloat));
                    },
                    {y}};
  });
}
NPU_ATEN_OP(GroupedMatmulAddV2, "x, weight, groupList, yRef, transposeX, transposeWeight, groupType, groupListType");
