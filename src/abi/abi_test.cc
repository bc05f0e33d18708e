// abi.h without logs: type strings and their limits, canonical forms, signatures and topic hashes
// (checked against viem's), ABI JSON parsing and its error messages, and the JSON and decimal
// text of values. DecodeLog is in decode_test.cc.
#include "abi/abi.h"

#include <gtest/gtest.h>

namespace gapless::abi {
namespace {

std::string HexOf(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    auto u = static_cast<unsigned char>(c);
    out.push_back(kDigits[u >> 4]);
    out.push_back(kDigits[u & 0xf]);
  }
  return out;
}

Type MustType(std::string_view text, std::vector<Type> components = {},
              std::vector<std::string> names = {}) {
  Result<Type> t = ParseType(text, std::move(components), std::move(names));
  EXPECT_TRUE(t.ok()) << text << ": " << t.status().ToString();
  return t.ok() ? *t : Type{};
}

std::string TypeError(std::string_view text, std::vector<Type> components = {}) {
  Result<Type> t = ParseType(text, std::move(components));
  EXPECT_FALSE(t.ok()) << text << " parsed as " << (t.ok() ? t->Canonical() : "");
  EXPECT_EQ(t.status().code(), Code::kInvalidData);
  return t.status().message();
}

std::vector<Event> MustEvents(std::string_view json) {
  Result<std::vector<Event>> events = ParseEvents(json);
  EXPECT_TRUE(events.ok()) << events.status().ToString();
  return events.ok() ? *events : std::vector<Event>{};
}

std::string EventsError(std::string_view json) {
  Result<std::vector<Event>> events = ParseEvents(json);
  EXPECT_FALSE(events.ok()) << json;
  EXPECT_EQ(events.status().code(), Code::kInvalidData);
  return events.status().message();
}

// ---------------------------------------------------------------------------------------------
// ParseType, Canonical, IsDynamic

TEST(ParseType, ReadsEveryValueType) {
  for (int bits = 8; bits <= 256; bits += 8) {
    Type u = MustType("uint" + std::to_string(bits));
    EXPECT_EQ(u.kind, TypeKind::kUint);
    EXPECT_EQ(u.bits, bits);
    EXPECT_EQ(u.Canonical(), "uint" + std::to_string(bits));
    Type i = MustType("int" + std::to_string(bits));
    EXPECT_EQ(i.kind, TypeKind::kInt);
    EXPECT_EQ(i.bits, bits);
    EXPECT_EQ(i.Canonical(), "int" + std::to_string(bits));
  }
  for (int size = 1; size <= 32; ++size) {
    Type b = MustType("bytes" + std::to_string(size));
    EXPECT_EQ(b.kind, TypeKind::kFixedBytes);
    EXPECT_EQ(b.size, size);
    EXPECT_EQ(b.Canonical(), "bytes" + std::to_string(size));
    EXPECT_FALSE(b.IsDynamic());
  }
  EXPECT_EQ(MustType("address").kind, TypeKind::kAddress);
  EXPECT_EQ(MustType("bool").kind, TypeKind::kBool);
  EXPECT_EQ(MustType("bytes").kind, TypeKind::kBytes);
  EXPECT_EQ(MustType("string").kind, TypeKind::kString);
}

TEST(ParseType, AliasesTakeTheirCanonicalForm) {
  EXPECT_EQ(MustType("uint").Canonical(), "uint256");
  EXPECT_EQ(MustType("int").Canonical(), "int256");
  EXPECT_EQ(MustType("byte").Canonical(), "bytes1");
  EXPECT_EQ(MustType("uint"), MustType("uint256"));
  EXPECT_EQ(MustType("uint[]").Canonical(), "uint256[]");
}

TEST(ParseType, EqualsTheTypeBuiltByHand) {
  Type address;
  address.kind = TypeKind::kAddress;
  EXPECT_EQ(MustType("address"), address);
  Type bytes4;
  bytes4.kind = TypeKind::kFixedBytes;
  bytes4.size = 4;
  EXPECT_EQ(MustType("bytes4"), bytes4);
  Type array;
  array.kind = TypeKind::kArray;
  array.components = {address};
  EXPECT_EQ(MustType("address[]"), array);
  EXPECT_NE(MustType("address[]"), MustType("address[1]"));
}

TEST(ParseType, RefusesWhatIsNotAType) {
  for (const char* bad : {"uint7",
                          "uint0",
                          "uint264",
                          "uint08",
                          "int4",
                          "intx",
                          "bytes0",
                          "bytes33",
                          "bytes01",
                          "fixed128x18",
                          "ufixed",
                          "function",
                          "",
                          "Uint256",
                          "uint256 ",
                          "address payable",
                          "uint256[",
                          "uint256]",
                          "[]",
                          "[2]",
                          "uint256[-1]",
                          "uint256[01]",
                          "uint256[x]",
                          "uint256[2",
                          "tuple(uint256)"}) {
    std::string message = TypeError(bad);
    EXPECT_NE(message.find("unknown type \"" + std::string(bad) + "\""), std::string::npos)
        << message;
  }
  EXPECT_EQ(TypeError("uint7"), "unknown type \"uint7\"");
  EXPECT_EQ(TypeError("uint7[]"), "unknown type \"uint7[]\"");
  EXPECT_NE(TypeError("uint256[0]").find("length 0"), std::string::npos);
  EXPECT_NE(TypeError("tuple").find("no components"), std::string::npos);
  EXPECT_NE(TypeError("uint256", {MustType("bool")}).find("not a tuple"), std::string::npos);
  Result<Type> names = ParseType("tuple", {MustType("bool")}, {"a", "b"});
  EXPECT_FALSE(names.ok());
}

TEST(ParseType, ArraysNestOutermostLast) {
  // "uint256[2][]": a dynamic array whose elements are uint256[2].
  Type t = MustType("uint256[2][]");
  ASSERT_EQ(t.kind, TypeKind::kArray);
  ASSERT_EQ(t.components.size(), 1u);
  const Type& element = t.components[0];
  EXPECT_EQ(element.kind, TypeKind::kFixedArray);
  EXPECT_EQ(element.size, 2);
  EXPECT_EQ(element.components[0].kind, TypeKind::kUint);
  EXPECT_EQ(t.Canonical(), "uint256[2][]");
  EXPECT_EQ(MustType("address[][3]").Canonical(), "address[][3]");
  EXPECT_EQ(MustType("address[][3]").kind, TypeKind::kFixedArray);
}

TEST(ParseType, TuplesTakeTheirComponents) {
  Type t = MustType("tuple[2][]", {MustType("uint256"), MustType("address")}, {"amount", ""});
  EXPECT_EQ(t.Canonical(), "(uint256,address)[2][]");
  const Type& tuple = t.components[0].components[0];
  EXPECT_EQ(tuple.kind, TypeKind::kTuple);
  EXPECT_EQ(tuple.component_names, (std::vector<std::string>{"amount", ""}));
  Type unnamed = MustType("tuple", {MustType("bool"), MustType("string")});
  EXPECT_EQ(unnamed.component_names, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(unnamed.Canonical(), "(bool,string)");
  Type nested = MustType("tuple", {unnamed, MustType("tuple[]", {MustType("int24")})});
  EXPECT_EQ(nested.Canonical(), "((bool,string),(int24)[])");
}

TEST(ParseType, RefusesTypesOverTheSizeLimits) {
  EXPECT_EQ(MustType("uint256[65536]").size, 65536);
  std::string huge = TypeError("uint256[1000000]");
  EXPECT_NE(huge.find("1000000 elements"), std::string::npos) << huge;
  EXPECT_NE(huge.find("65536"), std::string::npos) << huge;
  EXPECT_FALSE(ParseType("uint256[99999999999999999999]").ok());
  // Each dimension is small; together they are not.
  std::string square = TypeError("uint8[300][300]");
  EXPECT_NE(square.find("more than 65536 values"), std::string::npos) << square;
  Type wide = MustType("uint8[256][]");
  EXPECT_FALSE(ParseType("tuple[300]", {wide.components[0]}).ok());
  // A dynamic array counts once: its length is the data's business.
  EXPECT_TRUE(ParseType("uint8[256][][256]").ok());

  std::string deep = "uint256";
  for (int i = 0; i < kMaxTypeDepth; ++i) deep += "[]";
  EXPECT_TRUE(ParseType(deep).ok());
  std::string message = TypeError(deep + "[]");
  EXPECT_NE(message.find("deep"), std::string::npos) << message;
  // Depth through tuples counts as well.
  Type t = MustType("bool");
  for (int i = 0; i < kMaxTypeDepth; ++i) t = MustType("tuple", {t});
  EXPECT_NE(TypeError("tuple", {t}).find("deep"), std::string::npos);
}

TEST(Type, IsDynamicFollowsTheAbi) {
  EXPECT_FALSE(MustType("uint256").IsDynamic());
  EXPECT_FALSE(MustType("address[3]").IsDynamic());
  EXPECT_FALSE(MustType("tuple", {MustType("uint8"), MustType("bytes32[2]")}).IsDynamic());
  EXPECT_TRUE(MustType("bytes").IsDynamic());
  EXPECT_TRUE(MustType("string").IsDynamic());
  EXPECT_TRUE(MustType("uint8[]").IsDynamic());
  EXPECT_TRUE(MustType("string[2]").IsDynamic());
  EXPECT_TRUE(MustType("uint8[][2]").IsDynamic());
  EXPECT_TRUE(MustType("tuple", {MustType("uint8"), MustType("bytes")}).IsDynamic());
  EXPECT_TRUE(MustType("tuple[2]", {MustType("string")}).IsDynamic());
}

// ---------------------------------------------------------------------------------------------
// Event: signature, topic 0, topic count

Param P(std::string_view type, std::string name = "", bool indexed = false) {
  return Param{std::move(name), MustType(type), indexed};
}

TEST(Event, TransferTopic0IsTheWellKnownHash) {
  Event transfer{"Transfer", {P("address", "from", true), P("address", "to", true), P("uint")}};
  EXPECT_EQ(transfer.Signature(), "Transfer(address,address,uint256)");
  EXPECT_EQ(HexOf(transfer.Topic0()),
            "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef");
  EXPECT_EQ(transfer.TopicCount(), 3);
}

TEST(Event, UniswapV3SwapTopic0) {
  Event swap{"Swap",
             {P("address", "sender", true), P("address", "recipient", true), P("int256"),
              P("int256"), P("uint160"), P("uint128"), P("int24")}};
  EXPECT_EQ(swap.Signature(), "Swap(address,address,int256,int256,uint160,uint128,int24)");
  EXPECT_EQ(HexOf(swap.Topic0()),
            "c42079f94a6350d7e6235f29174924f928cc2ac818eb64fed8004e115fbcca67");
}

TEST(Event, AnonymousEventsHaveNoTopic0Slot) {
  Event e{"Anon", {P("address", "a", true), P("uint256", "b", true), P("bytes")}, true};
  EXPECT_EQ(e.TopicCount(), 2);
  e.anonymous = false;
  EXPECT_EQ(e.TopicCount(), 3);
  EXPECT_EQ((Event{"Empty", {}, false}).TopicCount(), 1);
  EXPECT_EQ((Event{"Empty", {}, true}).TopicCount(), 0);
}

// ---------------------------------------------------------------------------------------------
// ParseEvents

const char kSolcAbi[] = R"([
  {"type": "constructor", "inputs": [{"name": "x", "type": "uint256"}], "stateMutability": "nonpayable"},
  {"type": "function", "name": "transfer", "inputs": [{"name": "to", "type": "address"}],
   "outputs": [{"name": "", "type": "bool"}], "stateMutability": "nonpayable"},
  {"type": "event", "name": "Transfer", "anonymous": false, "inputs": [
    {"indexed": true, "internalType": "address", "name": "from", "type": "address"},
    {"indexed": true, "name": "to", "type": "address"},
    {"indexed": false, "name": "value", "type": "uint256"}]},
  {"type": "error", "name": "Bad", "inputs": [{"name": "x", "type": "uint7"}]},
  {"name": "legacyFunction", "inputs": [], "outputs": []},
  {"type": "fallback"},
  {"type": "event", "name": "Deposit", "inputs": [
    {"name": "who", "type": "address", "indexed": true}, {"name": "amount", "type": "uint"}]},
  {"type": "event", "name": "Deposit", "inputs": [
    {"name": "who", "type": "address", "indexed": true}, {"name": "amount", "type": "uint"},
    {"name": "memo", "type": "bytes"}]},
  {"type": "event", "name": "Ping"},
  {"type": "event", "name": "Log", "anonymous": true, "inputs": [
    {"name": "", "type": "bytes32", "indexed": true}, {"name": "", "type": "bytes32", "indexed": true},
    {"name": "", "type": "bytes32", "indexed": true}, {"name": "", "type": "bytes32", "indexed": true},
    {"name": "", "type": "string"}]}
])";

