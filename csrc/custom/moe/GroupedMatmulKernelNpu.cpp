// GroupedMatmulKernelNpu.cpp - npu_grouped_matmul, MoE's per-expert matmuls over tensor lists (group_list as a
// tensor: aclnnGroupedMatmulV5; as a list of cumulative row ends, the .List overload: aclnnGroupedMatmul), and their
// Meta kernels. Outputs as torch_npu allocates them: one per x / group (split_item 0, 1) or one for all (2, 3).
// The gradient (float path) is GroupedMatmulAutogradKernelNpu.cpp.
#include <ATen/ops/empty.h>

#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/NpuDtypeCodes.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_grouped_matmul";

bool present(const std::optional<at::TensorList>& list) { return list.has_value() && !list->empty(); }

// One group of the split axis as the host sees it: its expert and size.
struct HostGroup {
  int64_t expert;
  int64_t size;
};

// Group list values: cumulative ends (type 0), sizes (1) or [expert, size] pairs (2).
std::vector<HostGroup> hostGroups(const std::vector<int64_t>& values, int64_t list_type) {
  std::vector<HostGroup> groups;
  const size_t count = list_type == 2 ? values.size() / 2 : values.size();
  int64_t end = 0;
  for (size_t i = 0; i < count; ++i) {
    HostGroup g{static_cast<int64_t>(i), 0};
    if (list_type == 0) {
      g.size = values[i] - end;
      end = values[i];
    } else if (list_type == 1) {
      g.size = values[i];
    } else {
      g.expert = values[2 * i];
      g.size = values[2 * i + 1];
    }
    TORCH_CHECK_VALUE(g.size >= 0, kOp, ": group_list must give non-negative group sizes",
                      list_type == 0 ? " (cumulative ends that never decrease)" : "", "; group ", i, " has ", g.size);
    groups.push_back(g);
  }
  return groups;
}

std::vector<int64_t> deviceValues(const at::Tensor& group_list) {
  const at::Tensor values = group_list.cpu().to(at::kLong).contiguous();
  const int64_t* p = values.const_data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + values.numel());
}

enum class Layout { kPairs, kSplitM, kSplitK };

// The operands' geometry, and how the device op pairs x with the experts (same rule as GroupedMatmulOps.cpp).
struct GmmGeometry {
  at::TensorList x, weight;
  int64_t split_item = 0, group_type = -1;
  bool grouped = false;      // a group list was given
  int64_t group_count = 0;   // its groups (rows of an [E, 2] list)

  bool single_weight() const { return weight.size() == 1 && weight[0].dim() == 3; }
  int64_t experts() const { return single_weight() ? weight[0].size(0) : static_cast<int64_t>(weight.size()); }
  const at::Tensor& weight_of(int64_t e) const { return single_weight() ? weight[0] : weight[e]; }
  int64_t k_of(int64_t e) const { return weight_of(e).size(-2); }
  int64_t n_of(int64_t e) const {
    const at::Tensor& w = weight_of(e);
    return w.size(-1) * (w.scalar_type() == at::kInt ? 8 : 1);  // int32 carries 8 int4 values
  }
  int64_t x_k(size_t i) const { return x[i].size(-1) * (x[i].scalar_type() == at::kInt ? 8 : 1); }
  Layout layout() const {
    if (group_type == 2) return Layout::kSplitK;
    if (group_type == 0 && x.size() == 1 && x[0].dim() == 2 && (experts() > 1 || grouped)) return Layout::kSplitM;
    return Layout::kPairs;
  }
};

void checkWeights(const GmmGeometry& g) {
  for (const at::Tensor& w : g.weight) {
    TORCH_CHECK_VALUE(w.dim() == 2 || (g.weight.size() == 1 && w.dim() == 3), kOp,
                      ": weight must be [k, n] tensors or one [experts, k, n] tensor, got ", w.sizes());
  }
}

