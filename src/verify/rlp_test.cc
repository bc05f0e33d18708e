// RLP against the yellow paper's and the Ethereum wiki's examples, and the decoder's round trip
// and refusals.
#include "verify/rlp.h"

#include <gtest/gtest.h>

#include "verify/keccak.h"

namespace gapless::verify {
namespace {

std::string Hex(const std::string& bytes) { return ToHex(bytes); }

std::string Bytes(std::string_view s) {
  std::string out;
  RlpAppendBytes(&out, s);
  return out;
}
std::string Uint(uint64_t v) {
  std::string out;
  RlpAppendUint(&out, v);
  return out;
}

TEST(Rlp, Strings) {
  EXPECT_EQ(Hex(Bytes("dog")), "0x83646f67");
  EXPECT_EQ(Hex(Bytes("")), "0x80");
  EXPECT_EQ(Hex(Bytes(std::string(1, '\0'))), "0x00");  // a single byte below 0x80 is itself
  EXPECT_EQ(Hex(Bytes("\x7f")), "0x7f");
  EXPECT_EQ(Hex(Bytes("\x80")), "0x8180");
  // 56 bytes: the first length that needs the long form.
  std::string lorem = "Lorem ipsum dolor sit amet, consectetur adipisicing elit";
  ASSERT_EQ(lorem.size(), 56u);
  EXPECT_EQ(Bytes(lorem), "\xb8\x38" + lorem);
  std::string s55(55, 'a');
  EXPECT_EQ(Bytes(s55), "\xb7" + s55);
  std::string s1024(1024, 'b');
  EXPECT_EQ(Bytes(s1024), std::string("\xb9\x04\x00", 3) + s1024);
}

TEST(Rlp, Lists) {
  EXPECT_EQ(Hex(RlpWrapList("")), "0xc0");
  EXPECT_EQ(Hex(RlpWrapList(Bytes("cat") + Bytes("dog"))), "0xc88363617483646f67");
  // The set-theoretical representation of three: [ [], [[]], [ [], [[]] ] ].
  std::string empty = RlpWrapList("");
  std::string one = RlpWrapList(empty);
  std::string two = RlpWrapList(empty + one);
  EXPECT_EQ(Hex(RlpWrapList(empty + one + two)), "0xc7c0c1c0c3c0c1c0");
  // A list whose payload is 58 bytes takes the long form.
  std::string lorem = "Lorem ipsum dolor sit amet, consectetur adipisicing elit";
  EXPECT_EQ(RlpWrapList(Bytes(lorem)), "\xf8\x3a\xb8\x38" + lorem);
}

TEST(Rlp, Integers) {
  EXPECT_EQ(Hex(Uint(0)), "0x80");
  EXPECT_EQ(Hex(Uint(1)), "0x01");
  EXPECT_EQ(Hex(Uint(15)), "0x0f");
  EXPECT_EQ(Hex(Uint(127)), "0x7f");
  EXPECT_EQ(Hex(Uint(128)), "0x8180");
  EXPECT_EQ(Hex(Uint(1024)), "0x820400");
  EXPECT_EQ(Hex(Uint(UINT64_MAX)), "0x88ffffffffffffffff");

  std::string out;
  RlpAppendU256(&out, U256());
  EXPECT_EQ(Hex(out), "0x80");
  out.clear();
  RlpAppendU256(&out, *U256::FromHexQuantity("0x10000000000000000"));  // 2^64
  EXPECT_EQ(Hex(out), "0x89010000000000000000");
  out.clear();
  RlpAppendU256(&out, *U256::FromHexQuantity("0x" + std::string(64, 'f')));
  EXPECT_EQ(Hex(out), "0xa0" + std::string(64, 'f'));
}

TEST(Rlp, QuantityToBytesIsMinimal) {
  std::string out;
  ASSERT_TRUE(QuantityToBytes("0x0", &out));
  EXPECT_EQ(out, "");
  ASSERT_TRUE(QuantityToBytes("0x000abc", &out));  // leading zeros tolerated, dropped
  EXPECT_EQ(Hex(out), "0x0abc");
  ASSERT_TRUE(QuantityToBytes("0xABC", &out));
  EXPECT_EQ(Hex(out), "0x0abc");
  EXPECT_FALSE(QuantityToBytes("0x", &out));
  EXPECT_FALSE(QuantityToBytes("12", &out));
  EXPECT_FALSE(QuantityToBytes("0x1g", &out));
  EXPECT_FALSE(QuantityToBytes("0x1" + std::string(64, '0'), &out));  // 2^256
}

TEST(Rlp, DecodeRoundTrip) {
  std::string lorem = "Lorem ipsum dolor sit amet, consectetur adipisicing elit";
  std::string encoded = RlpWrapList(Bytes("cat") + RlpWrapList(Bytes(lorem) + Uint(1024)) +
                                    Bytes("") + Bytes(std::string(1, '\0')));
  auto item = RlpDecode(encoded);
  ASSERT_TRUE(item.has_value());
  ASSERT_TRUE(item->is_list);
  ASSERT_EQ(item->items.size(), 4u);
  EXPECT_EQ(item->items[0].bytes, "cat");
  ASSERT_TRUE(item->items[1].is_list);
  EXPECT_EQ(item->items[1].items[0].bytes, lorem);
  EXPECT_EQ(item->items[1].items[1].bytes, std::string("\x04\x00", 2));
  EXPECT_EQ(item->items[2].bytes, "");
  EXPECT_FALSE(item->items[2].is_list);
  EXPECT_EQ(item->items[3].bytes, std::string(1, '\0'));
}

TEST(Rlp, DecodeRefusesTruncatedTrailingAndNonCanonical) {
  EXPECT_FALSE(RlpDecode("").has_value());
  EXPECT_FALSE(RlpDecode("\x83\x64\x6f").has_value());                          // truncated
  EXPECT_FALSE(RlpDecode(std::string("\x83\x64\x6f\x67\x00", 5)).has_value());  // trailing
  EXPECT_FALSE(RlpDecode("\x81\x05").has_value());  // 0x05 must be itself
  EXPECT_FALSE(RlpDecode("\xb8\x03"
                         "dog")
                   .has_value());                           // long form for a short string
  EXPECT_FALSE(RlpDecode("\xc4\x83\x64\x6f").has_value());  // list payload cut short
}

}  // namespace
}  // namespace gapless::verify
