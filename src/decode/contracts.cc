#include "decode/contracts.h"

#include <algorithm>
#include <map>
#include <set>

#include "decode/hex.h"

namespace gapless {
namespace {

using decode_internal::HexValue;

// The bytes of "0x..." hex; nullopt on a missing prefix, an odd length or a bad digit.
std::optional<std::string> Bytes(std::string_view hex) {
  if (hex.size() < 2 || hex[0] != '0' || (hex[1] != 'x' && hex[1] != 'X') || hex.size() % 2 != 0) {
    return std::nullopt;
  }
  std::string out;
  out.reserve((hex.size() - 2) / 2);
  for (size_t i = 2; i < hex.size(); i += 2) {
    const int hi = HexValue(hex[i]), lo = HexValue(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

// The 32-byte word at offset as a number, when it fits 64 bits (an offset or a length).
std::optional<uint64_t> Word64(const std::string& data, size_t offset) {
  if (offset > data.size() || data.size() - offset < 32) return std::nullopt;
  uint64_t v = 0;
  for (size_t i = 0; i < 32; ++i) {
    const auto byte = static_cast<unsigned char>(data[offset + i]);
    if (i < 24 && byte != 0) return std::nullopt;  // above 2^64: no offset or length is
    if (i >= 24) v = (v << 8) | byte;
  }
  return v;
}

// Strict UTF-8 (no overlongs, no surrogates, at most U+10FFFF), as Python's decode('utf-8').
bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i <= n) return false;  // truncated
    for (size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

std::string WithoutNuls(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), '\0'), s.end());
  return s;
}

}  // namespace

ContractInfo AnalyzeBytecode(std::string_view bytecode) {
  ContractInfo info;
  std::set<std::string> selectors;
  // Hex digit pairs after "0x"; the sweep stops at the first JUMPDEST or a bad digit.
  const size_t start = bytecode.size() >= 2 && bytecode[0] == '0' && bytecode[1] == 'x' ? 2 : 0;
  const size_t bytes = (bytecode.size() - start) / 2;
  auto byte_at = [&](size_t i) -> int {
    const int hi = HexValue(bytecode[start + 2 * i]), lo = HexValue(bytecode[start + 2 * i + 1]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  };
  for (size_t pc = 0; pc < bytes;) {
    const int op = byte_at(pc);
    if (op < 0 || op == 0x5b) break;  // JUMPDEST: the end of the first basic block
    if (op >= 0x60 && op <= 0x7f) {   // PUSH1..PUSH32
      const size_t n = static_cast<size_t>(op - 0x5f);
      if (op == 0x63 && pc + 1 + 4 <= bytes) {  // a complete PUSH4
        std::string selector = "0x";
        bool ok = true;
        for (size_t k = 0; k < 8; ++k) {
          const char c = bytecode[start + 2 * (pc + 1) + k];
          if (HexValue(c) < 0) ok = false;
          selector.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
        }
        if (ok) selectors.insert(selector);
      }
      pc += 1 + n;
    } else {
      ++pc;
    }
  }
  info.function_sighashes.assign(selectors.begin(), selectors.end());
  auto has = [&](std::string_view s) { return selectors.count(std::string(s)) > 0; };
  constexpr std::string_view kBalanceOf = "0x70a08231", kTransfer = "0xa9059cbb",
                             kTransferFrom = "0x23b872dd", kApprove = "0x095ea7b3",
                             kAllowance = "0xdd62ed3e", kOwnerOf = "0x6352211e";
  info.is_erc20 = has(kSelectorTotalSupply) && has(kBalanceOf) && has(kTransfer) &&
                  has(kTransferFrom) && has(kApprove) && has(kAllowance);
  info.is_erc721 =
      has(kBalanceOf) && has(kOwnerOf) && has(kApprove) && (has(kTransfer) || has(kTransferFrom));
  return info;
}

std::optional<std::string> AbiString(std::string_view hex) {
  const std::optional<std::string> data = Bytes(hex);
  if (!data.has_value()) return std::nullopt;
  const std::optional<uint64_t> offset = Word64(*data, 0);
  if (!offset.has_value()) return std::nullopt;
  const std::optional<uint64_t> length = Word64(*data, *offset);
  if (!length.has_value() || *length > data->size() - *offset - 32) return std::nullopt;
  std::string text = data->substr(*offset + 32, *length);
  if (!ValidUtf8(text)) return std::nullopt;
  return WithoutNuls(std::move(text));
}

std::optional<std::string> AbiBytes32String(std::string_view hex) {
  const std::optional<std::string> data = Bytes(hex);
  if (!data.has_value() || data->size() < 32) return std::nullopt;
  std::string text = data->substr(0, 32);
  if (!ValidUtf8(text)) return std::nullopt;
  return WithoutNuls(std::move(text));
}

std::optional<U256> AbiUint(std::string_view hex, int bits) {
  const std::optional<std::string> data = Bytes(hex);
  if (!data.has_value() || data->size() < 32 || bits <= 0 || bits > 256 || bits % 8 != 0) {
    return std::nullopt;
  }
  // The high bytes above `bits` must be zero.
  const size_t zero_bytes = 32 - static_cast<size_t>(bits / 8);
  for (size_t i = 0; i < zero_bytes; ++i) {
    if ((*data)[i] != '\0') return std::nullopt;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string digits;
  for (size_t i = 0; i < 32; ++i) {
    const auto b = static_cast<unsigned char>((*data)[i]);
    digits.push_back(kHex[b >> 4]);
    digits.push_back(kHex[b & 0xf]);
  }
  return U256::FromHexDigits(digits);
}

TokenMetadata ReadTokenMetadata(
    const std::function<std::optional<std::string>(std::string_view selector)>& call) {
  std::map<std::string_view, std::optional<std::string>> asked;
  auto answer = [&](std::string_view selector) -> const std::optional<std::string>& {
    auto it = asked.find(selector);
    if (it == asked.end()) it = asked.emplace(selector, call(selector)).first;
    return it->second;
  };
  // The first of: lower as string, upper as string, lower as bytes32, upper as bytes32.
  auto text = [&](std::string_view lower, std::string_view upper) -> std::optional<std::string> {
    for (auto decode : {&AbiString, &AbiBytes32String}) {
      for (std::string_view selector : {lower, upper}) {
        const std::optional<std::string>& a = answer(selector);
        if (!a.has_value()) continue;
        if (std::optional<std::string> v = decode(*a); v.has_value()) return v;
      }
    }
    return std::nullopt;
  };
  TokenMetadata out;
  out.symbol = text(kSelectorSymbol, kSelectorSymbolUpper);
  out.name = text(kSelectorName, kSelectorNameUpper);
  for (std::string_view selector : {kSelectorDecimals, kSelectorDecimalsUpper}) {
    const std::optional<std::string>& a = answer(selector);
    if (!a.has_value()) continue;
    if (std::optional<U256> v = AbiUint(*a, 8); v.has_value()) {
      out.decimals = static_cast<uint32_t>(v->low64());
      break;
    }
  }
  if (const std::optional<std::string>& a = answer(kSelectorTotalSupply); a.has_value()) {
    out.total_supply = AbiUint(*a, 256);
  }
  return out;
}

void SetBytecode(Contract* contract, std::string bytecode) {
  ContractInfo info = AnalyzeBytecode(bytecode);
  contract->bytecode = std::move(bytecode);
  contract->function_sighashes = std::move(info.function_sighashes);
  contract->is_erc20 = info.is_erc20;
  contract->is_erc721 = info.is_erc721;
}

std::vector<Contract> DeriveContracts(const BlockData& data) {
  std::vector<Contract> out;
  if (!data.traces.empty()) {
    for (const Trace& t : data.traces) {
      if ((t.trace_type != "create" && t.trace_type != "create2") || t.status != 1 ||
          !t.to_address.has_value() || !t.transaction_hash.has_value() ||
          !t.transaction_index.has_value()) {
        continue;
      }
      Contract c;
      c.block_number = data.block.number;
      c.transaction_hash = *t.transaction_hash;
      c.transaction_index = *t.transaction_index;
      c.trace_address = t.trace_address;
      c.address = *t.to_address;
      c.creator_address = t.from_address.value_or("");
      c.creation_type = t.trace_type;
      SetBytecode(&c, t.output.value_or("0x"));
      out.push_back(std::move(c));
    }
    return out;
  }
  for (const Transaction& tx : data.transactions) {
    if (!tx.contract_address.has_value() || tx.status == std::optional<uint8_t>(0)) continue;
    Contract c;
    c.block_number = data.block.number;
    c.transaction_hash = tx.hash;
    c.transaction_index = tx.transaction_index;
    c.address = *tx.contract_address;
    c.creator_address = tx.from_address;
    c.creation_type = "create";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace gapless
