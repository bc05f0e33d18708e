// U256: an unsigned 256-bit integer for EVM quantities (wei values, difficulty, token amounts).
//
// Parsed from JSON-RPC hex quantities and from 32-byte ABI words, printed as exact decimal for
// PostgreSQL NUMERIC(78,0) and CSV. Never goes through a double. A plain value type.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gapless {

class U256 {
 public:
  U256() = default;
  explicit U256(uint64_t v) : limbs_{v, 0, 0, 0} {}

  // Parses "0x1a" style quantities: "0x" then 1..64 hex digits (either case). Leading zeros are
  // accepted. Returns nullopt on a missing prefix, an empty or non-hex digit string, or a value
  // above 2^256-1.
  static std::optional<U256> FromHexQuantity(std::string_view text);
  // Parses up to 64 hex digits without a prefix (an ABI word); nullopt on a bad digit or length.
  static std::optional<U256> FromHexDigits(std::string_view digits);
  // Parses a decimal string; nullopt on a bad digit or overflow.
  static std::optional<U256> FromDecimal(std::string_view text);

  std::string ToDecimal() const;
  std::string ToHexQuantity() const;  // "0x0", "0x1a"

  bool is_zero() const { return (limbs_[0] | limbs_[1] | limbs_[2] | limbs_[3]) == 0; }
  bool fits_u64() const { return (limbs_[1] | limbs_[2] | limbs_[3]) == 0; }
  uint64_t low64() const { return limbs_[0]; }

  friend bool operator==(const U256& a, const U256& b) = default;

 private:
  // Little-endian 64-bit limbs.
  std::array<uint64_t, 4> limbs_{0, 0, 0, 0};
};

}  // namespace gapless