TEST(ParseEvents, KeepsOnlyEventsInOrder) {
  std::vector<Event> events = MustEvents(kSolcAbi);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].Signature(), "Transfer(address,address,uint256)");
  EXPECT_EQ(events[0].inputs[0].name, "from");
  EXPECT_TRUE(events[0].inputs[0].indexed);
  EXPECT_FALSE(events[0].inputs[2].indexed);
  EXPECT_FALSE(events[0].anonymous);
  EXPECT_EQ(events[1].Signature(), "Deposit(address,uint256)");
  EXPECT_FALSE(events[1].inputs[1].indexed);  // "indexed" absent
  EXPECT_EQ(events[3].Signature(), "Ping()");
  EXPECT_TRUE(events[3].inputs.empty());
  EXPECT_TRUE(events[4].anonymous);
  EXPECT_EQ(events[4].TopicCount(), 4);
  EXPECT_EQ(events[4].inputs[4].name, "");
}

TEST(ParseEvents, OverloadsHaveTheirOwnSignatureAndTopic0) {
  std::vector<Event> events = MustEvents(kSolcAbi);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[1].name, events[2].name);
  EXPECT_EQ(events[2].Signature(), "Deposit(address,uint256,bytes)");
  EXPECT_EQ(HexOf(events[1].Topic0()),
            "e1fffcc4923d04b559f4d29a8bfc6cda04eb5b0d3c460751c2402c5c5cc9109c");
  EXPECT_EQ(HexOf(events[2].Topic0()),
            "87de3cfd3de44d9b830a98f5554f3ff79f1fafd7b3579d113ce92d82d3def2a1");
}

