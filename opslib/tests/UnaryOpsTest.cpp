// UnaryOpsTest.cpp - Relu, Neg, Abs, Exp, Sqrt, Sigmoid, Tanh and Cast against references computed
// here: dtypes, integer inputs into floating outs, special values, strided / broadcast / in-place
// views, every Cast pair, and rounding to the 16-bit float types.
#include <limits>

#include "OpsTestUtil.h"

namespace npu::opslib::testing {
namespace {

enum class UnaryOp { kRelu, kNeg, kAbs, kExp, kSqrt, kSigmoid, kTanh, kCast };

const char* OpName(UnaryOp op) {
  switch (op) {
    case UnaryOp::kRelu: return "Relu";
    case UnaryOp::kNeg: return "Neg";
    case UnaryOp::kAbs: return "Abs";
    case UnaryOp::kExp: return "Exp";
    case UnaryOp::kSqrt: return "Sqrt";
    case UnaryOp::kSigmoid: return "Sigmoid";
    case UnaryOp::kTanh: return "Tanh";
    case UnaryOp::kCast: return "Cast";
  }
  return "?";
}

aclnnStatus Prepare(UnaryOp op, const aclTensor* self, aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  switch (op) {
    case UnaryOp::kRelu: return aclnnReluGetWorkspaceSize(self, out, ws, ex);
    case UnaryOp::kNeg: return aclnnNegGetWorkspaceSize(self, out, ws, ex);
    case UnaryOp::kAbs: return aclnnAbsGetWorkspaceSize(self, out, ws, ex);
    case UnaryOp::kExp: return aclnnExpGetWorkspaceSize(self, out, ws, ex);
    case UnaryOp::kSqrt: return aclnnSqrtGetWorkspaceSize(self, out, ws, ex);
    case UnaryOp::kSigmoid: return aclnnSigmoidGetWorkspaceSize(self, out, ws, ex);
    case UnaryOp::kTanh: return aclnnTanhGetWorkspaceSize(self, out, ws, ex);
    case UnaryOp::kCast: return aclnnCastGetWorkspaceSize(self, out, ws, ex);
  }
  return -1;
}

template <typename C>
C Apply(UnaryOp op, C x) {
  if constexpr (std::is_same_v<C, int64_t>) {
    const auto negated = static_cast<int64_t>(0u - static_cast<uint64_t>(x));
    switch (op) {
      case UnaryOp::kRelu: return x < 0 ? 0 : x;
      case UnaryOp::kNeg: return negated;
      case UnaryOp::kAbs: return x < 0 ? negated : x;
      case UnaryOp::kCast: return x;
      default: ADD_FAILURE() << "integer " << OpName(op); return 0;
    }
  } else {
    switch (op) {
      case UnaryOp::kRelu: return x < 0 ? C(0) : x;
      case UnaryOp::kNeg: return -x;
      case UnaryOp::kAbs: return std::fabs(x);
      case UnaryOp::kExp: return std::exp(x);
      case UnaryOp::kSqrt: return std::sqrt(x);
      case UnaryOp::kSigmoid: return C(1) / (C(1) + std::exp(-x));
      case UnaryOp::kTanh: return std::tanh(x);
      case UnaryOp::kCast: return x;
    }
    return 0;
  }
}

// The input converted to the compute type of out's dtype, the op there, the result stored as out.
double Reference(UnaryOp op, double x, aclDataType out) {
  switch (out) {
    case ACL_FLOAT: case ACL_FLOAT16: case ACL_BF16:
      return RoundTo(out, Apply<float>(op, static_cast<float>(x)));
    case ACL_DOUBLE:
      return Apply<double>(op, x);
    case ACL_BOOL:
      return x != 0;  // only Cast has a bool out
    default:
      return RoundTo(out, static_cast<double>(Apply<int64_t>(op, static_cast<int64_t>(x))));
  }
}

void CheckUnary(UnaryOp op, const DeviceTensor& self, DeviceTensor& out) {
  SCOPED_TRACE(std::string("aclnn") + OpName(op));
  const auto x = BroadcastValues(self.Read(), self.sizes(), out.sizes());
  ASSERT_EQ(RunOp([&](uint64_t* ws, aclOpExecutor** ex) { return Prepare(op, self.get(), out.get(), ws, ex); }),
            ACLNN_SUCCESS)
      << aclnnGetRecentErrMsg();
  std::vector<double> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) expected[i] = Reference(op, x[i], out.dtype());
  ExpectValuesNear(out.Read(), expected, out.dtype(), std::string("aclnn") + OpName(op));
}

std::vector<UnaryOp> OpsFor(aclDataType dtype) {
  std::vector<UnaryOp> ops = {UnaryOp::kCast};
  if (dtype == ACL_BOOL) return ops;
  ops.insert(ops.end(), {UnaryOp::kRelu, UnaryOp::kNeg, UnaryOp::kAbs});
  if (IsFloating(dtype)) {
    ops.insert(ops.end(), {UnaryOp::kExp, UnaryOp::kSqrt, UnaryOp::kSigmoid, UnaryOp::kTanh});
  }
  return ops;
}

class UnaryDtypeTest : public OpsTest, public ::testing::WithParamInterface<aclDataType> {};

TEST_P(UnaryDtypeTest, ContiguousStridedBroadcastAndInPlace) {
  const aclDataType dtype = GetParam();
  for (UnaryOp op : OpsFor(dtype)) {
    const double low = op == UnaryOp::kSqrt ? 0.0 : -6.0;
    DeviceTensor self(dtype, {3, 90}, RandomValues(dtype, 270, 1, low, 6.0));
    DeviceTensor out(dtype, {3, 90});
    CheckUnary(op, self, out);
    DeviceTensor transposed(dtype, {90, 3}, {1, 90}, 0, 270, RandomValues(dtype, 270, 2, low, 6.0));
    DeviceTensor out2(dtype, {90, 3});
    CheckUnary(op, transposed, out2);
    DeviceTensor row(dtype, {1, 300}, RandomValues(dtype, 300, 3, low, 6.0));
    DeviceTensor out3(dtype, {4, 300});
    CheckUnary(op, row, out3);
    DeviceTensor scalar(dtype, {}, RandomValues(dtype, 1, 4, low, 6.0));
    CheckUnary(op, scalar, out3);
    CheckUnary(op, self, self);  // in place
    CheckUnary(op, transposed, transposed);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, UnaryDtypeTest, kAllDtypes, DtypeParamName);

using UnaryOpsTest = OpsTest;

TEST_F(UnaryOpsTest, IntegerAndBoolInputsIntoFloatingOuts) {
  struct Case {
    aclDataType self, out;
  };
  const Case cases[] = {{ACL_INT32, ACL_FLOAT}, {ACL_INT64, ACL_DOUBLE}, {ACL_BOOL, ACL_FLOAT16},
                        {ACL_UINT8, ACL_BF16},  {ACL_INT8, ACL_FLOAT},   {ACL_FLOAT, ACL_DOUBLE},
                        {ACL_DOUBLE, ACL_FLOAT16}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.self << " -> " << c.out);
    for (UnaryOp op : {UnaryOp::kExp, UnaryOp::kSqrt, UnaryOp::kSigmoid, UnaryOp::kTanh}) {
      DeviceTensor self(c.self, {2, 40}, RandomValues(c.self, 80, 5, 0.0, 6.0));
      DeviceTensor out(c.out, {2, 40});
      CheckUnary(op, self, out);
    }
    if (c.self != ACL_BOOL) {
      for (UnaryOp op : {UnaryOp::kRelu, UnaryOp::kNeg, UnaryOp::kAbs}) {
        DeviceTensor self(c.self, {2, 40}, RandomValues(c.self, 80, 6));
        DeviceTensor out(c.out, {2, 40});
        CheckUnary(op, self, out);
      }
    }
  }
}

TEST_F(UnaryOpsTest, SpecialValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  DeviceTensor x(ACL_FLOAT, {6}, {nan, -0.0, -1.0, 2.0, -inf, inf});
  DeviceTensor out(ACL_FLOAT, {6});
  CheckUnary(UnaryOp::kRelu, x, out);
  auto v = out.Read();
  EXPECT_TRUE(std::isnan(v[0]));  // relu propagates NaN, like PyTorch
  EXPECT_TRUE(std::signbit(v[1]));
  EXPECT_EQ(v[2], 0.0);
  EXPECT_EQ(v[4], 0.0);
  EXPECT_EQ(v[5], inf);

  CheckUnary(UnaryOp::kSqrt, x, out);
  v = out.Read();
  EXPECT_TRUE(std::isnan(v[2]));
  EXPECT_EQ(v[5], inf);

  DeviceTensor extremes(ACL_FLOAT, {4}, {-100.0, 100.0, -inf, inf});
  DeviceTensor sig(ACL_FLOAT, {4});
  CheckUnary(UnaryOp::kSigmoid, extremes, sig);
  v = sig.Read();
  EXPECT_NEAR(v[0], std::exp(-100.0), 1e-45);  // tiny, not flushed to 0 (e^-100 is a float subnormal)
  EXPECT_EQ(v[1], 1.0);
  EXPECT_EQ(v[2], 0.0);
  EXPECT_EQ(v[3], 1.0);
  CheckUnary(UnaryOp::kTanh, extremes, sig);
  EXPECT_EQ(sig.Read(), (std::vector<double>{-1.0, 1.0, -1.0, 1.0}));

  DeviceTensor int8(ACL_INT8, {3}, {-128, -5, 127});
  DeviceTensor int8_out(ACL_INT8, {3});
  CheckUnary(UnaryOp::kAbs, int8, int8_out);
  EXPECT_EQ(int8_out.Read(), (std::vector<double>{-128, 5, 127}));  // wraps, like PyTorch
  DeviceTensor u8(ACL_UINT8, {3}, {0, 3, 255});
  DeviceTensor u8_out(ACL_UINT8, {3});
  CheckUnary(UnaryOp::kNeg, u8, u8_out);
  EXPECT_EQ(u8_out.Read(), (std::vector<double>{0, 253, 1}));
}

std::vector<double> CastSources(aclDataType dtype) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  switch (dtype) {
    case ACL_BOOL: return {0, 1, 1, 0};
    case ACL_UINT8: return {0, 1, 200, 255, 7};
    case ACL_INT8: return {0, 1, -1, 127, -128, 42};
    case ACL_INT16: case ACL_INT32: case ACL_INT64: return {0, 1, -1, 127, -128, 300, -70000 % 30000};
    default: return {0, 1, -1, 2.5, -3.75, 100, 127, -0.5, 0.999, nan};
  }
}

