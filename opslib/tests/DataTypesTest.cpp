// DataTypesTest.cpp - opslib's float16 / bfloat16 conversions against independent references:
// the compiler's _Float16 and a nearbyint-based bfloat16 rounding.
#include <cmath>
#include <random>

#include "../src/DataTypes.h"
#include "OpsTestUtil.h"

namespace npu::opslib::testing {
namespace {

std::vector<float> EdgeFloats() {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65505.0f, 65519.0f, 65520.0f,
                               -65520.0f, 1e-8f, 2.98e-8f, 2.9802322e-8f, 5.9604645e-8f,
                               6.1035156e-5f, 6.0975552e-5f, 1.0f + 0x1p-11f, 1.0f + 0x3p-11f,
                               INFINITY, -INFINITY, 3.4028235e38f, 1e-40f, -1e-45f,
                               0x1p-25f, 0x1.000002p-25f, 0x1p-24f, 0x1.8p-24f};
  return values;
}

TEST(DataTypesTest, HalfRoundTripsEveryBitPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float value = HalfBitsToFloat(static_cast<uint16_t>(bits));
    const float reference = RefHalfToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(reference)) {
      EXPECT_TRUE(std::isnan(value)) << bits;
      EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(value)))) << bits;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(value), std::bit_cast<uint32_t>(reference)) << bits;
    ASSERT_EQ(FloatToHalfBits(value), bits) << bits;
  }
}

TEST(DataTypesTest, FloatToHalfRoundsToNearestEven) {
  std::vector<float> values = EdgeFloats();
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::uniform_real_distribution<float> in_range(-70000.0f, 70000.0f);
  std::uniform_real_distribution<float> tiny(-1e-4f, 1e-4f);
  for (int i = 0; i < 300000; ++i) {
    values.push_back(std::bit_cast<float>(any_bits(gen)));
    values.push_back(in_range(gen));
    values.push_back(tiny(gen));
  }
  for (float value : values) {
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(value))));
      continue;
    }
    ASSERT_EQ(FloatToHalfBits(value), RefFloatToHalf(value)) << std::hexfloat << value;
  }
}

TEST(DataTypesTest, BFloat16RoundTripsEveryBitPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float value = BFloat16BitsToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(FloatToBFloat16Bits(value))));
      continue;
    }
    ASSERT_EQ(FloatToBFloat16Bits(value), bits) << bits;
  }
}

TEST(DataTypesTest, FloatToBFloat16RoundsToNearestEven) {
  std::vector<float> values = EdgeFloats();
  values.push_back(1.0f + 0x1p-8f);        // tie, even stays down
  values.push_back(1.0f + 0x3p-8f);        // tie, odd goes up
  values.push_back(1.0f + 0x1.01p-8f);     // just above the tie
  std::mt19937 gen(11);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 500000; ++i) values.push_back(std::bit_cast<float>(any_bits(gen)));
  for (float value : values) {
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(FloatToBFloat16Bits(value))));
      continue;
    }
    ASSERT_EQ(FloatToBFloat16Bits(value), RefFloatToBf16(value)) << std::hexfloat << value;
  }
}

TEST(DataTypesTest, ConvertFollowsPyTorchForBoolAndIntegers) {
  EXPECT_TRUE(Convert<bool>(0.5f));
  EXPECT_TRUE(Convert<bool>(NAN));
  EXPECT_FALSE(Convert<bool>(-0.0));
  EXPECT_TRUE(Convert<bool>(Half{FloatToHalfBits(0.001f)}));
  EXPECT_EQ(Convert<int64_t>(-2.7f), -2);
  EXPECT_EQ(Convert<int8_t>(int64_t{300}), 44);
  EXPECT_EQ(Convert<float>(Half{0x3c00}), 1.0f);
  EXPECT_EQ(Convert<BFloat16>(1.0).bits, 0x3f80);
  EXPECT_EQ(Convert<Half>(true).bits, 0x3c00);
}

TEST(DataTypesTest, SizesAndNames) {
  EXPECT_EQ(ElementSize(ACL_BF16), 2);
  EXPECT_EQ(ElementSize(ACL_BOOL), 1);
  EXPECT_EQ(ElementSize(ACL_DOUBLE), 8);
  EXPECT_EQ(ElementSize(ACL_DT_UNDEFINED), 0);
  EXPECT_STREQ(DataTypeName(ACL_FLOAT16), "FLOAT16");
  EXPECT_STREQ(FormatName(ACL_FORMAT_FRACTAL_NZ), "FRACTAL_NZ");
}

}  // namespace
}  // namespace npu::opslib::testing
