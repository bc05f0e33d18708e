#include "store/copy_rows.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string_view>

namespace gapless {
namespace {

constexpr std::array<DataTableInfo, 7> kInfos = {{
    {"blocks",
     "number, hash, parent_hash, nonce, sha3_uncles, logs_bloom, transactions_root, state_root, "
     "receipts_root, miner, mix_hash, difficulty, total_difficulty, size, extra_data, gas_limit, "
     "gas_used, timestamp, transaction_count, base_fee_per_gas, withdrawals_root, blob_gas_used, "
     "excess_blob_gas, parent_beacon_block_root, requests_hash",
     "number", "number"},
    {"withdrawals", "block_number, withdrawal_index, validator_index, address, amount_gwei",
     "block_number", "block_number, withdrawal_index"},
    {"transactions",
     "block_number, transaction_index, hash, block_hash, nonce, from_address, to_address, value, "
     "gas, gas_price, input, transaction_type, max_fee_per_gas, max_priority_fee_per_gas, "
     "max_fee_per_blob_gas, blob_versioned_hashes, access_list, authorization_list, chain_id, v, "
     "r, s, y_parity, cumulative_gas_used, gas_used, contract_address, root, status, "
     "effective_gas_price, logs_bloom, blob_gas_used, blob_gas_price, log_count",
     "block_number", "block_number, transaction_index"},
    {"logs",
     "block_number, log_index, transaction_index, transaction_hash, block_hash, address, data, "
     "topic0, topic1, topic2, topic3, removed",
     "block_number", "block_number, log_index"},
    {"token_transfers",
     "block_number, log_index, batch_index, transaction_hash, token_address, from_address, "
     "to_address, operator_address, token_id, value, token_standard",
     "block_number", "block_number, log_index, batch_index"},
    {"traces",
     "block_number, trace_index, transaction_hash, transaction_index, from_address, to_address, "
     "value, input, output, trace_type, call_type, reward_type, gas, gas_used, subtraces, "
     "trace_address, error, status, trace_id",
     "block_number", "block_number, trace_index"},
    {"contracts",
     "block_number, contract_index, transaction_hash, transaction_index, trace_address, address, "
     "creator_address, creation_type, bytecode, function_sighashes, is_erc20, is_erc721",
     "block_number", "block_number, contract_index"},
}};

struct HexTable {
  std::array<bool, 256> is_hex{};
  constexpr HexTable() {
    for (int c = '0'; c <= '9'; ++c) is_hex[c] = true;
    for (int c = 'a'; c <= 'f'; ++c) is_hex[c] = true;
    for (int c = 'A'; c <= 'F'; ++c) is_hex[c] = true;
  }
};
constexpr HexTable kHex;

bool AllHex(std::string_view digits) {
  // Branch-light: OR the verdicts, test once.
  bool ok = true;
  for (unsigned char c : digits) ok &= kHex.is_hex[c];
  return ok;
}

// Builds one COPY text row. Each value is followed by a tab; EndRow turns the last tab into the
// row's newline. The first invalid value is remembered (field + reason) and later values are
// still appended (cheaper than branching everywhere); the caller discards the buffer.
class RowBuilder {
 public:
  explicit RowBuilder(std::string* out) : out_(*out) {}

  bool failed() const { return bad_field_ != nullptr; }
  Status Error(const std::string& row) const {
    return InvalidData(row + ": field " + bad_field_ + ": " + bad_reason_);
  }

  void Null() { out_.append("\\N\t", 3); }

  void U64(uint64_t v, const char* field) {
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      Fail(field, "value " + std::to_string(v) + " does not fit BIGINT (above 2^63-1)");
    }
    AppendUnsigned(v);
    out_.push_back('\t');
  }
  void U32(uint32_t v) {
    AppendUnsigned(v);
    out_.push_back('\t');
  }
  template <typename T>
  void OptU64(const std::optional<T>& v, const char* field) {
    if (v.has_value()) {
      U64(static_cast<uint64_t>(*v), field);
    } else {
      Null();
    }
  }

  void Dec(const U256& v) {
    if (v.fits_u64()) {
      AppendUnsigned(v.low64());
    } else {
      out_ += v.ToDecimal();
    }
    out_.push_back('\t');
  }
  void OptDec(const std::optional<U256>& v) {
    if (v.has_value()) {
      Dec(*v);
    } else {
      Null();
    }
  }

  void Bool(bool v) { out_.append(v ? "t\t" : "f\t", 2); }

