// RLP encoder and decoder (see rlp.h).
#include "verify/rlp.h"

#include "verify/keccak.h"

namespace gapless::verify {
namespace {

// Appends a length prefix: short_base + len for len <= 55, else short_base + 55 + (number of
// length bytes) followed by the big-endian length.
void AppendLength(std::string* out, size_t len, uint8_t short_base) {
  if (len <= 55) {
    out->push_back(static_cast<char>(short_base + len));
    return;
  }
  char be[8];
  int n = 0;
  for (size_t v = len; v != 0; v >>= 8) be[n++] = static_cast<char>(v & 0xff);
  out->push_back(static_cast<char>(short_base + 55 + n));
  while (n > 0) out->push_back(be[--n]);
}

// Decodes one item at the front of *in, advancing it.
bool DecodeOne(std::string_view* in, RlpItem* item) {
  if (in->empty()) return false;
  auto prefix = static_cast<uint8_t>((*in)[0]);
  in->remove_prefix(1);
  if (prefix < 0x80) {
    item->is_list = false;
    item->bytes.assign(1, static_cast<char>(prefix));
    return true;
  }
  bool list = prefix >= 0xc0;
  uint8_t base = list ? 0xc0 : 0x80;
  size_t len = 0;
  if (prefix - base <= 55) {
    len = prefix - base;
  } else {
    size_t n = prefix - base - 55;
    if (n > 8 || in->size() < n || (*in)[0] == 0) return false;
    for (size_t i = 0; i < n; ++i) len = len << 8 | static_cast<uint8_t>((*in)[i]);
    in->remove_prefix(n);
    if (len <= 55) return false;
  }
  if (in->size() < len) return false;
  std::string_view payload = in->substr(0, len);
  in->remove_prefix(len);
  item->is_list = list;
  if (!list) {
    if (len == 1 && static_cast<uint8_t>(payload[0]) < 0x80) return false;
    item->bytes.assign(payload);
    return true;
  }
  while (!payload.empty()) {
    item->items.emplace_back();
    if (!DecodeOne(&payload, &item->items.back())) return false;
  }
  return true;
}

}  // namespace

void RlpAppendBytes(std::string* out, std::string_view bytes) {
  if (bytes.size() == 1 && static_cast<uint8_t>(bytes[0]) < 0x80) {
    out->push_back(bytes[0]);
    return;
  }
  AppendLength(out, bytes.size(), 0x80);
  out->append(bytes);
}

void RlpAppendUint(std::string* out, uint64_t value) {
  char be[8];
  int n = 0;
  for (uint64_t v = value; v != 0; v >>= 8) be[n++] = static_cast<char>(v & 0xff);
  char bytes[8];
  for (int i = 0; i < n; ++i) bytes[i] = be[n - 1 - i];
  RlpAppendBytes(out, std::string_view(bytes, static_cast<size_t>(n)));
}

void RlpAppendU256(std::string* out, const U256& value) {
  if (value.fits_u64()) {
    RlpAppendUint(out, value.low64());
    return;
  }
  std::string bytes;
  // ToHexQuantity is always a valid quantity of at most 64 digits.
  QuantityToBytes(value.ToHexQuantity(), &bytes);
  RlpAppendBytes(out, bytes);
}

void RlpAppendList(std::string* out, std::string_view payload) {
  AppendLength(out, payload.size(), 0xc0);
  out->append(payload);
}

std::string RlpWrapList(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 9);
  RlpAppendList(&out, payload);
  return out;
}

std::optional<RlpItem> RlpDecode(std::string_view encoded) {
  RlpItem item;
  if (!DecodeOne(&encoded, &item) || !encoded.empty()) return std::nullopt;
  return item;
}

}  // namespace gapless::verify