TEST(ParseEvents, ReadsArtifactsWithAnAbiArray) {
  std::vector<Event> events = MustEvents(
      R"({"contractName": "X", "abi": [{"type": "event", "name": "E", "inputs": []}],
          "bytecode": "0x"})");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].Signature(), "E()");
  EXPECT_TRUE(MustEvents("[]").empty());
}

TEST(ParseEvents, ReadsTupleComponentsRecursively) {
  std::vector<Event> events = MustEvents(R"([{"type": "event", "name": "Nested", "inputs": [
    {"name": "order", "type": "tuple", "components": [
      {"name": "id", "type": "uint256"},
      {"name": "notes", "type": "tuple[]", "components": [
        {"name": "who", "type": "address"}, {"name": "memo", "type": "string"}]},
      {"name": "tags", "type": "bytes32[]"}]},
    {"name": "flag", "type": "bool"},
    {"name": "pair", "type": "string[2]"}]}])");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].Signature(), "Nested((uint256,(address,string)[],bytes32[]),bool,string[2])");
  EXPECT_EQ(HexOf(events[0].Topic0()),
            "015ad006c1a9beff6a413a93b4250eae571cd2d4ae6fdf6ea378b7378c371549");
  const Type& order = events[0].inputs[0].type;
  EXPECT_EQ(order.component_names, (std::vector<std::string>{"id", "notes", "tags"}));
  EXPECT_EQ(order.components[1].components[0].component_names,
            (std::vector<std::string>{"who", "memo"}));
}

