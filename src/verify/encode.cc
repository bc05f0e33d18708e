// Consensus encodings of the model (see encode.h).
#include "verify/encode.h"

#include <simdjson.h>

#include <array>
#include <cstdio>
#include <unordered_map>

#include "verify/keccak.h"
#include "verify/rlp.h"

namespace gapless::verify {
namespace {

constexpr size_t kAnyLength = static_cast<size_t>(-1);

Status FieldError(std::string_view field, std::string_view what) {
  return InvalidData("field \"" + std::string(field) + "\": " + std::string(what));
}

// Appends hex data (exactly `want` bytes unless kAnyLength) as an RLP string.
Status AppendData(std::string* out, std::string_view hex, size_t want, std::string_view field) {
  std::string bytes;
  if (!HexToBytes(hex, &bytes)) return FieldError(field, "is not hex data");
  if (want != kAnyLength && bytes.size() != want) {
    return FieldError(
        field, "has " + std::to_string(bytes.size()) + " bytes, expected " + std::to_string(want));
  }
  RlpAppendBytes(out, bytes);
  return Status::Ok();
}

// Appends a hex quantity as an RLP integer.
Status AppendQuantity(std::string* out, std::string_view hex, std::string_view field) {
  std::string bytes;
  if (!QuantityToBytes(hex, &bytes)) return FieldError(field, "is not a hex quantity");
  RlpAppendBytes(out, bytes);
  return Status::Ok();
}

Status AppendRequiredU256(std::string* out, const std::optional<U256>& value,
                          std::string_view field) {
  if (!value) return FieldError(field, "is missing");
  RlpAppendU256(out, *value);
  return Status::Ok();
}

Status AppendTo(std::string* out, const std::optional<std::string>& to) {
  if (!to) {
    RlpAppendBytes(out, "");  // contract creation
    return Status::Ok();
  }
  return AppendData(out, *to, 20, "to");
}

// A quantity that must fit 64 bits, from its text.
bool QuantityToU64(std::string_view hex, uint64_t* value) {
  std::string bytes;
  if (!QuantityToBytes(hex, &bytes) || bytes.size() > 8) return false;
  *value = 0;
  for (char c : bytes) *value = *value << 8 | static_cast<uint8_t>(c);
  return true;
}

simdjson::dom::parser& Parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

// A JSON string member of an object, or an error naming the list and member.
Status StringMember(simdjson::dom::object object, std::string_view member, std::string_view list,
                    std::string_view* out) {
  if (object[member].get_string().get(*out) != simdjson::SUCCESS) {
    return FieldError(list, "an entry has no string \"" + std::string(member) + "\"");
  }
  return Status::Ok();
}

// [[address, [storageKey, ...]], ...] from the node's accessList JSON; absent = empty.
Status AppendAccessList(std::string* out, const std::optional<std::string>& json) {
  std::string payload;
  if (json) {
    simdjson::dom::array entries;
    if (Parser().parse(*json).get_array().get(entries) != simdjson::SUCCESS) {
      return FieldError("accessList", "is not a JSON array");
    }
    for (simdjson::dom::element element : entries) {
      simdjson::dom::object entry;
      if (element.get_object().get(entry) != simdjson::SUCCESS) {
        return FieldError("accessList", "an entry is not an object");
      }
      std::string_view address;
      GAPLESS_RETURN_IF_ERROR(StringMember(entry, "address", "accessList", &address));
      std::string item;
      GAPLESS_RETURN_IF_ERROR(AppendData(&item, address, 20, "accessList.address"));
      simdjson::dom::array keys;
      if (entry["storageKeys"].get_array().get(keys) != simdjson::SUCCESS) {
        return FieldError("accessList", "an entry has no \"storageKeys\" array");
      }
      std::string key_payload;
      for (simdjson::dom::element key : keys) {
        std::string_view text;
        if (key.get_string().get(text) != simdjson::SUCCESS) {
          return FieldError("accessList.storageKeys", "holds a non-string");
        }
        GAPLESS_RETURN_IF_ERROR(AppendData(&key_payload, text, 32, "accessList.storageKeys"));
      }
      RlpAppendList(&item, key_payload);
      RlpAppendList(&payload, item);
    }
  }
  RlpAppendList(out, payload);
  return Status::Ok();
}

// [[chainId, address, nonce, yParity, r, s], ...] from the node's authorizationList JSON.
Status AppendAuthorizationList(std::string* out, const std::optional<std::string>& json) {
  if (!json) return FieldError("authorizationList", "is missing");
  simdjson::dom::array entries;
  if (Parser().parse(*json).get_array().get(entries) != simdjson::SUCCESS) {
    return FieldError("authorizationList", "is not a JSON array");
  }
  std::string payload;
  for (simdjson::dom::element element : entries) {
    simdjson::dom::object entry;
    if (element.get_object().get(entry) != simdjson::SUCCESS) {
      return FieldError("authorizationList", "an entry is not an object");
    }
    std::string item;
    std::string_view text;
    GAPLESS_RETURN_IF_ERROR(StringMember(entry, "chainId", "authorizationList", &text));
    GAPLESS_RETURN_IF_ERROR(AppendQuantity(&item, text, "authorizationList.chainId"));
    GAPLESS_RETURN_IF_ERROR(StringMember(entry, "address", "authorizationList", &text));
    GAPLESS_RETURN_IF_ERROR(AppendData(&item, text, 20, "authorizationList.address"));
    GAPLESS_RETURN_IF_ERROR(StringMember(entry, "nonce", "authorizationList", &text));
    GAPLESS_RETURN_IF_ERROR(AppendQuantity(&item, text, "authorizationList.nonce"));
    // geth writes yParity; some clients also (or only) write v, which equals it here.
    if (entry["yParity"].get_string().get(text) != simdjson::SUCCESS) {
      GAPLESS_RETURN_IF_ERROR(StringMember(entry, "v", "authorizationList", &text));
    }
    GAPLESS_RETURN_IF_ERROR(AppendQuantity(&item, text, "authorizationList.yParity"));
    GAPLESS_RETURN_IF_ERROR(StringMember(entry, "r", "authorizationList", &text));
    GAPLESS_RETURN_IF_ERROR(AppendQuantity(&item, text, "authorizationList.r"));
    GAPLESS_RETURN_IF_ERROR(StringMember(entry, "s", "authorizationList", &text));
    GAPLESS_RETURN_IF_ERROR(AppendQuantity(&item, text, "authorizationList.s"));
    RlpAppendList(&payload, item);
  }
  RlpAppendList(out, payload);
  return Status::Ok();
}

// A typed transaction's y parity: yParity, else v (which equals it for typed transactions).
Status YParity(const Transaction& tx, uint64_t* parity) {
  if (tx.y_parity) {
    *parity = *tx.y_parity;
  } else if (!tx.v || !QuantityToU64(*tx.v, parity)) {
    return FieldError("yParity", "is missing (and v does not give it)");
  }
  if (*parity > 1) return FieldError("yParity", "is " + std::to_string(*parity) + ", not 0 or 1");
  return Status::Ok();
}

// The fields of the transaction before its signature, as an RLP payload (no list prefix).
Status AppendUnsignedFields(const Transaction& tx, uint8_t type, std::string* out) {
  if (type == 0) {
    RlpAppendUint(out, tx.nonce);
    GAPLESS_RETURN_IF_ERROR(AppendRequiredU256(out, tx.gas_price, "gasPrice"));
    RlpAppendUint(out, tx.gas);
    GAPLESS_RETURN_IF_ERROR(AppendTo(out, tx.to_address));
    RlpAppendU256(out, tx.value);
    return AppendData(out, tx.input, kAnyLength, "input");
  }
  if (!tx.chain_id) return FieldError("chainId", "is missing");
  RlpAppendUint(out, *tx.chain_id);
  RlpAppendUint(out, tx.nonce);
  if (type == 1) {
    GAPLESS_RETURN_IF_ERROR(AppendRequiredU256(out, tx.gas_price, "gasPrice"));
  } else {
    GAPLESS_RETURN_IF_ERROR(
        AppendRequiredU256(out, tx.max_priority_fee_per_gas, "maxPriorityFeePerGas"));
    GAPLESS_RETURN_IF_ERROR(AppendRequiredU256(out, tx.max_fee_per_gas, "maxFeePerGas"));
  }
  RlpAppendUint(out, tx.gas);
  if ((type == 3 || type == 4) && !tx.to_address) {
    return FieldError("to", "is missing (blob and set-code transactions cannot create)");
  }
  GAPLESS_RETURN_IF_ERROR(AppendTo(out, tx.to_address));
  RlpAppendU256(out, tx.value);
  GAPLESS_RETURN_IF_ERROR(AppendData(out, tx.input, kAnyLength, "input"));
  GAPLESS_RETURN_IF_ERROR(AppendAccessList(out, tx.access_list_json));
  if (type == 3) {
    GAPLESS_RETURN_IF_ERROR(AppendRequiredU256(out, tx.max_fee_per_blob_gas, "maxFeePerBlobGas"));
    std::string hashes;
    for (const std::string& hash : tx.blob_versioned_hashes) {
      GAPLESS_RETURN_IF_ERROR(AppendData(&hashes, hash, 32, "blobVersionedHashes"));
    }
    RlpAppendList(out, hashes);
  }
  if (type == 4) GAPLESS_RETURN_IF_ERROR(AppendAuthorizationList(out, tx.authorization_list_json));
  return Status::Ok();
}

Status AppendRS(const Transaction& tx, std::string* out) {
  if (!tx.r) return FieldError("r", "is missing");
  if (!tx.s) return FieldError("s", "is missing");
  GAPLESS_RETURN_IF_ERROR(AppendQuantity(out, *tx.r, "r"));
  return AppendQuantity(out, *tx.s, "s");
}

}  // namespace

Result<uint8_t> EncodedType(const Transaction& tx) {
  uint8_t type = tx.transaction_type.value_or(0);
  if (type > 4) {
    char hex[8];
    snprintf(hex, sizeof hex, "0x%x", type);
    return FailedPrecondition("transaction type " + std::string(hex) +
                              " is not an Ethereum transaction type (0-4): this chain's blocks "
                              "cannot be verified")
        .WithReason(std::string(kUnsupportedTxTypeReason));
  }
  return type;
}

Status EncodeTransaction(const Transaction& tx, std::string* out) {
  GAPLESS_ASSIGN_OR_RETURN(uint8_t type, EncodedType(tx));
  std::string payload;
  payload.reserve(tx.input.size() / 2 + 256);
  GAPLESS_RETURN_IF_ERROR(AppendUnsignedFields(tx, type, &payload));
  if (type == 0) {
    if (!tx.v) return FieldError("v", "is missing");
    GAPLESS_RETURN_IF_ERROR(AppendQuantity(&payload, *tx.v, "v"));
  } else {
    uint64_t parity = 0;
    GAPLESS_RETURN_IF_ERROR(YParity(tx, &parity));
    RlpAppendUint(&payload, parity);
  }
  GAPLESS_RETURN_IF_ERROR(AppendRS(tx, &payload));
  out->clear();
  if (type != 0) out->push_back(static_cast<char>(type));
  RlpAppendList(out, payload);
  return Status::Ok();
}

Status EncodeSigningPayload(const Transaction& tx, std::string* out, int* recovery_id) {
  GAPLESS_ASSIGN_OR_RETURN(uint8_t type, EncodedType(tx));
  std::string payload;
  GAPLESS_RETURN_IF_ERROR(AppendUnsignedFields(tx, type, &payload));
  out->clear();
  if (type == 0) {
    uint64_t v = 0;
    if (!tx.v || !QuantityToU64(*tx.v, &v)) return FieldError("v", "is missing or above 2^64");
    if (v == 27 || v == 28) {
      *recovery_id = static_cast<int>(v - 27);
    } else if (v >= 35) {
      // EIP-155: v = chainId * 2 + 35 + parity; the chain id and two empty fields are signed.
      *recovery_id = static_cast<int>((v - 35) % 2);
      RlpAppendUint(&payload, (v - 35) / 2);
      RlpAppendBytes(&payload, "");
      RlpAppendBytes(&payload, "");
    } else {
      return FieldError("v", "is " + std::to_string(v) + ", neither 27/28 nor EIP-155");
    }
  } else {
    uint64_t parity = 0;
    GAPLESS_RETURN_IF_ERROR(YParity(tx, &parity));
    *recovery_id = static_cast<int>(parity);
    out->push_back(static_cast<char>(type));
  }
  RlpAppendList(out, payload);
  return Status::Ok();
}

void AddToBloom(Bloom* bloom, std::string_view bytes) {
  Hash32 hash = Keccak256(bytes);
  for (int i = 0; i < 6; i += 2) {
    unsigned bit = (static_cast<unsigned>(hash[i]) << 8 | hash[i + 1]) & 2047u;
    (*bloom)[255 - bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
  }
}

namespace {

// The three bloom bits of a value, from its hex text, remembered per thread: a block's logs repeat
// the same addresses and topics (a token's address, the Transfer topic, busy holders), and each
// Keccak-256 saved is about a tenth of a microsecond of the hasher's permutation, the bulk of a
// block's verification. Bounded: cleared when full.
struct BloomBits {
  std::array<uint16_t, 3> bits{};
  bool ok = false;  // the text was hex of the expected length
};

const BloomBits& BitsOf(const std::string& hex, size_t length) {
  thread_local std::unordered_map<std::string, BloomBits> cache;
  auto it = cache.find(hex);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 16'384) cache.clear();
  BloomBits b;
  std::string bytes;
  if (HexToBytes(hex, &bytes) && bytes.size() == length) {
    Hash32 hash = Keccak256(bytes);
    for (int i = 0; i < 3; ++i) {
      b.bits[i] = static_cast<uint16_t>((hash[2 * i] << 8 | hash[2 * i + 1]) & 2047u);
    }
    b.ok = true;
  }
  return cache.emplace(hex, b).first->second;
}

void SetBits(Bloom* bloom, const BloomBits& b) {
  for (uint16_t bit : b.bits) (*bloom)[255 - bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
}

}  // namespace

Status BloomOfLogs(std::span<const Log* const> logs, Bloom* bloom) {
  bloom->fill(0);
  for (const Log* log : logs) {
    const BloomBits& address = BitsOf(log->address, 20);
    if (!address.ok) {
      return InvalidData("log " + std::to_string(log->log_index) +
                         ": field \"address\" is not a 20-byte address");
    }
    SetBits(bloom, address);
    for (const std::string& topic : log->topics) {
      const BloomBits& bits = BitsOf(topic, 32);
      if (!bits.ok) {
        return InvalidData("log " + std::to_string(log->log_index) +
                           ": field \"topics\" holds a value that is not 32 bytes");
      }
      SetBits(bloom, bits);
    }
  }
  return Status::Ok();
}

Status EncodeReceipt(const Transaction& tx, const Bloom& bloom, std::span<const Log* const> logs,
                     std::string* out) {
  GAPLESS_ASSIGN_OR_RETURN(uint8_t type, EncodedType(tx));
  std::string payload;
  if (tx.root && *tx.root != "0x") {
    GAPLESS_RETURN_IF_ERROR(AppendData(&payload, *tx.root, 32, "root"));
  } else if (tx.status) {
    RlpAppendUint(&payload, *tx.status);
  } else {
    return FieldError("status", "is missing and so is root");
  }
  RlpAppendUint(&payload, tx.cumulative_gas_used);
  RlpAppendBytes(&payload,
                 std::string_view(reinterpret_cast<const char*>(bloom.data()), bloom.size()));
  std::string log_payload;
  for (const Log* log : logs) {
    std::string item;
    Status st = AppendData(&item, log->address, 20, "address");
    std::string topics;
    for (const std::string& topic : log->topics) {
      if (st.ok()) st = AppendData(&topics, topic, 32, "topics");
    }
    RlpAppendList(&item, topics);
    if (st.ok()) st = AppendData(&item, log->data, kAnyLength, "data");
    if (!st.ok()) return st.WithContext("log " + std::to_string(log->log_index));
    RlpAppendList(&log_payload, item);
  }
  RlpAppendList(&payload, log_payload);
  out->clear();
  if (type != 0) out->push_back(static_cast<char>(type));
  RlpAppendList(out, payload);
  return Status::Ok();
}

Status EncodeWithdrawal(const Withdrawal& withdrawal, std::string* out) {
  std::string payload;
  RlpAppendUint(&payload, withdrawal.index);
  RlpAppendUint(&payload, withdrawal.validator_index);
  GAPLESS_RETURN_IF_ERROR(AppendData(&payload, withdrawal.address, 20, "address"));
  RlpAppendUint(&payload, withdrawal.amount_gwei);
  out->clear();
  RlpAppendList(out, payload);
  return Status::Ok();
}

Status EncodeHeader(const Block& block, std::string* out) {
  if (!block.mix_hash) {
    return FailedPrecondition(
               "the header has no mixHash (not an Ethereum-style header): its hash cannot be "
               "recomputed")
        .WithReason(std::string(kUnsupportedHeaderReason));
  }
  std::string p;
  p.reserve(640);
  GAPLESS_RETURN_IF_ERROR(AppendData(&p, block.parent_hash, 32, "parentHash"));
  GAPLESS_RETURN_IF_ERROR(AppendData(&p, block.sha3_uncles, 32, "sha3Uncles"));
  GAPLESS_RETURN_IF_ERROR(AppendData(&p, block.miner, 20, "miner"));
  GAPLESS_RETURN_IF_ERROR(AppendData(&p, block.state_root, 32, "stateRoot"));
  GAPLESS_RETURN_IF_ERROR(AppendData(&p, block.transactions_root, 32, "transactionsRoot"));
  GAPLESS_RETURN_IF_ERROR(AppendData(&p, block.receipts_root, 32, "receiptsRoot"));
  GAPLESS_RETURN_IF_ERROR(AppendData(&p, block.logs_bloom, 256, "logsBloom"));
  RlpAppendU256(&p, block.difficulty);
  RlpAppendUint(&p, block.number);
  RlpAppendUint(&p, block.gas_limit);
  RlpAppendUint(&p, block.gas_used);
  RlpAppendUint(&p, block.timestamp);
  GAPLESS_RETURN_IF_ERROR(AppendData(&p, block.extra_data, kAnyLength, "extraData"));
  GAPLESS_RETURN_IF_ERROR(AppendData(&p, *block.mix_hash, 32, "mixHash"));
  GAPLESS_RETURN_IF_ERROR(AppendData(&p, block.nonce, 8, "nonce"));

  // The fork fields: each fork appends to the end, so they are present as a prefix of this list.
  const char* missing = nullptr;  // the first absent one
  auto present = [&](bool has, const char* name) -> Status {
    if (!has) {
      if (!missing) missing = name;
      return Status::Ok();
    }
    if (missing) {
      return InvalidData("the header has \"" + std::string(name) + "\" but not \"" + missing +
                         "\", which an earlier fork added");
    }
    return Status::Ok();
  };
  GAPLESS_RETURN_IF_ERROR(present(block.base_fee_per_gas.has_value(), "baseFeePerGas"));
  if (block.base_fee_per_gas) RlpAppendU256(&p, *block.base_fee_per_gas);
  GAPLESS_RETURN_IF_ERROR(present(block.withdrawals_root.has_value(), "withdrawalsRoot"));
  if (block.withdrawals_root) {
    GAPLESS_RETURN_IF_ERROR(AppendData(&p, *block.withdrawals_root, 32, "withdrawalsRoot"));
  }
  GAPLESS_RETURN_IF_ERROR(present(block.blob_gas_used.has_value(), "blobGasUsed"));
  if (block.blob_gas_used) RlpAppendUint(&p, *block.blob_gas_used);
  GAPLESS_RETURN_IF_ERROR(present(block.excess_blob_gas.has_value(), "excessBlobGas"));
  if (block.excess_blob_gas) RlpAppendUint(&p, *block.excess_blob_gas);
  GAPLESS_RETURN_IF_ERROR(
      present(block.parent_beacon_block_root.has_value(), "parentBeaconBlockRoot"));
  if (block.parent_beacon_block_root) {
    GAPLESS_RETURN_IF_ERROR(
        AppendData(&p, *block.parent_beacon_block_root, 32, "parentBeaconBlockRoot"));
  }
  GAPLESS_RETURN_IF_ERROR(present(block.requests_hash.has_value(), "requestsHash"));
  if (block.requests_hash) {
    GAPLESS_RETURN_IF_ERROR(AppendData(&p, *block.requests_hash, 32, "requestsHash"));
  }
  out->clear();
  RlpAppendList(out, p);
  return Status::Ok();
}

}  // namespace gapless::verify
