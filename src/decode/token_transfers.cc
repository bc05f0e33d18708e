// ExtractTokenTransfers: recognises ERC-20 / ERC-721 Transfer and ERC-1155 TransferSingle /
// TransferBatch events by their topic0 and shape. See decode.h for the exact rules.
//
// The log may come from anywhere (not only from DecodeBlock), so every topic and data word is
// checked here again; a log that does not fit a shape yields nothing.

#include <cstdint>
#include <string>
#include <string_view>

#include "decode/decode.h"
#include "decode/hex.h"

namespace gapless {
namespace {

using decode_internal::IsHexOfBytes;

constexpr size_t kWordHexDigits = 64;

// The hex digits of data without its 0x prefix; false if data is not 0x-prefixed even-length hex.
bool DataDigits(std::string_view data, std::string_view* digits) {
  if (data.empty()) {  // tolerated: some sources write empty data as ""
    *digits = {};
    return true;
  }
  if (data.size() < 2 || data[0] != '0' || (data[1] != 'x' && data[1] != 'X')) return false;
  *digits = data.substr(2);
  return digits->size() % 2 == 0;
}

// The 32-byte word at byte offset `offset` of the data digits.
bool WordAt(std::string_view digits, uint64_t offset, U256* out) {
  if (offset > digits.size() / 2 || digits.size() / 2 - offset < 32) return false;
  std::optional<U256> v = U256::FromHexDigits(digits.substr(offset * 2, kWordHexDigits));
  if (!v) return false;
  *out = *v;
  return true;
}

// A word used as an offset or length: must fit comfortably in 64 bits.
bool SmallWordAt(std::string_view digits, uint64_t offset, uint64_t* out) {
  U256 w;
  if (!WordAt(digits, offset, &w) || !w.fits_u64()) return false;
  *out = w.low64();
  return true;
}

// The address in the low 20 bytes of a 32-byte topic, lower-cased.
std::string TopicAddress(std::string_view topic) {
  std::string out = "0x";
  out.reserve(42);
  for (char c : topic.substr(topic.size() - 40)) {
    out.push_back(c >= 'A' && c <= 'F' ? static_cast<char>(c - 'A' + 'a') : c);
  }
  return out;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

TokenTransfer Base(const Log& log, TokenStandard standard) {
  TokenTransfer t;
  t.block_number = log.block_number;
  t.log_index = log.log_index;
  t.transaction_hash = log.transaction_hash;
  t.token_address = Lower(log.address);
  t.standard = standard;
  return t;
}

// ERC-1155 TransferBatch data: abi.encode(uint256[] ids, uint256[] values).
bool DecodeBatch(std::string_view digits, std::vector<U256>* ids, std::vector<U256>* values) {
  const uint64_t size = digits.size() / 2;
  uint64_t ids_offset = 0, values_offset = 0;
  if (!SmallWordAt(digits, 0, &ids_offset) || !SmallWordAt(digits, 32, &values_offset)) {
    return false;
  }
  auto read_array = [&](uint64_t offset, std::vector<U256>* out) {
    uint64_t n = 0;
    if (offset > size || !SmallWordAt(digits, offset, &n)) return false;
    uint64_t available = (size - offset - 32) / 32;  // SmallWordAt proved offset + 32 <= size
    if (n > available) return false;
    out->resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      if (!WordAt(digits, offset + 32 + 32 * i, &(*out)[i])) return false;
    }
    return true;
  };
  if (!read_array(ids_offset, ids) || !read_array(values_offset, values)) return false;
  return ids->size() == values->size();
}

}  // namespace

void AppendTokenTransfers(const Log& log, std::vector<TokenTransfer>* out) {
  const std::vector<std::string>& topics = log.topics;
  if (topics.empty()) return;
  const std::string& topic0 = topics[0];
  if (topic0.size() != kTransferTopic.size()) return;
  bool transfer = EqualsIgnoreCase(topic0, kTransferTopic);
  bool single = !transfer && EqualsIgnoreCase(topic0, kTransferSingleTopic);
  bool batch = !transfer && !single && EqualsIgnoreCase(topic0, kTransferBatchTopic);
  if (!transfer && !single && !batch) return;
  for (size_t i = 1; i < topics.size(); ++i) {
    if (!IsHexOfBytes(topics[i], 32)) return;
  }
  std::string_view digits;
  if (!DataDigits(log.data, &digits)) return;

  if (transfer) {
    if (topics.size() == 3 && digits.size() == kWordHexDigits) {
      TokenTransfer t = Base(log, TokenStandard::kErc20);
      if (!WordAt(digits, 0, &t.value)) return;
      t.from_address = TopicAddress(topics[1]);
      t.to_address = TopicAddress(topics[2]);
      out->push_back(std::move(t));
    } else if (topics.size() == 4 && digits.empty()) {
      TokenTransfer t = Base(log, TokenStandard::kErc721);
      std::optional<U256> id = U256::FromHexDigits(std::string_view(topics[3]).substr(2));
      if (!id) return;
      t.token_id = *id;
      t.value = U256(1);
      t.from_address = TopicAddress(topics[1]);
      t.to_address = TopicAddress(topics[2]);
      out->push_back(std::move(t));
    }
    return;
  }

  if (topics.size() != 4) return;
  if (single) {
    if (digits.size() != 2 * kWordHexDigits) return;
    U256 id, value;
    if (!WordAt(digits, 0, &id) || !WordAt(digits, 32, &value)) return;
    TokenTransfer t = Base(log, TokenStandard::kErc1155);
    t.operator_address = TopicAddress(topics[1]);
    t.from_address = TopicAddress(topics[2]);
    t.to_address = TopicAddress(topics[3]);
    t.token_id = id;
    t.value = value;
    out->push_back(std::move(t));
    return;
  }

  std::vector<U256> ids, values;
  if (!DecodeBatch(digits, &ids, &values)) return;
  TokenTransfer base = Base(log, TokenStandard::kErc1155);
  base.operator_address = TopicAddress(topics[1]);
  base.from_address = TopicAddress(topics[2]);
  base.to_address = TopicAddress(topics[3]);
  out->reserve(out->size() + ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    TokenTransfer t = base;
    t.batch_index = static_cast<uint32_t>(i);
    t.token_id = ids[i];
    t.value = values[i];
    out->push_back(std::move(t));
  }
}

std::vector<TokenTransfer> ExtractTokenTransfers(const Log& log) {
  std::vector<TokenTransfer> out;
  AppendTokenTransfers(log, &out);
  return out;
}

}  // namespace gapless
