// BinaryOpsTest.cpp - Add, Sub, Mul, Div against references computed here: every dtype, broadcasting
// (0-d included), strided and transposed views, in-place aliasing, empty tensors, mixed input
// dtypes, alpha, integer wrap-around, and large multithreaded kernels.
#include <limits>
#include <string>

#include "OpsTestUtil.h"

namespace npu::opslib::testing {
namespace {

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

const char* OpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "Add";
    case BinaryOp::kSub: return "Sub";
    case BinaryOp::kMul: return "Mul";
    case BinaryOp::kDiv: return "Div";
  }
  return "?";
}

aclnnStatus Prepare(BinaryOp op, const aclTensor* self, const aclTensor* other,
                    const aclScalar* alpha, aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  switch (op) {
    case BinaryOp::kAdd: return aclnnAddGetWorkspaceSize(self, other, alpha, out, ws, ex);
    case BinaryOp::kSub: return aclnnSubGetWorkspaceSize(self, other, alpha, out, ws, ex);
    case BinaryOp::kMul: return aclnnMulGetWorkspaceSize(self, other, out, ws, ex);
    case BinaryOp::kDiv: return aclnnDivGetWorkspaceSize(self, other, out, ws, ex);
  }
  return -1;
}

template <typename C>
C Apply(BinaryOp op, C a, C b, C alpha) {
  if constexpr (std::is_same_v<C, int64_t>) {
    const auto ua = static_cast<uint64_t>(a);
    const auto ub = static_cast<uint64_t>(b);
    const auto ualpha = static_cast<uint64_t>(alpha);
    switch (op) {
      case BinaryOp::kAdd: return static_cast<int64_t>(ua + ualpha * ub);
      case BinaryOp::kSub: return static_cast<int64_t>(ua - ualpha * ub);
      case BinaryOp::kMul: return static_cast<int64_t>(ua * ub);
      case BinaryOp::kDiv: break;
    }
    ADD_FAILURE() << "integer division";
    return 0;
  } else {
    switch (op) {
      case BinaryOp::kAdd: return alpha == C(1) ? a + b : a + alpha * b;
      case BinaryOp::kSub: return alpha == C(1) ? a - b : a - alpha * b;
      case BinaryOp::kMul: return a * b;
      case BinaryOp::kDiv: return a / b;
    }
    return 0;
  }
}

// The expected out element: inputs converted to the compute type of out's dtype, the op computed
// there, the result stored as out's dtype.
double Reference(BinaryOp op, double a, double b, double alpha, aclDataType out) {
  switch (out) {
    case ACL_FLOAT: case ACL_FLOAT16: case ACL_BF16: {
      const float r = Apply<float>(op, static_cast<float>(a), static_cast<float>(b), static_cast<float>(alpha));
      return RoundTo(out, r);
    }
    case ACL_DOUBLE:
      return Apply<double>(op, a, b, alpha);
    case ACL_BOOL:
      if (op == BinaryOp::kAdd) return (a != 0) || (alpha != 0 && b != 0);
      return (a != 0) && (b != 0);
    default:
      return RoundTo(out, static_cast<double>(Apply<int64_t>(op, static_cast<int64_t>(a), static_cast<int64_t>(b),
                                                             static_cast<int64_t>(alpha))));
  }
}

// Runs the op and checks out against the reference, and that out's storage outside the view is
// untouched. The inputs are read before the launch, so out may alias them.
void CheckBinary(BinaryOp op, const DeviceTensor& self, const DeviceTensor& other, DeviceTensor& out,
                 const aclScalar* alpha = nullptr, double alpha_value = 1.0) {
  SCOPED_TRACE(std::string("aclnn") + OpName(op));
  const auto a = BroadcastValues(self.Read(), self.sizes(), out.sizes());
  const auto b = BroadcastValues(other.Read(), other.sizes(), out.sizes());
  const auto before = out.ReadStorage();
  ASSERT_EQ(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
              return Prepare(op, self.get(), other.get(), alpha, out.get(), ws, ex);
            }),
            ACLNN_SUCCESS)
      << aclnnGetRecentErrMsg();
  std::vector<double> expected(a.size());
  for (size_t i = 0; i < a.size(); ++i) expected[i] = Reference(op, a[i], b[i], alpha_value, out.dtype());
  ExpectValuesNear(out.Read(), expected, out.dtype(), std::string("aclnn") + OpName(op));

  // Bytes outside the view keep their fill.
  const auto after = out.ReadStorage();
  std::vector<bool> in_view(out.storage_elems(), false);
  for (int64_t i = 0; i < Numel(out.sizes()); ++i) in_view[out.StorageIndex(i)] = true;
  const int64_t item = ElementBytes(out.dtype());
  for (int64_t e = 0; e < out.storage_elems(); ++e) {
    if (in_view[e]) continue;
    for (int64_t byte = 0; byte < item; ++byte) {
      ASSERT_EQ(after[e * item + byte], before[e * item + byte]) << "storage element " << e << " changed";
    }
  }
}