TEST_F(UnaryOpsTest, CastEveryPair) {
  const aclDataType types[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT8,
                               ACL_UINT8, ACL_INT16,   ACL_INT32, ACL_INT64, ACL_BOOL};
  for (aclDataType from : types) {
    for (aclDataType to : types) {
      SCOPED_TRACE(::testing::Message() << "cast " << from << " -> " << to);
      std::vector<double> values = CastSources(from);
      // NaN to an integer type is undefined in C++ and PyTorch alike; leave it out there.
      if (!IsFloating(to) && to != ACL_BOOL) {
        std::erase_if(values, [](double v) { return std::isnan(v); });
      }
      const int64_t n = static_cast<int64_t>(values.size());
      DeviceTensor self(from, {n}, values);
      DeviceTensor out(to, {n});
      CheckUnary(UnaryOp::kCast, self, out);
      // Also from a stepped view into a transposed out.
      DeviceTensor stepped(from, {2, n}, {1, 2}, 0, 2 * n, [&] {
        std::vector<double> twice(values);
        twice.insert(twice.end(), values.begin(), values.end());
        return twice;
      }());
      DeviceTensor out2(to, {2, n}, {1, 2}, 0, 2 * n);
      CheckUnary(UnaryOp::kCast, stepped, out2);
    }
  }
}

