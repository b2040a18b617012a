// OpsTestUtil.h - test fixture and helpers: a fresh runtime per test, device tensors with any
// layout built from logical values, the tests' own dtype conversions, and op launch helpers.
#ifndef NPU_OPSLIB_TESTS_OPS_TEST_UTIL_H_
#define NPU_OPSLIB_TESTS_OPS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "npu/opslib.h"
#include "npu/runtime.h"
#include "../src/DataTypes.h"

#define NRT_ASSERT_OK(expr) ASSERT_EQ((expr), NRT_SUCCESS) << nrtGetRecentErrMsg()
#define NRT_EXPECT_OK(expr) EXPECT_EQ((expr), NRT_SUCCESS) << nrtGetRecentErrMsg()
#define NOP_ASSERT_OK(expr) ASSERT_EQ((expr), ACLNN_SUCCESS) << aclnnGetRecentErrMsg()
#define NOP_EXPECT_OK(expr) EXPECT_EQ((expr), ACLNN_SUCCESS) << aclnnGetRecentErrMsg()

namespace npu::opslib::testing {

using Shape = std::vector<int64_t>;

// Sets (or, with nullptr, unsets) an environment variable and restores it when destroyed.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    Apply(value);
  }
  ~ScopedEnv() { Apply(old_ ? old_->c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void Apply(const char* value) {
    if (value == nullptr) {
      unsetenv(name_.c_str());
    } else {
      setenv(name_.c_str(), value, 1);
    }
  }
  std::string name_;
  std::optional<std::string> old_;
};

// ---- The tests' own conversions, independent of opslib's DataTypes.h: float16 through the
// compiler's _Float16, bfloat16 by rounding the scaled significand with nearbyint (ties to even).

inline uint16_t RefFloatToHalf(float value) {
  return std::bit_cast<uint16_t>(static_cast<_Float16>(value));
}
inline float RefHalfToFloat(uint16_t bits) {
  return static_cast<float>(std::bit_cast<_Float16>(bits));
}
inline uint16_t RefFloatToBf16(float value) {
  if (std::isnan(value)) return 0x7fc0;
  if (std::isinf(value) || value == 0.0f) return static_cast<uint16_t>(std::bit_cast<uint32_t>(value) >> 16);
  int exponent = 0;
  std::frexp(value, &exponent);  // value = m * 2^exponent, 0.5 <= |m| < 1
  // bfloat16 keeps 8 significant bits; below the normal range the step stays 2^-133.
  const int step_exponent = std::max(exponent - 8, -133);
  const double scaled = std::nearbyint(std::ldexp(static_cast<double>(value), -step_exponent));
  const float rounded = static_cast<float>(std::ldexp(scaled, step_exponent));  // may be inf
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(rounded) >> 16);
}
inline float RefBf16ToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

inline int64_t ElementBytes(aclDataType dtype) {
  switch (dtype) {
    case ACL_DOUBLE: case ACL_INT64: return 8;
    case ACL_FLOAT: case ACL_INT32: return 4;
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: return 2;
    default: return 1;
  }
}

inline bool IsFloating(aclDataType dtype) {
  return dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || dtype == ACL_BF16 || dtype == ACL_DOUBLE;
}

// Writes `value` as one element of dtype (C++ conversion semantics for integers and bool).
inline void Encode(aclDataType dtype, double value, void* dst) {
  switch (dtype) {
    case ACL_FLOAT: { float v = static_cast<float>(value); std::memcpy(dst, &v, 4); break; }
    case ACL_DOUBLE: std::memcpy(dst, &value, 8); break;
    case ACL_FLOAT16: { uint16_t v = RefFloatToHalf(static_cast<float>(value)); std::memcpy(dst, &v, 2); break; }
    case ACL_BF16: { uint16_t v = RefFloatToBf16(static_cast<float>(value)); std::memcpy(dst, &v, 2); break; }
    case ACL_INT8: { int8_t v = static_cast<int8_t>(static_cast<int64_t>(value)); std::memcpy(dst, &v, 1); break; }
    case ACL_UINT8: { uint8_t v = static_cast<uint8_t>(static_cast<int64_t>(value)); std::memcpy(dst, &v, 1); break; }
    case ACL_INT16: { int16_t v = static_cast<int16_t>(static_cast<int64_t>(value)); std::memcpy(dst, &v, 2); break; }
    case ACL_INT32: { int32_t v = static_cast<int32_t>(static_cast<int64_t>(value)); std::memcpy(dst, &v, 4); break; }
    case ACL_INT64: { int64_t v = static_cast<int64_t>(value); std::memcpy(dst, &v, 8); break; }
    case ACL_BOOL: { uint8_t v = value != 0.0 ? 1 : 0; std::memcpy(dst, &v, 1); break; }
    default: ADD_FAILURE() << "Encode: unexpected dtype " << dtype;
  }
}

