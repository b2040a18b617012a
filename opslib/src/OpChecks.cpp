// OpChecks.cpp - null, dtype / format, broadcast and memory checks for the elementwise ops.
#include "OpChecks.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "DataTypes.h"
#include "Error.h"

namespace npu::opslib {
namespace {

// Lowest and highest element index a non-empty view touches, relative to the storage base; false
// if that overflows int64 (a nonsensical descriptor).
bool ViewExtent(const aclTensor& tensor, int64_t* lowest, int64_t* highest) {
  if (!IsPlainFormat(tensor.format)) {
    // A private-format descriptor covers its whole (validated) storage.
    int64_t elements = 1;
    for (int64_t dim : tensor.storage_dims()) elements *= dim;
    *lowest = 0;
    *highest = elements - 1;
    return true;
  }
  int64_t low = tensor.offset;
  int64_t high = tensor.offset;
  const auto sizes = tensor.sizes();
  const auto strides = tensor.strides();
  for (size_t d = 0; d < sizes.size(); ++d) {
    int64_t reach = 0;
    if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &reach)) return false;
    if (__builtin_add_overflow(reach >= 0 ? high : low, reach, reach >= 0 ? &high : &low)) {
      return false;
    }
  }
  *lowest = low;
  *highest = high;
  return true;
}

std::string ViewString(const aclTensor& tensor) {
  return StrCat("shape ", ShapeString(tensor.sizes()), ", strides ", ShapeString(tensor.strides()),
                ", offset ", tensor.offset);
}

}  // namespace

aclnnStatus CheckNotNull(const char* op, std::initializer_list<NamedTensor> tensors,
                         const uint64_t* workspace_size, aclOpExecutor* const* executor) {
  for (const NamedTensor& t : tensors) {
    if (t.tensor == nullptr) return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR, op, ": ", t.name, " is NULL");
  }
  if (workspace_size == nullptr) {
    return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR, op, ": workspaceSize is NULL");
  }
  if (executor == nullptr) return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR, op, ": executor is NULL");
  return ACLNN_SUCCESS;
}

aclnnStatus CheckTensorType(const char* op, const NamedTensor& t) {
  if (!IsSupportedType(t.tensor->dtype)) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": ", t.name, " dtype ",
                    DataTypeName(t.tensor->dtype),
                    " is not supported (FLOAT, FLOAT16, BF16, DOUBLE, INT8, UINT8, INT16, INT32, "
                    "INT64, BOOL)");
  }
  if (!IsPlainFormat(t.tensor->format)) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": ", t.name, " format ",
                    FormatName(t.tensor->format),
                    " is not supported: elementwise ops compute on plain formats (ND, NCHW, NHWC, "
                    "NCDHW, NDHWC); convert it with aclnnTransData first");
  }
  return ACLNN_SUCCESS;
}

aclnnStatus CheckBroadcast(const char* op, const NamedTensor& input, const aclTensor& out) {
  const auto in_sizes = input.tensor->sizes();
  const auto out_sizes = out.sizes();
  bool ok = in_sizes.size() <= out_sizes.size();
  const size_t lead = ok ? out_sizes.size() - in_sizes.size() : 0;
  for (size_t d = 0; ok && d < in_sizes.size(); ++d) {
    ok = in_sizes[d] == out_sizes[lead + d] || in_sizes[d] == 1;
  }
  if (!ok) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": ", input.name, " shape ", ShapeString(in_sizes),
                    " cannot broadcast to out shape ", ShapeString(out_sizes));
  }
  return ACLNN_SUCCESS;
}

