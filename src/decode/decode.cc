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
//
// This file holds the documents: parsing an answer, its root, the checks across objects (a
// block's transactions against the block, its receipts against its transactions) and the public
// functions. The objects' readers are in blocks.cc, transactions.cc and receipts.cc (objects.h).

#include "decode/decode.h"

#include <simdjson.h>

#include <utility>

#include "decode/hex.h"
#include "decode/json_fields.h"
#include "decode/objects.h"

namespace gapless {
namespace {

using decode_internal::ArrayOf;
using decode_internal::CheckChainId;
using decode_internal::DecodeBlockObject;
using decode_internal::DecodeReceipt;
using decode_internal::DecodeTransaction;
using decode_internal::Expect;
using decode_internal::JsonError;
using decode_internal::JsonTypeName;
using decode_internal::kBigintMax;
using decode_internal::Mismatch;
using decode_internal::QuoteForMessage;
using decode_internal::TxMode;
using decode_internal::Where;
namespace dom = simdjson::dom;

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

Result<BlockData> DecodeBlockReceipts(const std::string& receipts_json, std::string_view block_hash,
                                      uint64_t block_number) {
  BlockData data;
  data.block.number = block_number;
  data.block.hash = std::string(block_hash);
  Where block_where;
  block_where.block = block_number;
  dom::element root;
  GAPLESS_RETURN_IF_ERROR(ParseAt(receipts_json, &root, block_where, "receipts JSON"));
  if (root.is_null())
    return NotFound("block " + std::to_string(block_number) + ": receipts not found");
  if (!root.is_array())
    return WrongRoot(block_where, "receipts JSON", "an array of receipts", root);
  int64_t last_log_index = -1;
  size_t i = 0;
  for (dom::element element : ArrayOf(root)) {
    Where where = block_where;
    where.item = "receipt";
    where.index = i;
    Transaction& tx = data.transactions.emplace_back();
    tx.transaction_index = static_cast<uint32_t>(i);
    tx.block_hash = data.block.hash;
    tx.block_number = block_number;
    if (!element.is_object()) {
      return where.Wrap(InvalidData(std::string("expected a receipt object, got a ") +
                                    JsonTypeName(element.type())));
    }
    // The receipt is compared with itself for its hash (there is no transaction to compare it
    // with); its type is the receipt's own, which the trie encodes.
    dom::element field;
    if (element["transactionHash"].get(field) != simdjson::SUCCESS) {
      return where.Error("transactionHash", "is missing");
    }
    GAPLESS_RETURN_IF_ERROR(
        where.Wrap(decode_internal::ReadHex(field, "transactionHash", 32, &tx.hash)));
    where.tx_hash = tx.hash;
    if (element["type"].get(field) == simdjson::SUCCESS) {
      GAPLESS_RETURN_IF_ERROR(
          where.Wrap(decode_internal::ReadOptUint(field, "type", &tx.transaction_type)));
    }
    Expect expect{data.block.hash, block_number, tx.hash, static_cast<uint32_t>(i)};
    GAPLESS_RETURN_IF_ERROR(
        DecodeReceipt(element, where, expect, &last_log_index, &tx, &data.logs));
    ++i;
  }
  return data;
}

Result<std::vector<Log>> DecodeLogsResult(const std::string& json) {
  Where where;
  where.item = "eth_getLogs answer";
  dom::element root;
  GAPLESS_RETURN_IF_ERROR(ParseAt(json, &root, where, "logs JSON"));
  if (!root.is_array()) return WrongRoot(where, "logs JSON", "an array", root);
  std::vector<Log> logs;
  Expect loose;
  loose.compare = false;
  size_t n = 0;
  for (dom::element element : ArrayOf(root)) {
    Where log_where = where;
    log_where.log = n++;
    int64_t last = -1;
    Log log;
    GAPLESS_RETURN_IF_ERROR(DecodeLog(element, log_where, loose, &last, &log));
    if (log.removed) {
      return log_where.Wrap(InvalidData(
          "block " + std::to_string(log.block_number) + " log " + std::to_string(log.log_index) +
          " is marked removed (the chain re-orged under the request)"));
    }
    if (!logs.empty()) {
      const Log& p = logs.back();
      const bool after = log.block_number > p.block_number ||
                         (log.block_number == p.block_number && log.log_index > p.log_index);
      if (!after) {
        return log_where.Wrap(InvalidData(
            "block " + std::to_string(log.block_number) + " log " + std::to_string(log.log_index) +
            " comes after block " + std::to_string(p.block_number) + " log " +
            std::to_string(p.log_index) + " (an answer's logs must be in chain order, each once)"));
      }
      if (log.block_number == p.block_number && log.block_hash != p.block_hash) {
        return log_where.Wrap(InvalidData("block " + std::to_string(log.block_number) +
                                          ": logs of two different block hashes"));
      }
    }
    logs.push_back(std::move(log));
  }
  return logs;
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