void checkSameN(const GmmGeometry& g, int64_t count) {
  for (int64_t e = 1; e < count; ++e) {
    TORCH_CHECK_VALUE(g.n_of(e) == g.n_of(0), kOp, ": one output (split_item 2 / 3) needs every weight's n equal, got ",
                      g.n_of(0), " and ", g.n_of(e));
  }
}

std::vector<std::vector<int64_t>> pairShapes(const GmmGeometry& g) {
  TORCH_CHECK_VALUE(static_cast<int64_t>(g.x.size()) == g.experts(), kOp, ": with group_type ", g.group_type,
                    " x[i] multiplies weight[i], but x has ", g.x.size(), " tensors for ", g.experts(),
                    " weights (one x of all rows with a group_list splits its rows: group_type 0)");
  std::vector<std::vector<int64_t>> shapes;
  int64_t rows = 0;
  for (size_t i = 0; i < g.x.size(); ++i) {
    const int64_t e = static_cast<int64_t>(i);
    TORCH_CHECK_VALUE(g.x[i].dim() >= 2 && g.x[i].dim() <= 6 && (g.split_item < 2 || g.x[i].dim() == 2), kOp,
                      ": x[", i, "] must have 2 to 6 dimensions (2 for one output, split_item 2 / 3), got ",
                      g.x[i].sizes());
    TORCH_CHECK_VALUE(g.x_k(i) == g.k_of(e), kOp, ": x[", i, "] ", g.x[i].sizes(), " and its weight ",
                      g.weight_of(e).sizes(), " do not multiply (k differs)");
    std::vector<int64_t> shape = g.x[i].sizes().vec();
    shape.back() = g.n_of(e);
    shapes.push_back(shape);
    rows += g.x[i].size(0);
  }
  if (g.split_item < 2) return shapes;
  checkSameN(g, g.experts());
  return {{rows, g.n_of(0)}};
}

std::vector<std::vector<int64_t>> splitMShapes(const GmmGeometry& g,
                                               const std::optional<std::vector<HostGroup>>& groups) {
  TORCH_CHECK_VALUE(g.grouped, kOp, ": x as one tensor for ", g.experts(),
                    " experts needs a group_list giving each expert's rows");
  for (int64_t e = 0; e < g.experts(); ++e) {
    TORCH_CHECK_VALUE(g.x_k(0) == g.k_of(e), kOp, ": x ", g.x[0].sizes(), " and expert ", e, "'s weight do not ",
                      "multiply (k ", g.x_k(0), " vs ", g.k_of(e), ")");
  }
  if (g.split_item >= 2) {
    checkSameN(g, g.experts());
    return {{g.x[0].size(0), g.n_of(0)}};
  }
  TORCH_CHECK_VALUE(groups.has_value(), kOp, ": with split_item 0 / 1 each output has its group's rows, which come ",
                    "from group_list's values; a Meta / fake tensor cannot read them. Use split_item 2 / 3 (one ",
                    "output) or pass x as per-group tensors");
  std::vector<std::vector<int64_t>> shapes;
  int64_t rows = 0;
  for (const HostGroup& h : *groups) {
    TORCH_CHECK_VALUE(h.expert >= 0 && h.expert < g.experts(), kOp, ": group_list names expert ", h.expert, " of ",
                      g.experts());
    shapes.push_back({h.size, g.n_of(h.expert)});
    rows += h.size;
  }
  TORCH_CHECK_VALUE(rows <= g.x[0].size(0), kOp, ": group_list covers ", rows, " rows of x's ", g.x[0].size(0));
  return shapes;
}

