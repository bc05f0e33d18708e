// Hex text helpers for the decoder: validate JSON-RPC hex strings and quantities, lower-case them.
//
// Internal to decode/ (other modules use decode.h). The fast path of every function is a single
// pass over the text with no allocation beyond the output string; the problem codes are turned
// into words (DescribeHexProblem) only when an error message is built. Stateless, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/text.h"
#include "core/u256.h"

namespace gapless::decode_internal {

// What is wrong with a hex string, kNone when nothing is.
enum class HexProblem {
  kNone,
  kNoPrefix,     // does not start with "0x"
  kEmpty,        // a quantity with no digits ("0x")
  kBadDigit,     // a character that is not a hex digit
  kOddLength,    // data with an odd number of digits
  kWrongLength,  // a hash or address of the wrong size
  kOverflow,     // a quantity above 2^256-1 (or above 2^64-1 for ParseQuantityU64)
};

// "want_bytes" for data of any (even) length.
inline constexpr size_t kAnyLength = static_cast<size_t>(-1);

// Validates "0x" followed by an even number of hex digits (exactly 2*want_bytes of them unless
// want_bytes is kAnyLength) and stores the lower-cased text in *out. "0x" alone is valid data.
// *out is unspecified on failure.
HexProblem NormalizeHexData(std::string_view text, size_t want_bytes, std::string* out);

// Validates a quantity ("0x" + 1..64 significant hex digits; leading zeros are tolerated) and
// stores its lower-cased text in *out (for v, r, s, which are kept as text).
HexProblem NormalizeHexQuantity(std::string_view text, std::string* out);

// Parses a quantity that must fit 64 bits (kOverflow otherwise).
HexProblem ParseQuantityU64(std::string_view text, uint64_t* out);

// Parses a quantity up to 2^256-1.
HexProblem ParseQuantityU256(std::string_view text, U256* out);

// Validates like NormalizeHexData (exact size) and sets *equal to whether the lower-cased text
// equals `lower`, without allocating.
HexProblem CompareHexData(std::string_view text, size_t want_bytes, std::string_view lower,
                          bool* equal);

// True when text is "0x" + hex digits of exactly 2*bytes characters, in either case.
bool IsHexOfBytes(std::string_view text, size_t bytes);

// The value of a hex digit, or -1.
inline int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Words for an error message, e.g. "has 62 hex digits, expected 64 (32 bytes)".
std::string DescribeHexProblem(HexProblem problem, std::string_view text, size_t want_bytes);

// The text quoted for an error message: at most ~80 characters, non-printable bytes as '?'.
std::string QuoteForMessage(std::string_view text);

}  // namespace gapless::decode_internal
