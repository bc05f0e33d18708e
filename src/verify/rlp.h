// rlp: Recursive Length Prefix encoding (Ethereum yellow paper, appendix B), the serialisation
// under every hash and trie root that verify/ recomputes, plus a small decoder for tests and for
// checking our encodings against a node's raw RLP.
//
// The encoder appends to a caller's std::string (a byte buffer), so a list is built by encoding
// its items into one buffer and wrapping that payload once (RlpWrapList). Integers are
// big-endian with no leading zero bytes; zero is the empty string (0x80). Stateless, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/u256.h"

namespace gapless::verify {

// Appends the encoding of a byte string: a single byte below 0x80 as itself, else a length
// prefix (0x80+len up to 55 bytes, 0xb7+len-of-len beyond) and the bytes.
void RlpAppendBytes(std::string* out, std::string_view bytes);
// Appends the encoding of an unsigned integer (minimal big-endian bytes; 0 -> 0x80).
void RlpAppendUint(std::string* out, uint64_t value);
void RlpAppendU256(std::string* out, const U256& value);
// Appends a list whose items' encodings are `payload` (0xc0+len up to 55 bytes, 0xf7+len-of-len
// beyond).
void RlpAppendList(std::string* out, std::string_view payload);
// The list with `payload` as its items' encodings.
std::string RlpWrapList(std::string_view payload);

// A decoded item: a byte string or a list of items.
struct RlpItem {
  bool is_list = false;
  std::string bytes;           // when !is_list
  std::vector<RlpItem> items;  // when is_list
};

// Decodes exactly one item spanning all of `encoded`; nullopt on truncation, trailing bytes or a
// non-canonical encoding (a single byte below 0x80 with a prefix, a long form for a short length,
// a length with leading zeros).
std::optional<RlpItem> RlpDecode(std::string_view encoded);

}  // namespace gapless::verify
