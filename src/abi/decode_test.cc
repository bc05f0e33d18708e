// DecodeLog: every type from hand-built words and from encodings made by viem 2.x
// (encodeAbiParameters; the vectors are pasted below, the test does not need it), indexed
// parameters from topics, anonymous and overloaded events, and the logs that must not decode:
// wrong topic counts, short data, bad offsets and lengths, non-canonical words, hostile sizes.
#include <gtest/gtest.h>

#include <chrono>

#include "abi/abi.h"

namespace gapless::abi {
namespace {

int Nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// Raw bytes from hex digits (no "0x"; whitespace ignored).
std::string Bytes(std::string_view hex) {
  std::string digits;
  for (char c : hex) {
    if (c != ' ' && c != '\n') digits.push_back(c);
  }
  std::string out;
  for (size_t i = 0; i + 1 < digits.size(); i += 2) {
    out.push_back(static_cast<char>(Nibble(digits[i]) * 16 + Nibble(digits[i + 1])));
  }
  return out;
}

// One 32-byte word holding a small value.
std::string W(uint64_t v) {
  std::string w(32, '\0');
  for (int i = 31; i >= 24; --i, v >>= 8) w[i] = static_cast<char>(v & 0xff);
  return w;
}

// A word of `fill` bytes with `tail` written over its last bytes.
std::string Word(char fill, std::string_view tail = "") {
  std::string w(32, fill);
  w.replace(32 - tail.size(), tail.size(), tail);
  return w;
}

std::string Padded(std::string_view bytes) {
  std::string out(bytes);
  out.resize((bytes.size() + 31) / 32 * 32, '\0');
  return out;
}

U256 Dec(const char* text) { return *U256::FromDecimal(text); }

Type T(std::string_view text, std::vector<Type> components = {},
       std::vector<std::string> names = {}) {
  Result<Type> t = ParseType(text, std::move(components), std::move(names));
  EXPECT_TRUE(t.ok()) << text << ": " << t.status().ToString();
  return t.ok() ? *t : Type{};
}

Param P(std::string_view type, std::string name = "", bool indexed = false) {
  return Param{std::move(name), T(type), indexed};
}

Event Ev(std::string name, std::vector<Param> inputs, bool anonymous = false) {
  return Event{std::move(name), std::move(inputs), anonymous};
}

// The topics of a log of `event`: topic 0 then the given ones.
std::vector<std::string> Topics(const Event& event, std::vector<std::string> rest = {}) {
  rest.insert(rest.begin(), event.Topic0());
  return rest;
}

std::vector<Value> MustDecode(const Event& event, const std::vector<std::string>& topics,
                              std::string_view data) {
  Result<std::vector<Value>> values = DecodeLog(event, topics, data);
  EXPECT_TRUE(values.ok()) << values.status().ToString();
  if (values.ok()) {
    EXPECT_EQ(values->size(), event.inputs.size());
  }
  return values.ok() ? *values : std::vector<Value>(event.inputs.size());
}

std::string DecodeError(const Event& event, const std::vector<std::string>& topics,
                        std::string_view data) {
  Result<std::vector<Value>> values = DecodeLog(event, topics, data);
  EXPECT_FALSE(values.ok()) << event.Signature();
  EXPECT_EQ(values.status().code(), Code::kInvalidData);
  return values.status().message();
}

// The single non-indexed input of One(type) decoded from data.
Result<std::vector<Value>> DecodeOne(const Type& type, std::string_view data) {
  Event e{"One", {Param{"x", type, false}}, false};
  return DecodeLog(e, Topics(e), data);
}

Value MustOne(std::string_view type, std::string_view data) {
  Result<std::vector<Value>> values = DecodeOne(T(type), data);
  EXPECT_TRUE(values.ok()) << type << ": " << values.status().ToString();
  return values.ok() ? (*values)[0] : Value{};
}

std::string OneError(std::string_view type, std::string_view data) {
  Result<std::vector<Value>> values = DecodeOne(T(type), data);
  EXPECT_FALSE(values.ok()) << type;
  return values.status().message();
}

const std::string kFrom = Bytes("9f73bc871764c879fd9e0f524278373fa7875068");
const std::string kTo = Bytes("f51bc4633f5924465c8c6317169faf3e4312e82f");

// ---------------------------------------------------------------------------------------------
// Real encodings (viem)

TEST(DecodeLog, Transfer) {
  Event transfer =
      Ev("Transfer", {P("address", "from", true), P("address", "to", true), P("uint256", "value")});
  std::vector<Value> v =
      MustDecode(transfer, Topics(transfer, {Word(0, kFrom), Word(0, kTo)}),
                 Bytes("0000000000000000000000000000000000000000000000000de0b6b3a7640000"));
  EXPECT_EQ(v[0].kind, Value::Kind::kAddress);
  EXPECT_EQ(v[0].bytes, kFrom);
  EXPECT_EQ(v[1].bytes, kTo);
  EXPECT_EQ(v[2].kind, Value::Kind::kUint);
  EXPECT_EQ(v[2].magnitude, U256(1000000000000000000));
  EXPECT_FALSE(v[2].negative);
}

// Statics(uint8 a, uint16 b, uint24 c, uint48 d, uint56 e, uint160 f, uint256 g, int8 h, int24 i,
// int64 j, int128 k, int256 l, int256 m, address n, bool o, bytes1 p, bytes4 q, bytes32 r) with
// a..g at their maxima, h = -128, i = -1, j = -2^63, k = 2^127-1, l = -2^255, m = -5.
const char kStaticsData[] =
    "00000000000000000000000000000000000000000000000000000000000000ff"  // 0
    "000000000000000000000000000000000000000000000000000000000000ffff"  // 32
    "0000000000000000000000000000000000000000000000000000000000ffffff"  // 64
    "0000000000000000000000000000000000000000000000000000ffffffffffff"  // 96
    "00000000000000000000000000000000000000000000000000ffffffffffffff"  // 128
    "000000000000000000000000ffffffffffffffffffffffffffffffffffffffff"  // 160
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"  // 192
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff80"  // 224
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"  // 256
    "ffffffffffffffffffffffffffffffffffffffffffffffff8000000000000000"  // 288
    "000000000000000000000000000000007fffffffffffffffffffffffffffffff"  // 320
    "8000000000000000000000000000000000000000000000000000000000000000"  // 352
    "fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffb"  // 384
    "00000000000000000000000000000000000000000000000000000000deadbeef"  // 416
    "0000000000000000000000000000000000000000000000000000000000000001"  // 448
    "ff00000000000000000000000000000000000000000000000000000000000000"  // 480
    "1234567800000000000000000000000000000000000000000000000000000000"  // 512
    "abababababababababababababababababababababababababababababababab"  // 544
    ;

TEST(DecodeLog, EveryStaticTypeFromViem) {
  Event e =
      Ev("Statics", {P("uint8"), P("uint16"), P("uint24"), P("uint48"), P("uint56"), P("uint160"),
                     P("uint256"), P("int8"), P("int24"), P("int64"), P("int128"), P("int256"),
                     P("int256"), P("address"), P("bool"), P("bytes1"), P("bytes4"), P("bytes32")});
  std::vector<Value> v = MustDecode(e, Topics(e), Bytes(kStaticsData));
  EXPECT_EQ(v[0].magnitude, U256(255));
  EXPECT_EQ(v[1].magnitude, U256(65535));
  EXPECT_EQ(v[2].magnitude, U256(16777215));
  EXPECT_EQ(v[3].magnitude, U256(281474976710655));
  EXPECT_EQ(v[4].magnitude, U256(72057594037927935));
  EXPECT_EQ(v[5].magnitude, Dec("1461501637330902918203684832716283019655932542975"));
  EXPECT_EQ(ToDecimal(v[6]),
            "115792089237316195423570985008687907853269984665640564039457584007913129639935");
  for (int i = 0; i <= 6; ++i) EXPECT_EQ(v[i].kind, Value::Kind::kUint);
  for (int i = 7; i <= 12; ++i) EXPECT_EQ(v[i].kind, Value::Kind::kInt);
  EXPECT_EQ(ToDecimal(v[7]), "-128");
  EXPECT_EQ(ToDecimal(v[8]), "-1");
  EXPECT_EQ(ToDecimal(v[9]), "-9223372036854775808");
  EXPECT_EQ(ToDecimal(v[10]), "170141183460469231731687303715884105727");
  EXPECT_FALSE(v[10].negative);
  EXPECT_EQ(ToDecimal(v[11]),
            "-57896044618658097711785492504343953926634992332820282019728792003956564819968");
  EXPECT_TRUE(v[11].negative);
  EXPECT_EQ(v[12].magnitude, U256(5));
  EXPECT_TRUE(v[12].negative);
  EXPECT_EQ(v[13].kind, Value::Kind::kAddress);
  EXPECT_EQ(v[13].bytes, Bytes("00000000000000000000000000000000deadbeef"));
  EXPECT_EQ(v[14].kind, Value::Kind::kBool);
  EXPECT_TRUE(v[14].boolean);
  EXPECT_EQ(v[15].kind, Value::Kind::kFixedBytes);
  EXPECT_EQ(v[15].bytes, "\xff");
  EXPECT_EQ(v[16].bytes, "\x12\x34\x56\x78");
  EXPECT_EQ(v[17].bytes, std::string(32, '\xab'));
  EXPECT_EQ(*ToJson(v[8], e.inputs[8].type), "-1");
  EXPECT_EQ(*ToJson(v[9], e.inputs[9].type), "\"-9223372036854775808\"");
}

// Dyn(bytes b, string s, uint256[] arr, address[2] pair, string[] names, uint256[2][] grid,
// bool[] empty): b is 33 bytes, s "héllo, wörld ✓", arr [1,2,3], names ["alice", "", <60
// bytes>], grid [[1,2],[3,4]], empty [].
const char kDynamicData[] =
    "0000000000000000000000000000000000000000000000000000000000000100"  // 0
    "0000000000000000000000000000000000000000000000000000000000000160"  // 32
    "00000000000000000000000000000000000000000000000000000000000001a0"  // 64
    "0000000000000000000000001111111111111111111111111111111111111111"  // 96
    "0000000000000000000000002222222222222222222222222222222222222222"  // 128
    "0000000000000000000000000000000000000000000000000000000000000220"  // 160
    "0000000000000000000000000000000000000000000000000000000000000360"  // 192
    "0000000000000000000000000000000000000000000000000000000000000400"  // 224
    "0000000000000000000000000000000000000000000000000000000000000021"  // 256
    "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"  // 288
    "2100000000000000000000000000000000000000000000000000000000000000"  // 320
    "0000000000000000000000000000000000000000000000000000000000000012"  // 352
    "68c3a96c6c6f2c2077c3b6726c6420e29c930000000000000000000000000000"  // 384
    "0000000000000000000000000000000000000000000000000000000000000003"  // 416
    "0000000000000000000000000000000000000000000000000000000000000001"  // 448
    "0000000000000000000000000000000000000000000000000000000000000002"  // 480
    "0000000000000000000000000000000000000000000000000000000000000003"  // 512
    "0000000000000000000000000000000000000000000000000000000000000003"  // 544
    "0000000000000000000000000000000000000000000000000000000000000060"  // 576
    "00000000000000000000000000000000000000000000000000000000000000a0"  // 608
    "00000000000000000000000000000000000000000000000000000000000000c0"  // 640
    "0000000000000000000000000000000000000000000000000000000000000005"  // 672
    "616c696365000000000000000000000000000000000000000000000000000000"  // 704
    "0000000000000000000000000000000000000000000000000000000000000000"  // 736
    "000000000000000000000000000000000000000000000000000000000000003c"  // 768
    "6120737472696e672074686174206973206c6f6e676572207468616e20746869"  // 800
    "7274792d74776f2062797465732c20746f207370616e20776f72647300000000"  // 832
    "0000000000000000000000000000000000000000000000000000000000000002"  // 864
    "0000000000000000000000000000000000000000000000000000000000000001"  // 896
    "0000000000000000000000000000000000000000000000000000000000000002"  // 928
    "0000000000000000000000000000000000000000000000000000000000000003"  // 960
    "0000000000000000000000000000000000000000000000000000000000000004"  // 992
    "0000000000000000000000000000000000000000000000000000000000000000"  // 1024
    ;

TEST(DecodeLog, DynamicTypesFromViem) {
  Event e =
      Ev("Dyn", {P("bytes", "b"), P("string", "s"), P("uint256[]", "arr"), P("address[2]", "pair"),
                 P("string[]", "names"), P("uint256[2][]", "grid"), P("bool[]", "empty")});
  std::vector<Value> v = MustDecode(e, Topics(e), Bytes(kDynamicData));
  EXPECT_EQ(v[0].kind, Value::Kind::kBytes);
  EXPECT_EQ(v[0].bytes,
            Bytes("0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021"));
  EXPECT_EQ(v[1].kind, Value::Kind::kString);
  EXPECT_EQ(v[1].bytes, "h\xC3\xA9llo, w\xC3\xB6rld \xE2\x9C\x93");
  EXPECT_EQ(v[2].kind, Value::Kind::kArray);
  ASSERT_EQ(v[2].items.size(), 3u);
  EXPECT_EQ(v[2].items[2].magnitude, U256(3));
  EXPECT_EQ(v[3].kind, Value::Kind::kFixedArray);
  ASSERT_EQ(v[3].items.size(), 2u);
  EXPECT_EQ(v[3].items[1].bytes, std::string(20, '\x22'));
  ASSERT_EQ(v[4].items.size(), 3u);
  EXPECT_EQ(v[4].items[0].bytes, "alice");
  EXPECT_EQ(v[4].items[1].bytes, "");
  EXPECT_EQ(v[4].items[2].bytes, "a string that is longer than thirty-two bytes, to span words");
  ASSERT_EQ(v[5].items.size(), 2u);
  EXPECT_EQ(v[5].items[1].kind, Value::Kind::kFixedArray);
  EXPECT_EQ(v[5].items[1].items[0].magnitude, U256(3));
  EXPECT_EQ(v[5].items[1].items[1].magnitude, U256(4));
  EXPECT_EQ(v[6].kind, Value::Kind::kArray);
  EXPECT_TRUE(v[6].items.empty());
  EXPECT_EQ(*ToJson(v[5], e.inputs[5].type), R"([["1","2"],["3","4"]])");
}

// Nested((uint256 id, (address who, string memo)[] notes, bytes32[] tags) order, bool flag,
// string[2] pair) = ((7, [(0x33.., "first"), (0x44.., "second note")], [0x0101..]), false,
// ["x", "yz"]). The tuple's offsets count from the tuple (byte 96), not from the data's start.
const char kNestedData[] =
    "0000000000000000000000000000000000000000000000000000000000000060"  // 0
    "0000000000000000000000000000000000000000000000000000000000000000"  // 32
    "0000000000000000000000000000000000000000000000000000000000000260"  // 64
    "0000000000000000000000000000000000000000000000000000000000000007"  // 96
    "0000000000000000000000000000000000000000000000000000000000000060"  // 128
    "00000000000000000000000000000000000000000000000000000000000001c0"  // 160
    "0000000000000000000000000000000000000000000000000000000000000002"  // 192
    "0000000000000000000000000000000000000000000000000000000000000040"  // 224
    "00000000000000000000000000000000000000000000000000000000000000c0"  // 256
    "0000000000000000000000003333333333333333333333333333333333333333"  // 288
    "0000000000000000000000000000000000000000000000000000000000000040"  // 320
    "0000000000000000000000000000000000000000000000000000000000000005"  // 352
    "6669727374000000000000000000000000000000000000000000000000000000"  // 384
    "0000000000000000000000004444444444444444444444444444444444444444"  // 416
    "0000000000000000000000000000000000000000000000000000000000000040"  // 448
    "000000000000000000000000000000000000000000000000000000000000000b"  // 480
    "7365636f6e64206e6f7465000000000000000000000000000000000000000000"  // 512
    "0000000000000000000000000000000000000000000000000000000000000001"  // 544
    "0101010101010101010101010101010101010101010101010101010101010101"  // 576
    "0000000000000000000000000000000000000000000000000000000000000040"  // 608
    "0000000000000000000000000000000000000000000000000000000000000080"  // 640
    "0000000000000000000000000000000000000000000000000000000000000001"  // 672
    "7800000000000000000000000000000000000000000000000000000000000000"  // 704
    "0000000000000000000000000000000000000000000000000000000000000002"  // 736
    "797a000000000000000000000000000000000000000000000000000000000000"  // 768
    ;

Event NestedEvent() {
  Type note = T("tuple[]", {T("address"), T("string")}, {"who", "memo"});
  Type order = T("tuple", {T("uint256"), note, T("bytes32[]")}, {"id", "notes", "tags"});
  return Ev("Nested", {Param{"order", order, false}, P("bool", "flag"), P("string[2]", "pair")});
}

TEST(DecodeLog, NestedTuplesFromViem) {
  Event e = NestedEvent();
  std::vector<Value> v = MustDecode(e, Topics(e), Bytes(kNestedData));
  const Value& order = v[0];
  EXPECT_EQ(order.kind, Value::Kind::kTuple);
  ASSERT_EQ(order.items.size(), 3u);
  EXPECT_EQ(order.items[0].magnitude, U256(7));
  const Value& notes = order.items[1];
  ASSERT_EQ(notes.items.size(), 2u);
  EXPECT_EQ(notes.items[0].kind, Value::Kind::kTuple);
  EXPECT_EQ(notes.items[0].items[0].bytes, std::string(20, '\x33'));
  EXPECT_EQ(notes.items[0].items[1].bytes, "first");
  EXPECT_EQ(notes.items[1].items[1].bytes, "second note");
  ASSERT_EQ(order.items[2].items.size(), 1u);
  EXPECT_EQ(order.items[2].items[0].bytes, std::string(32, '\x01'));
  EXPECT_FALSE(v[1].boolean);
  EXPECT_EQ(v[1].kind, Value::Kind::kBool);
  ASSERT_EQ(v[2].items.size(), 2u);
  EXPECT_EQ(v[2].items[0].bytes, "x");
  EXPECT_EQ(v[2].items[1].bytes, "yz");
  EXPECT_EQ(*ToJson(order, e.inputs[0].type),
            R"({"id":"7","notes":[{"who":"0x3333333333333333333333333333333333333333",)"
            R"("memo":"first"},{"who":"0x4444444444444444444444444444444444444444",)"
            R"("memo":"second note"}],"tags":["0x)"
            "0101010101010101010101010101010101010101010101010101010101010101\"]}");
}

TEST(DecodeLog, NestedErrorsNameThePath) {
  Event e = NestedEvent();
  std::string data = Bytes(kNestedData);
  // The second note's memo offset (byte 448, relative to the note at 416) points far away.
  data.replace(448, 32, W(4000));
  EXPECT_EQ(DecodeError(e, Topics(e), data),
            "input 0 \"order\" ((uint256,(address,string)[],bytes32[])): member 1 \"notes\" "
            "((address,string)[]): element 1: member 1 \"memo\" (string): offset 4000 at byte 448 "
            "(from byte 416) points past the end of the data (800 bytes)");
}

// ---------------------------------------------------------------------------------------------
// Every value type, word by word

TEST(DecodeLog, EveryUintSizeChecksItsHighBits) {
  for (int bits = 8; bits <= 256; bits += 8) {
    std::string type = "uint" + std::to_string(bits);
    std::string max = Word(0, std::string(bits / 8, '\xff'));
    Value v = MustOne(type, max);
    EXPECT_EQ(v.kind, Value::Kind::kUint);
    EXPECT_EQ(v.magnitude, *U256::FromHexDigits(std::string(bits / 4, 'f'))) << type;
    EXPECT_EQ(MustOne(type, W(0)).magnitude, U256(0));
    if (bits < 256) {
      std::string over = max;
      over[31 - bits / 8] = 1;  // bit `bits` set
      std::string message = OneError(type, over);
      EXPECT_NE(message.find("does not fit " + type + " (bits above the low " +
                             std::to_string(bits) + " are set)"),
                std::string::npos)
          << message;
    }
  }
}

TEST(DecodeLog, EveryIntSizeIsSignExtended) {
  for (int bits = 8; bits <= 256; bits += 8) {
    std::string type = "int" + std::to_string(bits);
    size_t pad = 32 - bits / 8;
    // The minimum, -2^(bits-1): ff..ff 80 00..00.
    std::string min = std::string(pad, '\xff') + '\x80' + std::string(bits / 8 - 1, '\0');
    Value v = MustOne(type, min);
    EXPECT_EQ(v.kind, Value::Kind::kInt);
    EXPECT_TRUE(v.negative);
    EXPECT_EQ(v.magnitude, *U256::FromHexDigits("8" + std::string(bits / 4 - 1, '0'))) << type;
    // The maximum, 2^(bits-1)-1: 00..00 7f ff..ff.
    std::string max = std::string(pad, '\0') + '\x7f' + std::string(bits / 8 - 1, '\xff');
    v = MustOne(type, max);
    EXPECT_FALSE(v.negative);
    EXPECT_EQ(v.magnitude, *U256::FromHexDigits("7" + std::string(bits / 4 - 1, 'f'))) << type;
    v = MustOne(type, Word('\xff'));
    EXPECT_TRUE(v.negative);
    EXPECT_EQ(v.magnitude, U256(1));
    EXPECT_EQ(ToDecimal(MustOne(type, W(0))), "0");
    if (bits < 256) {
      // A negative value without its sign extension, and a positive one with it.
      std::string message = OneError(type, std::string(pad, '\0') + min.substr(pad));
      EXPECT_NE(message.find("not sign-extended from bit " + std::to_string(bits - 1)),
                std::string::npos)
          << message;
      std::string bad = max;
      bad[0] = '\xff';
      EXPECT_FALSE(DecodeOne(T(type), bad).ok()) << type;
    }
  }
  // int24, Uniswap's tick: -887272.
  Value tick =
      MustOne("int24", Bytes("fffffffffffffffffffffffffffffffffffffffffffffffffffffffffff27618"));
  EXPECT_EQ(ToDecimal(tick), "-887272");
}

TEST(DecodeLog, EveryFixedBytesSizeChecksItsPadding) {
  for (int size = 1; size <= 32; ++size) {
    std::string type = "bytes" + std::to_string(size);
    std::string word = std::string(size, '\xa5') + std::string(32 - size, '\0');
    Value v = MustOne(type, word);
    EXPECT_EQ(v.kind, Value::Kind::kFixedBytes);
    EXPECT_EQ(v.bytes, std::string(size, '\xa5'));
    if (size < 32) {
      word[31] = 1;
      std::string message = OneError(type, word);
      EXPECT_NE(message.find("the padding after " + std::to_string(size) + " bytes is not zero"),
                std::string::npos)
          << message;
    }
  }
}

TEST(DecodeLog, AddressAndBoolAreStrict) {
  EXPECT_EQ(MustOne("address", Word(0, kFrom)).bytes, kFrom);
  std::string dirty = Word(0, kFrom);
  dirty[0] = 1;
  EXPECT_EQ(OneError("address", dirty),
            "input 0 \"x\" (address): word 0x0100000000000000000000009f73bc871764c879fd9e0f524278"
            "373fa7875068 does not fit address (the high 12 bytes are not zero)");
  EXPECT_FALSE(MustOne("bool", W(0)).boolean);
  EXPECT_TRUE(MustOne("bool", W(1)).boolean);
  EXPECT_NE(OneError("bool", W(2)).find("does not fit bool (not 0 or 1)"), std::string::npos);
  std::string high = W(1);
  high[0] = 1;
  EXPECT_FALSE(DecodeOne(T("bool"), high).ok());
}

TEST(DecodeLog, BytesAndStringsKeepTheirRawContent) {
  std::string nul = std::string("a\0b", 3);
  Value v = MustOne("string", W(32) + W(3) + Padded(nul));
  EXPECT_EQ(v.kind, Value::Kind::kString);
  EXPECT_EQ(v.bytes, nul);
  EXPECT_FALSE(ToJson(v, T("string")).has_value());  // NUL: not storable
  v = MustOne("string", W(32) + W(2) + Padded("\xC3\x28"));
  EXPECT_EQ(v.bytes, "\xC3\x28");
  EXPECT_FALSE(IsStorableText(v.bytes));
  EXPECT_FALSE(ToJson(v, T("string")).has_value());
  v = MustOne("bytes", W(32) + W(0));
  EXPECT_EQ(v.kind, Value::Kind::kBytes);
  EXPECT_EQ(v.bytes, "");
  std::string long_bytes(100, '\x7e');
  EXPECT_EQ(MustOne("bytes", W(32) + W(100) + Padded(long_bytes)).bytes, long_bytes);
}

// ---------------------------------------------------------------------------------------------
// Indexed parameters, anonymous and overloaded events

TEST(DecodeLog, IndexedValueTypesDecodeFromTopics) {
  Event e = Ev("Swap", {P("int24", "tick", true), P("bytes4", "sel", true), P("bool", "ok", true),
                        P("uint256", "amount")});
  std::string tick = Bytes("fffffffffffffffffffffffffffffffffffffffffffffffffffffffffff27618");
  std::vector<Value> v = MustDecode(
      e, Topics(e, {tick, std::string("\x12\x34\x56\x78") + std::string(28, '\0'), W(1)}), W(9));
  EXPECT_EQ(ToDecimal(v[0]), "-887272");
  EXPECT_EQ(v[0].kind, Value::Kind::kInt);
  EXPECT_EQ(v[1].kind, Value::Kind::kFixedBytes);
  EXPECT_EQ(v[1].bytes, "\x12\x34\x56\x78");
  EXPECT_TRUE(v[2].boolean);
  EXPECT_EQ(v[3].magnitude, U256(9));
}

TEST(DecodeLog, IndexedValueTypesAreAsStrictAsData) {
  Event transfer =
      Ev("Transfer", {P("address", "from", true), P("address", "to", true), P("uint256", "value")});
  std::string bad = Word(0, kTo);
  bad[11] = 1;
  std::string message = DecodeError(transfer, Topics(transfer, {Word(0, kFrom), bad}), W(1));
  EXPECT_EQ(message.substr(0, 40), "input 1 \"to\" (address): topic 2: word 0x");
  EXPECT_NE(message.find("the high 12 bytes are not zero"), std::string::npos);
}

TEST(DecodeLog, IndexedDynamicTypesAreTopicHashes) {
  // Indexed(string indexed s, uint256[] indexed a, (uint256 x, address y) indexed t, int24 tick)
  Type tuple = T("tuple", {T("uint256"), T("address")}, {"x", "y"});
  Event e = Ev("Indexed", {P("string", "s", true), P("uint256[]", "a", true),
                           Param{"t", tuple, true}, P("int24", "tick")});
  EXPECT_EQ(e.Signature(), "Indexed(string,uint256[],(uint256,address),int24)");
  // keccak256("hello"), as viem computes it.
  std::string hello = Bytes("1c8aff950685c2ed4bc3174f3472287b56d9517b9c948127319a09a7a36deac8");
  std::string h2 = std::string(32, '\x02'), h3 = std::string(32, '\x03');
  std::vector<Value> v = MustDecode(e, Topics(e, {hello, h2, h3}), Word('\xff', "\xf2\x76\x18"));
  EXPECT_EQ(v[0].kind, Value::Kind::kTopicHash);
  EXPECT_EQ(v[0].bytes, hello);
  EXPECT_EQ(v[1].kind, Value::Kind::kTopicHash);
  EXPECT_EQ(v[1].bytes, h2);
  EXPECT_EQ(v[2].kind, Value::Kind::kTopicHash);
  EXPECT_EQ(v[2].bytes, h3);
  EXPECT_EQ(ToDecimal(v[3]), "-887272");
  EXPECT_EQ(*ToJson(v[0], e.inputs[0].type),
            "\"0x1c8aff950685c2ed4bc3174f3472287b56d9517b9c948127319a09a7a36deac8\"");
  // A fixed array is hashed too, static or not.
  Event fixed = Ev("F", {P("uint256[2]", "f", true), P("bytes", "b", true)});
  v = MustDecode(fixed, Topics(fixed, {h2, h3}), "");
  EXPECT_EQ(v[0].kind, Value::Kind::kTopicHash);
  EXPECT_EQ(v[1].kind, Value::Kind::kTopicHash);
}

TEST(DecodeLog, AnonymousEventsHaveNoTopic0) {
  Event e = Ev("Anon",
               {P("address", "a", true), P("uint256", "b", true), P("string", "c", true),
                P("bool", "d", true), P("uint8", "e")},
               true);
  ASSERT_EQ(e.TopicCount(), 4);
  std::string hash(32, '\x5a');
  std::vector<Value> v = MustDecode(e, {Word(0, kFrom), W(77), hash, W(1)}, W(200));
  EXPECT_EQ(v[0].bytes, kFrom);
  EXPECT_EQ(v[1].magnitude, U256(77));
  EXPECT_EQ(v[2].kind, Value::Kind::kTopicHash);
  EXPECT_TRUE(v[3].boolean);
  EXPECT_EQ(v[4].magnitude, U256(200));
  // With topic 0 in front it has five topics: not this event.
  EXPECT_EQ(DecodeError(e, {e.Topic0(), Word(0, kFrom), W(77), hash, W(1)}, W(200)),
            "the log has 5 topics, Anon(address,uint256,string,bool,uint8) (anonymous) needs 4");
}

TEST(DecodeLog, OverloadsDecodeByTheirOwnSignature) {
  Event one = Ev("Deposit", {P("address", "who", true), P("uint256", "amount")});
  Event two =
      Ev("Deposit", {P("address", "who", true), P("uint256", "amount"), P("bytes", "memo")});
  ASSERT_NE(one.Topic0(), two.Topic0());
  std::vector<Value> v = MustDecode(one, Topics(one, {Word(0, kFrom)}), W(5));
  EXPECT_EQ(v[1].magnitude, U256(5));
  v = MustDecode(two, Topics(two, {Word(0, kFrom)}), W(5) + W(64) + W(2) + Padded("hi"));
  EXPECT_EQ(v[2].bytes, "hi");
  // Each refuses the other's data.
  EXPECT_FALSE(
      DecodeLog(one, Topics(one, {Word(0, kFrom)}), W(5) + W(64) + W(2) + Padded("hi")).ok());
  EXPECT_FALSE(DecodeLog(two, Topics(two, {Word(0, kFrom)}), W(5)).ok());
}

// ---------------------------------------------------------------------------------------------
// Logs that do not fit

Event TransferEvent() {
  return Ev("Transfer",
            {P("address", "from", true), P("address", "to", true), P("uint256", "value")});
}

TEST(DecodeLog, RefusesTheWrongTopicCount) {
  Event e = TransferEvent();
  EXPECT_EQ(DecodeError(e, Topics(e, {Word(0, kFrom)}), W(1)),
            "the log has 2 topics, Transfer(address,address,uint256) needs 3");
  // ERC-721's Transfer has the same topic 0 and the token id as a fourth topic.
  EXPECT_EQ(DecodeError(e, Topics(e, {Word(0, kFrom), Word(0, kTo), W(1)}), ""),
            "the log has 4 topics, Transfer(address,address,uint256) needs 3");
  EXPECT_EQ(DecodeError(e, Topics(e, {Word(0, kFrom), kTo}), W(1)),
            "topic 2 holds 20 bytes, not 32");
}

TEST(DecodeLog, RefusesShortAndOverlongStaticData) {
  Event e = TransferEvent();
  std::vector<std::string> topics = Topics(e, {Word(0, kFrom), Word(0, kTo)});
  EXPECT_EQ(DecodeError(e, topics, ""),
            "input 2 \"value\" (uint256): data holds 0 bytes, needs 32");
  EXPECT_EQ(DecodeError(e, topics, W(1).substr(0, 31)),
            "input 2 \"value\" (uint256): data holds 31 bytes, needs 32");
  EXPECT_EQ(DecodeError(e, topics, W(1) + W(2)),
            "data holds 64 bytes, the non-indexed inputs take exactly 32");
  Event three = Ev("Three", {P("uint256", "a"), P("uint256", "b"), P("int256", "amount")});
  EXPECT_EQ(DecodeError(three, Topics(three), W(1) + W(2)),
            "input 2 \"amount\" (int256): data holds 64 bytes, needs 96");
  Event fixed = Ev("Fixed", {P("uint256"), P("uint8[3]", "v")});
  EXPECT_EQ(DecodeError(fixed, Topics(fixed), W(1) + W(2)),
            "input 1 \"v\" (uint8[3]): data holds 64 bytes, needs 128");
}

TEST(DecodeLog, RefusesBadOffsets) {
  EXPECT_EQ(OneError("string", W(96) + W(0)),
            "input 0 \"x\" (string): offset 96 at byte 0 (from byte 0) points past the end of "
            "the data (64 bytes)");
  // Pointing exactly at the end: the length word is missing.
  EXPECT_EQ(OneError("string", W(64) + W(1)),
            "input 0 \"x\" (string): data holds 64 bytes, needs 96");
  std::string huge = Word('\0', "\x01" + std::string(8, '\0'));  // 2^64
  EXPECT_NE(OneError("bytes", huge + W(0)).find("offset 0x0000"), std::string::npos);
  EXPECT_NE(OneError("uint256[]", Word('\xff') + W(0)).find("points past the end"),
            std::string::npos);
  EXPECT_EQ(OneError("bytes", ""), "input 0 \"x\" (bytes): data holds 0 bytes, needs 32");
}

TEST(DecodeLog, RefusesLengthsPastTheData) {
  EXPECT_EQ(OneError("bytes", W(32) + W(33) + Padded("x")),
            "input 0 \"x\" (bytes): length 33 at byte 32 runs past the end of the data (32 bytes "
            "follow it)");
  // 2^255 and 2^64-1: refused before anything is allocated.
  std::string two_255 = '\x80' + std::string(31, '\0');
  EXPECT_NE(OneError("bytes", W(32) + two_255).find("length 0x8000"), std::string::npos);
  EXPECT_NE(OneError("string", W(32) + Word(0, std::string(8, '\xff'))).find("runs past"),
            std::string::npos);
  EXPECT_NE(OneError("uint256[]", W(32) + two_255).find("runs past"), std::string::npos);
  EXPECT_NE(OneError("uint256[]", W(32) + Word(0, std::string(8, '\xff'))).find("runs past"),
            std::string::npos);
  EXPECT_EQ(OneError("uint256[]", W(32) + W(3) + W(1) + W(2)),
            "input 0 \"x\" (uint256[]): length 3 at byte 32 runs past the end of the data (64 "
            "bytes follow it)");
  // A dynamic element takes at least its offset word.
  EXPECT_NE(OneError("string[]", W(32) + W(2) + W(64)).find("runs past"), std::string::npos);
}

TEST(DecodeLog, ElementErrorsNameTheElement) {
  EXPECT_EQ(OneError("uint8[]", W(32) + W(2) + W(1) + W(256)),
            "input 0 \"x\" (uint8[]): element 1: word 0x" + std::string(60, '0') +
                "0100 does not fit uint8 (bits above the low 8 are set)");
}

// ---------------------------------------------------------------------------------------------
// Hostile sizes: nothing is allocated in proportion to what a length or offset claims

TEST(DecodeLog, RefusesHugeFixedArraysWithoutAllocating) {
  // Built by hand: ParseType refuses these types outright.
  Type huge;
  huge.kind = TypeKind::kFixedArray;
  huge.size = 1000000;
  huge.components = {T("uint256")};
  Result<std::vector<Value>> r = DecodeOne(huge, W(1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "input 0 \"x\" (uint256[1000000]): data holds 32 bytes, needs 32000000");
  Type square = huge;
  square.components = {huge};
  square.size = 2000000000;
  r = DecodeOne(square, W(1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("data holds 32 bytes, needs"), std::string::npos);
  // A fixed array of dynamic elements: a million offsets would be needed, the budget says no
  // before the million values are made.
  Type strings = huge;
  strings.components = {T("string")};
  r = DecodeOne(strings, W(32) + W(0));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more values than the limit"), std::string::npos)
      << r.status().message();
}

TEST(DecodeLog, RefusesOffsetsThatAliasOneTailManyTimes) {
  // string[][][] where each level's n offsets all point at the same next level: ~100 KB of data
  // that would otherwise decode into n^3 = 10^9 strings.
  const uint64_t n = 1000;
  std::string data = W(32);  // offset of the outer array
  // Each level: length n, then n offsets (relative to the word after the length) all pointing at
  // the word after the offsets, where the next level starts.
  for (int level = 0; level < 3; ++level) {
    data += W(n);
    for (uint64_t i = 0; i < n; ++i) data += W(32 * n);
  }
  data += W(5) + Padded("hello");
  auto start = std::chrono::steady_clock::now();
  std::string message = OneError("string[][][]", data);
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_NE(message.find("more values than the limit for"), std::string::npos) << message;
  EXPECT_LT(elapsed, std::chrono::seconds(20));
  // The same shape with honest sizes decodes.
  Value v = MustOne("string[][]", W(32) + W(2) + W(64) + W(192) + W(1) + W(32) + W(1) +
                                      Padded("a") + W(1) + W(32) + W(1) + Padded("b"));
  ASSERT_EQ(v.items.size(), 2u);
  EXPECT_EQ(v.items[1].items[0].bytes, "b");
}

TEST(DecodeLog, DecodesLargeHonestArrays) {
  const uint64_t n = 20000;
  std::string data = W(32) + W(n);
  for (uint64_t i = 0; i < n; ++i) data += W(i);
  Value v = MustOne("uint256[]", data);
  ASSERT_EQ(v.items.size(), n);
  EXPECT_EQ(v.items[n - 1].magnitude, U256(n - 1));
  // Tuples nested as deep as allowed, in an array: one word per leaf, many values per word.
  Type t = T("uint8");
  for (int i = 0; i < kMaxTypeDepth - 1; ++i) t = T("tuple", {t});
  Type array;
  array.kind = TypeKind::kArray;
  array.components = {t};
  const uint64_t m = 2000;
  std::string deep = W(32) + W(m);
  for (uint64_t i = 0; i < m; ++i) deep += W(i % 256);
  Result<std::vector<Value>> r = DecodeOne(array, deep);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)[0].items.size(), m);
  const Value* leaf = &(*r)[0].items[m - 1];
  while (leaf->kind == Value::Kind::kTuple) leaf = &leaf->items[0];
  EXPECT_EQ(leaf->magnitude, U256((m - 1) % 256));
}

}  // namespace
}  // namespace gapless::abi