std::vector<std::vector<int64_t>> splitKShapes(const GmmGeometry& g) {
  TORCH_CHECK_VALUE(g.x.size() == 1 && g.x[0].dim() == 2, kOp,
                    ": group_type 2 (split k) takes x as one [m, k] tensor (usually a transposed view)");
  const bool shared = g.weight.size() == 1 && g.weight[0].dim() == 2;  // one [k, n] weight split like x
  const int64_t m = g.x[0].size(0);
  if (g.split_item >= 2) {
    TORCH_CHECK_VALUE(g.grouped, kOp, ": group_type 2 with split_item 2 / 3 needs a group_list splitting k");
    checkSameN(g, g.experts());
    return {{g.group_count, m, g.n_of(0)}};
  }
  const int64_t outputs = g.grouped ? g.group_count : g.experts();
  TORCH_CHECK_VALUE(shared || g.single_weight() || outputs == g.experts(), kOp, ": ", outputs, " groups of k for ",
                    g.experts(), " weights");
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t i = 0; i < outputs; ++i) shapes.push_back({m, g.n_of(shared || g.single_weight() ? 0 : i)});
  return shapes;
}

std::vector<std::vector<int64_t>> outputShapes(const GmmGeometry& g,
                                               const std::optional<std::vector<HostGroup>>& groups) {
  TORCH_CHECK_VALUE(!g.x.empty() && !g.weight.empty(), kOp, ": x and weight must each hold at least one tensor");
  TORCH_CHECK_VALUE(g.split_item >= 0 && g.split_item <= 3, kOp, ": split_item must be 0, 1 (one output per group) ",
                    "or 2, 3 (one output), got ", g.split_item);
  checkWeights(g);
  switch (g.layout()) {
    case Layout::kPairs: return pairShapes(g);
    case Layout::kSplitM: return splitMShapes(g, groups);
    case Layout::kSplitK: return splitKShapes(g);
  }
  return {};
}

void checkOperandTypes(at::TensorList x, at::TensorList weight) {
  const auto plain = [](at::ScalarType t) {
    return t == at::kFloat || t == at::kHalf || t == at::kBFloat16 || t == at::kChar || t == at::kInt;
  };
  for (const at::TensorList list : {x, weight}) {
    for (const at::Tensor& t : list) {
      TORCH_CHECK_TYPE(plain(t.scalar_type()), kOp, ": x and weight must be float32, float16, bfloat16, int8 or ",
                       "int32 (carrying int4), got ", t.scalar_type(), " (float8 / float4 forms are chip number ",
                       "formats the software NPU does not have)");
    }
  }
}

at::ScalarType outputType(at::TensorList x, std::optional<at::ScalarType> requested) {
  if (!requested.has_value()) {
    TORCH_CHECK_VALUE(x[0].scalar_type() != at::kInt, kOp, ": x of int32 (int4 values) needs output_dtype ",
                      "torch.float16 or torch.bfloat16");
    return x[0].scalar_type();
  }
  const at::ScalarType t = *requested;
  TORCH_CHECK_VALUE(t == at::kFloat || t == at::kHalf || t == at::kBFloat16 || t == at::kChar || t == at::kInt, kOp,
                    ": output_dtype must be torch.float32, float16, bfloat16, int8 or int32, got ", t);
  return t;
}

std::optional<at::ScalarType> dtypeArgument(std::optional<int64_t> code) {
  if (!code.has_value()) return std::nullopt;
  return dtype_codes::scalarTypeOfCode(kOp, "output_dtype", *code, "output");
}

void checkChipForms(std::initializer_list<std::pair<const char*, bool>> given) {
  for (const auto& [name, is_given] : given) {
    TORCH_CHECK_VALUE(!is_given, kOp, ": ", name, " selects a chip number format (float8 / hifloat8 / float4 / ",
                      "float8_e8m0 scales), which the software NPU does not have; leave it None");
  }
}

void checkReserved(const std::optional<at::TensorList>& activation_input,
                   const std::optional<at::TensorList>& activation_quant_scale,
                   const std::optional<at::TensorList>& activation_quant_offset) {
  TORCH_CHECK_VALUE(!present(activation_input) && !present(activation_quant_scale) &&
                        !present(activation_quant_offset),
                    kOp, ": activation_input, activation_quant_scale and activation_quant_offset are reserved; ",
                    "pass None");
}