std::vector<BinaryOp> OpsFor(aclDataType dtype) {
  std::vector<BinaryOp> ops = {BinaryOp::kAdd, BinaryOp::kMul};
  if (dtype != ACL_BOOL) ops.push_back(BinaryOp::kSub);
  if (IsFloating(dtype)) ops.push_back(BinaryOp::kDiv);
  return ops;
}

class BinaryDtypeTest : public OpsTest, public ::testing::WithParamInterface<aclDataType> {};

TEST_P(BinaryDtypeTest, ContiguousSameDtype) {
  const aclDataType dtype = GetParam();
  for (BinaryOp op : OpsFor(dtype)) {
    const Shape shape = {4, 67};
    DeviceTensor self(dtype, shape, RandomValues(dtype, Numel(shape), 1));
    DeviceTensor other(dtype, shape, RandomValues(dtype, Numel(shape), 2, 0.5, 9.0));
    DeviceTensor out(dtype, shape);
    CheckBinary(op, self, other, out);
  }
}

TEST_P(BinaryDtypeTest, BroadcastTransposedAndSteppedViews) {
  const aclDataType dtype = GetParam();
  for (BinaryOp op : OpsFor(dtype)) {
    // self: the transpose of a contiguous [300, 7]; other: every other column of a [7, 600]
    // buffer, starting at offset 1; out: contiguous [7, 300]. Rows are longer than one block.
    DeviceTensor self(dtype, {7, 300}, {1, 7}, 0, 2100, RandomValues(dtype, 2100, 3));
    DeviceTensor other(dtype, {7, 300}, {600, 2}, 1, 4200, RandomValues(dtype, 2100, 4, 0.5, 9.0));
    DeviceTensor out(dtype, {7, 300});
    CheckBinary(op, self, other, out);
    // Broadcasting: [4, 1, 3] with [5, 1] into [4, 5, 3], and a 0-d other.
    DeviceTensor a(dtype, {4, 1, 3}, RandomValues(dtype, 12, 5));
    DeviceTensor b(dtype, {5, 1}, RandomValues(dtype, 5, 6, 0.5, 9.0));
    DeviceTensor c(dtype, {4, 5, 3});
    CheckBinary(op, a, b, c);
    DeviceTensor scalar(dtype, {}, RandomValues(dtype, 1, 7, 1.0, 9.0));
    CheckBinary(op, a, scalar, c);
  }
}

