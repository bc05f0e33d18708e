// The readers of a receipt and of its logs (objects.h). A receipt is merged into the transaction
// it belongs to; every log is checked against its receipt and block (Expect).
#include <bit>
#include <string>

#include "decode/objects.h"

namespace gapless::decode_internal {
namespace {

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

}  // namespace

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
        if (st.ok() && expect.compare && log->transaction_hash != expect.tx_hash) {
          return where.Error(name, Mismatch(log->transaction_hash, "its receipt's transaction hash",
                                            expect.tx_hash));
        }
        break;
      case kLTransactionIndex:
        st = ReadUint(kv.value, name, &log->transaction_index);
        if (st.ok() && expect.compare && log->transaction_index != expect.tx_index) {
          return where.Error(name, std::to_string(log->transaction_index) +
                                       " does not match its receipt's transaction index " +
                                       std::to_string(expect.tx_index));
        }
        break;
      case kLBlockHash:
        st = ReadHex(kv.value, name, kHashBytes, &log->block_hash);
        if (st.ok() && expect.compare && log->block_hash != expect.block_hash) {
          return where.Error(name,
                             Mismatch(log->block_hash, "the block's hash", expect.block_hash));
        }
        break;
      case kLBlockNumber:
        st = ReadU64(kv.value, name, kBigintMax, &log->block_number);
        if (st.ok() && expect.compare && log->block_number != expect.block_number) {
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

namespace {

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

}  // namespace

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

}  // namespace gapless::decode_internal