  // Hex data ("0x" + an even number of hex digits) as bytea hex input.
  void Hex(std::string_view v, const char* field) {
    std::string_view digits = Digits(v, field);
    if (digits.size() % 2 != 0) Fail(field, "odd number of hex digits in " + Excerpt(v));
    out_.append("\\\\x", 3);
    out_.append(digits);
    out_.push_back('\t');
  }
  void OptHex(const std::optional<std::string>& v, const char* field) {
    if (v.has_value()) {
      Hex(*v, field);
    } else {
      Null();
    }
  }

  // A hex quantity ("0x1b", "0x0"): stored as bytea, left-padded to an even digit count.
  void OptQuantity(const std::optional<std::string>& v, const char* field) {
    if (!v.has_value()) {
      Null();
      return;
    }
    std::string_view digits = Digits(*v, field);
    if (digits.empty()) Fail(field, "empty quantity");
    out_.append("\\\\x", 3);
    if (digits.size() % 2 != 0) out_.push_back('0');
    out_.append(digits);
    out_.push_back('\t');
  }

  // A list of 32-byte hashes as a bytea[] literal; NULL when empty.
  void HexArray(const std::vector<std::string>& values, const char* field) {
    if (values.empty()) {
      Null();
      return;
    }
    out_.push_back('{');
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out_.push_back(',');
      std::string_view digits = Digits(values[i], field);
      if (digits.size() % 2 != 0) Fail(field, "odd number of hex digits in " + Excerpt(values[i]));
      // Array element "\x.." needs its backslash escaped for the array parser, and both again
      // for COPY.
      out_.append("\\\\\\\\x", 5);
      out_.append(digits);
    }
    out_.append("}\t", 2);
  }

  // Free text (JSON), escaped for COPY.
  void OptText(const std::optional<std::string>& v, const char* field) {
    if (!v.has_value()) {
      Null();
      return;
    }
    for (char c : *v) {
      switch (c) {
        case '\\':
          out_.append("\\\\", 2);
          break;
        case '\t':
          out_.append("\\t", 2);
          break;
        case '\n':
          out_.append("\\n", 2);
          break;
        case '\r':
          out_.append("\\r", 2);
          break;
        case '\0':
          Fail(field, "contains a NUL byte");
          break;
        default:
          out_.push_back(c);
      }
    }
    out_.push_back('\t');
  }

  // An integer[] literal ("{}", "{0,2}").
  void U32Array(const std::vector<uint32_t>& values) {
    out_.push_back('{');
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out_.push_back(',');
      AppendUnsigned(values[i]);
    }
    out_.append("}\t", 2);
  }

  // A text[] literal of 0x-hex words ("{}", "{0x06fdde03,0x095ea7b3}"): no element needs quoting.
  void HexWordArray(const std::vector<std::string>& values, const char* field) {
    out_.push_back('{');
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out_.push_back(',');
      Digits(values[i], field);  // checks 0x + hex digits
      out_.append(values[i]);
    }
    out_.append("}\t", 2);
  }

  void EndRow() { out_.back() = '\n'; }

 private:
  void Fail(const char* field, std::string reason) {
    if (bad_field_ != nullptr) return;
    bad_field_ = field;
    bad_reason_ = std::move(reason);
  }

  static std::string Excerpt(std::string_view v) {
    std::string out = "\"";
    for (char c : v.substr(0, 20)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
    if (v.size() > 20) out += "...";
    out += "\"";
    return out;
  }

  std::string_view Digits(std::string_view v, const char* field) {
    if (v.size() < 2 || v[0] != '0' || (v[1] != 'x' && v[1] != 'X')) {
      Fail(field, "expected 0x-prefixed hex, got " + Excerpt(v));
      return {};
    }
    std::string_view digits = v.substr(2);
    if (!AllHex(digits)) {
      Fail(field, "non-hex character in " + Excerpt(v));
      return {};
    }
    return digits;
  }

  void AppendUnsigned(uint64_t v) {
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, static_cast<size_t>(res.ptr - buf));
  }

  std::string& out_;
  const char* bad_field_ = nullptr;
  std::string bad_reason_;
};

std::string BlockRow(uint64_t number) { return "block " + std::to_string(number); }