inline double Decode(aclDataType dtype, const void* src) {
  switch (dtype) {
    case ACL_FLOAT: { float v; std::memcpy(&v, src, 4); return v; }
    case ACL_DOUBLE: { double v; std::memcpy(&v, src, 8); return v; }
    case ACL_FLOAT16: { uint16_t v; std::memcpy(&v, src, 2); return RefHalfToFloat(v); }
    case ACL_BF16: { uint16_t v; std::memcpy(&v, src, 2); return RefBf16ToFloat(v); }
    case ACL_INT8: { int8_t v; std::memcpy(&v, src, 1); return v; }
    case ACL_UINT8: { uint8_t v; std::memcpy(&v, src, 1); return v; }
    case ACL_INT16: { int16_t v; std::memcpy(&v, src, 2); return v; }
    case ACL_INT32: { int32_t v; std::memcpy(&v, src, 4); return v; }
    case ACL_INT64: { int64_t v; std::memcpy(&v, src, 8); return static_cast<double>(v); }
    case ACL_BOOL: { uint8_t v; std::memcpy(&v, src, 1); return v; }
    default: ADD_FAILURE() << "Decode: unexpected dtype " << dtype; return 0;
  }
}

// What `value` becomes when stored as dtype.
inline double RoundTo(aclDataType dtype, double value) {
  unsigned char bytes[8] = {};
  Encode(dtype, value, bytes);
  return Decode(dtype, bytes);
}

inline int64_t Numel(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

inline Shape ContiguousStrides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t step = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = step;
    step *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

// Row-major multi-index of a linear index.
inline Shape Unravel(int64_t linear, const Shape& sizes) {
  Shape index(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    index[d] = linear % sizes[d];
    linear /= sizes[d];
  }
  return index;
}

// Values of a tensor (row-major, shape in_sizes) read at every index of out_sizes (broadcast).
inline std::vector<double> BroadcastValues(const std::vector<double>& values, const Shape& in_sizes,
                                           const Shape& out_sizes) {
  std::vector<double> result(Numel(out_sizes));
  const Shape in_strides = ContiguousStrides(in_sizes);
  const size_t lead = out_sizes.size() - in_sizes.size();
  for (int64_t i = 0; i < static_cast<int64_t>(result.size()); ++i) {
    const Shape index = Unravel(i, out_sizes);
    int64_t source = 0;
    for (size_t d = 0; d < in_sizes.size(); ++d) {
      if (in_sizes[d] != 1) source += index[lead + d] * in_strides[d];
    }
    result[i] = values[source];
  }
  return result;
}

// Deterministic values that dtype holds exactly; floats get fractions, bool gets 0 / 1.
inline std::vector<double> RandomValues(aclDataType dtype, int64_t n, uint32_t seed,
                                        double low = -8.0, double high = 8.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(low, high);
  std::vector<double> values(n);
  for (auto& v : values) {
    double x = dist(gen);
    if (dtype == ACL_BOOL) {
      x = x > (low + high) / 2 ? 1 : 0;
    } else if (!IsFloating(dtype)) {
      x = std::round(x);
      if (dtype == ACL_UINT8) x = std::fabs(x);
    } else {
      x = std::round(x * 64) / 64;  // a few fraction bits: exact even in bf16 for |x| < 2
    }
    v = RoundTo(dtype, x);
  }
  return values;
}

// A device tensor: a descriptor over an nrtMalloc'ed storage, any strided layout. Values are
// given and read back in logical row-major order.
class DeviceTensor {
 public:
  DeviceTensor(aclDataType dtype, Shape sizes, const std::vector<double>& values = {})
      : DeviceTensor(dtype, sizes, ContiguousStrides(sizes), 0, Numel(sizes), values) {}

  DeviceTensor(aclDataType dtype, Shape sizes, Shape strides, int64_t offset, int64_t storage_elems,
               const std::vector<double>& values = {}, aclFormat format = ACL_FORMAT_ND)
      : dtype_(dtype), sizes_(std::move(sizes)), strides_(std::move(strides)), offset_(offset),
        storage_elems_(storage_elems) {
    const size_t bytes = static_cast<size_t>(storage_elems_ * ElementBytes(dtype_));
    if (bytes > 0) {
      EXPECT_EQ(nrtMalloc(&data_, bytes), NRT_SUCCESS) << nrtGetRecentErrMsg();
      // A recognisable fill outside the view, to catch writes that stray.
      std::vector<unsigned char> fill(bytes, 0xAB);
      EXPECT_EQ(nrtMemcpy(data_, fill.data(), bytes, NRT_MEMCPY_HOST_TO_DEVICE), NRT_SUCCESS);
    }
    if (!values.empty()) Write(values);
    tensor_ = aclCreateTensor(sizes_.data(), sizes_.size(), dtype_, strides_.data(), offset_, format,
                              &storage_elems_, 1, data_);
    EXPECT_NE(tensor_, nullptr) << aclnnGetRecentErrMsg();
  }

  ~DeviceTensor() {
    aclDestroyTensor(tensor_);
    if (data_ != nullptr) nrtFree(data_);
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  aclTensor* get() const { return tensor_; }
  void* data() const { return data_; }
  aclDataType dtype() const { return dtype_; }
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t storage_elems() const { return storage_elems_; }

  // Another descriptor for the same memory (for in-place ops); the caller destroys it.
  aclTensor* Alias() const {
    return aclCreateTensor(sizes_.data(), sizes_.size(), dtype_, strides_.data(), offset_,
                           ACL_FORMAT_ND, &storage_elems_, 1, data_);
  }

  std::vector<unsigned char> ReadStorage() const {
    std::vector<unsigned char> bytes(storage_elems_ * ElementBytes(dtype_));
    if (!bytes.empty()) {
      EXPECT_EQ(nrtMemcpy(bytes.data(), data_, bytes.size(), NRT_MEMCPY_DEVICE_TO_HOST), NRT_SUCCESS);
    }
    return bytes;
  }

  std::vector<double> Read() const {
    const auto bytes = ReadStorage();
    std::vector<double> values(Numel(sizes_));
    for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i) {
      values[i] = Decode(dtype_, bytes.data() + StorageIndex(i) * ElementBytes(dtype_));
    }
    return values;
  }

  void Write(const std::vector<double>& values) {
    auto bytes = ReadStorage();
    for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i) {
      Encode(dtype_, values[i], bytes.data() + StorageIndex(i) * ElementBytes(dtype_));
    }
    if (!bytes.empty()) {
      EXPECT_EQ(nrtMemcpy(data_, bytes.data(), bytes.size(), NRT_MEMCPY_HOST_TO_DEVICE), NRT_SUCCESS);
    }
  }

  int64_t StorageIndex(int64_t linear) const {
    const Shape index = Unravel(linear, sizes_);
    int64_t at = offset_;
    for (size_t d = 0; d < index.size(); ++d) at += index[d] * strides_[d];
    return at;
  }

 private:
  aclDataType dtype_;
  Shape sizes_;
  Shape strides_;
  int64_t offset_;
  int64_t storage_elems_;
  void* data_ = nullptr;
  aclTensor* tensor_ = nullptr;
};