std::vector<at::Tensor> allocate(at::TensorList x, const std::vector<std::vector<int64_t>>& shapes,
                                 at::ScalarType type) {
  std::vector<at::Tensor> y;
  for (const auto& shape : shapes) y.push_back(at::empty(shape, x[0].options().dtype(type)));
  return y;
}

// The tensor form's checks and outputs; `read_groups` says whether group_list's values may be read (not on Meta).
std::vector<at::Tensor> tensorFormOutputs(at::TensorList x, at::TensorList weight,
                                          const std::optional<at::Tensor>& group_list,
                                          const std::optional<at::TensorList>& activation_input,
                                          const std::optional<at::TensorList>& activation_quant_scale,
                                          const std::optional<at::TensorList>& activation_quant_offset,
                                          std::optional<int64_t> split_item, std::optional<int64_t> group_type,
                                          std::optional<int64_t> group_list_type, std::optional<int64_t> act_type,
                                          std::optional<int64_t> output_dtype, std::optional<int64_t> x_dtype,
                                          std::optional<int64_t> weight_dtype, std::optional<int64_t> scale_dtype,
                                          std::optional<int64_t> per_token_scale_dtype, bool read_groups) {
  // RuntimeErrors with torch_npu's wording: its tests match these two.
  TORCH_CHECK(group_type.has_value(), kOp, ": Requires manual passing group_type (-1: x[i] @ weight[i]; 0: split ",
              "x's rows by group_list; 2: split k by group_list), current is None");
  TORCH_CHECK(*group_type == -1 || *group_type == 0 || *group_type == 2, kOp,
              ": The group type must be -1 (no split), 0 (split m) or 2 (split k), got ", *group_type);
  checkChipForms({{"x_dtype", x_dtype.has_value()},
                  {"weight_dtype", weight_dtype.has_value()},
                  {"scale_dtype", scale_dtype.has_value()},
                  {"per_token_scale_dtype", per_token_scale_dtype.has_value()}});
  checkReserved(activation_input, activation_quant_scale, activation_quant_offset);
  const int64_t list_type = group_list_type.value_or(0), act = act_type.value_or(0);
  TORCH_CHECK_VALUE(list_type >= 0 && list_type <= 2, kOp, ": group_list_type must be 0 (cumulative ends), 1 (sizes) ",
                    "or 2 ([expert, size] rows), got ", list_type);
  TORCH_CHECK_VALUE(act == 0 || act == 1 || act == 2 || act == 4 || act == 5, kOp, ": act_type must be 0 (none), ",
                    "1 (relu), 2 (gelu tanh), 4 (fast gelu) or 5 (silu), got ", act);
  TORCH_CHECK_VALUE(!(x.empty() || weight.empty()), kOp, ": x and weight must each hold at least one tensor");
  checkOperandTypes(x, weight);
  GmmGeometry g{x, weight, split_item.value_or(0), *group_type, group_list.has_value(), 0};
  if (group_list.has_value()) {
    const at::Tensor& gl = *group_list;
    TORCH_CHECK_VALUE(*group_type != -1, kOp, ": group_type -1 (no split) takes no group_list");
    TORCH_CHECK_TYPE(!at::isFloatingType(gl.scalar_type()), kOp, ": group_list must be an integer tensor, got ",
                     gl.scalar_type());
    TORCH_CHECK_VALUE(list_type == 2 ? (gl.dim() == 2 && gl.size(1) == 2) : gl.dim() == 1, kOp, ": group_list must be ",
                      list_type == 2 ? "[groups, 2] rows of (expert, size)" : "1-D", " for group_list_type ", list_type,
                      ", got ", gl.sizes());
    g.group_count = gl.size(0);
  }
  std::optional<std::vector<HostGroup>> groups;
  if (read_groups && g.grouped && g.layout() == Layout::kSplitM && g.split_item < 2) {
    groups = hostGroups(deviceValues(*group_list), list_type);  // output sizes depend on the values
  }
  const at::ScalarType out_type = outputType(x, dtypeArgument(output_dtype));
  return allocate(x, outputShapes(g, groups), out_type);
}

