// DecodeBlock and friends, on simdjson's DOM API.
//
// Why DOM rather than On-Demand: the distro's simdjson builds On-Demand for its compile-time
// "builtin" kernel, which without -march flags is the scalar fallback (~0.5 GB/s on the mainnet
// receipts here), while the DOM parser picks the best kernel at run time (haswell: ~1.2 GB/s for
// parse + full walk). DOM also validates the whole document up front (truncation, trailing
// content), which keeps error handling simple. The cost: a JSON integer above 2^64 anywhere in
// the answer (even in a field we ignore) fails the parse; JSON-RPC sends quantities as hex
// strings, so this does not happen with real nodes.
//
// Each object is read field by field in the order the node wrote it; a field is looked up in a
// small per-object table and parsed straight into the model, unknown fields are skipped. Checks
// that need several fields (required fields present, the block's hash in every transaction) run
// after the object is read. Error messages are built only on failure.

#include "decode/decode.h"

#include <simdjson.h>

#include <bit>
#include <utility>

#include "decode/hex.h"
#include "decode/json_fields.h"

namespace gapless {
namespace {

using decode_internal::ArrayOf;
using decode_internal::FieldError;
using decode_internal::FieldIndex;
using decode_internal::JsonError;
using decode_internal::JsonTypeName;
using decode_internal::kAnyLength;
using decode_internal::kBigintMax;
using decode_internal::ObjectOf;
using decode_internal::QuoteForMessage;
using decode_internal::ReadBool;
using decode_internal::ReadHashList;
using decode_internal::ReadHex;
using decode_internal::ReadHexAndCompare;
using decode_internal::ReadOptCompactJsonArray;
using decode_internal::ReadOptHex;
using decode_internal::ReadOptQuantityText;
using decode_internal::ReadOptU256;
using decode_internal::ReadOptU64;
using decode_internal::ReadOptUint;
using decode_internal::ReadString;
using decode_internal::ReadU256;
using decode_internal::ReadU64;
using decode_internal::ReadUint;
namespace dom = simdjson::dom;

constexpr size_t kHashBytes = 32;
constexpr size_t kAddressBytes = 20;
constexpr size_t kMaxTopics = 4;

// Where an error happened; formatted only when one does:
// "block 17000000: receipt 3 (tx 0xab..): log 2".
struct Where {
  std::optional<uint64_t> block;
  const char* item = nullptr;  // "transaction", "receipt", "withdrawal"
  std::optional<size_t> index;
  std::string_view tx_hash;
  std::optional<size_t> log;

  std::string Prefix() const {
    std::string s;
    if (block || item == nullptr) {
      s = "block";
      if (block) s += " " + std::to_string(*block);
    }
    if (item != nullptr) {
      if (!s.empty()) s += ": ";
      s += item;
      if (index) s += " " + std::to_string(*index);
      if (!tx_hash.empty()) {
        s += " (tx ";
        s.append(tx_hash);
        s += ")";
      }
    }
    if (log) s += ": log " + std::to_string(*log);
    return s;
  }