TEST_P(BinaryDtypeTest, InPlace) {
  const aclDataType dtype = GetParam();
  for (BinaryOp op : OpsFor(dtype)) {
    const Shape shape = {3, 50};
    DeviceTensor x(dtype, shape, RandomValues(dtype, 150, 8));
    DeviceTensor y(dtype, shape, RandomValues(dtype, 150, 9, 0.5, 9.0));
    CheckBinary(op, x, y, x);  // out is self
    CheckBinary(op, y, x, x);  // out is other
    DeviceTensor z(dtype, shape, RandomValues(dtype, 150, 10, 0.5, 4.0));
    CheckBinary(op, z, z, z);  // all three
    // A transposed tensor updated in place, with a broadcast row.
    DeviceTensor t(dtype, {50, 3}, {1, 50}, 0, 150, RandomValues(dtype, 150, 11));
    DeviceTensor row(dtype, {3}, RandomValues(dtype, 3, 12, 0.5, 9.0));
    CheckBinary(op, t, row, t);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, BinaryDtypeTest, kAllDtypes, DtypeParamName);

using BinaryOpsTest = OpsTest;

TEST_F(BinaryOpsTest, ZeroDimOperandsAndOut) {
  DeviceTensor a(ACL_FLOAT, {}, {2.5});
  DeviceTensor b(ACL_FLOAT, {}, {-4.0});
  DeviceTensor out(ACL_FLOAT, {});
  CheckBinary(BinaryOp::kMul, a, b, out);
  EXPECT_EQ(out.Read()[0], -10.0);
  DeviceTensor one(ACL_INT64, {1}, {3});
  DeviceTensor three(ACL_INT64, {3}, {1, 2, 3});
  DeviceTensor out3(ACL_INT64, {3});
  CheckBinary(BinaryOp::kSub, one, three, out3);
  EXPECT_EQ(out3.Read(), (std::vector<double>{2, 1, 0}));
}

TEST_F(BinaryOpsTest, EmptyTensorsDoNoWork) {
  DeviceTensor a(ACL_FLOAT, {2, 0, 3});
  DeviceTensor b(ACL_FLOAT, {3}, {1, 2, 3});  // broadcasts to the empty out
  DeviceTensor out(ACL_FLOAT, {2, 0, 3});
  NOP_EXPECT_OK(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
    return aclnnAddGetWorkspaceSize(a.get(), b.get(), nullptr, out.get(), ws, ex);
  }));
  DeviceTensor one(ACL_INT32, {1}, {5});  // a size-1 dim broadcasts to a zero one
  DeviceTensor none(ACL_INT32, {0});
  NOP_EXPECT_OK(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
    return aclnnMulGetWorkspaceSize(one.get(), none.get(), none.get(), ws, ex);
  }));
  // Empty tensors need no memory at all.
  const int64_t dims[] = {0, 4};
  aclTensor* empty = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, nullptr);
  NOP_EXPECT_OK(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
    return aclnnDivGetWorkspaceSize(empty, empty, empty, ws, ex);
  }));
  aclDestroyTensor(empty);
}

TEST_F(BinaryOpsTest, MixedInputDtypes) {
  struct Case {
    aclDataType self, other, out;
  };
  const Case cases[] = {
      {ACL_INT64, ACL_FLOAT, ACL_FLOAT},    {ACL_FLOAT, ACL_INT64, ACL_FLOAT},
      {ACL_INT32, ACL_FLOAT16, ACL_FLOAT16}, {ACL_BOOL, ACL_INT8, ACL_INT8},
      {ACL_FLOAT, ACL_DOUBLE, ACL_DOUBLE},  {ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT},
      {ACL_UINT8, ACL_INT8, ACL_INT16},     {ACL_INT64, ACL_BOOL, ACL_INT64},
      {ACL_BF16, ACL_FLOAT16, ACL_FLOAT},   {ACL_INT32, ACL_INT32, ACL_FLOAT},
      {ACL_FLOAT16, ACL_FLOAT16, ACL_BF16},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.self << " op " << c.other << " -> " << c.out);
    for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kMul, BinaryOp::kSub, BinaryOp::kDiv}) {
      if (op == BinaryOp::kSub && (c.self == ACL_BOOL || c.other == ACL_BOOL)) continue;
      if (op == BinaryOp::kDiv && !IsFloating(c.out)) continue;
      // Contiguous operands of different dtypes and a broadcast one.
      DeviceTensor self(c.self, {6, 40}, RandomValues(c.self, 240, 20));
      DeviceTensor other(c.other, {6, 40}, RandomValues(c.other, 240, 21, 1.0, 9.0));
      DeviceTensor out(c.out, {6, 40});
      CheckBinary(op, self, other, out);
      DeviceTensor column(c.other, {6, 1}, RandomValues(c.other, 6, 22, 1.0, 9.0));
      CheckBinary(op, self, column, out);
    }
  }
}

TEST_F(BinaryOpsTest, DivOfIntegersIsTrueDivisionIntoAFloatingOut) {
  DeviceTensor a(ACL_INT32, {4}, {7, -7, 1, 0});
  DeviceTensor b(ACL_INT64, {4}, {2, 2, 0, 0});
  DeviceTensor out(ACL_FLOAT, {4});
  CheckBinary(BinaryOp::kDiv, a, b, out);
  const auto values = out.Read();
  EXPECT_EQ(values[0], 3.5);
  EXPECT_EQ(values[1], -3.5);
  EXPECT_EQ(values[2], std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(values[3]));
}