// The list form: group_list holds cumulative row ends on the host; no per-token scales or activations.
std::vector<at::Tensor> listFormOutputs(at::TensorList x, at::TensorList weight,
                                        const std::optional<at::TensorList>& per_token_scale,
                                        at::OptionalIntArrayRef group_list,
                                        const std::optional<at::TensorList>& activation_input,
                                        const std::optional<at::TensorList>& activation_quant_scale,
                                        const std::optional<at::TensorList>& activation_quant_offset,
                                        std::optional<int64_t> split_item, std::optional<int64_t> group_type,
                                        std::optional<int64_t> group_list_type, std::optional<int64_t> act_type,
                                        std::optional<at::ScalarType> output_dtype) {
  const bool grouped = group_list.has_value() && !group_list->empty();
  TORCH_CHECK_VALUE(!present(per_token_scale), kOp, ": per_token_scale needs group_list as a tensor (the list form ",
                    "takes none)");
  checkReserved(activation_input, activation_quant_scale, activation_quant_offset);
  TORCH_CHECK_VALUE(group_list_type.value_or(0) == 0 && act_type.value_or(0) == 0, kOp, ": with group_list as a ",
                    "list (cumulative ends) group_list_type and act_type must be None or 0; pass a tensor for others");
  TORCH_CHECK_VALUE(!group_type.has_value() || *group_type == (grouped ? 0 : -1), kOp, ": with group_list as a list ",
                    "group_type must be None, or ", grouped ? "0 (its rows are split)" : "-1 (no group_list)", ", got ",
                    *group_type);
  checkOperandTypes(x, weight);
  GmmGeometry g{x, weight, split_item.value_or(0), grouped ? 0 : -1, grouped,
                grouped ? static_cast<int64_t>(group_list->size()) : 0};
  std::optional<std::vector<HostGroup>> groups;
  if (grouped) groups = hostGroups(group_list->vec(), 0);
  return allocate(x, outputShapes(g, groups), outputType(x, output_dtype));
}

}  // namespace

std::vector<at::Tensor> npu_grouped_matmul(
    at::TensorList x, at::TensorList weight, std::optional<at::TensorList> bias, std::optional<at::TensorList> scale,
    std::optional<at::TensorList> offset, std::optional<at::TensorList> antiquant_scale,
    std::optional<at::TensorList> antiquant_offset, std::optional<at::TensorList> per_token_scale,
    const std::optional<at::Tensor>& group_list, std::optional<at::TensorList> activation_input,
    std::optional<at::TensorList> activation_quant_scale, std::optional<at::TensorList> activation_quant_offset,
    std::optional<int64_t> split_item, std::optional<int64_t> group_type, std::optional<int64_t> group_list_type,
    std::optional<int64_t> act_type, at::OptionalIntArrayRef tuning_config, std::optional<int64_t> output_dtype,
    std::optional<int64_t> x_dtype, std::optional<int64_t> weight_dtype, std::optional<int64_t> scale_dtype,
    std::optional<int64_t> per_token_scale_dtype) {
  std::vector<at::Tensor> y = tensorFormOutputs(
      x, weight, group_list, activation_input, activation_quant_scale, activation_quant_offset, split_item, group_type,
      group_list_type, act_type, output_dtype, x_dtype, weight_dtype, scale_dtype, per_token_scale_dtype, true);
  const at::TensorList none;
  const int64_t split = split_item.value_or(0), type = *group_type, list_type = group_list_type.value_or(0);
  const int64_t act = act_type.value_or(0);
  EXEC_NPU_CMD(aclnnGroupedMatmulV5, x, weight, bias.value_or(none), scale.value_or(none), offset.value_or(none),
               antiquant_scale.value_or(none), antiquant_offset.value_or(none), per_token_scale.value_or(none),
               group_list, none, none, none, split, type, list_type, act, tuning_config, at::TensorList(y), none, none);
  return y;
}