TEST(ParseEvents, ErrorsNameTheEntryTheEventAndTheField) {
  EXPECT_EQ(EventsError(R"([{"type": "function", "name": "f"}, {"type": "error"}, {},
    {"type": "event", "name": "Swap", "inputs": [
      {"name": "a", "type": "address"}, {"name": "b", "type": "uint256"},
      {"name": "amount", "type": "uint7"}]}])"),
            "ABI entry 3 (event Swap): input 2 \"amount\": unknown type \"uint7\"");
  EXPECT_EQ(EventsError(R"([{"type": "event", "name": "E", "inputs": [{"type": "fixed128x18"}]}])"),
            "ABI entry 0 (event E): input 0: unknown type \"fixed128x18\"");
  EXPECT_EQ(EventsError(R"([{"type": "event", "name": "E", "inputs": [
              {"name": "s", "type": "tuple", "components": [
                {"name": "ok", "type": "bool"}, {"name": "bad", "type": "bytes33"}]}]}])"),
            "ABI entry 0 (event E): input 0 \"s\": component 1 \"bad\": unknown type \"bytes33\"");
  EXPECT_EQ(EventsError(R"([{"type": "event", "name": "E", "inputs": [
              {"name": "a", "type": "uint8", "indexed": true}, {"name": "b", "type": "uint8", "indexed": true},
              {"name": "c", "type": "uint8", "indexed": true}, {"name": "d", "type": "uint8", "indexed": true}]}])"),
            "ABI entry 0 (event E): 4 indexed inputs, more than the 3 a non-anonymous event can "
            "have");
  std::string anon = EventsError(R"([{"type": "event", "name": "A", "anonymous": true, "inputs": [
      {"type": "uint8", "indexed": true}, {"type": "uint8", "indexed": true}, {"type": "uint8", "indexed": true},
      {"type": "uint8", "indexed": true}, {"type": "uint8", "indexed": true}]}])");
  EXPECT_NE(anon.find("5 indexed inputs, more than the 4 an anonymous"), std::string::npos) << anon;
  EXPECT_EQ(EventsError(R"([{"type": "event", "name": "E", "inputs": [{"name": "x"}]}])"),
            "ABI entry 0 (event E): input 0 \"x\": no \"type\"");
  EXPECT_EQ(EventsError(
                R"([{"type": "event", "name": "E", "inputs": [{"type": "bool", "indexed": 1}]}])"),
            "ABI entry 0 (event E): input 0: \"indexed\" is a number, not a boolean");
  EXPECT_EQ(EventsError(R"([{"type": "event", "name": "E", "anonymous": "no"}])"),
            "ABI entry 0 (event E): \"anonymous\" is a string, not a boolean");
  EXPECT_EQ(EventsError(R"([{"type": "event", "inputs": []}])"),
            "ABI entry 0: an event without a \"name\"");
  EXPECT_EQ(EventsError(R"([{"type": "event", "name": "E", "inputs": {}}])"),
            "ABI entry 0 (event E): \"inputs\" is an object, not an array");
  EXPECT_EQ(EventsError(R"([{"type": "event", "name": "E", "inputs": [{"type": "tuple"}]}])"),
            "ABI entry 0 (event E): input 0: type \"tuple\" has no components (an empty tuple is "
            "not a valid type)");
  EXPECT_EQ(EventsError(R"json([{"type": "event", "name": "Bad(uint256)"}])json"),
            "ABI entry 0: event name \"Bad(uint256)\" is not an identifier");
  EXPECT_EQ(MustEvents(R"([{"type": "event", "name": "$_x9", "inputs": []}])")[0].name, "$_x9");
  EXPECT_EQ(EventsError("[1]"), "ABI entry 0: is a number, not an object");
  EXPECT_EQ(EventsError(R"([{"type": 5}])"), "ABI entry 0: \"type\" is a number, not a string");
}

