#include "core/u256.h"

#include <gtest/gtest.h>

namespace gapless {
namespace {

TEST(U256, ParsesAndPrintsValuesAbove64Bits) {
  // 110 ETH in wei, from mainnet block 47218 (above 2^64).
  auto v = U256::FromHexQuantity("0x5f68e8131ecf80000");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->ToDecimal(), "110000000000000000000");
  EXPECT_EQ(v->ToHexQuantity(), "0x5f68e8131ecf80000");
}

TEST(U256, MaxValueIsExact) {
  auto v = U256::FromHexQuantity("0x" + std::string(64, 'f'));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->ToDecimal(),
            "115792089237316195423570985008687907853269984665640564039457584007913129639935");
  EXPECT_EQ(U256::FromDecimal(v->ToDecimal()), v);
}

TEST(U256, RejectsOverflowBadDigitsAndMissingPrefix) {
  EXPECT_FALSE(U256::FromHexQuantity("0x1" + std::string(64, '0')).has_value());
  EXPECT_FALSE(U256::FromHexQuantity("0x").has_value());
  EXPECT_FALSE(U256::FromHexQuantity("12").has_value());
  EXPECT_FALSE(U256::FromHexQuantity("0x12g").has_value());
  EXPECT_FALSE(U256::FromDecimal(
                   "115792089237316195423570985008687907853269984665640564039457584007913129639936")
                   .has_value());
}

TEST(U256, ZeroAndLeadingZeros) {
  EXPECT_EQ(U256::FromHexQuantity("0x0")->ToDecimal(), "0");
  EXPECT_EQ(U256::FromHexQuantity("0x000a")->ToDecimal(), "10");
  EXPECT_EQ(U256::FromHexDigits(std::string(64, '0'))->ToDecimal(), "0");
  EXPECT_EQ(U256().ToHexQuantity(), "0x0");
}

TEST(U256, DecimalRoundTripAcrossLimbBoundaries) {
  for (const char* s :
       {"18446744073709551615", "18446744073709551616", "340282366920938463463374607431768211456",
        "10000000000000000000", "9999999999999999999"}) {
    auto v = U256::FromDecimal(s);
    ASSERT_TRUE(v.has_value()) << s;
    EXPECT_EQ(v->ToDecimal(), s);
    EXPECT_EQ(U256::FromHexQuantity(v->ToHexQuantity()), v) << s;
  }
}

}  // namespace
}  // namespace gapless
