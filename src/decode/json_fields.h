// Typed readers for the fields of a JSON-RPC object, on top of simdjson's DOM API.
//
// Internal to decode/. Each reader takes one dom::element, validates it (JSON type, hex
// syntax, size, range) and stores the result; on failure it returns InvalidData with a message
// that starts with `field "<name>": ` and quotes the offending value. The caller adds where the
// field was (block, transaction, receipt, log). "Opt" readers map JSON null to std::nullopt; the
// others reject null. Stateless, thread-safe.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/u256.h"
#include "decode/hex.h"

namespace gapless::decode_internal {

namespace dom = simdjson::dom;

// PostgreSQL BIGINT is signed: a uint64 column holds at most 2^63-1.
inline constexpr uint64_t kBigintMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// field "<field>": <what>
Status FieldError(std::string_view field, const std::string& what);
// invalid JSON (<simdjson's message>), for errors outside any field.
Status JsonError(simdjson::error_code error);

// "array", "object", "number", "string", "boolean", "null".
const char* JsonTypeName(dom::element_type type);

// Reads a JSON string. When is_null is given, null is accepted (*is_null = true, *out untouched).
Status ReadString(dom::element v, std::string_view field, std::string_view* out,
                  bool* is_null = nullptr);

// Hex data of exactly `bytes` bytes (32 for a hash, 20 for an address), or of any even length
// when bytes is kAnyLength. Stored lower-case.
Status ReadHex(dom::element v, std::string_view field, size_t bytes, std::string* out);
Status ReadOptHex(dom::element v, std::string_view field, size_t bytes,
                  std::optional<std::string>* out);

// Hex data of exactly `bytes` bytes compared with `expected` (lower-case) without copying:
// *equal tells whether they match; *text is the raw value for a message.
Status ReadHexAndCompare(dom::element v, std::string_view field, size_t bytes,
                         std::string_view expected, bool* equal, std::string_view* text);

// A quantity kept as lower-case text (v, r, s).
Status ReadOptQuantityText(dom::element v, std::string_view field, std::optional<std::string>* out);

// A quantity at most `max`.
Status ReadU64(dom::element v, std::string_view field, uint64_t max, uint64_t* out);
Status ReadOptU64(dom::element v, std::string_view field, uint64_t max,
                  std::optional<uint64_t>* out);

// A quantity up to 2^256-1.
Status ReadU256(dom::element v, std::string_view field, U256* out);
Status ReadOptU256(dom::element v, std::string_view field, std::optional<U256>* out);

// true / false; null reads as false.
Status ReadBool(dom::element v, std::string_view field, bool* out);

// A JSON array (or null -> nullopt), re-serialised compactly: no whitespace, strings that are
// 0x-prefixed hex lower-cased, everything else kept (numbers in simdjson's formatting). At most
// 16 levels deep.
Status ReadOptCompactJsonArray(dom::element v, std::string_view field,
                               std::optional<std::string>* out);

// A JSON array of 32-byte hashes (topics, blobVersionedHashes); null is accepted as empty when
// nullable. At most max_entries entries.
Status ReadHashList(dom::element v, std::string_view field, size_t max_entries, bool nullable,
                    std::vector<std::string>* out);

// Small unsigned integers (indexes, type, status): a quantity at most T's maximum.
template <typename T>
Status ReadUint(dom::element v, std::string_view field, T* out) {
  uint64_t x = 0;
  Status st = ReadU64(v, field, std::numeric_limits<T>::max(), &x);
  if (st.ok()) *out = static_cast<T>(x);
  return st;
}

template <typename T>
Status ReadOptUint(dom::element v, std::string_view field, std::optional<T>* out) {
  std::optional<uint64_t> x;
  Status st = ReadOptU64(v, field, std::numeric_limits<T>::max(), &x);
  if (!st.ok()) return st;
  if (x) {
    *out = static_cast<T>(*x);
  } else {
    out->reset();
  }
  return st;
}

// The object / array of an element whose type the caller has checked. (Range-for over
// get_object().value_unsafe() would bind a reference into a destroyed temporary.)
inline dom::object ObjectOf(dom::element v) {
  dom::object o;
  [[maybe_unused]] simdjson::error_code e = v.get_object().get(o);
  return o;
}
inline dom::array ArrayOf(dom::element v) {
  dom::array a;
  [[maybe_unused]] simdjson::error_code e = v.get_array().get(a);
  return a;
}

// Looks key up in names (linear, comparing sizes first); -1 when absent.
template <size_t N>
int FieldIndex(const std::string_view (&names)[N], std::string_view key) {
  if (key.empty()) return -1;
  for (size_t i = 0; i < N; ++i) {
    // Size, first and last character reject nearly every other name before the compare.
    const std::string_view& name = names[i];
    if (name.size() == key.size() && name[0] == key[0] && name.back() == key.back() &&
        name == key) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

}  // namespace gapless::decode_internal
