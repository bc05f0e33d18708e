#include "decode/decode_test_util.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/u256.h"

namespace gapless::testing {

namespace dom = simdjson::dom;

std::string Fixture(const std::string& relative) {
  return std::string(GAPLESS_FIXTURES_DIR) + "/" + relative;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ResultOf(const std::string& envelope_json) {
  dom::parser parser;
  dom::element root;
  auto error = parser.parse(envelope_json).get(root);
  if (error) {
    ADD_FAILURE() << "bad JSON envelope: " << simdjson::error_message(error);
    return "";
  }
  dom::element result;
  if (root["result"].get(result)) {
    ADD_FAILURE() << "envelope without result";
    return "";
  }
  return simdjson::minify(result);
}

std::vector<IoExchange> ReadIo(const std::string& path) {
  std::vector<IoExchange> out;
  std::istringstream in(ReadFile(path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(">> ", 0) == 0) {
      out.push_back({line.substr(3), ""});
    } else if (line.rfind("<< ", 0) == 0) {
      if (out.empty()) {
        ADD_FAILURE() << path << ": response without request";
        continue;
      }
      out.back().response = line.substr(3);
    }
  }
  return out;
}

std::string IoResult(const std::string& path) {
  std::vector<IoExchange> io = ReadIo(path);
  if (io.empty()) {
    ADD_FAILURE() << path << ": no exchange";
    return "";
  }
  return ResultOf(io[0].response);
}

namespace {

// Splits CSV text into records of cells (quoted cells may hold commas, quotes and newlines).
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string cell;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        cell.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell.push_back(c);
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      record.push_back(std::move(cell));
      cell.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !cell.empty()) {
        record.push_back(std::move(cell));
        records.push_back(std::move(record));
      }
      record.clear();
      cell.clear();
      any = false;
    } else {
      cell.push_back(c);
      any = true;
    }
  }
  if (any || !cell.empty()) {
    record.push_back(std::move(cell));
    records.push_back(std::move(record));
  }
  return records;
}

std::string Dec(const U256& v) { return v.ToDecimal(); }
std::string Dec(const std::optional<U256>& v) { return v ? v->ToDecimal() : ""; }
template <typename T>
std::string DecInt(const std::optional<T>& v) {
  return v ? std::to_string(static_cast<uint64_t>(*v)) : "";
}
std::string Str(const std::optional<std::string>& v) { return v ? *v : ""; }

std::string_view JsonString(dom::element e) {
  std::string_view s;
  if (e.get_string().get(s)) ADD_FAILURE() << "expected a JSON string, got " << e;
  return s;
}

// "" for null, else the decimal of the hex quantity.
std::string JsonDec(dom::element e) { return e.is_null() ? "" : HexToDecimal(JsonString(e)); }
// "" for null, else the lower-cased hex text.
std::string JsonHex(dom::element e) { return e.is_null() ? "" : Lower(JsonString(e)); }

std::vector<std::string> JsonHexList(dom::element e) {
  std::vector<std::string> out;
  if (e.is_null()) return out;
  dom::array array;
  if (e.get_array().get(array)) {
    ADD_FAILURE() << "expected an array";
    return out;
  }
  for (dom::element x : array) out.push_back(Lower(JsonString(x)));
  return out;
}

}  // namespace

Csv ReadCsv(const std::string& path) {
  Csv csv;
  std::vector<std::vector<std::string>> records = ParseCsv(ReadFile(path));
  if (records.empty()) return csv;
  csv.header = records[0];
  for (size_t r = 1; r < records.size(); ++r) {
    EXPECT_EQ(records[r].size(), csv.header.size()) << path << " row " << r;
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < csv.header.size() && c < records[r].size(); ++c) {
      row[csv.header[c]] = records[r][c];
    }
    csv.rows.push_back(std::move(row));
  }
  return csv;
}