TEST_F(UnaryOpsTest, CastRoundsToNearestEvenIn16BitFloats) {
  const std::vector<double> values = {1.0 + 0x1p-11, 1.0 + 0x3p-11, 1.0 + 0x1p-8, 1.0 + 0x3p-8,
                                      65504.0,       65520.0,       1e-8,         3e-8,
                                      -2.0000001,    1e6,           0.1,          -0.3};
  DeviceTensor self(ACL_FLOAT, {12}, values);
  DeviceTensor half(ACL_FLOAT16, {12});
  CheckUnary(UnaryOp::kCast, self, half);
  const auto h = half.Read();
  EXPECT_EQ(h[0], 1.0);
  EXPECT_EQ(h[1], 1.0 + 0x1p-9);
  EXPECT_EQ(h[4], 65504.0);
  EXPECT_EQ(h[5], std::numeric_limits<double>::infinity());
  EXPECT_EQ(h[6], 0.0);
  EXPECT_EQ(h[7], 0x1p-24);
  DeviceTensor bf16(ACL_BF16, {12});
  CheckUnary(UnaryOp::kCast, self, bf16);
  const auto b = bf16.Read();
  EXPECT_EQ(b[2], 1.0);
  EXPECT_EQ(b[3], 1.0 + 0x1p-6);
}

