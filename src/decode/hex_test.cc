#include "decode/hex.h"

#include <gtest/gtest.h>

#include "decode/decode.h"

namespace gapless::decode_internal {
namespace {

TEST(Hex, NormalizesDataToLowerCase) {
  std::string out;
  EXPECT_EQ(NormalizeHexData("0xAbCdEF", kAnyLength, &out), HexProblem::kNone);
  EXPECT_EQ(out, "0xabcdef");
  EXPECT_EQ(NormalizeHexData("0X00", kAnyLength, &out), HexProblem::kNone);
  EXPECT_EQ(out, "0x00");
  EXPECT_EQ(NormalizeHexData("0x", kAnyLength, &out), HexProblem::kNone);
  EXPECT_EQ(out, "0x");
}

TEST(Hex, RejectsBadData) {
  std::string out;
  EXPECT_EQ(NormalizeHexData("abcd", kAnyLength, &out), HexProblem::kNoPrefix);
  EXPECT_EQ(NormalizeHexData("", kAnyLength, &out), HexProblem::kNoPrefix);
  EXPECT_EQ(NormalizeHexData("0xabc", kAnyLength, &out), HexProblem::kOddLength);
  EXPECT_EQ(NormalizeHexData("0xzz", kAnyLength, &out), HexProblem::kBadDigit);
  EXPECT_EQ(NormalizeHexData("0x0g", kAnyLength, &out), HexProblem::kBadDigit);
  EXPECT_EQ(NormalizeHexData("0x 1", kAnyLength, &out), HexProblem::kBadDigit);
}

TEST(Hex, ChecksSizes) {
  std::string out;
  std::string address = "0x" + std::string(40, 'A');
  EXPECT_EQ(NormalizeHexData(address, 20, &out), HexProblem::kNone);
  EXPECT_EQ(out, "0x" + std::string(40, 'a'));
  EXPECT_EQ(NormalizeHexData(address + "00", 20, &out), HexProblem::kWrongLength);
  EXPECT_EQ(NormalizeHexData(address, 32, &out), HexProblem::kWrongLength);
  EXPECT_EQ(DescribeHexProblem(HexProblem::kWrongLength, "0x1234", 20),
            "has 4 hex digits, expected 40 (20 bytes)");
  EXPECT_TRUE(IsHexOfBytes("0x" + std::string(64, 'F'), 32));
  EXPECT_FALSE(IsHexOfBytes("0x" + std::string(63, 'F') + "g", 32));
  EXPECT_FALSE(IsHexOfBytes("1x" + std::string(64, 'F'), 32));
}

TEST(Hex, ParsesU64Quantities) {
  uint64_t v = 0;
  EXPECT_EQ(ParseQuantityU64("0x0", &v), HexProblem::kNone);
  EXPECT_EQ(v, 0u);
  EXPECT_EQ(ParseQuantityU64("0x1A", &v), HexProblem::kNone);
  EXPECT_EQ(v, 26u);
  EXPECT_EQ(ParseQuantityU64("0xffffffffffffffff", &v), HexProblem::kNone);
  EXPECT_EQ(v, UINT64_MAX);
  EXPECT_EQ(ParseQuantityU64("0x0000000000000000001", &v), HexProblem::kNone);  // leading zeros
  EXPECT_EQ(v, 1u);
  EXPECT_EQ(ParseQuantityU64("0x10000000000000000", &v), HexProblem::kOverflow);
  EXPECT_EQ(ParseQuantityU64("0x", &v), HexProblem::kEmpty);
  EXPECT_EQ(ParseQuantityU64("12", &v), HexProblem::kNoPrefix);
  EXPECT_EQ(ParseQuantityU64("0x1z", &v), HexProblem::kBadDigit);
  EXPECT_EQ(ParseQuantityU64("0x-1", &v), HexProblem::kBadDigit);
}

TEST(Hex, ParsesU256Quantities) {
  U256 v;
  std::string max = "0x" + std::string(64, 'f');
  EXPECT_EQ(ParseQuantityU256(max, &v), HexProblem::kNone);
  EXPECT_EQ(v.ToDecimal(),
            "115792089237316195423570985008687907853269984665640564039457584007913129639935");
  EXPECT_EQ(ParseQuantityU256("0x1" + std::string(64, '0'), &v), HexProblem::kOverflow);
  EXPECT_EQ(ParseQuantityU256("0x000" + std::string(64, 'f'), &v), HexProblem::kNone);
  EXPECT_EQ(ParseQuantityU256("0x5f5e100", &v), HexProblem::kNone);
  EXPECT_EQ(v, U256(100000000));
  EXPECT_EQ(ParseQuantityU256("0x", &v), HexProblem::kEmpty);
  EXPECT_EQ(ParseQuantityU256("0xq", &v), HexProblem::kBadDigit);
  std::string text;
  EXPECT_EQ(NormalizeHexQuantity("0x1B", &text), HexProblem::kNone);
  EXPECT_EQ(text, "0x1b");
  EXPECT_EQ(NormalizeHexQuantity("0x1" + std::string(64, '0'), &text), HexProblem::kOverflow);
}

TEST(Hex, CaseInsensitiveEquality) {
  EXPECT_TRUE(EqualsIgnoreCase("0xABcd", "0xabCD"));
  EXPECT_FALSE(EqualsIgnoreCase("0xab", "0xabc"));
  EXPECT_FALSE(EqualsIgnoreCase("0xab", "0xac"));
}

TEST(Hex, QuotesLongValuesShortly) {
  EXPECT_EQ(QuoteForMessage("0x12"), "\"0x12\"");
  std::string quoted = QuoteForMessage(std::string(1000, 'a'));
  EXPECT_LT(quoted.size(), 120u);
  EXPECT_NE(quoted.find("1000 characters"), std::string::npos);
  EXPECT_EQ(QuoteForMessage(std::string("a\nb", 3)), "\"a?b\"");
}

TEST(ParseBlockNumberQuantity, AcceptsAndRejects) {
  Result<uint64_t> n = ParseBlockNumberQuantity("0x1036640");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 17000000u);
  EXPECT_EQ(ParseBlockNumberQuantity("0x7fffffffffffffff").value(), 0x7fffffffffffffffu);
  for (const char* bad : {"0x8000000000000000",
                          "0x1"
                          "0000000000000000",
                          "17000000", "0x", "0xg", ""}) {
    Result<uint64_t> r = ParseBlockNumberQuantity(bad);
    EXPECT_EQ(r.status().code(), Code::kInvalidData) << bad;
    EXPECT_NE(r.status().message().find("block number"), std::string::npos);
  }
}

TEST(DecodeQuantityResult, ParsesAJsonString) {
  EXPECT_EQ(DecodeQuantityResult("\"0x36\"", "eth_blockNumber").value(), 54u);
  EXPECT_EQ(DecodeQuantityResult(" \"0x1\" ", "eth_chainId").value(), 1u);
  for (const char* bad :
       {"54", "null", "\"0x\"", "\"0x8000000000000000\"", "\"0x1\" x", "\"0x1", "", "{}"}) {
    Result<uint64_t> r = DecodeQuantityResult(bad, "eth_blockNumber");
    EXPECT_EQ(r.status().code(), Code::kInvalidData) << bad;
    EXPECT_EQ(r.status().message().rfind("eth_blockNumber", 0), 0u) << r.status().message();
  }
}

}  // namespace
}  // namespace gapless::decode_internal
