// Descriptors.cpp - creation, destruction and accessors of tensor / scalar / int-array descriptors.
#include "Descriptors.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "DataTypes.h"
#include "Error.h"
#include "OperandHooks.h"
#include "npu/format_layout.h"

using npu::opslib::Fail;
using npu::opslib::StrCat;

int64_t aclTensor::numel() const {
  int64_t count = 1;
  for (int64_t size : sizes()) count *= size;
  return count;
}

bool aclTensor::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (size_t d = ndim; d-- > 0;) {
    if (sizes()[d] != 1 && strides()[d] != expected) return false;
    expected *= sizes()[d];
  }
  return true;
}

char* aclTensor::first_element() const {
  return static_cast<char*>(data) + offset * npu::opslib::ElementSize(dtype);
}

bool aclScalar::is_floating() const { return npu::opslib::IsFloatingType(dtype); }

double aclScalar::ToDouble() const {
  if (is_floating()) return value.f64;
  if (dtype == ACL_BOOL) return value.b ? 1.0 : 0.0;
  return static_cast<double>(value.i64);
}

int64_t aclScalar::ToInt64() const {
  if (dtype == ACL_BOOL) return value.b ? 1 : 0;
  if (!is_floating()) return value.i64;
  // Callers validate integral values first; this only keeps odd values from being undefined.
  const double v = value.f64;
  if (std::isnan(v)) return 0;
  if (v >= 0x1p63) return std::numeric_limits<int64_t>::max();
  if (v < -0x1p63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

bool aclScalar::ToBool() const {
  if (dtype == ACL_BOOL) return value.b;
  if (is_floating()) return value.f64 != 0.0;  // NaN is true
  return value.i64 != 0;
}

namespace {

// The descriptor-creating functions return NULL on failure, with the reason as the recent error.
template <typename Body>
auto CreateOrNull(const char* api, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    Fail(ACLNN_ERR_INNER, StrCat(api, ": out of host memory"));
  } catch (const std::exception& e) {
    Fail(ACLNN_ERR_INNER, StrCat(api, ": internal error: ", e.what()));
  }
  return nullptr;
}

// Copies an array the caller owns into a new[] array the caller will own (ACL's accessor contract).
aclnnStatus CopyOut(std::span<const int64_t> values, int64_t** out, uint64_t* count) {
  auto copy = std::make_unique<int64_t[]>(values.empty() ? 1 : values.size());
  std::copy(values.begin(), values.end(), copy.get());
  *out = copy.release();
  *count = values.size();
  return ACLNN_SUCCESS;
}

// "" when a private-format descriptor is well formed (see opslib.h), else the reason.
std::string CheckPrivateDescriptor(const aclTensor& t) {
  namespace nf = npu::formats;
  const char* name = nf::FormatName(t.format);
  if (!nf::SupportsDataType(t.dtype)) {
    return StrCat(name, " does not hold ", npu::opslib::DataTypeName(t.dtype),
                  " (private formats hold FLOAT, FLOAT16, BF16, INT8, UINT8, INT16, INT32)");
  }
  const std::string rank = nf::CheckRank(t.format, t.ndim);
  if (!rank.empty()) return StrCat(rank, "; the view has shape ", npu::opslib::ShapeString(t.sizes()));
  const std::vector<int64_t> view(t.sizes().begin(), t.sizes().end());
  const std::vector<int64_t> base =
      nf::BaseDimsOf(view, std::vector<int64_t>(t.strides().begin(), t.strides().end()), t.offset);
  if (base.size() != view.size()) {
    return StrCat("a ", name, " descriptor describes a whole tensor or a permutation of its dims (offset 0), ",
                  "but its view has strides ", npu::opslib::ShapeString(t.strides()), " and offset ", t.offset);
  }
  const auto storage = t.storage_dims();
  const int64_t c0 = t.format == ACL_FORMAT_FRACTAL_NZ && !storage.empty() ? storage.back() : nf::kBlock;
  const bool c0_ok = c0 == 2 || c0 == 4 || c0 == 8 || c0 == 16 || c0 == 32;
  const std::vector<int64_t> expected = nf::StorageShape(t.format, base, c0_ok ? c0 : nf::kBlock);
  if (!c0_ok || std::vector<int64_t>(storage.begin(), storage.end()) != expected) {
    return StrCat(name, " storage of a tensor of shape ", npu::opslib::ShapeString(base), " has shape ",
                  npu::opslib::ShapeString(expected), ", but storageDims are ",
                  npu::opslib::ShapeString(storage));
  }
  return "";
}

}  // namespace

extern "C" {

aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t* stride, int64_t offset, aclFormat format,
                           const int64_t* storageDims, uint64_t storageDimsNum, void* tensorData) {
  return CreateOrNull("aclCreateTensor", [&]() -> aclTensor* {
    if (viewDims == nullptr && viewDimsNum != 0) {
      Fail(ACLNN_ERR_PARAM_NULLPTR,
           StrCat("aclCreateTensor: viewDims is NULL but viewDimsNum is ", viewDimsNum));
      return nullptr;
    }
    if (storageDims == nullptr && storageDimsNum != 0) {
      Fail(ACLNN_ERR_PARAM_NULLPTR,
           StrCat("aclCreateTensor: storageDims is NULL but storageDimsNum is ", storageDimsNum));
      return nullptr;
    }
    for (uint64_t i = 0; i < viewDimsNum; ++i) {
      if (viewDims[i] < 0) {
        Fail(ACLNN_ERR_PARAM_INVALID,
             StrCat("aclCreateTensor: negative size in viewDims ",
                    npu::opslib::ShapeString({viewDims, static_cast<size_t>(viewDimsNum)})));
        return nullptr;
      }
    }
    if (offset < 0) {
      Fail(ACLNN_ERR_PARAM_INVALID, StrCat("aclCreateTensor: negative offset ", offset));
      return nullptr;
    }
    auto tensor = std::make_unique<aclTensor>();
    tensor->ndim = viewDimsNum;
    tensor->storage_ndim = storageDims != nullptr ? storageDimsNum : 0;
    tensor->ResizeDims(2 * tensor->ndim + tensor->storage_ndim);
    int64_t* sizes = tensor->dims();
    int64_t* strides = sizes + tensor->ndim;
    std::copy(viewDims, viewDims + viewDimsNum, sizes);
    if (stride != nullptr) {
      std::copy(stride, stride + viewDimsNum, strides);
    } else {
      // No strides means a contiguous (row-major) view, as in ACL.
      int64_t step = 1;
      for (uint64_t i = viewDimsNum; i-- > 0;) {
        strides[i] = step;
        step *= sizes[i] > 0 ? sizes[i] : 1;
      }
    }
    if (tensor->storage_ndim != 0) {
      std::copy(storageDims, storageDims + storageDimsNum, strides + tensor->ndim);
    }
    tensor->offset = offset;
    tensor->dtype = dataType;
    tensor->format = format;
    tensor->data = tensorData;
    static std::atomic<uint64_t> next_id{1};
    tensor->id = next_id.fetch_add(1, std::memory_order_relaxed);
    if (!npu::formats::IsBaseFormat(format) && !npu::formats::IsPrivateFormat(format)) {
      Fail(ACLNN_ERR_PARAM_INVALID, StrCat("aclCreateTensor: unknown format ", static_cast<int>(format)));
      return nullptr;
    }
    if (npu::formats::IsPrivateFormat(format)) {
      const std::string problem = CheckPrivateDescriptor(*tensor);
      if (!problem.empty()) {
        Fail(ACLNN_ERR_PARAM_INVALID, StrCat("aclCreateTensor: ", problem));
        return nullptr;
      }
    }
    return tensor.release();
  });
}

aclnnStatus aclDestroyTensor(const aclTensor* tensor) {
  delete tensor;
  return ACLNN_SUCCESS;
}

int aclIsOutputTensor(const aclTensor* tensor) { return tensor != nullptr && tensor->written ? 1 : 0; }

aclnnStatus aclMarkOutputTensor(const aclTensor* tensor) {
  if (tensor == nullptr) return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclMarkOutputTensor: tensor is NULL");
  tensor->written = true;
  return ACLNN_SUCCESS;
}

aclScalar* aclCreateScalar(void* value, aclDataType dataType) {
  return CreateOrNull("aclCreateScalar", [&]() -> aclScalar* {
    if (value == nullptr) {
      Fail(ACLNN_ERR_PARAM_NULLPTR, "aclCreateScalar: value is NULL");
      return nullptr;
    }
    auto scalar = std::make_unique<aclScalar>();
    scalar->dtype = dataType;
    // Read exactly one element of dataType (the caller's value may be a 1-byte bool).
    const bool known = npu::opslib::VisitStorageType(dataType, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        uint8_t byte;  // read as a byte: any non-zero byte is true
        std::memcpy(&byte, value, 1);
        scalar->value.b = byte != 0;
      } else {
        T element;
        std::memcpy(&element, value, sizeof(T));
        if constexpr (std::is_integral_v<T>) {
          scalar->value.i64 = static_cast<int64_t>(element);
        } else {
          scalar->value.f64 = npu::opslib::Convert<double>(element);
          if (!std::isfinite(scalar->value.f64)) npu::opslib::NoteNonFiniteScalar();
        }
      }
    });
    if (!known) {
      Fail(ACLNN_ERR_PARAM_INVALID,
           StrCat("aclCreateScalar: unsupported data type ", static_cast<int>(dataType)));
      return nullptr;
    }
    return scalar.release();
  });
}

