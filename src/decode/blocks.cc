// The reader of a block object (objects.h): its header fields, its withdrawals, and its list of
// transactions (full objects, read with transactions.cc, or hashes for a header-only read).
#include <bit>
#include <cstdint>
#include <string>

#include "decode/objects.h"

namespace gapless::decode_internal {
namespace {

enum BlockField {
  kBNumber,
  kBHash,
  kBParentHash,
  kBNonce,
  kBSha3Uncles,
  kBLogsBloom,
  kBTransactionsRoot,
  kBStateRoot,
  kBReceiptsRoot,
  kBMiner,
  kBDifficulty,
  kBSize,
  kBExtraData,
  kBGasLimit,
  kBGasUsed,
  kBTimestamp,
  kBTransactions,
  kBMixHash,
  kBTotalDifficulty,
  kBBaseFeePerGas,
  kBWithdrawalsRoot,
  kBWithdrawals,
  kBBlobGasUsed,
  kBExcessBlobGas,
  kBParentBeaconBlockRoot,
  kBRequestsHash,
};
constexpr std::string_view kBlockFieldNames[] = {
    "number",
    "hash",
    "parentHash",
    "nonce",
    "sha3Uncles",
    "logsBloom",
    "transactionsRoot",
    "stateRoot",
    "receiptsRoot",
    "miner",
    "difficulty",
    "size",
    "extraData",
    "gasLimit",
    "gasUsed",
    "timestamp",
    "transactions",
    "mixHash",
    "totalDifficulty",
    "baseFeePerGas",
    "withdrawalsRoot",
    "withdrawals",
    "blobGasUsed",
    "excessBlobGas",
    "parentBeaconBlockRoot",
    "requestsHash",
};
// Everything before "mixHash" is required.
constexpr uint32_t kBlockRequired = (1u << kBMixHash) - 1;

enum WithdrawalField { kWIndex, kWValidatorIndex, kWAddress, kWAmount };
constexpr std::string_view kWithdrawalFieldNames[] = {"index", "validatorIndex", "address",
                                                      "amount"};
constexpr uint32_t kWithdrawalRequired = 0xf;

Status DecodeWithdrawals(dom::element v, const Where& block_where, std::vector<Withdrawal>* out) {
  out->clear();
  if (v.is_null()) return Status::Ok();
  if (!v.is_array()) {
    return block_where.Error("withdrawals",
                             std::string("expected a JSON array, got a ") + JsonTypeName(v.type()));
  }
  dom::array array = ArrayOf(v);
  out->reserve(array.size());
  for (dom::element element : array) {
    Where where = block_where;
    where.item = "withdrawal";
    where.index = out->size();
    if (!element.is_object()) {
      return where.Wrap(InvalidData(std::string("expected a withdrawal object, got a ") +
                                    JsonTypeName(element.type())));
    }
    Withdrawal& w = out->emplace_back();
    uint32_t seen = 0;
    for (dom::key_value_pair kv : ObjectOf(element)) {
      int id = FieldIndex(kWithdrawalFieldNames, kv.key);
      if (id < 0) continue;
      if (seen & (1u << id))
        return where.Error(kWithdrawalFieldNames[id], "appears more than once");
      seen |= 1u << id;
      std::string_view name = kWithdrawalFieldNames[id];
      Status st;
      switch (id) {
        case kWIndex:
          st = ReadU64(kv.value, name, kBigintMax, &w.index);
          break;
        case kWValidatorIndex:
          st = ReadU64(kv.value, name, kBigintMax, &w.validator_index);
          break;
        case kWAddress:
          st = ReadHex(kv.value, name, kAddressBytes, &w.address);
          break;
        case kWAmount:
          st = ReadU64(kv.value, name, kBigintMax, &w.amount_gwei);
          break;
      }
      if (!st.ok()) return where.Wrap(st);
    }
    if (uint32_t missing = kWithdrawalRequired & ~seen) {
      return where.Error(kWithdrawalFieldNames[std::countr_zero(missing)], "is missing");
    }
  }
  return Status::Ok();
}

Status DecodeTransactionList(dom::element v, TxMode mode, const Where& block_where, Block* block,
                             std::vector<Transaction>* txs) {
  if (!v.is_array()) {
    return block_where.Error("transactions",
                             std::string("expected a JSON array, got a ") + JsonTypeName(v.type()));
  }
  dom::array array = ArrayOf(v);
  if (mode == TxMode::kFull) txs->reserve(array.size());
  size_t i = 0;
  for (dom::element element : array) {
    auto entry = [i] { return "transactions[" + std::to_string(i) + "]"; };
    if (element.is_object()) {
      if (mode == TxMode::kFull) {
        Where where = block_where;
        where.item = "transaction";
        where.index = i;
        GAPLESS_RETURN_IF_ERROR(DecodeTransaction(element, where, &txs->emplace_back()));
      }
    } else if (element.is_string()) {
      if (mode == TxMode::kFull) {
        return block_where.Error(
            entry(),
            "is a transaction hash, not a transaction object: decoding transactions needs "
            "eth_getBlockByNumber(n, true) (DecodeBlockHeader reads full=false blocks)");
      }
      std::string hash;
      Status st = ReadHex(element, entry(), kHashBytes, &hash);
      if (!st.ok()) return block_where.Wrap(st);
    } else {
      return block_where.Error(entry(),
                               std::string("expected a transaction object or hash, got a ") +
                                   JsonTypeName(element.type()));
    }
    ++i;
  }
  if (i > UINT32_MAX) return block_where.Error("transactions", "has too many entries");
  block->transaction_count = static_cast<uint32_t>(i);
  return Status::Ok();
}

}  // namespace

// Reads a block object. where->block is the requested number when known; otherwise it is set as
// soon as the number is read, so later messages name the block.
Status DecodeBlockObject(dom::element v, TxMode mode, Where* where, Block* block,
                         std::vector<Transaction>* txs) {
  uint32_t seen = 0;
  for (dom::key_value_pair kv : ObjectOf(v)) {
    int id = FieldIndex(kBlockFieldNames, kv.key);
    if (id < 0) continue;
    // A repeated field would be read twice (e.g. a second "logs" list appended to the first).
    if (seen & (1u << id)) return where->Error(kBlockFieldNames[id], "appears more than once");
    seen |= 1u << id;
    dom::element fv = kv.value;
    std::string_view name = kBlockFieldNames[id];
    Status st;
    switch (id) {
      case kBNumber:
        st = ReadU64(fv, name, kBigintMax, &block->number);
        if (st.ok() && where->block && block->number != *where->block) {
          return where->Error(name, std::to_string(block->number) +
                                        " is not the requested block number " +
                                        std::to_string(*where->block));
        }
        if (st.ok()) where->block = block->number;
        break;
      case kBHash:
        st = ReadHex(fv, name, kHashBytes, &block->hash);
        break;
      case kBParentHash:
        st = ReadHex(fv, name, kHashBytes, &block->parent_hash);
        break;
      case kBNonce:
        st = ReadHex(fv, name, kAnyLength, &block->nonce);
        break;
      case kBSha3Uncles:
        st = ReadHex(fv, name, kHashBytes, &block->sha3_uncles);
        break;
      case kBLogsBloom:
        st = ReadHex(fv, name, kAnyLength, &block->logs_bloom);
        break;
      case kBTransactionsRoot:
        st = ReadHex(fv, name, kHashBytes, &block->transactions_root);
        break;
      case kBStateRoot:
        st = ReadHex(fv, name, kHashBytes, &block->state_root);
        break;
      case kBReceiptsRoot:
        st = ReadHex(fv, name, kHashBytes, &block->receipts_root);
        break;
      case kBMiner:
        st = ReadHex(fv, name, kAddressBytes, &block->miner);
        break;
      case kBDifficulty:
        st = ReadU256(fv, name, &block->difficulty);
        break;
      case kBSize:
        st = ReadU64(fv, name, kBigintMax, &block->size);
        break;
      case kBExtraData:
        st = ReadHex(fv, name, kAnyLength, &block->extra_data);
        break;
      case kBGasLimit:
        st = ReadU64(fv, name, kBigintMax, &block->gas_limit);
        break;
      case kBGasUsed:
        st = ReadU64(fv, name, kBigintMax, &block->gas_used);
        break;
      case kBTimestamp:
        st = ReadU64(fv, name, kBigintMax, &block->timestamp);
        break;
      case kBTransactions:
        // Errors from here are already prefixed.
        GAPLESS_RETURN_IF_ERROR(DecodeTransactionList(fv, mode, *where, block, txs));
        break;
      case kBMixHash:
        st = ReadOptHex(fv, name, kHashBytes, &block->mix_hash);
        break;
      case kBTotalDifficulty:
        st = ReadOptU256(fv, name, &block->total_difficulty);
        break;
      case kBBaseFeePerGas:
        st = ReadOptU256(fv, name, &block->base_fee_per_gas);
        break;
      case kBWithdrawalsRoot:
        st = ReadOptHex(fv, name, kHashBytes, &block->withdrawals_root);
        break;
      case kBWithdrawals:
        GAPLESS_RETURN_IF_ERROR(DecodeWithdrawals(fv, *where, &block->withdrawals));
        break;
      case kBBlobGasUsed:
        st = ReadOptU64(fv, name, kBigintMax, &block->blob_gas_used);
        break;
      case kBExcessBlobGas:
        st = ReadOptU64(fv, name, kBigintMax, &block->excess_blob_gas);
        break;
      case kBParentBeaconBlockRoot:
        st = ReadOptHex(fv, name, kHashBytes, &block->parent_beacon_block_root);
        break;
      case kBRequestsHash:
        st = ReadOptHex(fv, name, kHashBytes, &block->requests_hash);
        break;
    }
    if (!st.ok()) return where->Wrap(st);
  }
  if (uint32_t missing = kBlockRequired & ~seen) {
    return where->Error(kBlockFieldNames[std::countr_zero(missing)], "is missing");
  }
  return Status::Ok();
}

}  // namespace gapless::decode_internal