TEST_F(BinaryOpsTest, Alpha) {
  struct Case {
    aclDataType dtype;
    aclDataType alpha_dtype;
    double alpha;
  };
  const Case cases[] = {
      {ACL_FLOAT, ACL_DOUBLE, 2.5},  {ACL_FLOAT, ACL_FLOAT, -0.5},  {ACL_FLOAT16, ACL_FLOAT16, 0.5},
      {ACL_BF16, ACL_DOUBLE, 3.0},   {ACL_DOUBLE, ACL_INT64, -2},   {ACL_INT64, ACL_INT64, 3},
      {ACL_INT32, ACL_INT32, -2},    {ACL_INT8, ACL_DOUBLE, 2.0},  // integral value: accepted
      {ACL_UINT8, ACL_BOOL, 1},      {ACL_FLOAT, ACL_INT64, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "dtype " << c.dtype << " alpha " << c.alpha);
    unsigned char bytes[8] = {};
    Encode(c.alpha_dtype, c.alpha, bytes);
    aclScalar* alpha = aclCreateScalar(bytes, c.alpha_dtype);
    ASSERT_NE(alpha, nullptr);
    DeviceTensor self(c.dtype, {5, 30}, RandomValues(c.dtype, 150, 30));
    DeviceTensor other(c.dtype, {30}, RandomValues(c.dtype, 30, 31));
    DeviceTensor out(c.dtype, {5, 30});
    CheckBinary(BinaryOp::kAdd, self, other, out, alpha, c.alpha);
    CheckBinary(BinaryOp::kSub, self, other, out, alpha, c.alpha);
    aclDestroyScalar(alpha);
  }
  // Bool add: self or (alpha and other).
  for (bool alpha_value : {true, false}) {
    aclScalar* alpha = aclCreateScalar(&alpha_value, ACL_BOOL);
    DeviceTensor self(ACL_BOOL, {4}, {0, 0, 1, 1});
    DeviceTensor other(ACL_BOOL, {4}, {0, 1, 0, 1});
    DeviceTensor out(ACL_BOOL, {4});
    CheckBinary(BinaryOp::kAdd, self, other, out, alpha, alpha_value);
    EXPECT_EQ(out.Read(), (alpha_value ? std::vector<double>{0, 1, 1, 1} : std::vector<double>{0, 0, 1, 1}));
    aclDestroyScalar(alpha);
  }
}

aclnnStatus PrepareScalar(BinaryOp op, const aclTensor* self, const aclScalar* other,
                          const aclScalar* alpha, aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  switch (op) {
    case BinaryOp::kAdd: return aclnnAddsGetWorkspaceSize(self, other, alpha, out, ws, ex);
    case BinaryOp::kSub: return aclnnSubsGetWorkspaceSize(self, other, alpha, out, ws, ex);
    case BinaryOp::kMul: return aclnnMulsGetWorkspaceSize(self, other, out, ws, ex);
    case BinaryOp::kDiv: return aclnnDivsGetWorkspaceSize(self, other, out, ws, ex);
  }
  return -1;
}