aclnnStatus aclDestroyScalar(const aclScalar* scalar) {
  delete scalar;
  return ACLNN_SUCCESS;
}

aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  return CreateOrNull("aclCreateIntArray", [&]() -> aclIntArray* {
    if (value == nullptr && size != 0) {
      Fail(ACLNN_ERR_PARAM_NULLPTR, StrCat("aclCreateIntArray: value is NULL but size is ", size));
      return nullptr;
    }
    auto array = std::make_unique<aclIntArray>();
    array->values.assign(value, value + size);
    return array.release();
  });
}

aclnnStatus aclDestroyIntArray(const aclIntArray* array) {
  delete array;
  return ACLNN_SUCCESS;
}

aclScalarList* aclCreateScalarList(const aclScalar* const* value, uint64_t size) {
  return CreateOrNull("aclCreateScalarList", [&]() -> aclScalarList* {
    if (value == nullptr && size != 0) {
      Fail(ACLNN_ERR_PARAM_NULLPTR, StrCat("aclCreateScalarList: value is NULL but size is ", size));
      return nullptr;
    }
    auto list = std::make_unique<aclScalarList>();
    list->scalars.reserve(size);
    for (uint64_t i = 0; i < size; ++i) {
      if (value[i] == nullptr) {
        Fail(ACLNN_ERR_PARAM_NULLPTR, StrCat("aclCreateScalarList: scalar ", i, " is NULL"));
        return nullptr;
      }
      list->scalars.push_back(*value[i]);
    }
    return list.release();
  });
}