Status AppendBlock(const Block& b, std::string* out) {
  RowBuilder r(out);
  r.U64(b.number, "number");
  r.Hex(b.hash, "hash");
  r.Hex(b.parent_hash, "parent_hash");
  r.Hex(b.nonce, "nonce");
  r.Hex(b.sha3_uncles, "sha3_uncles");
  r.Hex(b.logs_bloom, "logs_bloom");
  r.Hex(b.transactions_root, "transactions_root");
  r.Hex(b.state_root, "state_root");
  r.Hex(b.receipts_root, "receipts_root");
  r.Hex(b.miner, "miner");
  r.OptHex(b.mix_hash, "mix_hash");
  r.Dec(b.difficulty);
  r.OptDec(b.total_difficulty);
  r.U64(b.size, "size");
  r.Hex(b.extra_data, "extra_data");
  r.U64(b.gas_limit, "gas_limit");
  r.U64(b.gas_used, "gas_used");
  r.U64(b.timestamp, "timestamp");
  r.U64(b.transaction_count, "transaction_count");
  r.OptDec(b.base_fee_per_gas);
  r.OptHex(b.withdrawals_root, "withdrawals_root");
  r.OptU64(b.blob_gas_used, "blob_gas_used");
  r.OptU64(b.excess_blob_gas, "excess_blob_gas");
  r.OptHex(b.parent_beacon_block_root, "parent_beacon_block_root");
  r.OptHex(b.requests_hash, "requests_hash");
  r.EndRow();
  if (r.failed()) return r.Error(BlockRow(b.number));
  return Status::Ok();
}

Status AppendWithdrawals(const Block& b, std::string* out) {
  RowBuilder r(out);
  for (const Withdrawal& w : b.withdrawals) {
    r.U64(b.number, "block_number");
    r.U64(w.index, "index");
    r.U64(w.validator_index, "validator_index");
    r.Hex(w.address, "address");
    r.U64(w.amount_gwei, "amount");
    r.EndRow();
    if (r.failed()) return r.Error(BlockRow(b.number) + " withdrawal " + std::to_string(w.index));
  }
  return Status::Ok();
}

Status AppendTransactions(const BlockData& data, std::string* out) {
  RowBuilder r(out);
  for (const Transaction& t : data.transactions) {
    r.U64(t.block_number, "block_number");
    r.U32(t.transaction_index);
    r.Hex(t.hash, "hash");
    r.Hex(t.block_hash, "block_hash");
    r.U64(t.nonce, "nonce");
    r.Hex(t.from_address, "from");
    r.OptHex(t.to_address, "to");
    r.Dec(t.value);
    r.U64(t.gas, "gas");
    r.OptDec(t.gas_price);
    r.Hex(t.input, "input");
    r.OptU64(t.transaction_type, "type");
    r.OptDec(t.max_fee_per_gas);
    r.OptDec(t.max_priority_fee_per_gas);
    r.OptDec(t.max_fee_per_blob_gas);
    r.HexArray(t.blob_versioned_hashes, "blobVersionedHashes");
    r.OptText(t.access_list_json, "accessList");
    r.OptText(t.authorization_list_json, "authorizationList");
    r.OptU64(t.chain_id, "chainId");
    r.OptQuantity(t.v, "v");
    r.OptQuantity(t.r, "r");
    r.OptQuantity(t.s, "s");
    r.OptU64(t.y_parity, "yParity");
    r.U64(t.cumulative_gas_used, "cumulativeGasUsed");
    r.U64(t.gas_used, "gasUsed");
    r.OptHex(t.contract_address, "contractAddress");
    r.OptHex(t.root, "root");
    r.OptU64(t.status, "status");
    r.OptDec(t.effective_gas_price);
    r.Hex(t.receipt_logs_bloom, "logsBloom");
    r.OptU64(t.blob_gas_used, "blobGasUsed");
    r.OptDec(t.blob_gas_price);
    r.U32(t.log_count);
    r.EndRow();
    if (r.failed()) {
      return r.Error(BlockRow(t.block_number) + " transaction " +
                     std::to_string(t.transaction_index) + " (" + t.hash + ")");
    }
  }
  return Status::Ok();
}

Status AppendLogs(const BlockData& data, std::string* out) {
  RowBuilder r(out);
  for (const Log& l : data.logs) {
    r.U64(l.block_number, "block_number");
    r.U32(l.log_index);
    r.U32(l.transaction_index);
    r.Hex(l.transaction_hash, "transactionHash");
    r.Hex(l.block_hash, "blockHash");
    r.Hex(l.address, "address");
    r.Hex(l.data, "data");
    if (l.topics.size() > 4) {
      return InvalidData(BlockRow(l.block_number) + " log " + std::to_string(l.log_index) +
                         ": field topics: " + std::to_string(l.topics.size()) +
                         " topics (at most 4)");
    }
    for (size_t i = 0; i < 4; ++i) {
      if (i < l.topics.size()) {
        r.Hex(l.topics[i], "topics");
      } else {
        r.Null();
      }
    }
    r.Bool(l.removed);
    r.EndRow();
    if (r.failed())
      return r.Error(BlockRow(l.block_number) + " log " + std::to_string(l.log_index));
  }
  return Status::Ok();
}

