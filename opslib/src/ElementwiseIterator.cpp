// ElementwiseIterator.cpp - builds the plan of an elementwise op: broadcast strides, dim order by
// out's strides, size-1 dims dropped, mergeable neighbours coalesced.
#include "ElementwiseIterator.h"

#include <cstdlib>

namespace npu::opslib {
namespace {

struct Dim {
  int64_t size;
  std::array<int64_t, kMaxOperands> stride;
};

// Every operand has out's shape and a row-major contiguous layout.
bool AllContiguousSameShape(const aclTensor& out, std::span<const aclTensor* const> inputs) {
  const auto sizes = out.sizes();
  const auto out_strides = out.strides();
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] != 1 && out_strides[d] != expected) return false;
    expected *= sizes[d];
  }
  for (const aclTensor* input : inputs) {
    if (input->ndim != out.ndim) return false;
    const auto in_sizes = input->sizes();
    const auto in_strides = input->strides();
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (in_sizes[d] != sizes[d] || (sizes[d] != 1 && in_strides[d] != out_strides[d])) return false;
    }
  }
  return true;
}

}  // namespace

ElementwisePlan MakeElementwisePlan(const aclTensor& out, std::span<const aclTensor* const> inputs) {
  ElementwisePlan plan;
  const int operands = 1 + static_cast<int>(inputs.size());
  plan.num_operands = operands;
  plan.numel = out.numel();
  plan.same_dtype = true;
  for (int k = 0; k < operands; ++k) {
    const aclTensor& tensor = k == 0 ? out : *inputs[k - 1];
    plan.dtypes[k] = tensor.dtype;
    plan.same_dtype = plan.same_dtype && tensor.dtype == out.dtype;
    if (tensor.data != nullptr) {
      plan.data[k] = tensor.first_element();
    }
  }
  if (plan.numel == 0) return plan;
  if (AllContiguousSameShape(out, inputs)) {
    // The common small op (a + b on same-shape contiguous tensors): one dim, no reordering.
    plan.dims.Resize(1);
    plan.dims.size(0) = plan.numel;
    for (int k = 0; k < operands; ++k) plan.dims.stride(k, 0) = 1;
    plan.contiguous = true;
    return plan;
  }

  // Scratch reused by every plan built on this thread: no allocation per op once it has grown.
  thread_local std::vector<Dim> dims;
  dims.clear();
  // Inputs align with out's trailing dims (NumPy rules); a missing or size-1 dim broadcasts with
  // stride 0. Size-1 dims of out select one element and carry no iteration.
  const auto out_sizes = out.sizes();
  const auto out_strides = out.strides();
  const int64_t out_dims = static_cast<int64_t>(out_sizes.size());
  for (int64_t d = 0; d < out_dims; ++d) {
    if (out_sizes[d] == 1) continue;
    Dim dim{out_sizes[d], {}};
    dim.stride[0] = out_strides[d];
    for (int k = 1; k < operands; ++k) {
      const aclTensor& input = *inputs[k - 1];
      const int64_t input_dim = d - (out_dims - static_cast<int64_t>(input.ndim));
      const bool broadcast = input_dim < 0 || input.sizes()[input_dim] == 1;
      dim.stride[k] = broadcast ? 0 : input.strides()[input_dim];
    }
    dims.push_back(dim);
  }

  // Walk out's memory in order: for a contiguous out this keeps the given order, for a transposed
  // (in-place) one it undoes the transposition so that the dims can merge below.
  // Insertion sort: stable, and unlike std::stable_sort it needs no buffer for these few dims.
  for (size_t i = 1; i < dims.size(); ++i) {
    const Dim dim = dims[i];
    size_t j = i;
    for (; j > 0 && std::llabs(dims[j - 1].stride[0]) < std::llabs(dim.stride[0]); --j) {
      dims[j] = dims[j - 1];
    }
    dims[j] = dim;
  }

  // Merge each dim into the previous (outer) one where every operand steps through both as one.
  size_t merged = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    bool mergeable = merged > 0;
    for (int k = 0; k < operands && mergeable; ++k) {
      mergeable = dims[merged - 1].stride[k] == dims[i].stride[k] * dims[i].size;
    }
    if (mergeable) {
      dims[merged - 1].size *= dims[i].size;
      dims[merged - 1].stride = dims[i].stride;
    } else {
      dims[merged++] = dims[i];
    }
  }
  dims.resize(merged);
  if (dims.empty()) dims.push_back(Dim{1, {1, 1, 1}});  // a single element

  plan.dims.Resize(static_cast<int>(dims.size()));
  for (int d = 0; d < static_cast<int>(dims.size()); ++d) {
    plan.dims.size(d) = dims[d].size;
    for (int k = 0; k < operands; ++k) plan.dims.stride(k, d) = dims[d].stride[k];
  }
  plan.contiguous = dims.size() == 1;
  for (int k = 0; k < operands; ++k) plan.contiguous = plan.contiguous && dims[0].stride[k] == 1;
  return plan;
}

}  // namespace npu::opslib