TEST_F(UnaryOpsTest, FloatToIntegerCastTruncatesAndWraps) {
  DeviceTensor self(ACL_FLOAT, {5}, {2.7, -2.7, 300.0, -1.0, 0.5});
  DeviceTensor i32(ACL_INT32, {5});
  CheckUnary(UnaryOp::kCast, self, i32);
  EXPECT_EQ(i32.Read(), (std::vector<double>{2, -2, 300, -1, 0}));
  DeviceTensor u8(ACL_UINT8, {5});
  CheckUnary(UnaryOp::kCast, self, u8);
  EXPECT_EQ(u8.Read(), (std::vector<double>{2, 254, 44, 255, 0}));
  DeviceTensor flags(ACL_BOOL, {5});
  CheckUnary(UnaryOp::kCast, self, flags);
  EXPECT_EQ(flags.Read(), (std::vector<double>{1, 1, 1, 1, 1}));
}

TEST_F(UnaryOpsTest, LargeKernels) {
  const int64_t n = (1 << 20) + 17;
  DeviceTensor x(ACL_FLOAT, {n}, RandomValues(ACL_FLOAT, n, 60));
  DeviceTensor half(ACL_FLOAT16, {n});
  CheckUnary(UnaryOp::kCast, x, half);  // contiguous, different dtypes
  DeviceTensor y(ACL_FLOAT, {n});
  CheckUnary(UnaryOp::kSigmoid, x, y);
  CheckUnary(UnaryOp::kRelu, x, x);
  DeviceTensor t(ACL_BF16, {1024, 1000}, {1, 1024}, 0, 1024000, RandomValues(ACL_BF16, 1024000, 61));
  DeviceTensor t_out(ACL_BF16, {1024, 1000});
  CheckUnary(UnaryOp::kTanh, t, t_out);
}

// Tensor.copy_'s op: src broadcast into selfRef and converted to its dtype, written in place.
TEST_F(UnaryOpsTest, InplaceCopyBroadcastsAndConvertsIntoSelf) {
  DeviceTensor src(ACL_FLOAT, {3}, {1.5, -2.25, 7.0});
  DeviceTensor dst(ACL_FLOAT16, {2, 3}, {1, 2}, 0, 6);  // transposed strides
  ASSERT_EQ(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
              return aclnnInplaceCopyGetWorkspaceSize(dst.get(), src.get(), ws, ex);
            }),
            ACLNN_SUCCESS)
      << aclnnGetRecentErrMsg();
  EXPECT_EQ(dst.Read(), (std::vector<double>{1.5, -2.25, 7.0, 1.5, -2.25, 7.0}));
  DeviceTensor wrong(ACL_FLOAT, {2, 4});
  EXPECT_NE(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
              return aclnnInplaceCopyGetWorkspaceSize(wrong.get(), src.get(), ws, ex);
            }),
            ACLNN_SUCCESS);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("aclnnInplaceCopy"), std::string::npos)
      << aclnnGetRecentErrMsg();
}

}  // namespace
}  // namespace npu::opslib::testing

