// Keccak-256 through Crypto++ and the hex helpers of keccak.h.
#include "verify/keccak.h"

#include <cryptopp/keccak.h>

namespace gapless::verify {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

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
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = HexDigit(hex[i]);
    int lo = HexDigit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    *dst++ = static_cast<char>(hi << 4 | lo);
  }
  return true;
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

}  // namespace gapless::verify
