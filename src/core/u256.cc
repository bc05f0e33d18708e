#include "core/u256.h"

#include <algorithm>

namespace gapless {
namespace {

// GCC's 128-bit integer; __extension__ keeps -Wpedantic quiet about it.
__extension__ typedef unsigned __int128 Uint128;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<U256> U256::FromHexDigits(std::string_view digits) {
  if (digits.empty()) return std::nullopt;
  size_t first = digits.find_first_not_of('0');
  if (first == std::string_view::npos) {
    for (char c : digits)
      if (c != '0') return std::nullopt;
    return U256();
  }
  std::string_view significant = digits.substr(first);
  if (significant.size() > 64) {
    for (char c : significant)
      if (HexDigit(c) < 0) return std::nullopt;
    return std::nullopt;  // overflow
  }
  U256 out;
  // Walk from the least significant digit.
  for (size_t i = 0; i < significant.size(); ++i) {
    int d = HexDigit(significant[significant.size() - 1 - i]);
    if (d < 0) return std::nullopt;
    out.limbs_[i / 16] |= static_cast<uint64_t>(d) << (4 * (i % 16));
  }
  return out;
}

std::optional<U256> U256::FromHexQuantity(std::string_view text) {
  if (text.size() < 3 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X')) return std::nullopt;
  return FromHexDigits(text.substr(2));
}

std::optional<U256> U256::FromDecimal(std::string_view text) {
  if (text.empty()) return std::nullopt;
  U256 out;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    // out = out * 10 + d, detecting overflow.
    Uint128 carry = static_cast<unsigned>(c - '0');
    for (auto& limb : out.limbs_) {
      Uint128 v = static_cast<Uint128>(limb) * 10 + carry;
      limb = static_cast<uint64_t>(v);
      carry = v >> 64;
    }
    if (carry != 0) return std::nullopt;
  }
  return out;
}

std::string U256::ToDecimal() const {
  if (fits_u64()) return std::to_string(limbs_[0]);
  // Repeated division by 10^19 (the largest power of ten below 2^64).
  constexpr uint64_t kChunk = 10'000'000'000'000'000'000ULL;
  std::array<uint64_t, 4> n = limbs_;
  std::string out;
  auto nonzero = [&] { return (n[0] | n[1] | n[2] | n[3]) != 0; };
  while (nonzero()) {
    Uint128 rem = 0;
    for (int i = 3; i >= 0; --i) {
      Uint128 cur = (rem << 64) | n[i];
      n[i] = static_cast<uint64_t>(cur / kChunk);
      rem = cur % kChunk;
    }
    std::string part = std::to_string(static_cast<uint64_t>(rem));
    if (nonzero()) part.insert(0, 19 - part.size(), '0');
    out.insert(0, part);
  }
  return out;
}

std::string U256::ToHexQuantity() const {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (int i = 63; i >= 0; --i) {
    int d = static_cast<int>((limbs_[i / 16] >> (4 * (i % 16))) & 0xf);
    if (d == 0 && out.empty()) continue;
    out.push_back(kDigits[d]);
  }
  if (out.empty()) out = "0";
  return "0x" + out;
}

}  // namespace gapless
