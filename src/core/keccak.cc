// Keccak-256 through Crypto++, and the hex helpers of keccak.h.
#include "core/keccak.h"

#include <cryptopp/keccak.h>

#include <array>
#include <cstdint>

namespace gapless {
namespace {

// A table: hex decoding is a fifth of VerifyBlock's time with a branchy digit function.
constexpr std::array<int8_t, 256> kHexDigits = [] {
  std::array<int8_t, 256> t{};
  t.fill(-1);
  for (int c = '0'; c <= '9'; ++c) t[c] = static_cast<int8_t>(c - '0');
  for (int c = 'a'; c <= 'f'; ++c) t[c] = static_cast<int8_t>(c - 'a' + 10);
  for (int c = 'A'; c <= 'F'; ++c) t[c] = static_cast<int8_t>(c - 'A' + 10);
  return t;
}();

inline int HexDigit(char c) { return kHexDigits[static_cast<uint8_t>(c)]; }

}  // namespace

Hash32 Keccak256(std::string_view bytes) {
  // One hasher per thread: Keccak_256 keeps 200 bytes of state and Final() resets it.
  thread_local CryptoPP::Keccak_256 hasher;
  Hash32 out;
  hasher.Update(reinterpret_cast<const CryptoPP::byte*>(bytes.data()), bytes.size());
  hasher.Final(out.data());
  return out;
}

std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 + 2 * bytes.size());
  out += "0x";
  for (char c : bytes) {
    auto b = static_cast<uint8_t>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

bool HexToBytes(std::string_view hex, std::string* out) {
  if (hex.size() < 2 || hex[0] != '0' || (hex[1] != 'x' && hex[1] != 'X')) return false;
  hex.remove_prefix(2);
  if (hex.size() % 2 != 0) return false;
  out->resize(hex.size() / 2);
  char* dst = out->data();
  int bad = 0;  // any digit's -1 sets the sign bit: one test at the end
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = HexDigit(hex[i]);
    int lo = HexDigit(hex[i + 1]);
    bad |= hi | lo;
    *dst++ = static_cast<char>(hi << 4 | lo);
  }
  return bad >= 0;
}

bool QuantityToBytes(std::string_view hex, std::string* out) {
  if (hex.size() < 3 || hex[0] != '0' || (hex[1] != 'x' && hex[1] != 'X')) return false;
  hex.remove_prefix(2);
  for (char c : hex) {
    if (HexDigit(c) < 0) return false;
  }
  while (!hex.empty() && hex.front() == '0') hex.remove_prefix(1);
  if (hex.size() > 64) return false;
  out->clear();
  out->reserve((hex.size() + 1) / 2);
  size_t i = 0;
  if (hex.size() % 2 == 1) {
    out->push_back(static_cast<char>(HexDigit(hex[0])));
    i = 1;
  }
  for (; i < hex.size(); i += 2) {
    out->push_back(static_cast<char>(HexDigit(hex[i]) << 4 | HexDigit(hex[i + 1])));
  }
  return true;
}

}  // namespace gapless