TEST(ParseEvents, RefusesDocumentsThatAreNotAnAbi) {
  EXPECT_NE(EventsError("[{").find("ABI JSON does not parse"), std::string::npos);
  EXPECT_NE(EventsError("").find("ABI JSON does not parse"), std::string::npos);
  EXPECT_EQ(EventsError("42"),
            "ABI JSON is a number, not an array of entries or an object with an \"abi\" array");
  EXPECT_EQ(EventsError(R"({"abi": 1})"),
            "ABI JSON is an object, not an array of entries or an object with an \"abi\" array");
}

TEST(ParseEvents, RefusesComponentsNestedTooDeep) {
  std::string json = R"({"type": "bool"})";
  for (int i = 0; i < 40; ++i) json = R"({"type": "tuple", "components": [)" + json + "]}";
  std::string message =
      EventsError(R"([{"type": "event", "name": "E", "inputs": [)" + json + "]}]");
  EXPECT_NE(message.find("deep"), std::string::npos) << message;
}

// ---------------------------------------------------------------------------------------------
// ToJson, ToDecimal, IsStorableText

Value Int(uint64_t magnitude, bool negative = false) {
  Value v;
  v.kind = negative ? Value::Kind::kInt : Value::Kind::kUint;
  v.magnitude = U256(magnitude);
  v.negative = negative;
  return v;
}

