// TransDataTest.cpp - the private storage formats and aclnnTransData against placements computed
// here from the documented layouts: storage shapes, bit-exact element placement with zeroed
// padding for every format and dtype, round trips between every pair of formats, strided plain
// sides, and the errors for descriptors and arguments a format cannot take.
#include "OpsTestUtil.h"
#include "npu/format_layout.h"

namespace npu::opslib::testing {
namespace {

int64_t Up(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string Str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Where logical element `index` of a tensor of `dims` lives in `format`'s storage, written out
// from the layout definitions (independent of format_layout.h).
int64_t RefStorageIndex(aclFormat format, const Shape& dims, const Shape& index, int64_t c0) {
  if (format == ACL_FORMAT_FRACTAL_NZ) {
    const size_t r = dims.size();
    const int64_t m_dim = dims[r - 2], k_dim = dims[r - 1];
    int64_t batch = 0;
    for (size_t d = 0; d + 2 < r; ++d) batch = batch * dims[d] + index[d];
    const int64_t m = index[r - 2], k = index[r - 1];
    const int64_t k1 = Up(k_dim, c0), m1 = Up(m_dim, 16);
    return ((batch * k1 + k / c0) * m1 + m / 16) * 16 * c0 + (m % 16) * c0 + k % c0;
  }
  if (format == ACL_FORMAT_NDC1HWC0 || format == ACL_FRACTAL_Z_3D) {
    const int64_t N = dims[0], C = dims[1], D = dims[2], H = dims[3], W = dims[4];
    const int64_t n = index[0], c = index[1], d = index[2], h = index[3], w = index[4];
    const int64_t c1 = Up(C, 16), n1 = Up(N, 16);
    if (format == ACL_FORMAT_NDC1HWC0) return ((((n * D + d) * c1 + c / 16) * H + h) * W + w) * 16 + c % 16;
    return (((((d * c1 + c / 16) * H + h) * W + w) * n1 + n / 16) * 16 + n % 16) * 16 + c % 16;
  }
  // NCHW group: fewer than 4 dims are C, CH or CHW.
  Shape d4{1, 1, 1, 1}, i4{0, 0, 0, 0};
  if (dims.size() == 4) {
    d4 = dims;
    i4 = index;
  } else {
    for (size_t k = 0; k < dims.size(); ++k) {
      d4[k + 1] = dims[k];
      i4[k + 1] = index[k];
    }
  }
  const int64_t N = d4[0], C = d4[1], H = d4[2], W = d4[3];
  const int64_t n = i4[0], c = i4[1], h = i4[2], w = i4[3];
  const int64_t c1 = Up(C, 16), n1 = Up(N, 16);
  if (format == ACL_FORMAT_NC1HWC0) return (((n * c1 + c / 16) * H + h) * W + w) * 16 + c % 16;
  return ((((c / 16) * H + h) * W + w) * n1 + n / 16) * 256 + (n % 16) * 16 + c % 16;
}

// A whole tensor in a private format on the device.
class PrivateTensor {
 public:
  PrivateTensor(aclDataType dtype, aclFormat format, Shape sizes, int64_t c0 = 0)
      : dtype_(dtype), format_(format), sizes_(std::move(sizes)) {
    c0_ = c0 > 0 ? c0 : npu::formats::DefaultC0(format, ElementBytes(dtype));
    storage_ = npu::formats::StorageShape(format, sizes_, c0_);
    const size_t bytes = static_cast<size_t>(Numel(storage_) * ElementBytes(dtype_));
    EXPECT_EQ(nrtMalloc(&data_, bytes), NRT_SUCCESS);
    std::vector<unsigned char> fill(bytes, 0xAB);  // must become zero padding
    EXPECT_EQ(nrtMemcpy(data_, fill.data(), bytes, NRT_MEMCPY_HOST_TO_DEVICE), NRT_SUCCESS);
    tensor_ = aclCreateTensor(sizes_.data(), sizes_.size(), dtype_, nullptr, 0, format_,
                              storage_.data(), storage_.size(), data_);
    EXPECT_NE(tensor_, nullptr) << aclnnGetRecentErrMsg();
  }
  ~PrivateTensor() {
    aclDestroyTensor(tensor_);
    nrtFree(data_);
  }
  PrivateTensor(const PrivateTensor&) = delete;
  PrivateTensor& operator=(const PrivateTensor&) = delete;

  aclTensor* get() const { return tensor_; }
  int64_t c0() const { return c0_; }
  const Shape& storage() const { return storage_; }
  std::vector<unsigned char> Bytes() const {
    std::vector<unsigned char> bytes(Numel(storage_) * ElementBytes(dtype_));
    EXPECT_EQ(nrtMemcpy(bytes.data(), data_, bytes.size(), NRT_MEMCPY_DEVICE_TO_HOST), NRT_SUCCESS);
    return bytes;
  }

 private:
  aclDataType dtype_;
  aclFormat format_;
  Shape sizes_, storage_;
  int64_t c0_ = 16;
  void* data_ = nullptr;
  aclTensor* tensor_ = nullptr;
};

aclnnStatus TransData(const aclTensor* src, aclTensor* dst) {
  return RunOp([&](uint64_t* ws, aclOpExecutor** ex) { return aclnnTransDataGetWorkspaceSize(src, dst, ws, ex); });
}

const aclDataType kTypes[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT8, ACL_UINT8, ACL_INT16, ACL_INT32};

struct Case {
  aclFormat format;
  Shape sizes;
};
// Shapes with partial blocks in every blocked dim, and the short ranks of the 4-d formats.
const Case kCases[] = {
    {ACL_FORMAT_NC1HWC0, {2, 17, 3, 5}}, {ACL_FORMAT_NC1HWC0, {5, 20}}, {ACL_FORMAT_NC1HWC0, {18}},
    {ACL_FORMAT_NC1HWC0, {3, 4, 5}},     {ACL_FORMAT_FRACTAL_Z, {33, 17, 3, 2}},
    {ACL_FORMAT_FRACTAL_Z, {7, 5}},      {ACL_FORMAT_NDC1HWC0, {2, 17, 2, 3, 4}},
    {ACL_FRACTAL_Z_3D, {17, 18, 2, 2, 3}}, {ACL_FORMAT_FRACTAL_NZ, {15, 33}},
    {ACL_FORMAT_FRACTAL_NZ, {2, 3, 17, 40}},
};

TEST(FormatLayoutTest, StorageShapesFollowTheDocumentedDefinitions) {
  namespace nf = npu::formats;
  EXPECT_EQ(nf::StorageShape(ACL_FORMAT_NC1HWC0, {2, 17, 3, 5}, 16), (Shape{2, 2, 3, 5, 16}));
  EXPECT_EQ(nf::StorageShape(ACL_FORMAT_NC1HWC0, {5, 256}, 16), (Shape{1, 1, 256, 1, 16}));
  EXPECT_EQ(nf::StorageShape(ACL_FORMAT_FRACTAL_Z, {33, 17, 3, 3}, 16), (Shape{18, 3, 16, 16}));
  EXPECT_EQ(nf::StorageShape(ACL_FORMAT_NDC1HWC0, {2, 17, 4, 3, 5}, 16), (Shape{2, 4, 2, 3, 5, 16}));
  EXPECT_EQ(nf::StorageShape(ACL_FRACTAL_Z_3D, {33, 17, 4, 3, 3}, 16), (Shape{72, 3, 16, 16}));
  EXPECT_EQ(nf::StorageShape(ACL_FORMAT_FRACTAL_NZ, {3, 15, 33}, nf::DefaultC0(ACL_FORMAT_FRACTAL_NZ, 2)),
            (Shape{3, 3, 1, 16, 16}));
  EXPECT_EQ(nf::DefaultC0(ACL_FORMAT_FRACTAL_NZ, 4), 16);
  EXPECT_EQ(nf::DefaultC0(ACL_FORMAT_FRACTAL_NZ, 1), 32);
  EXPECT_EQ(nf::StorageShape(ACL_FORMAT_FRACTAL_NZ, {15, 33}, 32), (Shape{2, 1, 16, 32}));
  EXPECT_NE(nf::CheckRank(ACL_FORMAT_NC1HWC0, 5), "");
  EXPECT_NE(nf::CheckRank(ACL_FORMAT_NDC1HWC0, 4), "");
  EXPECT_NE(nf::CheckRank(ACL_FORMAT_FRACTAL_NZ, 1), "");
  EXPECT_EQ(nf::BaseFormatOf(ACL_FORMAT_FRACTAL_Z), ACL_FORMAT_NCHW);
  EXPECT_EQ(nf::BaseFormatOf(ACL_FRACTAL_Z_3D), ACL_FORMAT_NCDHW);
  EXPECT_EQ(nf::BaseFormatOf(ACL_FORMAT_FRACTAL_NZ), ACL_FORMAT_ND);
}

class TransDataTest : public OpsTest {};

TEST_F(TransDataTest, PlainToPrivatePlacesEveryElementAndZeroesPadding) {
  for (const Case& c : kCases) {
    for (aclDataType dtype : kTypes) {
      SCOPED_TRACE(std::string(npu::formats::FormatName(c.format)) + " " + DataTypeName(dtype) + " " +
                   Str(c.sizes));
      const auto values = RandomValues(dtype, Numel(c.sizes), 7);
      DeviceTensor plain(dtype, c.sizes, values);
      PrivateTensor priv(dtype, c.format, c.sizes);
      NOP_ASSERT_OK(TransData(plain.get(), priv.get()));
      EXPECT_TRUE(aclIsOutputTensor(priv.get()));
      EXPECT_FALSE(aclIsOutputTensor(plain.get()));
      const auto bytes = priv.Bytes();
      const int64_t item = ElementBytes(dtype);
      std::vector<char> placed(bytes.size() / item, 0);
      for (int64_t i = 0; i < Numel(c.sizes); ++i) {
        const int64_t at = RefStorageIndex(c.format, c.sizes, Unravel(i, c.sizes), priv.c0());
        ASSERT_LT(at * item, static_cast<int64_t>(bytes.size()));
        placed[at] = 1;
        ASSERT_EQ(Decode(dtype, bytes.data() + at * item), values[i]) << "element " << i;
      }
      for (size_t at = 0; at < placed.size(); ++at) {
        if (placed[at]) continue;
        for (int64_t b = 0; b < item; ++b) ASSERT_EQ(bytes[at * item + b], 0) << "padding element " << at;
      }
    }
  }
}

TEST_F(TransDataTest, RoundTripsThroughEveryPairOfFormats) {
  // Every format that can hold a shape, converted into every other and back to ND.
  const std::pair<Shape, std::vector<aclFormat>> groups[] = {
      {{3, 17, 2, 5}, {ACL_FORMAT_NC1HWC0, ACL_FORMAT_FRACTAL_Z, ACL_FORMAT_FRACTAL_NZ}},
      {{17, 18, 2, 3, 4}, {ACL_FORMAT_NDC1HWC0, ACL_FRACTAL_Z_3D, ACL_FORMAT_FRACTAL_NZ}},
  };
  for (const auto& [sizes, formats] : groups) {
    for (aclDataType dtype : kTypes) {
      const auto values = RandomValues(dtype, Numel(sizes), 11);
      DeviceTensor source(dtype, sizes, values);
      for (aclFormat from : formats) {
        for (aclFormat to : formats) {
          if (from == to) continue;
          SCOPED_TRACE(std::string(npu::formats::FormatName(from)) + " -> " + npu::formats::FormatName(to) +
                       " " + DataTypeName(dtype));
          PrivateTensor a(dtype, from, sizes), b(dtype, to, sizes);
          DeviceTensor back(dtype, sizes);
          NOP_ASSERT_OK(TransData(source.get(), a.get()));
          NOP_ASSERT_OK(TransData(a.get(), b.get()));
          NOP_ASSERT_OK(TransData(b.get(), back.get()));
          ASSERT_EQ(back.Read(), values);
        }
      }
    }
  }
}

TEST_F(TransDataTest, StridedPlainSidesAndCustomC0) {
  // A transposed view in, an offset strided view out.
  const Shape sizes{20, 18};
  const auto values = RandomValues(ACL_FLOAT, Numel(sizes), 3);
  DeviceTensor transposed(ACL_FLOAT, sizes, Shape{1, 20}, 0, 360, values);
  PrivateTensor nz(ACL_FLOAT, ACL_FORMAT_FRACTAL_NZ, sizes, /*c0=*/8);
  EXPECT_EQ(nz.storage(), (Shape{3, 2, 16, 8}));
  NOP_ASSERT_OK(TransData(transposed.get(), nz.get()));
  DeviceTensor out(ACL_FLOAT, sizes, Shape{40, 2}, 5, 820);
  NOP_ASSERT_OK(TransData(nz.get(), out.get()));
  EXPECT_EQ(out.Read(), values);
  const auto bytes = nz.Bytes();
  for (int64_t i = 0; i < Numel(sizes); ++i) {
    const int64_t at = RefStorageIndex(ACL_FORMAT_FRACTAL_NZ, sizes, Unravel(i, sizes), 8);
    ASSERT_EQ(Decode(ACL_FLOAT, bytes.data() + at * 4), values[i]);
  }
}

TEST_F(TransDataTest, LargeTensorsSplitAcrossThreadsGiveTheSamePlacement) {
  const Shape sizes{4, 300, 17, 9};
  const auto values = RandomValues(ACL_FLOAT16, Numel(sizes), 5);
  DeviceTensor plain(ACL_FLOAT16, sizes, values);
  PrivateTensor priv(ACL_FLOAT16, ACL_FORMAT_NC1HWC0, sizes);
  NOP_ASSERT_OK(TransData(plain.get(), priv.get()));
  DeviceTensor back(ACL_FLOAT16, sizes);
  NOP_ASSERT_OK(TransData(priv.get(), back.get()));
  EXPECT_EQ(back.Read(), values);
}

TEST_F(TransDataTest, RejectsWhatAFormatCannotHoldWithReasons) {
  const Shape sizes{4, 5};
  const Shape nz_storage{1, 1, 16, 16};
  void* data = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&data, 4096));
  const auto create = [&](aclDataType t, const Shape& view, const Shape* strides, int64_t offset, aclFormat f,
                          const Shape& storage) {
    return aclCreateTensor(view.data(), view.size(), t, strides ? strides->data() : nullptr, offset, f,
                           storage.data(), storage.size(), data);
  };
  EXPECT_EQ(create(ACL_DOUBLE, sizes, nullptr, 0, ACL_FORMAT_FRACTAL_NZ, nz_storage), nullptr);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("FRACTAL_NZ does not hold DOUBLE"), std::string::npos)
      << aclnnGetRecentErrMsg();
  EXPECT_EQ(create(ACL_FLOAT, sizes, nullptr, 0, ACL_FORMAT_FRACTAL_NZ, Shape{2, 1, 16, 16}), nullptr);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("has shape [1, 1, 16, 16], but storageDims are [2, 1, 16, 16]"),
            std::string::npos) << aclnnGetRecentErrMsg();
  const Shape gapped{10, 1};
  EXPECT_EQ(create(ACL_FLOAT, sizes, &gapped, 0, ACL_FORMAT_FRACTAL_NZ, nz_storage), nullptr);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("a permutation of its dims"), std::string::npos)
      << aclnnGetRecentErrMsg();
  EXPECT_EQ(create(ACL_FLOAT, sizes, nullptr, 3, ACL_FORMAT_FRACTAL_NZ, nz_storage), nullptr);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("offset 3"), std::string::npos);
  // A transposed view of a whole tensor is a valid descriptor (matmuls take transposed weights)...
  const Shape transposed{1, 5};
  const Shape t_sizes{5, 4};
  aclTensor* t = create(ACL_FLOAT, t_sizes, &transposed, 0, ACL_FORMAT_FRACTAL_NZ, nz_storage);
  EXPECT_NE(t, nullptr) << aclnnGetRecentErrMsg();
  // ...but TransData moves whole tensors only.
  {
    DeviceTensor plain(ACL_FLOAT, t_sizes);
    uint64_t ws0 = 0;
    aclOpExecutor* ex0 = nullptr;
    EXPECT_EQ(aclnnTransDataGetWorkspaceSize(t, plain.get(), &ws0, &ex0), ACLNN_ERR_PARAM_INVALID);
    EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("whole"), std::string::npos) << aclnnGetRecentErrMsg();
  }
  aclDestroyTensor(t);
  EXPECT_EQ(create(ACL_FLOAT, Shape{7}, nullptr, 0, ACL_FORMAT_FRACTAL_NZ, nz_storage), nullptr);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("at least 2 dims"), std::string::npos);
  EXPECT_EQ(create(ACL_FLOAT, Shape{1, 2, 3, 4, 5}, nullptr, 0, ACL_FORMAT_NC1HWC0, nz_storage), nullptr);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("at most 4 dims"), std::string::npos);
  EXPECT_EQ(create(ACL_FLOAT, sizes, nullptr, 0, static_cast<aclFormat>(7), sizes), nullptr);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("unknown format 7"), std::string::npos);

  // TransData itself: dtypes and shapes must match.
  DeviceTensor f32(ACL_FLOAT, sizes), f16(ACL_FLOAT16, sizes), other(ACL_FLOAT, Shape{5, 4});
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  EXPECT_EQ(aclnnTransDataGetWorkspaceSize(f32.get(), f16.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("use aclnnCast for dtypes"), std::string::npos);
  EXPECT_EQ(aclnnTransDataGetWorkspaceSize(f32.get(), other.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("differs from dst shape [5, 4]"), std::string::npos);
  EXPECT_EQ(aclnnTransDataGetWorkspaceSize(nullptr, f32.get(), &ws, &ex), ACLNN_ERR_PARAM_NULLPTR);
  // Elementwise ops still refuse private descriptors and say how to convert.
  PrivateTensor nz(ACL_FLOAT, ACL_FORMAT_FRACTAL_NZ, sizes);
  EXPECT_EQ(aclnnReluGetWorkspaceSize(nz.get(), f32.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("aclnnTransData"), std::string::npos);
  EXPECT_FALSE(aclIsOutputTensor(f32.get()));
  nrtFree(data);
}

TEST_F(TransDataTest, IsRegisteredAsANamedDeviceOp) {
  const aclnnOpEntry* entry = aclnnFindOp("aclnnTransData");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->get_workspace_size, reinterpret_cast<void*>(&aclnnTransDataGetWorkspaceSize));
  EXPECT_FALSE(entry->is_custom);
}

}  // namespace
}  // namespace npu::opslib::testing
