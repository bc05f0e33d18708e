// abi: Solidity ABI JSON for events, their canonical signatures and topic hashes, and the decoding
// of a log's topics and data into typed values (issue 36). Pure: no I/O, no globals; thread-safe.
//
// What a log that does not fit its event gives: DecodeLog returns InvalidData with a reason a
// person can read (`input 2 "amount" (int256): data holds 64 bytes, needs 96`); the caller keeps
// the log and lists it as undecoded, it never guesses. Decoding is strict: a word that does not fit
// its type (an address or uintN with high bits set, an intN not sign-extended, a bool other than 0
// or 1, bytesN with non-zero padding, an offset or length past the data) is such a misfit.
//
// Indexed parameters come from topics 1..3 (topic 0 is the signature's hash unless the event is
// anonymous): static value types decode from the topic; strings, bytes, arrays and tuples are
// stored as the 32-byte topic itself (Value::kind == kTopicHash), since the ABI keeps only their
// hash there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/u256.h"

namespace gapless::abi {

// Limits that keep a hostile ABI or log from exhausting memory or the stack. No type or log that
// Solidity or Vyper produces comes near them.
//   kMaxTypeDepth       arrays and tuples nest at most 16 deep ("uint256[][2]" is 2 deep).
//   kMaxTypeValues      a type holds at most 65536 values through its fixed arrays and tuples
//                       (elements counted, not containers; a dynamic array counts once, its
//                       length is in the data): uint256[65536] passes; ParseType refuses
//                       uint256[1000000] and uint8[300][300].
//   kMaxLogValues       a log decodes to at most 2^20 values (~100 MiB) in all, and to at most
//   kValuesPerDataWord  32 per 32-byte word of its data (plus 32). A byte string or string
//                       counts one, plus one per 32 bytes of content. A canonical encoding needs
//                       a word of its own for each value but the tuples and fixed arrays around
//                       it (at most kMaxTypeDepth of them), so only encodings whose offsets point
//                       many times at one place reach it (string[][][] with 1000 offsets per
//                       level all aimed at one place: 96 KB of data, 10^9 strings); DecodeLog
//                       refuses them before allocating.
inline constexpr int kMaxTypeDepth = 16;
inline constexpr int kMaxTypeValues = 65536;
inline constexpr int64_t kMaxLogValues = int64_t{1} << 20;
inline constexpr int64_t kValuesPerDataWord = 32;

enum class TypeKind {
  kUint,     // bits 8..256, a multiple of 8
  kInt,      // bits 8..256, a multiple of 8; two's complement
  kAddress,  // 20 bytes
  kBool,
  kFixedBytes,  // bytes1..bytes32: size
  kBytes,       // dynamic bytes
  kString,      // dynamic; the raw bytes, not checked for UTF-8
  kArray,       // T[]: components[0] is T
  kFixedArray,  // T[k]: components[0] is T, size is k
  kTuple,       // (T1,...,Tn): components, with component_names ("" when unnamed)
};

struct Type {
  TypeKind kind = TypeKind::kUint;
  int bits = 256;  // kUint, kInt
  int size = 0;    // kFixedBytes: bytes; kFixedArray: length
  std::vector<Type> components;
  std::vector<std::string> component_names;

  // The canonical form used in signatures: "uint256", "bytes32", "(uint256,address)[2][]".
  std::string Canonical() const;
  // True for bytes, string, T[], a T[k] or tuple with a dynamic member (ABI "dynamic").
  bool IsDynamic() const;
  bool operator==(const Type&) const = default;
};

// Parses a type string as the ABI JSON writes it ("uint", "int", "byte" are uint256, int256 and
// bytes1; "tuple", "tuple[]", "tuple[3][]" take their members from tuple_components, named by
// tuple_names: one per component, or none for all unnamed). InvalidData naming the type on
// anything else ("uint7", "bytes33", "fixed128x18", "function"), on a fixed array of length 0, a
// tuple without components or with a wrong number of names, components for a type that is not
// a tuple, and a type over kMaxTypeDepth or kMaxTypeValues.
Result<Type> ParseType(std::string_view type, std::vector<Type> tuple_components = {},
                       std::vector<std::string> tuple_names = {});

struct Param {
  std::string name;  // "" when the ABI leaves it unnamed
  Type type;
  bool indexed = false;
};

struct Event {
  std::string name;
  std::vector<Param> inputs;
  bool anonymous = false;