Value Text(Value::Kind kind, std::string bytes) {
  Value v;
  v.kind = kind;
  v.bytes = std::move(bytes);
  return v;
}

std::string Json(const Value& v, const Type& type) {
  std::optional<std::string> json = ToJson(v, type);
  EXPECT_TRUE(json.has_value());
  return json.value_or("<nullopt>");
}

TEST(ToJson, IntegersUpTo48BitsAreNumbersByType) {
  EXPECT_EQ(Json(Int(255), MustType("uint8")), "255");
  EXPECT_EQ(Json(Int(281474976710655), MustType("uint48")), "281474976710655");
  EXPECT_EQ(Json(Int(5, true), MustType("int24")), "-5");
  EXPECT_EQ(Json(Int(140737488355328, true), MustType("int48")), "-140737488355328");
  // Wider types are strings even for small values.
  EXPECT_EQ(Json(Int(1), MustType("uint56")), "\"1\"");
  EXPECT_EQ(Json(Int(5, true), MustType("int256")), "\"-5\"");
  Value min;
  min.kind = Value::Kind::kInt;
  min.negative = true;
  min.magnitude = *U256::FromHexDigits("8" + std::string(63, '0'));
  EXPECT_EQ(Json(min, MustType("int256")),
            "\"-57896044618658097711785492504343953926634992332820282019728792003956564819968\"");
}

TEST(ToJson, BytesAndAddressesAreLowerCaseHex) {
  EXPECT_EQ(Json(Text(Value::Kind::kAddress, std::string(19, '\0') + "\xAB"), MustType("address")),
            "\"0x00000000000000000000000000000000000000ab\"");
  EXPECT_EQ(Json(Text(Value::Kind::kFixedBytes, "\x12\xCD"), MustType("bytes2")), "\"0x12cd\"");
  EXPECT_EQ(Json(Text(Value::Kind::kBytes, ""), MustType("bytes")), "\"0x\"");
  EXPECT_EQ(Json(Text(Value::Kind::kTopicHash, std::string(32, '\xff')), MustType("string")),
            "\"0x" + std::string(64, 'f') + "\"");
  Value yes;
  yes.kind = Value::Kind::kBool;
  yes.boolean = true;
  EXPECT_EQ(Json(yes, MustType("bool")), "true");
  yes.boolean = false;
  EXPECT_EQ(Json(yes, MustType("bool")), "false");
}

TEST(ToJson, StringsAreEscaped) {
  EXPECT_EQ(Json(Text(Value::Kind::kString, "a\"b\\c\nd\x01\x1f\x7f"), MustType("string")),
            "\"a\\\"b\\\\c\\u000ad\\u0001\\u001f\x7f\"");
  EXPECT_EQ(Json(Text(Value::Kind::kString, "h\xC3\xA9llo \xE2\x9C\x93 \xF0\x9F\x98\x80"),
                 MustType("string")),
            "\"h\xC3\xA9llo \xE2\x9C\x93 \xF0\x9F\x98\x80\"");
}

TEST(ToJson, NulloptForTextPostgresRefuses) {
  EXPECT_FALSE(ToJson(Text(Value::Kind::kString, std::string("a\0b", 3)), MustType("string")));
  EXPECT_FALSE(ToJson(Text(Value::Kind::kString, "\xC3"), MustType("string")));
  Value array;
  array.kind = Value::Kind::kArray;
  array.items = {Text(Value::Kind::kString, "ok"), Text(Value::Kind::kString, "\xFF")};
  EXPECT_FALSE(ToJson(array, MustType("string[]")));
  // Bytes are hex: any content is fine.
  EXPECT_TRUE(ToJson(Text(Value::Kind::kBytes, std::string("\0\xFF", 2)), MustType("bytes")));
}