std::string HexToDecimal(std::string_view hex) {
  std::optional<U256> v = U256::FromHexQuantity(hex);
  if (!v) {
    ADD_FAILURE() << "not a hex quantity: " << hex;
    return "<bad>";
  }
  return v->ToDecimal();
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

void ReplaceNth(std::string* text, const std::string& from, const std::string& to, size_t n) {
  size_t pos = text->find(from);
  for (size_t i = 0; i < n && pos != std::string::npos; ++i) pos = text->find(from, pos + 1);
  if (pos == std::string::npos) {
    ADD_FAILURE() << "occurrence " << n << " of " << from << " not found";
    return;
  }
  text->replace(pos, from.size(), to);
}

std::map<std::string, std::string> BlockCells(const Block& b) {
  std::string withdrawals;
  for (const Withdrawal& w : b.withdrawals) {
    if (!withdrawals.empty()) withdrawals += ",";
    withdrawals += "{\"index\":" + std::to_string(w.index) +
                   ",\"validator_index\":" + std::to_string(w.validator_index) + ",\"address\":\"" +
                   w.address + "\",\"amount\":" + std::to_string(w.amount_gwei) + "}";
  }
  return {
      {"number", std::to_string(b.number)},
      {"hash", b.hash},
      {"parent_hash", b.parent_hash},
      {"nonce", b.nonce},
      {"sha3_uncles", b.sha3_uncles},
      {"logs_bloom", b.logs_bloom},
      {"transactions_root", b.transactions_root},
      {"state_root", b.state_root},
      {"receipts_root", b.receipts_root},
      {"miner", b.miner},
      {"difficulty", Dec(b.difficulty)},
      {"total_difficulty", Dec(b.total_difficulty)},
      {"size", std::to_string(b.size)},
      {"extra_data", b.extra_data},
      {"gas_limit", std::to_string(b.gas_limit)},
      {"gas_used", std::to_string(b.gas_used)},
      {"timestamp", std::to_string(b.timestamp)},
      {"transaction_count", std::to_string(b.transaction_count)},
      {"base_fee_per_gas", Dec(b.base_fee_per_gas)},
      {"withdrawals_root", Str(b.withdrawals_root)},
      {"withdrawals", withdrawals},
  };
}

std::map<std::string, std::string> TransactionCells(const Transaction& tx, const Block& block) {
  return {
      {"hash", tx.hash},
      {"nonce", std::to_string(tx.nonce)},
      {"block_hash", tx.block_hash},
      {"block_number", std::to_string(tx.block_number)},
      {"transaction_index", std::to_string(tx.transaction_index)},
      {"from_address", tx.from_address},
      {"to_address", Str(tx.to_address)},
      {"value", Dec(tx.value)},
      {"gas", std::to_string(tx.gas)},
      {"gas_price", Dec(tx.gas_price)},
      {"input", tx.input},
      {"block_timestamp", std::to_string(block.timestamp)},
      {"max_fee_per_gas", Dec(tx.max_fee_per_gas)},
      {"max_priority_fee_per_gas", Dec(tx.max_priority_fee_per_gas)},
      {"transaction_type", DecInt(tx.transaction_type)},
  };
}

std::map<std::string, std::string> ReceiptCells(const Transaction& tx) {
  return {
      {"transaction_hash", tx.hash},
      {"transaction_index", std::to_string(tx.transaction_index)},
      {"block_hash", tx.block_hash},
      {"block_number", std::to_string(tx.block_number)},
      {"cumulative_gas_used", std::to_string(tx.cumulative_gas_used)},
      {"gas_used", std::to_string(tx.gas_used)},
      {"contract_address", Str(tx.contract_address)},
      {"root", Str(tx.root)},
      {"status", DecInt(tx.status)},
      {"effective_gas_price", Dec(tx.effective_gas_price)},
      // OP-stack L2 fields: always empty on mainnet, not in the model.
      {"l1_fee", ""},
      {"l1_gas_used", ""},
      {"l1_gas_price", ""},
      {"l1_fee_scalar", ""},
  };
}

std::map<std::string, std::string> LogCells(const Log& log) {
  std::string topics;
  for (const std::string& t : log.topics) {
    if (!topics.empty()) topics += ",";
    topics += t;
  }
  return {
      {"log_index", std::to_string(log.log_index)},
      {"transaction_hash", log.transaction_hash},
      {"transaction_index", std::to_string(log.transaction_index)},
      {"block_hash", log.block_hash},
      {"block_number", std::to_string(log.block_number)},
      {"address", log.address},
      {"data", log.data},
      {"topics", topics},
  };
}

std::map<std::string, std::string> TransferCells(const TokenTransfer& t) {
  return {
      {"token_address", t.token_address},
      {"from_address", t.from_address},
      {"to_address", t.to_address},
      {"value", Dec(t.value)},
      {"transaction_hash", t.transaction_hash},
      {"log_index", std::to_string(t.log_index)},
      {"block_number", std::to_string(t.block_number)},
  };
}

void ExpectCells(const std::map<std::string, std::string>& expected,
                 const std::map<std::string, std::string>& actual) {
  for (const auto& [column, cell] : expected) {
    auto it = actual.find(column);
    if (it == actual.end()) {
      ADD_FAILURE() << "unknown CSV column " << column;
      continue;
    }
    // ethereum-etl passes log.address through unchanged; the model lower-cases every address.
    EXPECT_EQ(it->second, column == "address" ? Lower(cell) : cell) << "column " << column;
  }
}

void ExpectBlockMatchesJson(const Block& b, dom::object json) {
  std::set<std::string> keys;
  for (dom::key_value_pair kv : json) {
    std::string key(kv.key);
    keys.insert(key);
    dom::element v = kv.value;
    SCOPED_TRACE("block field " + key);
    if (key == "number") {
      EXPECT_EQ(std::to_string(b.number), JsonDec(v));
    } else if (key == "hash") {
      EXPECT_EQ(b.hash, JsonHex(v));
    } else if (key == "parentHash") {
      EXPECT_EQ(b.parent_hash, JsonHex(v));
    } else if (key == "nonce") {
      EXPECT_EQ(b.nonce, JsonHex(v));
    } else if (key == "sha3Uncles") {
      EXPECT_EQ(b.sha3_uncles, JsonHex(v));
    } else if (key == "logsBloom") {
      EXPECT_EQ(b.logs_bloom, JsonHex(v));
    } else if (key == "transactionsRoot") {
      EXPECT_EQ(b.transactions_root, JsonHex(v));
    } else if (key == "stateRoot") {
      EXPECT_EQ(b.state_root, JsonHex(v));
    } else if (key == "receiptsRoot") {
      EXPECT_EQ(b.receipts_root, JsonHex(v));
    } else if (key == "miner" || key == "author") {  // Parity sends both, equal
      EXPECT_EQ(b.miner, JsonHex(v));
    } else if (key == "mixHash") {
      EXPECT_EQ(Str(b.mix_hash), JsonHex(v));
    } else if (key == "difficulty") {
      EXPECT_EQ(Dec(b.difficulty), JsonDec(v));
    } else if (key == "totalDifficulty") {
      EXPECT_EQ(Dec(b.total_difficulty), JsonDec(v));
    } else if (key == "size") {
      EXPECT_EQ(std::to_string(b.size), JsonDec(v));
    } else if (key == "extraData") {
      EXPECT_EQ(b.extra_data, JsonHex(v));
    } else if (key == "gasLimit") {
      EXPECT_EQ(std::to_string(b.gas_limit), JsonDec(v));
    } else if (key == "gasUsed") {
      EXPECT_EQ(std::to_string(b.gas_used), JsonDec(v));
    } else if (key == "timestamp") {
      EXPECT_EQ(std::to_string(b.timestamp), JsonDec(v));
    } else if (key == "transactions") {
      EXPECT_EQ(b.transaction_count, dom::array(v).size());
    } else if (key == "baseFeePerGas") {
      EXPECT_EQ(Dec(b.base_fee_per_gas), JsonDec(v));
    } else if (key == "withdrawalsRoot") {
      EXPECT_EQ(Str(b.withdrawals_root), JsonHex(v));
    } else if (key == "withdrawals") {
      dom::array array = v;
      ASSERT_EQ(b.withdrawals.size(), array.size());
      size_t i = 0;
      for (dom::object w : array) {
        const Withdrawal& m = b.withdrawals[i++];
        EXPECT_EQ(std::to_string(m.index), JsonDec(w["index"]));
        EXPECT_EQ(std::to_string(m.validator_index), JsonDec(w["validatorIndex"]));
        EXPECT_EQ(m.address, JsonHex(w["address"]));
        EXPECT_EQ(std::to_string(m.amount_gwei), JsonDec(w["amount"]));
      }
    } else if (key == "blobGasUsed") {
      EXPECT_EQ(DecInt(b.blob_gas_used), JsonDec(v));
    } else if (key == "excessBlobGas") {
      EXPECT_EQ(DecInt(b.excess_blob_gas), JsonDec(v));
    } else if (key == "parentBeaconBlockRoot") {
      EXPECT_EQ(Str(b.parent_beacon_block_root), JsonHex(v));
    } else if (key == "requestsHash") {
      EXPECT_EQ(Str(b.requests_hash), JsonHex(v));
    } else if (key == "uncles" || key == "sealFields") {
      // Not in the model (ethereum-etl does not export them either).
    } else {
      ADD_FAILURE() << "unchecked block field " << key;
    }
  }
  // Optional model fields must come from the JSON.
  EXPECT_EQ(b.mix_hash.has_value(), keys.count("mixHash") == 1);
  EXPECT_EQ(b.total_difficulty.has_value(), keys.count("totalDifficulty") == 1);
  EXPECT_EQ(b.base_fee_per_gas.has_value(), keys.count("baseFeePerGas") == 1);
  EXPECT_EQ(b.withdrawals_root.has_value(), keys.count("withdrawalsRoot") == 1);
  EXPECT_EQ(b.blob_gas_used.has_value(), keys.count("blobGasUsed") == 1);
  EXPECT_EQ(b.excess_blob_gas.has_value(), keys.count("excessBlobGas") == 1);
  EXPECT_EQ(b.parent_beacon_block_root.has_value(), keys.count("parentBeaconBlockRoot") == 1);
  EXPECT_EQ(b.requests_hash.has_value(), keys.count("requestsHash") == 1);
}

void ExpectTransactionMatchesJson(const Transaction& tx, dom::object json, const Block* block) {
  std::set<std::string> keys;
  for (dom::key_value_pair kv : json) {
    std::string key(kv.key);
    keys.insert(key);
    dom::element v = kv.value;
    SCOPED_TRACE("transaction " + tx.hash + " field " + key);
    if (key == "hash") {
      EXPECT_EQ(tx.hash, JsonHex(v));
    } else if (key == "nonce") {
      EXPECT_EQ(std::to_string(tx.nonce), JsonDec(v));
    } else if (key == "blockHash") {
      EXPECT_EQ(tx.block_hash, JsonHex(v));
    } else if (key == "blockNumber") {
      EXPECT_EQ(std::to_string(tx.block_number), JsonDec(v));
    } else if (key == "transactionIndex") {
      EXPECT_EQ(std::to_string(tx.transaction_index), JsonDec(v));
    } else if (key == "from") {
      EXPECT_EQ(tx.from_address, JsonHex(v));
    } else if (key == "to") {
      EXPECT_EQ(Str(tx.to_address), JsonHex(v));
      EXPECT_EQ(tx.to_address.has_value(), !v.is_null());
    } else if (key == "value") {
      EXPECT_EQ(Dec(tx.value), JsonDec(v));
    } else if (key == "gas") {
      EXPECT_EQ(std::to_string(tx.gas), JsonDec(v));
    } else if (key == "gasPrice") {
      EXPECT_EQ(Dec(tx.gas_price), JsonDec(v));
    } else if (key == "input") {
      EXPECT_EQ(tx.input, JsonHex(v));
    } else if (key == "type") {
      EXPECT_EQ(DecInt(tx.transaction_type), JsonDec(v));
    } else if (key == "maxFeePerGas") {
      EXPECT_EQ(Dec(tx.max_fee_per_gas), JsonDec(v));
    } else if (key == "maxPriorityFeePerGas") {
      EXPECT_EQ(Dec(tx.max_priority_fee_per_gas), JsonDec(v));
    } else if (key == "maxFeePerBlobGas") {
      EXPECT_EQ(Dec(tx.max_fee_per_blob_gas), JsonDec(v));
    } else if (key == "blobVersionedHashes") {
      EXPECT_EQ(tx.blob_versioned_hashes, JsonHexList(v));
    } else if (key == "accessList") {
      ASSERT_TRUE(tx.access_list_json.has_value());
      EXPECT_EQ(*tx.access_list_json, simdjson::minify(v));
    } else if (key == "authorizationList") {
      ASSERT_TRUE(tx.authorization_list_json.has_value());
      EXPECT_EQ(*tx.authorization_list_json, simdjson::minify(v));
    } else if (key == "chainId") {
      EXPECT_EQ(DecInt(tx.chain_id), JsonDec(v));
    } else if (key == "v") {
      EXPECT_EQ(Str(tx.v), JsonHex(v));
    } else if (key == "r") {
      EXPECT_EQ(Str(tx.r), JsonHex(v));
    } else if (key == "s") {
      EXPECT_EQ(Str(tx.s), JsonHex(v));
    } else if (key == "yParity") {
      EXPECT_EQ(DecInt(tx.y_parity), JsonDec(v));
    } else if (key == "blockTimestamp") {
      if (block != nullptr) {
        EXPECT_EQ(std::to_string(block->timestamp), JsonDec(v));
      }
    } else if (key == "publicKey" || key == "raw" || key == "standardV" || key == "condition" ||
               key == "creates") {
      // Parity extras, not in the model.
    } else {
      ADD_FAILURE() << "unchecked transaction field " << key;
    }
  }
  EXPECT_EQ(tx.gas_price.has_value(), keys.count("gasPrice") == 1);
  EXPECT_EQ(tx.transaction_type.has_value(), keys.count("type") == 1);
  EXPECT_EQ(tx.max_fee_per_gas.has_value(), keys.count("maxFeePerGas") == 1);
  EXPECT_EQ(tx.max_priority_fee_per_gas.has_value(), keys.count("maxPriorityFeePerGas") == 1);
  EXPECT_EQ(tx.max_fee_per_blob_gas.has_value(), keys.count("maxFeePerBlobGas") == 1);
  EXPECT_EQ(tx.access_list_json.has_value(), keys.count("accessList") == 1);
  EXPECT_EQ(tx.authorization_list_json.has_value(), keys.count("authorizationList") == 1);
  EXPECT_EQ(tx.y_parity.has_value(), keys.count("yParity") == 1);
}

void ExpectLogMatchesJson(const Log& log, dom::object json) {
  for (dom::key_value_pair kv : json) {
    std::string key(kv.key);
    dom::element v = kv.value;
    SCOPED_TRACE("log " + std::to_string(log.log_index) + " field " + key);
    if (key == "address") {
      EXPECT_EQ(log.address, JsonHex(v));
    } else if (key == "topics") {
      EXPECT_EQ(log.topics, JsonHexList(v));
    } else if (key == "data") {
      EXPECT_EQ(log.data, JsonHex(v));
    } else if (key == "logIndex") {
      EXPECT_EQ(std::to_string(log.log_index), JsonDec(v));
    } else if (key == "transactionHash") {
      EXPECT_EQ(log.transaction_hash, JsonHex(v));
    } else if (key == "transactionIndex") {
      EXPECT_EQ(std::to_string(log.transaction_index), JsonDec(v));
    } else if (key == "blockHash") {
      EXPECT_EQ(log.block_hash, JsonHex(v));
    } else if (key == "blockNumber") {
      EXPECT_EQ(std::to_string(log.block_number), JsonDec(v));
    } else if (key == "removed") {
      EXPECT_EQ(log.removed, bool(v));
    } else if (key == "blockTimestamp" || key == "transactionLogIndex" || key == "type") {
      // Ignored (MANIFEST §2.4): the block's timestamp, Parity's per-tx index and "mined".
    } else {
      ADD_FAILURE() << "unchecked log field " << key;
    }
  }
}

void ExpectReceiptMatchesJson(const Transaction& tx, const std::vector<Log>& tx_logs,
                              dom::object json) {
  std::set<std::string> keys;
  for (dom::key_value_pair kv : json) {
    std::string key(kv.key);
    keys.insert(key);
    dom::element v = kv.value;
    SCOPED_TRACE("receipt " + tx.hash + " field " + key);
    if (key == "transactionHash") {
      EXPECT_EQ(tx.hash, JsonHex(v));
    } else if (key == "transactionIndex") {
      EXPECT_EQ(std::to_string(tx.transaction_index), JsonDec(v));
    } else if (key == "blockHash") {
      EXPECT_EQ(tx.block_hash, JsonHex(v));
    } else if (key == "blockNumber") {
      EXPECT_EQ(std::to_string(tx.block_number), JsonDec(v));
    } else if (key == "cumulativeGasUsed") {
      EXPECT_EQ(std::to_string(tx.cumulative_gas_used), JsonDec(v));
    } else if (key == "gasUsed") {
      EXPECT_EQ(std::to_string(tx.gas_used), JsonDec(v));
    } else if (key == "contractAddress") {
      EXPECT_EQ(Str(tx.contract_address), JsonHex(v));
      EXPECT_EQ(tx.contract_address.has_value(), !v.is_null());
    } else if (key == "logs") {
      dom::array logs = v;
      EXPECT_EQ(tx.log_count, logs.size());
      ASSERT_EQ(tx_logs.size(), logs.size());
      size_t i = 0;
      for (dom::object log : logs) ExpectLogMatchesJson(tx_logs[i++], log);
    } else if (key == "logsBloom") {
      EXPECT_EQ(tx.receipt_logs_bloom, JsonHex(v));
    } else if (key == "root") {
      EXPECT_EQ(Str(tx.root), JsonHex(v));
    } else if (key == "status") {
      EXPECT_EQ(DecInt(tx.status), JsonDec(v));
    } else if (key == "effectiveGasPrice") {
      EXPECT_EQ(Dec(tx.effective_gas_price), JsonDec(v));
    } else if (key == "blobGasUsed") {
      EXPECT_EQ(DecInt(tx.blob_gas_used), JsonDec(v));
    } else if (key == "blobGasPrice") {
      EXPECT_EQ(Dec(tx.blob_gas_price), JsonDec(v));
    } else if (key == "from") {  // geth echoes the transaction's from / to / type
      EXPECT_EQ(tx.from_address, JsonHex(v));
    } else if (key == "to") {
      EXPECT_EQ(Str(tx.to_address), JsonHex(v));
    } else if (key == "type") {
      EXPECT_EQ(DecInt(tx.transaction_type), JsonDec(v));
    } else {
      ADD_FAILURE() << "unchecked receipt field " << key;
    }
  }
  EXPECT_EQ(tx.root.has_value(), keys.count("root") == 1 && !json["root"].is_null());
  EXPECT_EQ(tx.status.has_value(), keys.count("status") == 1 && !json["status"].is_null());
  EXPECT_EQ(tx.effective_gas_price.has_value(), keys.count("effectiveGasPrice") == 1);
  EXPECT_EQ(tx.blob_gas_used.has_value(), keys.count("blobGasUsed") == 1);
  EXPECT_EQ(tx.blob_gas_price.has_value(), keys.count("blobGasPrice") == 1);
}

void ExpectBlockDataMatchesJson(const BlockData& data, dom::object block_json,
                                dom::array receipts_json) {
  ExpectBlockMatchesJson(data.block, block_json);
  dom::array txs = block_json["transactions"];
  ASSERT_EQ(data.transactions.size(), txs.size());
  size_t i = 0;
  for (dom::object tx : txs) {
    ExpectTransactionMatchesJson(data.transactions[i], tx, &data.block);
    ++i;
  }
  ASSERT_EQ(data.transactions.size(), receipts_json.size());
  size_t first_log = 0;
  i = 0;
  for (dom::object receipt : receipts_json) {
    const Transaction& tx = data.transactions[i++];
    ASSERT_LE(first_log + tx.log_count, data.logs.size());
    std::vector<Log> tx_logs(data.logs.begin() + static_cast<ptrdiff_t>(first_log),
                             data.logs.begin() + static_cast<ptrdiff_t>(first_log + tx.log_count));
    ExpectReceiptMatchesJson(tx, tx_logs, receipt);
    first_log += tx.log_count;
  }
  EXPECT_EQ(first_log, data.logs.size());
}

}  // namespace gapless::testing
