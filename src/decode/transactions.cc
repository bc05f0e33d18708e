// The reader of a transaction object (objects.h) and the check of its chain id.
#include <bit>
#include <string>

#include "decode/hex.h"
#include "decode/objects.h"

namespace gapless::decode_internal {
namespace {

enum TxField {
  kTHash,
  kTNonce,
  kTBlockHash,
  kTBlockNumber,
  kTTransactionIndex,
  kTFrom,
  kTValue,
  kTGas,
  kTInput,
  kTTo,
  kTGasPrice,
  kTType,
  kTMaxFeePerGas,
  kTMaxPriorityFeePerGas,
  kTMaxFeePerBlobGas,
  kTBlobVersionedHashes,
  kTAccessList,
  kTAuthorizationList,
  kTChainId,
  kTV,
  kTR,
  kTS,
  kTYParity,
};
constexpr std::string_view kTxFieldNames[] = {
    "hash",
    "nonce",
    "blockHash",
    "blockNumber",
    "transactionIndex",
    "from",
    "value",
    "gas",
    "input",
    "to",
    "gasPrice",
    "type",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
    "maxFeePerBlobGas",
    "blobVersionedHashes",
    "accessList",
    "authorizationList",
    "chainId",
    "v",
    "r",
    "s",
    "yParity",
};
// A mined transaction: everything before "to" is required.
constexpr uint32_t kTxRequired = (1u << kTTo) - 1;

Status ReadTxField(int id, dom::element v, Transaction* tx) {
  std::string_view name = kTxFieldNames[id];
  switch (id) {
    case kTHash:
      return ReadHex(v, name, kHashBytes, &tx->hash);
    case kTNonce:
      return ReadU64(v, name, kBigintMax, &tx->nonce);
    case kTBlockHash:
      return ReadHex(v, name, kHashBytes, &tx->block_hash);
    case kTBlockNumber:
      return ReadU64(v, name, kBigintMax, &tx->block_number);
    case kTTransactionIndex:
      return ReadUint(v, name, &tx->transaction_index);
    case kTFrom:
      return ReadHex(v, name, kAddressBytes, &tx->from_address);
    case kTValue:
      return ReadU256(v, name, &tx->value);
    case kTGas:
      return ReadU64(v, name, kBigintMax, &tx->gas);
    case kTInput:
      return ReadHex(v, name, kAnyLength, &tx->input);
    case kTTo:
      return ReadOptHex(v, name, kAddressBytes, &tx->to_address);
    case kTGasPrice:
      return ReadOptU256(v, name, &tx->gas_price);
    case kTType:
      return ReadOptUint(v, name, &tx->transaction_type);
    case kTMaxFeePerGas:
      return ReadOptU256(v, name, &tx->max_fee_per_gas);
    case kTMaxPriorityFeePerGas:
      return ReadOptU256(v, name, &tx->max_priority_fee_per_gas);
    case kTMaxFeePerBlobGas:
      return ReadOptU256(v, name, &tx->max_fee_per_blob_gas);
    case kTBlobVersionedHashes:
      return ReadHashList(v, name, static_cast<size_t>(-1), /*nullable=*/true,
                          &tx->blob_versioned_hashes);
    case kTAccessList:
      return ReadOptCompactJsonArray(v, name, &tx->access_list_json);
    case kTAuthorizationList:
      return ReadOptCompactJsonArray(v, name, &tx->authorization_list_json);
    case kTChainId:
      return ReadOptU64(v, name, kBigintMax, &tx->chain_id);
    case kTV:
      return ReadOptQuantityText(v, name, &tx->v);
    case kTR:
      return ReadOptQuantityText(v, name, &tx->r);
    case kTS:
      return ReadOptQuantityText(v, name, &tx->s);
    case kTYParity:
      return ReadOptUint(v, name, &tx->y_parity);
  }
  return Internal("unknown transaction field");
}

}  // namespace

// Reads one transaction object. When a field is bad, the message still names the transaction by
// its hash if the object has a valid one (geth writes "hash" after blockHash, from, gas...).
Status DecodeTransaction(dom::element v, Where where, Transaction* tx) {
  if (!v.is_object()) {
    return where.Wrap(
        InvalidData(std::string("expected a transaction object, got a ") + JsonTypeName(v.type())));
  }
  dom::object obj = ObjectOf(v);
  uint32_t seen = 0;
  for (dom::key_value_pair kv : obj) {
    int id = FieldIndex(kTxFieldNames, kv.key);
    if (id < 0) continue;
    // A repeated field would be read twice (e.g. a second "logs" list appended to the first).
    if (seen & (1u << id)) return where.Error(kTxFieldNames[id], "appears more than once");
    seen |= 1u << id;
    Status st = ReadTxField(id, kv.value, tx);
    if (!st.ok()) {
      std::string_view hash;
      if (!obj["hash"].get_string().get(hash) && decode_internal::IsHexOfBytes(hash, kHashBytes)) {
        decode_internal::NormalizeHexData(hash, kHashBytes, &tx->hash);
        where.tx_hash = tx->hash;
      }
      return where.Wrap(st);
    }
  }
  where.tx_hash = tx->hash;
  if (uint32_t missing = kTxRequired & ~seen) {
    return where.Error(kTxFieldNames[std::countr_zero(missing)], "is missing");
  }
  return Status::Ok();
}

Status CheckChainId(const Transaction& tx, std::optional<uint64_t> expected, const Where& where) {
  if (!expected || !tx.chain_id || *tx.chain_id == *expected) return Status::Ok();
  return where.Wrap(FailedPrecondition(
      "field \"chainId\": " + std::to_string(*tx.chain_id) + " is not the configured chain id " +
      std::to_string(*expected) + " (the node serves another chain)"));
}

}  // namespace gapless::decode_internal