// Adds / Subs / Muls / Divs: the scalar (a double or an int64, as adapters pass Python numbers)
// converted to the compute type of out, for every dtype, contiguous and strided, in place too.
TEST_P(BinaryDtypeTest, ScalarForms) {
  const aclDataType dtype = GetParam();
  const double value = IsFloating(dtype) ? 2.5 : (dtype == ACL_BOOL ? 1 : 3);
  const aclDataType scalar_type = IsFloating(dtype) ? ACL_DOUBLE : (dtype == ACL_BOOL ? ACL_BOOL : ACL_INT64);
  unsigned char bytes[8] = {};
  Encode(scalar_type, value, bytes);
  aclScalar* scalar = aclCreateScalar(bytes, scalar_type);
  ASSERT_NE(scalar, nullptr);
  for (BinaryOp op : OpsFor(dtype)) {
    SCOPED_TRACE(std::string("aclnn") + OpName(op) + "s");
    for (bool strided : {false, true}) {
      DeviceTensor self = strided ? DeviceTensor(dtype, {7, 300}, {1, 7}, 0, 2100, RandomValues(dtype, 2100, 5))
                                  : DeviceTensor(dtype, {2100}, RandomValues(dtype, 2100, 6));
      DeviceTensor out(dtype, self.sizes());
      const auto a = self.Read();
      ASSERT_EQ(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
                  return PrepareScalar(op, self.get(), scalar, nullptr, out.get(), ws, ex);
                }),
                ACLNN_SUCCESS)
          << aclnnGetRecentErrMsg();
      std::vector<double> expected(a.size());
      for (size_t i = 0; i < a.size(); ++i) expected[i] = Reference(op, a[i], value, 1.0, dtype);
      ExpectValuesNear(out.Read(), expected, dtype, "scalar form");
      // In place: out is self.
      ASSERT_EQ(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
                  return PrepareScalar(op, self.get(), scalar, nullptr, self.get(), ws, ex);
                }),
                ACLNN_SUCCESS)
          << aclnnGetRecentErrMsg();
      ExpectValuesNear(self.Read(), expected, dtype, "in place");
    }
  }
  aclDestroyScalar(scalar);
}

TEST_F(BinaryOpsTest, ScalarFormsWithAlphaAndTheirDtypeRules) {
  double two = 2.0, half = 0.5, frac = 2.5;
  int64_t three = 3;
  aclScalar* s_two = aclCreateScalar(&two, ACL_DOUBLE);
  aclScalar* s_half = aclCreateScalar(&half, ACL_DOUBLE);
  aclScalar* s_frac = aclCreateScalar(&frac, ACL_DOUBLE);
  aclScalar* s_three = aclCreateScalar(&three, ACL_INT64);
  DeviceTensor f(ACL_FLOAT, {4}, {1, 2, 3, 4});
  DeviceTensor f_out(ACL_FLOAT, {4});
  // self + alpha * other and self - alpha * other.
  ASSERT_EQ(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
              return aclnnAddsGetWorkspaceSize(f.get(), s_two, s_half, f_out.get(), ws, ex);
            }), ACLNN_SUCCESS) << aclnnGetRecentErrMsg();
  EXPECT_EQ(f_out.Read(), (std::vector<double>{2, 3, 4, 5}));
  ASSERT_EQ(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
              return aclnnSubsGetWorkspaceSize(f.get(), s_two, s_half, f_out.get(), ws, ex);
            }), ACLNN_SUCCESS) << aclnnGetRecentErrMsg();
  EXPECT_EQ(f_out.Read(), (std::vector<double>{0, 1, 2, 3}));
  // Integer out: integral scalars only; an int tensor divided needs a floating out.
  DeviceTensor i(ACL_INT32, {3}, {1, -2, 7});
  DeviceTensor i_out(ACL_INT32, {3});
  ASSERT_EQ(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
              return aclnnMulsGetWorkspaceSize(i.get(), s_three, i_out.get(), ws, ex);
            }), ACLNN_SUCCESS) << aclnnGetRecentErrMsg();
  EXPECT_EQ(i_out.Read(), (std::vector<double>{3, -6, 21}));
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  EXPECT_EQ(aclnnMulsGetWorkspaceSize(i.get(), s_frac, i_out.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("other 2.5 is not an integer"), std::string::npos)
      << aclnnGetRecentErrMsg();
  EXPECT_EQ(aclnnDivsGetWorkspaceSize(i.get(), s_two, i_out.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  DeviceTensor d_out(ACL_FLOAT, {3});
  ASSERT_EQ(RunOp([&](uint64_t* ws2, aclOpExecutor** ex2) {
              return aclnnDivsGetWorkspaceSize(i.get(), s_two, d_out.get(), ws2, ex2);
            }), ACLNN_SUCCESS) << aclnnGetRecentErrMsg();
  EXPECT_EQ(d_out.Read(), (std::vector<double>{0.5, -1, 3.5}));
  EXPECT_EQ(aclnnAddsGetWorkspaceSize(f.get(), nullptr, nullptr, f_out.get(), &ws, &ex),
            ACLNN_ERR_PARAM_NULLPTR);
  for (aclScalar* s : {s_two, s_half, s_frac, s_three}) aclDestroyScalar(s);
}

TEST_F(BinaryOpsTest, IntegerArithmeticWraps) {
  DeviceTensor a(ACL_INT32, {2}, {2147483647.0, -2147483648.0});
  DeviceTensor b(ACL_INT32, {2}, {1, 1});
  DeviceTensor out(ACL_INT32, {2});
  CheckBinary(BinaryOp::kAdd, a, b, out);
  EXPECT_EQ(out.Read(), (std::vector<double>{-2147483648.0, -2147483647.0}));
  DeviceTensor c(ACL_INT8, {2}, {100, -100});
  DeviceTensor d(ACL_INT8, {2}, {3, 3});
  DeviceTensor out8(ACL_INT8, {2});
  CheckBinary(BinaryOp::kMul, c, d, out8);
  EXPECT_EQ(out8.Read(), (std::vector<double>{44, -44}));
}

TEST_F(BinaryOpsTest, BoolMulIsLogicalAndOfAnyNonZeroByte) {
  DeviceTensor a(ACL_BOOL, {4}, {0, 0, 1, 1});
  DeviceTensor b(ACL_BOOL, {4}, {0, 1, 0, 1});
  // Bool memory holding bytes other than 0 / 1 still reads as true.
  const unsigned char raw[4] = {0, 2, 0, 0xff};
  ASSERT_EQ(nrtMemcpy(b.data(), raw, 4, NRT_MEMCPY_HOST_TO_DEVICE), NRT_SUCCESS);
  DeviceTensor out(ACL_BOOL, {4});
  NOP_ASSERT_OK(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
    return aclnnMulGetWorkspaceSize(a.get(), b.get(), out.get(), ws, ex);
  }));
  const auto bytes = out.ReadStorage();
  EXPECT_EQ(std::vector<int>(bytes.begin(), bytes.end()), (std::vector<int>{0, 0, 0, 1}));
}