TEST(ToJson, ArraysAndTuplesNest) {
  Type type = MustType("tuple",
                       {MustType("uint8"), MustType("tuple[]", {MustType("string")}, {"memo"}),
                        MustType("uint256[2]")},
                       {"n", "", "pair"});
  Value v;
  v.kind = Value::Kind::kTuple;
  Value notes;
  notes.kind = Value::Kind::kArray;
  Value note;
  note.kind = Value::Kind::kTuple;
  note.items = {Text(Value::Kind::kString, "hi")};
  notes.items = {note, note};
  Value pair;
  pair.kind = Value::Kind::kFixedArray;
  pair.items = {Int(1), Int(2)};
  v.items = {Int(7), notes, pair};
  EXPECT_EQ(Json(v, type), R"({"n":7,"arg1":[{"memo":"hi"},{"memo":"hi"}],"pair":["1","2"]})");
  Value empty;
  empty.kind = Value::Kind::kArray;
  EXPECT_EQ(Json(empty, MustType("uint8[]")), "[]");
}

TEST(ToDecimal, PrintsSignedValues) {
  EXPECT_EQ(ToDecimal(Int(0)), "0");
  EXPECT_EQ(ToDecimal(Int(0, true)), "0");
  EXPECT_EQ(ToDecimal(Int(12345)), "12345");
  EXPECT_EQ(ToDecimal(Int(1, true)), "-1");
  Value min;
  min.kind = Value::Kind::kInt;
  min.negative = true;
  min.magnitude = *U256::FromHexDigits("8" + std::string(31, '0'));
  EXPECT_EQ(ToDecimal(min), "-170141183460469231731687303715884105728");
  Value max;
  max.magnitude = *U256::FromHexDigits(std::string(64, 'f'));
  EXPECT_EQ(ToDecimal(max),
            "115792089237316195423570985008687907853269984665640564039457584007913129639935");
}

TEST(IsStorableText, AcceptsValidUtf8WithoutNul) {
  EXPECT_TRUE(IsStorableText(""));
  EXPECT_TRUE(IsStorableText("plain ascii\n\t"));
  EXPECT_TRUE(IsStorableText("\xC3\xA9\xE2\x9C\x93\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(IsStorableText(std::string("\0", 1)));
  EXPECT_FALSE(IsStorableText(std::string("abc\0", 4)));
  EXPECT_FALSE(IsStorableText("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsStorableText("\xED\xA0\x80"));      // a UTF-16 surrogate
  EXPECT_FALSE(IsStorableText("\xE2\x9C"));          // truncated
  EXPECT_FALSE(IsStorableText("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsStorableText("\xFF"));
  EXPECT_FALSE(IsStorableText("\x80"));  // a lone continuation byte
}

// NormalizeJson: what a JSONB column gives back, in ToJson's form again (the bus payloads,
// store/decoded_events.h).
TEST(NormalizeJson, PutsTupleMembersBackInTheTypesOrderAndCompacts) {
  Result<Type> tuple = ParseType(
      "tuple", {MustType("uint256"), MustType("string"), MustType("uint8[]"), MustType("bool")},
      {"zeta", "a", "mid", ""});
  ASSERT_TRUE(tuple.ok()) << tuple.status().ToString();
  // jsonb's order: shorter keys first; spaces after ':' and ','.
  EXPECT_EQ(NormalizeJson(R"({"a": "x\ny", "mid": [1, 255], "zeta": "5", "arg3": true})", *tuple),
            R"({"zeta":"5","a":"x\u000ay","mid":[1,255],"arg3":true})");
  Value v;
  v.kind = Value::Kind::kTuple;
  v.items = {Int(5), Text(Value::Kind::kString, "x\ny"), Value{}, Value{}};
  v.items[2].kind = Value::Kind::kArray;
  v.items[2].items = {Int(1), Int(255)};
  v.items[3].kind = Value::Kind::kBool;
  v.items[3].boolean = true;
  EXPECT_EQ(NormalizeJson(R"({"a": "x\ny", "mid": [1, 255], "zeta": "5", "arg3": true})", *tuple),
            ToJson(v, *tuple));
  EXPECT_EQ(NormalizeJson("[-5, 7]", MustType("int24[]")), "[-5,7]");
  // Not of the type's shape: a member missing, a number where a wide integer's string belongs.
  EXPECT_FALSE(NormalizeJson(R"({"a": "x", "mid": [], "zeta": "5"})", *tuple));
  EXPECT_FALSE(NormalizeJson("[5]", MustType("uint256[]")));
  EXPECT_FALSE(NormalizeJson("not json", MustType("uint8[]")));
}

}  // namespace
}  // namespace gapless::abi