  Status Wrap(const Status& st) const { return st.ok() ? st : st.WithContext(Prefix()); }
  Status Error(std::string_view field, const std::string& what) const {
    return Wrap(FieldError(field, what));
  }
};

std::string Mismatch(std::string_view got, std::string_view what, std::string_view expected) {
  std::string s = QuoteForMessage(got);
  s += " does not match ";
  s.append(what);
  s += " ";
  s.append(expected);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Documents

// One parser per thread, reused: its buffers grow to the largest answer seen and stay.
struct ThreadParser {
  dom::parser parser;
  std::string padded;  // copy of an input that lacks simdjson's padding
};

ThreadParser& LocalParser() {
  thread_local ThreadParser p;
  return p;
}

// Parses json with the thread's parser (copying it first if its spare capacity is too small to
// pad it). The element is valid until the next parse on this thread.
Status Parse(const std::string& json, dom::element* root) {
  ThreadParser& tp = LocalParser();
  simdjson::error_code e;
  if (json.capacity() - json.size() >= simdjson::SIMDJSON_PADDING) {
    e = tp.parser.parse(json.data(), json.size(), /*realloc_if_needed=*/false).get(*root);
  } else {
    tp.padded.reserve(json.size() + simdjson::SIMDJSON_PADDING);
    tp.padded.assign(json);
    e = tp.parser.parse(tp.padded.data(), tp.padded.size(), false).get(*root);
  }
  if (e) return JsonError(e);
  return Status::Ok();
}

// Parse with errors reported as "<where>: <what>: invalid JSON (...)".
Status ParseAt(const std::string& json, dom::element* root, const Where& where,
               std::string_view what) {
  Status st = Parse(json, root);
  if (!st.ok()) return where.Wrap(st.WithContext(std::string(what)));
  return st;
}

Status WrongRoot(const Where& where, std::string_view what, const char* expected,
                 dom::element root) {
  return where.Wrap(InvalidData(std::string(what) + ": expected " + expected + ", got a " +
                                JsonTypeName(root.type())));
}

// ---------------------------------------------------------------------------------------------
// Logs

enum LogField {
  kLAddress,
  kLTopics,
  kLData,
  kLLogIndex,
  kLTransactionHash,
  kLTransactionIndex,
  kLBlockHash,
  kLBlockNumber,
  kLRemoved,
};
constexpr std::string_view kLogFieldNames[] = {
    "address",          "topics",    "data",        "logIndex", "transactionHash",
    "transactionIndex", "blockHash", "blockNumber", "removed",
};
constexpr uint32_t kLogRequired = (1u << kLRemoved) - 1;  // all but "removed"

// What a receipt and its logs must agree with.
struct Expect {
  std::string_view block_hash;
  uint64_t block_number = 0;
  std::string_view tx_hash;
  uint32_t tx_index = 0;
};

Status DecodeLog(dom::element v, const Where& where, const Expect& expect, int64_t* last_log_index,
                 Log* log) {
  if (!v.is_object()) {
    return where.Wrap(
        InvalidData(std::string("expected a log object, got a ") + JsonTypeName(v.type())));
  }
  uint32_t seen = 0;
  for (dom::key_value_pair kv : ObjectOf(v)) {
    int id = FieldIndex(kLogFieldNames, kv.key);
    if (id < 0) continue;
    // A repeated field would be read twice (e.g. a second "logs" list appended to the first).
    if (seen & (1u << id)) return where.Error(kLogFieldNames[id], "appears more than once");
    seen |= 1u << id;
    std::string_view name = kLogFieldNames[id];
    Status st;
    switch (id) {
      case kLAddress:
        st = ReadHex(kv.value, name, kAddressBytes, &log->address);
        break;
      case kLTopics:
        st = ReadHashList(kv.value, name, kMaxTopics, /*nullable=*/false, &log->topics);
        break;
      case kLData:
        st = ReadHex(kv.value, name, kAnyLength, &log->data);
        break;
      case kLLogIndex:
        st = ReadUint(kv.value, name, &log->log_index);
        if (st.ok() && static_cast<int64_t>(log->log_index) <= *last_log_index) {
          return where.Error(name, std::to_string(log->log_index) +
                                       " is not above the previous log's index " +
                                       std::to_string(*last_log_index) +
                                       " (log indexes must strictly increase across the block)");
        }
        if (st.ok()) *last_log_index = log->log_index;
        break;
      case kLTransactionHash:
        st = ReadHex(kv.value, name, kHashBytes, &log->transaction_hash);
        if (st.ok() && log->transaction_hash != expect.tx_hash) {
          return where.Error(name, Mismatch(log->transaction_hash, "its receipt's transaction hash",
                                            expect.tx_hash));
        }
        break;
      case kLTransactionIndex:
        st = ReadUint(kv.value, name, &log->transaction_index);
        if (st.ok() && log->transaction_index != expect.tx_index) {
          return where.Error(name, std::to_string(log->transaction_index) +
                                       " does not match its receipt's transaction index " +
                                       std::to_string(expect.tx_index));
        }
        break;
      case kLBlockHash:
        st = ReadHex(kv.value, name, kHashBytes, &log->block_hash);
        if (st.ok() && log->block_hash != expect.block_hash) {
          return where.Error(name,
                             Mismatch(log->block_hash, "the block's hash", expect.block_hash));
        }
        break;
      case kLBlockNumber:
        st = ReadU64(kv.value, name, kBigintMax, &log->block_number);
        if (st.ok() && log->block_number != expect.block_number) {
          return where.Error(name, std::to_string(log->block_number) +
                                       " does not match the block's number " +
                                       std::to_string(expect.block_number));
        }
        break;
      case kLRemoved:
        st = ReadBool(kv.value, name, &log->removed);
        break;
    }
    if (!st.ok()) return where.Wrap(st);
  }
  if (uint32_t missing = kLogRequired & ~seen) {
    return where.Error(kLogFieldNames[std::countr_zero(missing)], "is missing");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Receipts

enum ReceiptField {
  kRTransactionHash,
  kRTransactionIndex,
  kRBlockHash,
  kRBlockNumber,
  kRCumulativeGasUsed,
  kRGasUsed,
  kRLogs,
  kRLogsBloom,
  kRContractAddress,
  kRRoot,
  kRStatus,
  kREffectiveGasPrice,
  kRBlobGasUsed,
  kRBlobGasPrice,
};
constexpr std::string_view kReceiptFieldNames[] = {
    "transactionHash",
    "transactionIndex",
    "blockHash",
    "blockNumber",
    "cumulativeGasUsed",
    "gasUsed",
    "logs",
    "logsBloom",
    "contractAddress",
    "root",
    "status",
    "effectiveGasPrice",
    "blobGasUsed",
    "blobGasPrice",
};
constexpr uint32_t kReceiptRequired = (1u << kRContractAddress) - 1;

Status DecodeLogList(dom::element v, const Where& where, const Expect& expect,
                     int64_t* last_log_index, std::vector<Log>* logs, uint32_t* count) {
  if (!v.is_array()) {
    return where.Error("logs",
                       std::string("expected a JSON array, got a ") + JsonTypeName(v.type()));
  }
  dom::array array = ArrayOf(v);
  size_t n = 0;
  for (dom::element element : array) {
    Where log_where = where;
    log_where.log = n;
    logs->emplace_back();
    GAPLESS_RETURN_IF_ERROR(DecodeLog(element, log_where, expect, last_log_index, &logs->back()));
    ++n;
  }
  *count = static_cast<uint32_t>(n);  // n <= the number of (uint32) log indexes seen
  return Status::Ok();
}

// Merges one receipt into *tx (which already holds the transaction) and appends its logs.
Status DecodeReceipt(dom::element v, const Where& where, const Expect& expect,
                     int64_t* last_log_index, Transaction* tx, std::vector<Log>* logs) {
  if (!v.is_object()) {
    return where.Wrap(
        InvalidData(std::string("expected a receipt object, got a ") + JsonTypeName(v.type())));
  }
  uint32_t seen = 0;
  bool equal = false;
  std::string_view text;
  for (dom::key_value_pair kv : ObjectOf(v)) {
    int id = FieldIndex(kReceiptFieldNames, kv.key);
    if (id < 0) continue;
    // A repeated field would be read twice (e.g. a second "logs" list appended to the first).
    if (seen & (1u << id)) return where.Error(kReceiptFieldNames[id], "appears more than once");
    seen |= 1u << id;
    std::string_view name = kReceiptFieldNames[id];
    Status st;
    switch (id) {
      case kRTransactionHash:
        st = ReadHexAndCompare(kv.value, name, kHashBytes, expect.tx_hash, &equal, &text);
        if (st.ok() && !equal) {
          return where.Error(name, Mismatch(text, "the transaction's hash", expect.tx_hash));
        }
        break;
      case kRTransactionIndex: {
        uint32_t index = 0;
        st = ReadUint(kv.value, name, &index);
        if (st.ok() && index != expect.tx_index) {
          return where.Error(name, std::to_string(index) +
                                       " does not match the transaction's index " +
                                       std::to_string(expect.tx_index));
        }
        break;
      }
      case kRBlockHash:
        st = ReadHexAndCompare(kv.value, name, kHashBytes, expect.block_hash, &equal, &text);
        if (st.ok() && !equal) {
          return where.Error(name, Mismatch(text, "the block's hash", expect.block_hash));
        }
        break;
      case kRBlockNumber: {
        uint64_t number = 0;
        st = ReadU64(kv.value, name, kBigintMax, &number);
        if (st.ok() && number != expect.block_number) {
          return where.Error(name, std::to_string(number) + " does not match the block's number " +
                                       std::to_string(expect.block_number));
        }
        break;
      }
      case kRCumulativeGasUsed:
        st = ReadU64(kv.value, name, kBigintMax, &tx->cumulative_gas_used);
        break;
      case kRGasUsed:
        st = ReadU64(kv.value, name, kBigintMax, &tx->gas_used);
        break;
      case kRLogs:
        // Errors from here are already prefixed with the log's position.
        GAPLESS_RETURN_IF_ERROR(
            DecodeLogList(kv.value, where, expect, last_log_index, logs, &tx->log_count));
        break;
      case kRLogsBloom:
        st = ReadHex(kv.value, name, kAnyLength, &tx->receipt_logs_bloom);
        break;
      case kRContractAddress:
        st = ReadOptHex(kv.value, name, kAddressBytes, &tx->contract_address);
        break;
      case kRRoot:
        st = ReadOptHex(kv.value, name, kHashBytes, &tx->root);
        break;
      case kRStatus:
        st = ReadOptUint(kv.value, name, &tx->status);
        if (st.ok() && tx->status && *tx->status > 1) {
          return where.Error(name, std::to_string(*tx->status) + " is neither 0x0 nor 0x1");
        }
        break;
      case kREffectiveGasPrice:
        st = ReadOptU256(kv.value, name, &tx->effective_gas_price);
        break;
      case kRBlobGasUsed:
        st = ReadOptU64(kv.value, name, kBigintMax, &tx->blob_gas_used);
        break;
      case kRBlobGasPrice:
        st = ReadOptU256(kv.value, name, &tx->blob_gas_price);
        break;
    }
    if (!st.ok()) return where.Wrap(st);
  }
  if (uint32_t missing = kReceiptRequired & ~seen) {
    return where.Error(kReceiptFieldNames[std::countr_zero(missing)], "is missing");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Transactions

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

// ---------------------------------------------------------------------------------------------
// Blocks

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

enum class TxMode { kFull, kHeaderOnly };

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

// Parses and reads the block document into *block (and *txs in full mode).
Status DecodeBlockDocument(const std::string& json, TxMode mode, Where* where, Block* block,
                           std::vector<Transaction>* txs) {
  dom::element root;
  GAPLESS_RETURN_IF_ERROR(ParseAt(json, &root, *where, "block JSON"));
  if (root.is_null()) {
    if (where->block) return NotFound("block " + std::to_string(*where->block) + " not found");
    return NotFound("block not found");
  }
  if (!root.is_object()) return WrongRoot(*where, "block JSON", "a block object or null", root);
  return DecodeBlockObject(root, mode, where, block, txs);
}

// Cross-checks a block's transactions against the block.
Status CheckTransactions(const Block& block, const std::vector<Transaction>& txs,
                         std::optional<uint64_t> expected_chain_id, const Where& block_where) {
  for (size_t i = 0; i < txs.size(); ++i) {
    const Transaction& tx = txs[i];
    Where where = block_where;
    where.item = "transaction";
    where.index = i;
    where.tx_hash = tx.hash;
    if (tx.block_hash != block.hash) {
      return where.Error("blockHash", Mismatch(tx.block_hash, "the block's hash", block.hash));
    }
    if (tx.block_number != block.number) {
      return where.Error("blockNumber", std::to_string(tx.block_number) +
                                            " does not match the block's number " +
                                            std::to_string(block.number));
    }
    if (tx.transaction_index != i) {
      return where.Error("transactionIndex", std::to_string(tx.transaction_index) +
                                                 " does not match the transaction's position " +
                                                 std::to_string(i) + " in the block");
    }
    GAPLESS_RETURN_IF_ERROR(CheckChainId(tx, expected_chain_id, where));
  }
  return Status::Ok();
}

Status DecodeReceiptsDocument(const std::string& json, const Where& block_where, BlockData* data) {
  dom::element root;
  GAPLESS_RETURN_IF_ERROR(ParseAt(json, &root, block_where, "receipts JSON"));
  if (root.is_null()) {
    return NotFound("block " + std::to_string(data->block.number) + ": receipts not found");
  }
  if (!root.is_array()) {
    return WrongRoot(block_where, "receipts JSON", "an array of receipts", root);
  }
  dom::array array = ArrayOf(root);
  size_t count = array.size();
  if (count != data->transactions.size()) {
    return block_where.Wrap(InvalidData("receipt count " + std::to_string(count) +
                                        " does not match the block's transaction count " +
                                        std::to_string(data->transactions.size())));
  }
  int64_t last_log_index = -1;
  size_t i = 0;
  for (dom::element element : array) {
    Transaction& tx = data->transactions[i];
    Where where = block_where;
    where.item = "receipt";
    where.index = i;
    where.tx_hash = tx.hash;
    Expect expect{data->block.hash, data->block.number, tx.hash, static_cast<uint32_t>(i)};
    GAPLESS_RETURN_IF_ERROR(
        DecodeReceipt(element, where, expect, &last_log_index, &tx, &data->logs));
    ++i;
  }
  return Status::Ok();
}

}  // namespace

Result<BlockData> DecodeBlock(const std::string& block_json, const std::string& receipts_json,
                              const DecodeOptions& options) {
  BlockData data;
  Where where;
  where.block = options.expected_number;
  GAPLESS_RETURN_IF_ERROR(
      DecodeBlockDocument(block_json, TxMode::kFull, &where, &data.block, &data.transactions));
  GAPLESS_RETURN_IF_ERROR(
      CheckTransactions(data.block, data.transactions, options.expected_chain_id, where));
  GAPLESS_RETURN_IF_ERROR(DecodeReceiptsDocument(receipts_json, where, &data));
  data.token_transfers.reserve(data.logs.size());
  for (const Log& log : data.logs) AppendTokenTransfers(log, &data.token_transfers);
  return data;
}

Result<Block> DecodeBlockHeader(const std::string& block_json,
                                std::optional<uint64_t> expected_number) {
  Block block;
  Where where;
  where.block = expected_number;
  GAPLESS_RETURN_IF_ERROR(
      DecodeBlockDocument(block_json, TxMode::kHeaderOnly, &where, &block, nullptr));
  return block;
}

Result<TransactionData> DecodeTransactionWithReceipt(const std::string& tx_json,
                                                     const std::string& receipt_json,
                                                     std::optional<uint64_t> expected_chain_id) {
  TransactionData data;
  Transaction& tx = data.transaction;
  Where where;
  where.item = "transaction";
  dom::element root;
  GAPLESS_RETURN_IF_ERROR(ParseAt(tx_json, &root, where, "transaction JSON"));
  if (root.is_null()) return NotFound("transaction not found");
  GAPLESS_RETURN_IF_ERROR(DecodeTransaction(root, where, &tx));
  where.block = tx.block_number;
  where.index = tx.transaction_index;
  where.tx_hash = tx.hash;
  GAPLESS_RETURN_IF_ERROR(CheckChainId(tx, expected_chain_id, where));

  where.item = "receipt";
  GAPLESS_RETURN_IF_ERROR(ParseAt(receipt_json, &root, where, "receipt JSON"));
  if (root.is_null()) return NotFound("transaction " + tx.hash + ": receipt not found");
  Expect expect{tx.block_hash, tx.block_number, tx.hash, tx.transaction_index};
  int64_t last_log_index = -1;
  GAPLESS_RETURN_IF_ERROR(DecodeReceipt(root, where, expect, &last_log_index, &tx, &data.logs));
  for (const Log& log : data.logs) AppendTokenTransfers(log, &data.token_transfers);
  return data;
}

namespace {

Result<uint64_t> ParseQuantity(std::string_view text, std::string_view what) {
  uint64_t n = 0;
  decode_internal::HexProblem p = decode_internal::ParseQuantityU64(text, &n);
  if (p == decode_internal::HexProblem::kOverflow ||
      (p == decode_internal::HexProblem::kNone && n > kBigintMax)) {
    return InvalidData(std::string(what) + " " + QuoteForMessage(text) + " is above 2^63-1");
  }
  if (p != decode_internal::HexProblem::kNone) {
    return InvalidData(std::string(what) + " " + QuoteForMessage(text) + " " +
                       decode_internal::DescribeHexProblem(p, text, 0));
  }
  return n;
}

}  // namespace

Result<uint64_t> ParseBlockNumberQuantity(std::string_view hex) {
  return ParseQuantity(hex, "block number");
}

Result<uint64_t> DecodeQuantityResult(const std::string& json, std::string_view what) {
  dom::element root;
  Status st = Parse(json, &root);
  if (!st.ok()) return st.WithContext(std::string(what));
  if (!root.is_string()) {
    return InvalidData(std::string(what) + ": expected a hex quantity string, got a " +
                       JsonTypeName(root.type()));
  }
  return ParseQuantity(root.get_string().value_unsafe(), std::string(what) + ":");
}

}  // namespace gapless