// Every test starts from a fresh runtime with a known environment and no launch tag.
class OpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(nrtFinalize(), NRT_SUCCESS);
    for (const char* name : {"NPU_SIM_DEVICES", "NPU_SIM_MEMORY", "ASCEND_GLOBAL_LOG_LEVEL",
                             "ASCEND_SLOG_PRINT_TO_STDOUT", "ASCEND_PROCESS_LOG_PATH"}) {
      env_.push_back(std::make_unique<ScopedEnv>(name, nullptr));
    }
    aclnnSetLaunchTag(nullptr);
  }
  void TearDown() override {
    aclnnSetLaunchTag(nullptr);
    EXPECT_EQ(nrtFinalize(), NRT_SUCCESS) << nrtGetRecentErrMsg();
  }

 private:
  std::vector<std::unique_ptr<ScopedEnv>> env_;
};

// Runs both phases of an op on `stream` and waits for it. `prepare` calls XxxGetWorkspaceSize.
inline aclnnStatus RunOp(const std::function<aclnnStatus(uint64_t*, aclOpExecutor**)>& prepare,
                         nrtStream_t stream = nullptr) {
  uint64_t workspace_size = 123;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus status = prepare(&workspace_size, &executor);
  if (status != ACLNN_SUCCESS) return status;
  EXPECT_EQ(workspace_size, 0u);
  EXPECT_NE(executor, nullptr);
  const aclnnStatus launched = aclnnLaunchExecutor(nullptr, 0, executor, stream);
  if (launched != ACLNN_SUCCESS) return launched;
  EXPECT_EQ(nrtStreamSynchronize(stream), NRT_SUCCESS) << nrtGetRecentErrMsg();
  return ACLNN_SUCCESS;
}

// Tolerance for comparing against a reference computed in the same compute type: one rounding
// step of the out dtype (exact for integers and bool).
inline double Tolerance(aclDataType dtype, double expected) {
  const double magnitude = std::max(std::fabs(expected), 1e-30);
  switch (dtype) {
    case ACL_FLOAT: return magnitude * 4e-7;
    case ACL_DOUBLE: return magnitude * 1e-15;
    case ACL_FLOAT16: return magnitude * 1e-3;
    case ACL_BF16: return magnitude * 8e-3;
    default: return 0;
  }
}

inline void ExpectValuesNear(const std::vector<double>& actual, const std::vector<double>& expected,
                             aclDataType dtype, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < actual.size() && failures < 5; ++i) {
    const double a = actual[i];
    const double e = expected[i];
    const bool same = (std::isnan(a) && std::isnan(e)) || a == e ||
                      std::fabs(a - e) <= Tolerance(dtype, e);
    if (!same) {
      ++failures;
      ADD_FAILURE() << what << ": element " << i << " is " << a << ", expected " << e;
    }
  }
}

// Every dtype the elementwise ops take, for value-parameterised tests, and their test-name suffix.
inline const auto kAllDtypes =
    ::testing::Values(ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT8, ACL_UINT8, ACL_INT16,
                      ACL_INT32, ACL_INT64, ACL_BOOL);
inline std::string DtypeParamName(const ::testing::TestParamInfo<aclDataType>& info) {
  return npu::opslib::DataTypeName(info.param);
}

}  // namespace npu::opslib::testing

#endif  // NPU_OPSLIB_TESTS_OPS_TEST_UTIL_H_
