// keccak: Keccak-256 (the pre-standard padding Ethereum uses, not SHA3-256), through Crypto++'s
// CryptoPP::Keccak_256, and the byte/hex helpers around it. Used by verify/ (roots, hashes,
// blooms), abi/ (event topics) and store/ (decoded logs). Bytes are held in std::string (a byte
// buffer, not text). Stateless and thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace gapless {

using Hash32 = std::array<uint8_t, 32>;

// Keccak-256 of the bytes.
Hash32 Keccak256(std::string_view bytes);

// The hash as bytes (32 characters), for RLP and comparisons.
inline std::string_view AsBytes(const Hash32& hash) {
  return std::string_view(reinterpret_cast<const char*>(hash.data()), hash.size());
}

// "0x" + lower-case hex of the bytes.
std::string ToHex(std::string_view bytes);
inline std::string ToHex(const Hash32& hash) { return ToHex(AsBytes(hash)); }

// Decodes "0x" + an even number of hex digits (either case) into *out. False on a missing
// prefix, an odd length or a bad digit. "0x" alone is the empty string.
bool HexToBytes(std::string_view hex, std::string* out);

// Decodes a hex quantity ("0x0", "0x1b", leading zeros tolerated) into its minimal big-endian
// bytes (zero is the empty string), as RLP wants integers. False on a missing prefix, no digits,
// a bad digit or more than 32 bytes.
bool QuantityToBytes(std::string_view hex, std::string* out);

}  // namespace gapless