Status AppendTokenTransfers(const BlockData& data, std::string* out) {
  RowBuilder r(out);
  for (const TokenTransfer& t : data.token_transfers) {
    r.U64(t.block_number, "block_number");
    r.U32(t.log_index);
    r.U32(t.batch_index);
    r.Hex(t.transaction_hash, "transaction_hash");
    r.Hex(t.token_address, "token_address");
    r.Hex(t.from_address, "from_address");
    r.Hex(t.to_address, "to_address");
    r.OptHex(t.operator_address, "operator");
    r.OptDec(t.token_id);
    r.Dec(t.value);
    r.U32(static_cast<uint32_t>(t.standard));
    r.EndRow();
    if (r.failed()) {
      return r.Error(BlockRow(t.block_number) + " token transfer at log " +
                     std::to_string(t.log_index) + "." + std::to_string(t.batch_index));
    }
  }
  return Status::Ok();
}

Status AppendTraces(const BlockData& data, std::string* out) {
  RowBuilder r(out);
  uint32_t index = 0;
  for (const Trace& t : data.traces) {
    r.U64(t.block_number, "block_number");
    r.U32(index);
    r.OptHex(t.transaction_hash, "transaction_hash");
    r.OptU64(t.transaction_index, "transaction_index");
    r.OptHex(t.from_address, "from_address");
    r.OptHex(t.to_address, "to_address");
    r.OptDec(t.value);
    r.OptHex(t.input, "input");
    r.OptHex(t.output, "output");
    r.OptText(t.trace_type, "trace_type");
    r.OptText(t.call_type, "call_type");
    r.OptText(t.reward_type, "reward_type");
    r.OptU64(t.gas, "gas");
    r.OptU64(t.gas_used, "gas_used");
    r.U32(t.subtraces);
    r.U32Array(t.trace_address);
    r.OptText(t.error, "error");
    r.OptU64(t.status, "status");
    r.OptText(t.trace_id, "trace_id");
    r.EndRow();
    if (r.failed()) {
      return r.Error(BlockRow(t.block_number) + " trace " + std::to_string(index) +
                     (t.trace_id.has_value() ? " (" + *t.trace_id + ")" : ""));
    }
    ++index;
  }
  return Status::Ok();
}

Status AppendContracts(const BlockData& data, std::string* out) {
  RowBuilder r(out);
  uint32_t index = 0;
  for (const Contract& c : data.contracts) {
    r.U64(c.block_number, "block_number");
    r.U32(index);
    r.Hex(c.transaction_hash, "transaction_hash");
    r.U32(c.transaction_index);
    r.U32Array(c.trace_address);
    r.Hex(c.address, "address");
    r.Hex(c.creator_address, "creator_address");
    r.OptText(c.creation_type, "creation_type");
    r.OptHex(c.bytecode, "bytecode");
    r.HexWordArray(c.function_sighashes, "function_sighashes");
    r.Bool(c.is_erc20);
    r.Bool(c.is_erc721);
    r.EndRow();
    if (r.failed()) {
      return r.Error(BlockRow(c.block_number) + " contract " + c.address + " created by " +
                     c.transaction_hash);
    }
    ++index;
  }
  return Status::Ok();
}

}  // namespace

const DataTableInfo& TableInfo(DataTable table) { return kInfos[static_cast<size_t>(table)]; }

Status AppendCopyRows(DataTable table, const BlockData& data, std::string* out) {
  switch (table) {
    case DataTable::kBlocks:
      return AppendBlock(data.block, out);
    case DataTable::kWithdrawals:
      return AppendWithdrawals(data.block, out);
    case DataTable::kTransactions:
      return AppendTransactions(data, out);
    case DataTable::kLogs:
      return AppendLogs(data, out);
    case DataTable::kTokenTransfers:
      return AppendTokenTransfers(data, out);
    case DataTable::kTraces:
      return AppendTraces(data, out);
    case DataTable::kContracts:
      return AppendContracts(data, out);
  }
  return Internal("unknown table");
}

size_t RowCount(DataTable table, const BlockData& data) {
  switch (table) {
    case DataTable::kBlocks:
      return 1;
    case DataTable::kWithdrawals:
      return data.block.withdrawals.size();
    case DataTable::kTransactions:
      return data.transactions.size();
    case DataTable::kLogs:
      return data.logs.size();
    case DataTable::kTokenTransfers:
      return data.token_transfers.size();
    case DataTable::kTraces:
      return data.traces.size();
    case DataTable::kContracts:
      return data.contracts.size();
  }
  return 0;
}

}  // namespace gapless