aclnnStatus CheckViewRange(const char* op, const NamedTensor& t, ViewRange* range) {
  const aclTensor& tensor = *t.tensor;
  range->empty = tensor.numel() == 0;  // touches no memory
  if (range->empty) return ACLNN_SUCCESS;
  if (!ViewExtent(tensor, &range->lowest, &range->highest) || range->lowest < 0) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": ", t.name, " view (", ViewString(tensor),
                    ") reaches before the start of its storage");
  }
  if (!tensor.storage_dims().empty() && IsPlainFormat(tensor.format)) {
    int64_t storage_elements = 1;
    for (int64_t dim : tensor.storage_dims()) {
      if (dim < 0 || __builtin_mul_overflow(storage_elements, dim, &storage_elements)) {
        storage_elements = -1;  // nonsense: reported below like any view beyond its storage
        break;
      }
    }
    if (range->highest >= storage_elements) {
      return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": ", t.name, " view (", ViewString(tensor),
                      ") reaches element ", range->highest, " but its storage ",
                      ShapeString(tensor.storage_dims()), " holds ", storage_elements, " elements");
    }
  }
  return ACLNN_SUCCESS;
}

aclnnStatus CheckPlacement(const char* op, std::span<const NamedTensor> tensors,
                           std::span<const ViewRange> ranges, int32_t* device) {
  *device = -1;
  const char* device_owner = nullptr;
  // Device allocations already found: the operands of an op usually lie in one or two of them
  // (the caching allocator carves tensors out of a few segments), so most ranges need no lookup.
  struct Found {
    const char* base;
    size_t size;
    int32_t device;
  };
  std::array<Found, 4> found{};
  size_t found_count = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& t = tensors[i];
    const aclTensor& tensor = *t.tensor;
    const ViewRange& range = ranges[i];
    if (range.empty) continue;
    if (tensor.data == nullptr) {
      return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR, op, ": ", t.name, " has ", tensor.numel(),
                      " elements but its data is NULL");
    }
    // Both ends of the touched range must lie in one device allocation.
    const int64_t itemsize = ElementSize(tensor.dtype);
    const char* data = static_cast<const char*>(tensor.data);
    const char* first = data + range.lowest * itemsize;
    const char* last = data + range.highest * itemsize + itemsize - 1;
    const auto holds = [&](const Found& f) {
      return static_cast<size_t>(first - f.base) < f.size && static_cast<size_t>(last - f.base) < f.size;
    };
    const Found* owner = nullptr;
    for (size_t k = 0; k < found_count && owner == nullptr; ++k) {
      if (holds(found[k])) owner = &found[k];
    }
    if (owner == nullptr) {
      Found f{};
      void* base = nullptr;
      const bool live = nrtPointerGetRange(first, &f.device, &base, &f.size) == NRT_SUCCESS;
      f.base = static_cast<const char*>(base);
      if (!live || !holds(f)) {
        return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": ", t.name, " (", ViewString(tensor),
                        ", data ", tensor.data,
                        ") is not inside one device allocation; device ops take memory from nrtMalloc");
      }
      if (found_count < found.size()) found[found_count++] = f;
      const int32_t first_device = f.device;
      if (*device == -1) {
        *device = first_device;
        device_owner = t.name;
      } else if (first_device != *device) {
        return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": ", t.name, " is on npu:", first_device,
                        " but ", device_owner, " is on npu:", *device);
      }
    }
  }
  return ACLNN_SUCCESS;
}

aclnnStatus CheckMemory(const char* op, std::initializer_list<NamedTensor> tensors, int32_t* device) {
  return CheckMemory(op, std::span<const NamedTensor>(tensors.begin(), tensors.size()), device);
}

aclnnStatus CheckMemory(const char* op, std::span<const NamedTensor> tensors, int32_t* device) {
  // Most ops have a few operands; foreach ops may have many.
  std::array<ViewRange, 8> inline_ranges;
  std::vector<ViewRange> heap_ranges;
  std::span<ViewRange> ranges(inline_ranges.data(), std::min(tensors.size(), inline_ranges.size()));
  if (tensors.size() > inline_ranges.size()) {
    heap_ranges.resize(tensors.size());
    ranges = heap_ranges;
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (aclnnStatus s = CheckViewRange(op, tensors[i], &ranges[i])) return s;
  }
  return CheckPlacement(op, tensors, ranges, device);
}

}  // namespace npu::opslib