TEST_F(BinaryOpsTest, StridedOutputWritesOnlyItsView) {
  // out is every third element of a padded, transposed buffer.
  DeviceTensor self(ACL_FLOAT, {20, 30}, RandomValues(ACL_FLOAT, 600, 40));
  DeviceTensor other(ACL_FLOAT, {30}, RandomValues(ACL_FLOAT, 30, 41));
  DeviceTensor out(ACL_FLOAT, {20, 30}, {3, 60}, 2, 1900);
  CheckBinary(BinaryOp::kAdd, self, other, out);
  DeviceTensor half_out(ACL_FLOAT16, {20, 30}, {1, 25}, 4, 800);
  CheckBinary(BinaryOp::kMul, self, other, half_out);
}

TEST_F(BinaryOpsTest, DescriptorsMayBeDestroyedBeforeTheLaunch) {
  DeviceTensor x(ACL_FLOAT, {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  DeviceTensor out(ACL_FLOAT, {8});
  aclTensor* self = x.Alias();
  aclTensor* result = out.Alias();
  double two = 2.0;
  aclScalar* alpha = aclCreateScalar(&two, ACL_DOUBLE);
  uint64_t ws = 0;
  aclOpExecutor* executor = nullptr;
  NOP_ASSERT_OK(aclnnAddGetWorkspaceSize(self, self, alpha, result, &ws, &executor));
  aclDestroyTensor(self);
  aclDestroyTensor(result);
  aclDestroyScalar(alpha);
  NOP_ASSERT_OK(aclnnAdd(nullptr, ws, executor, nullptr));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(out.Read(), (std::vector<double>{3, 6, 9, 12, 15, 18, 21, 24}));
}

// Adapters keep one descriptor per operand geometry and rebind its address for every call; a repeat
// call skips the geometry checks but must compute at the new addresses and still check them.
TEST_F(BinaryOpsTest, ReusedDescriptorsRunAtTheirNewAddressesAndAreStillChecked) {
  DeviceTensor a(ACL_FLOAT, {4}, {1, 2, 3, 4});
  DeviceTensor b(ACL_FLOAT, {4}, {10, 20, 30, 40});
  DeviceTensor c(ACL_FLOAT, {4}, {100, 200, 300, 400});
  DeviceTensor out1(ACL_FLOAT, {4});
  DeviceTensor out2(ACL_FLOAT, {4});
  aclTensor* self = a.Alias();
  aclTensor* other = b.Alias();
  aclTensor* out = out1.Alias();
  auto add = [&] {
    return RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
      return aclnnAddGetWorkspaceSize(self, other, nullptr, out, ws, ex);
    });
  };
  NOP_ASSERT_OK(add());
  EXPECT_EQ(out1.Read(), (std::vector<double>{11, 22, 33, 44}));
  NOP_ASSERT_OK(aclSetRawTensorAddr(other, c.data()));
  NOP_ASSERT_OK(aclSetRawTensorAddr(out, out2.data()));
  NOP_ASSERT_OK(add());
  EXPECT_EQ(out2.Read(), (std::vector<double>{101, 202, 303, 404}));
  EXPECT_EQ(out1.Read(), (std::vector<double>{11, 22, 33, 44}));

  // A rebound address outside device memory, or too close to the end of an allocation for the view.
  std::vector<float> host(4);
  NOP_ASSERT_OK(aclSetRawTensorAddr(other, host.data()));
  EXPECT_EQ(add(), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("other"), std::string::npos) << aclnnGetRecentErrMsg();
  NOP_ASSERT_OK(aclSetRawTensorAddr(other, static_cast<float*>(c.data()) + 2));
  EXPECT_EQ(add(), ACLNN_ERR_PARAM_INVALID);
  NOP_ASSERT_OK(aclSetRawTensorAddr(other, nullptr));
  EXPECT_EQ(add(), ACLNN_ERR_PARAM_NULLPTR);

  // Another scalar is another validation: an integer out rejects a fractional alpha.
  DeviceTensor ia(ACL_INT32, {4}, {1, 2, 3, 4});
  aclTensor* iself = ia.Alias();
  double one = 1.0, half = 0.5;
  aclScalar* alpha_one = aclCreateScalar(&one, ACL_DOUBLE);
  aclScalar* alpha_half = aclCreateScalar(&half, ACL_DOUBLE);
  auto iadd = [&](aclScalar* alpha) {
    return RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
      return aclnnAddGetWorkspaceSize(iself, iself, alpha, iself, ws, ex);
    });
  };
  NOP_ASSERT_OK(iadd(alpha_one));
  EXPECT_EQ(ia.Read(), (std::vector<double>{2, 4, 6, 8}));
  EXPECT_EQ(iadd(alpha_half), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(ia.Read(), (std::vector<double>{2, 4, 6, 8}));
  for (aclTensor* t : {self, other, out, iself}) aclDestroyTensor(t);
  aclDestroyScalar(alpha_one);
  aclDestroyScalar(alpha_half);
}