aclnnStatus aclDestroyScalarList(const aclScalarList* array) {
  delete array;
  return ACLNN_SUCCESS;
}

aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size) {
  return CreateOrNull("aclCreateTensorList", [&]() -> aclTensorList* {
    if (value == nullptr && size != 0) {
      Fail(ACLNN_ERR_PARAM_NULLPTR, StrCat("aclCreateTensorList: value is NULL but size is ", size));
      return nullptr;
    }
    auto list = std::make_unique<aclTensorList>();
    list->tensors.assign(value, value + size);
    return list.release();
  });
}

aclnnStatus aclDestroyTensorList(const aclTensorList* array) {
  delete array;
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetTensorListSize(const aclTensorList* array, uint64_t* size) {
  if (array == nullptr || size == nullptr) {
    return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR, "aclGetTensorListSize: NULL argument");
  }
  *size = array->tensors.size();
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetViewShape(const aclTensor* tensor, int64_t** viewDims, uint64_t* viewDimsNum) {
  return npu::opslib::GuardApi("aclGetViewShape", [&] {
    if (tensor == nullptr || viewDims == nullptr || viewDimsNum == nullptr) {
      return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetViewShape: tensor, viewDims or viewDimsNum is NULL");
    }
    return CopyOut(tensor->sizes(), viewDims, viewDimsNum);
  });
}

aclnnStatus aclGetViewStrides(const aclTensor* tensor, int64_t** stridesValue, uint64_t* stridesNum) {
  return npu::opslib::GuardApi("aclGetViewStrides", [&] {
    if (tensor == nullptr || stridesValue == nullptr || stridesNum == nullptr) {
      return Fail(ACLNN_ERR_PARAM_NULLPTR,
                  "aclGetViewStrides: tensor, stridesValue or stridesNum is NULL");
    }
    return CopyOut(tensor->strides(), stridesValue, stridesNum);
  });
}

aclnnStatus aclGetViewOffset(const aclTensor* tensor, int64_t* offset) {
  if (tensor == nullptr || offset == nullptr) {
    return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetViewOffset: tensor or offset is NULL");
  }
  *offset = tensor->offset;
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetStorageShape(const aclTensor* tensor, int64_t** storageDims,
                               uint64_t* storageDimsNum) {
  return npu::opslib::GuardApi("aclGetStorageShape", [&] {
    if (tensor == nullptr || storageDims == nullptr || storageDimsNum == nullptr) {
      return Fail(ACLNN_ERR_PARAM_NULLPTR,
                  "aclGetStorageShape: tensor, storageDims or storageDimsNum is NULL");
    }
    return CopyOut(tensor->storage_dims(), storageDims, storageDimsNum);
  });
}

aclnnStatus aclGetDataType(const aclTensor* tensor, aclDataType* dataType) {
  if (tensor == nullptr || dataType == nullptr) {
    return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetDataType: tensor or dataType is NULL");
  }
  *dataType = tensor->dtype;
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetFormat(const aclTensor* tensor, aclFormat* format) {
  if (tensor == nullptr || format == nullptr) {
    return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetFormat: tensor or format is NULL");
  }
  *format = tensor->format;
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetRawTensorAddr(const aclTensor* tensor, void** addr) {
  if (tensor == nullptr || addr == nullptr) {
    return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetRawTensorAddr: tensor or addr is NULL");
  }
  *addr = tensor->data;
  return ACLNN_SUCCESS;
}

aclnnStatus aclSetRawTensorAddr(aclTensor* tensor, void* addr) {
  if (tensor == nullptr) return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclSetRawTensorAddr: tensor is NULL");
  tensor->data = addr;
  tensor->written = false;
  return ACLNN_SUCCESS;
}

}  // extern "C"