  // "Transfer(address,address,uint256)".
  std::string Signature() const;
  // Keccak-256 of Signature(), 32 raw bytes (a log's topic 0 unless anonymous).
  std::string Topic0() const;
  // Topics a log of this event carries: indexed inputs, plus one unless anonymous.
  int TopicCount() const;
};

// Reads the events of an ABI JSON document: an array of entries as solc and explorers emit it, or
// an object with an "abi" array (Hardhat and Foundry artifacts). Functions, errors, constructors
// and the rest are skipped. InvalidData naming the entry (its index and name) and the field when
// the JSON does not parse or an event is malformed (more than 3 indexed inputs, more than 4 for
// an anonymous event, a bad type).
Result<std::vector<Event>> ParseEvents(std::string_view json);

// One decoded value. Which fields are set depends on kind (the type's kind, or kTopicHash):
//   kUint, kInt     magnitude (|value|) and negative (only kInt can be negative)
//   kAddress        bytes: 20 raw bytes
//   kBool           boolean
//   kFixedBytes     bytes: size raw bytes
//   kBytes, kString bytes: the raw bytes
//   kArray, kFixedArray, kTuple  items, in order
//   kTopicHash      bytes: the 32-byte topic of an indexed dynamic parameter
struct Value {
  enum class Kind {
    kUint,
    kInt,
    kAddress,
    kBool,
    kFixedBytes,
    kBytes,
    kString,
    kArray,
    kFixedArray,
    kTuple,
    kTopicHash
  };
  Kind kind = Kind::kUint;
  U256 magnitude;
  bool negative = false;
  bool boolean = false;
  std::string bytes;
  std::vector<Value> items;
  bool operator==(const Value&) const = default;
};

// Decodes a log of `event`: topics are raw 32-byte strings (topic 0 included; its match with
// Topic0() is the caller's business), data the raw bytes. One Value per input, in the ABI's
// order (indexed and not interleaved as declared). InvalidData with the reason when the log does
// not fit: a topic count other than TopicCount() or a topic not 32 bytes long, data too short, a
// word that does not fit its type, an offset or length out of range, more values than the
// limits above allow, or, when every non-indexed input is static, data longer than their
// encoding. The reason names the input and the path inside it: `input 2 "amount" (int256):
// data holds 64 bytes, needs 96`, `input 0 "order" (...): member 1 "notes" (...): element 3:
// ...`. Not checked (Solidity's own decoder does not either): the zero padding after the content
// of bytes and string, and that offsets point forward into the tail.
Result<std::vector<Value>> DecodeLog(const Event& event, const std::vector<std::string>& topics,
                                     std::string_view data);

// The value as JSON text, for JSONB columns and event payloads: integers of 48 bits or fewer
// (by type, never by value) as JSON numbers, wider ones as decimal strings ("-5", "1157..."),
// addresses, bytes and topic hashes as "0x" + lower-case hex, bools as true/false, strings as
// JSON strings, arrays as arrays, tuples as objects keyed by member name ("arg{i}" for an unnamed
// member, i from 0). nullopt when a string is not valid UTF-8 or holds a NUL byte (PostgreSQL
// refuses both in JSONB and TEXT).
std::optional<std::string> ToJson(const Value& value, const Type& type);

// `json`, a value of `type` as ToJson wrote it, read back from a JSONB column (which reorders
// object keys and may space it out), in ToJson's form again: compact, tuple members in the
// type's order. nullopt when it does not parse or does not have the type's shape.
std::optional<std::string> NormalizeJson(std::string_view json, const Type& type);

// The decimal text of an integer value (kUint, kInt: "-170141183460469231731687303715884105728"),
// for NUMERIC.
std::string ToDecimal(const Value& value);

// True when the bytes are valid UTF-8 with no NUL byte: what a TEXT column accepts.
bool IsStorableText(std::string_view bytes);

}  // namespace gapless::abi