TEST_F(BinaryOpsTest, LargeKernelsSplitAcrossThreadsMatchTheReference) {
  // Contiguous fast path, just above the parallel threshold and well above it.
  for (int64_t n : {int64_t{64 * 1024}, int64_t{(1 << 20) + 3}}) {
    DeviceTensor a(ACL_FLOAT, {n}, RandomValues(ACL_FLOAT, n, 50));
    DeviceTensor b(ACL_FLOAT, {n}, RandomValues(ACL_FLOAT, n, 51));
    DeviceTensor out(ACL_FLOAT, {n});
    CheckBinary(BinaryOp::kAdd, a, b, out);
  }
  // N-d path: a broadcast row into a large out, and mixed dtypes.
  DeviceTensor m(ACL_INT32, {700, 500}, RandomValues(ACL_INT32, 350000, 52));
  DeviceTensor row(ACL_INT32, {500}, RandomValues(ACL_INT32, 500, 53));
  DeviceTensor prod(ACL_INT32, {700, 500});
  CheckBinary(BinaryOp::kMul, m, row, prod);
  DeviceTensor h(ACL_FLOAT16, {500, 700}, {1, 500}, 0, 350000, RandomValues(ACL_FLOAT16, 350000, 54));
  DeviceTensor column(ACL_INT32, {500, 1}, RandomValues(ACL_INT32, 500, 55));
  DeviceTensor f(ACL_FLOAT, {500, 700});
  CheckBinary(BinaryOp::kSub, h, column, f);
}

}  // namespace
}  // namespace npu::opslib::testing