std::vector<at::Tensor> npu_grouped_matmul_meta(
    at::TensorList x, at::TensorList weight, std::optional<at::TensorList> bias, std::optional<at::TensorList> scale,
    std::optional<at::TensorList> offset, std::optional<at::TensorList> antiquant_scale,
    std::optional<at::TensorList> antiquant_offset, std::optional<at::TensorList> per_token_scale,
    const std::optional<at::Tensor>& group_list, std::optional<at::TensorList> activation_input,
    std::optional<at::TensorList> activation_quant_scale, std::optional<at::TensorList> activation_quant_offset,
    std::optional<int64_t> split_item, std::optional<int64_t> group_type, std::optional<int64_t> group_list_type,
    std::optional<int64_t> act_type, at::OptionalIntArrayRef tuning_config, std::optional<int64_t> output_dtype,
    std::optional<int64_t> x_dtype, std::optional<int64_t> weight_dtype, std::optional<int64_t> scale_dtype,
    std::optional<int64_t> per_token_scale_dtype) {
  return tensorFormOutputs(x, weight, group_list, activation_input, activation_quant_scale, activation_quant_offset,
                           split_item, group_type, group_list_type, act_type, output_dtype, x_dtype, weight_dtype,
                           scale_dtype, per_token_scale_dtype, false);
}

std::vector<at::Tensor> npu_grouped_matmul_List(
    at::TensorList x, at::TensorList weight, std::optional<at::TensorList> bias, std::optional<at::TensorList> scale,
    std::optional<at::TensorList> offset, std::optional<at::TensorList> antiquant_scale,
    std::optional<at::TensorList> antiquant_offset, std::optional<at::TensorList> per_token_scale,
    at::OptionalIntArrayRef group_list, std::optional<at::TensorList> activation_input,
    std::optional<at::TensorList> activation_quant_scale, std::optional<at::TensorList> activation_quant_offset,
    std::optional<int64_t> split_item, std::optional<int64_t> group_type, std::optional<int64_t> group_list_type,
    std::optional<int64_t> act_type, std::optional<at::ScalarType> output_dtype) {
  std::vector<at::Tensor> y = listFormOutputs(x, weight, per_token_scale, group_list, activation_input,
                                              activation_quant_scale, activation_quant_offset, split_item, group_type,
                                              group_list_type, act_type, output_dtype);
  const at::TensorList none;
  const int64_t split = split_item.value_or(0);
  EXEC_NPU_CMD(aclnnGroupedMatmul, x, weight, bias.value_or(none), scale.value_or(none), offset.value_or(none),
               antiquant_scale.value_or(none), antiquant_offset.value_or(none), group_list, split, at::TensorList(y));
  return y;
}

std::vector<at::Tensor> npu_grouped_matmul_List_meta(
    at::TensorList x, at::TensorList weight, std::optional<at::TensorList> bias, std::optional<at::TensorList> scale,
    std::optional<at::TensorList> offset, std::optional<at::TensorList> antiquant_scale,
    std::optional<at::TensorList> antiquant_offset, std::optional<at::TensorList> per_token_scale,
    at::OptionalIntArrayRef group_list, std::optional<at::TensorList> activation_input,
    std::optional<at::TensorList> activation_quant_scale, std::optional<at::TensorList> activation_quant_offset,
    std::optional<int64_t> split_item, std::optional<int64_t> group_type, std::optional<int64_t> group_list_type,
    std::optional<int64_t> act_type, std::optional<at::ScalarType> output_dtype) {
  return listFormOutputs(x, weight, per_token_scale, group_list, activation_input, activation_quant_scale,
                         activation_quant_offset, split_item, group_type, group_list_type, act_type, output_dtype);
}

}  // namespace at_npu::native
