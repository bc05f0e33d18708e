// copy_rows: the data tables' column lists and each table's rows from a block (which value goes
// into which column, in order), and the COPY statements and streams around them (copy_rows.h).
// How a value is written in each format is row_builders.h's.
#include "store/copy_rows.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "store/row_builders.h"

namespace gapless {
namespace {

using store_detail::BinaryRow;
using store_detail::TextRow;

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

std::string BlockRow(uint64_t number) { return "block " + std::to_string(number); }

template <typename Row>
Status AppendBlock(const Block& b, std::string* out) {
  Row r(out);
  r.BeginRow();
  r.Int8(b.number, "number");
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
  r.Int8(b.size, "size");
  r.Hex(b.extra_data, "extra_data");
  r.Int8(b.gas_limit, "gas_limit");
  r.Int8(b.gas_used, "gas_used");
  r.Int8(b.timestamp, "timestamp");
  r.Int4(b.transaction_count, "transaction_count");
  r.OptDec(b.base_fee_per_gas);
  r.OptHex(b.withdrawals_root, "withdrawals_root");
  r.OptInt8(b.blob_gas_used, "blob_gas_used");
  r.OptInt8(b.excess_blob_gas, "excess_blob_gas");
  r.OptHex(b.parent_beacon_block_root, "parent_beacon_block_root");
  r.OptHex(b.requests_hash, "requests_hash");
  r.EndRow();
  if (r.failed()) return r.Error(BlockRow(b.number));
  return Status::Ok();
}

template <typename Row>
Status AppendWithdrawals(const Block& b, std::string* out) {
  Row r(out);
  for (const Withdrawal& w : b.withdrawals) {
    r.BeginRow();
    r.Int8(b.number, "block_number");
    r.Int8(w.index, "index");
    r.Int8(w.validator_index, "validator_index");
    r.Hex(w.address, "address");
    r.Int8(w.amount_gwei, "amount");
    r.EndRow();
    if (r.failed()) return r.Error(BlockRow(b.number) + " withdrawal " + std::to_string(w.index));
  }
  return Status::Ok();
}

template <typename Row>
Status AppendTransactions(const BlockData& data, std::string* out) {
  Row r(out);
  for (const Transaction& t : data.transactions) {
    r.BeginRow();
    r.Int8(t.block_number, "block_number");
    r.Int4(t.transaction_index, "transaction_index");
    r.Hex(t.hash, "hash");
    r.Hex(t.block_hash, "block_hash");
    r.Int8(t.nonce, "nonce");
    r.Hex(t.from_address, "from");
    r.OptHex(t.to_address, "to");
    r.Dec(t.value);
    r.Int8(t.gas, "gas");
    r.OptDec(t.gas_price);
    r.Hex(t.input, "input");
    r.OptInt2(t.transaction_type, "type");
    r.OptDec(t.max_fee_per_gas);
    r.OptDec(t.max_priority_fee_per_gas);
    r.OptDec(t.max_fee_per_blob_gas);
    r.HexArray(t.blob_versioned_hashes, "blobVersionedHashes");
    r.OptText(t.access_list_json, "accessList");
    r.OptText(t.authorization_list_json, "authorizationList");
    r.OptInt8(t.chain_id, "chainId");
    r.OptQuantity(t.v, "v");
    r.OptQuantity(t.r, "r");
    r.OptQuantity(t.s, "s");
    r.OptInt2(t.y_parity, "yParity");
    r.Int8(t.cumulative_gas_used, "cumulativeGasUsed");
    r.Int8(t.gas_used, "gasUsed");
    r.OptHex(t.contract_address, "contractAddress");
    r.OptHex(t.root, "root");
    r.OptInt2(t.status, "status");
    r.OptDec(t.effective_gas_price);
    r.Hex(t.receipt_logs_bloom, "logsBloom");
    r.OptInt8(t.blob_gas_used, "blobGasUsed");
    r.OptDec(t.blob_gas_price);
    r.Int4(t.log_count, "log_count");
    r.EndRow();
    if (r.failed()) {
      return r.Error(BlockRow(t.block_number) + " transaction " +
                     std::to_string(t.transaction_index) + " (" + t.hash + ")");
    }
  }
  return Status::Ok();
}

template <typename Row>
Status AppendLogs(const BlockData& data, std::string* out) {
  Row r(out);
  for (const Log& l : data.logs) {
    r.BeginRow();
    r.Int8(l.block_number, "block_number");
    r.Int4(l.log_index, "logIndex");
    r.Int4(l.transaction_index, "transactionIndex");
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

template <typename Row>
Status AppendTokenTransfers(const BlockData& data, std::string* out) {
  Row r(out);
  for (const TokenTransfer& t : data.token_transfers) {
    r.BeginRow();
    r.Int8(t.block_number, "block_number");
    r.Int4(t.log_index, "log_index");
    r.Int4(t.batch_index, "batch_index");
    r.Hex(t.transaction_hash, "transaction_hash");
    r.Hex(t.token_address, "token_address");
    r.Hex(t.from_address, "from_address");
    r.Hex(t.to_address, "to_address");
    r.OptHex(t.operator_address, "operator");
    r.OptDec(t.token_id);
    r.Dec(t.value);
    r.Int2(static_cast<uint64_t>(t.standard), "token_standard");
    r.EndRow();
    if (r.failed()) {
      return r.Error(BlockRow(t.block_number) + " token transfer at log " +
                     std::to_string(t.log_index) + "." + std::to_string(t.batch_index));
    }
  }
  return Status::Ok();
}

template <typename Row>
Status AppendTraces(const BlockData& data, std::string* out) {
  Row r(out);
  uint32_t index = 0;
  for (const Trace& t : data.traces) {
    r.BeginRow();
    r.Int8(t.block_number, "block_number");
    r.Int4(index, "trace_index");
    r.OptHex(t.transaction_hash, "transaction_hash");
    r.OptInt4(t.transaction_index, "transaction_index");
    r.OptHex(t.from_address, "from_address");
    r.OptHex(t.to_address, "to_address");
    r.OptDec(t.value);
    r.OptHex(t.input, "input");
    r.OptHex(t.output, "output");
    r.OptText(t.trace_type, "trace_type");
    r.OptText(t.call_type, "call_type");
    r.OptText(t.reward_type, "reward_type");
    r.OptInt8(t.gas, "gas");
    r.OptInt8(t.gas_used, "gas_used");
    r.Int4(t.subtraces, "subtraces");
    r.Int4Array(t.trace_address, "trace_address");
    r.OptText(t.error, "error");
    r.OptInt2(t.status, "status");
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

template <typename Row>
Status AppendContracts(const BlockData& data, std::string* out) {
  Row r(out);
  uint32_t index = 0;
  for (const Contract& c : data.contracts) {
    r.BeginRow();
    r.Int8(c.block_number, "block_number");
    r.Int4(index, "contract_index");
    r.Hex(c.transaction_hash, "transaction_hash");
    r.Int4(c.transaction_index, "transaction_index");
    r.Int4Array(c.trace_address, "trace_address");
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

namespace {

template <typename Row>
Status AppendRows(DataTable table, const BlockData& data, std::string* out) {
  switch (table) {
    case DataTable::kBlocks:
      return AppendBlock<Row>(data.block, out);
    case DataTable::kWithdrawals:
      return AppendWithdrawals<Row>(data.block, out);
    case DataTable::kTransactions:
      return AppendTransactions<Row>(data, out);
    case DataTable::kLogs:
      return AppendLogs<Row>(data, out);
    case DataTable::kTokenTransfers:
      return AppendTokenTransfers<Row>(data, out);
    case DataTable::kTraces:
      return AppendTraces<Row>(data, out);
    case DataTable::kContracts:
      return AppendContracts<Row>(data, out);
  }
  return Internal("unknown table");
}

}  // namespace

const char* CopyFormatName(CopyFormat format) {
  return format == CopyFormat::kBinary ? "binary" : "text";
}

std::optional<CopyFormat> ParseCopyFormat(std::string_view name) {
  if (name == "binary") return CopyFormat::kBinary;
  if (name == "text") return CopyFormat::kText;
  return std::nullopt;
}

std::string CopyStatement(DataTable table, const std::string& target, CopyFormat format) {
  return "COPY " + target + " (" + TableInfo(table).columns + ") FROM STDIN" +
         (format == CopyFormat::kBinary ? " (FORMAT binary)" : "");
}

void AppendCopyHeader(CopyFormat format, std::string* out) {
  if (format != CopyFormat::kBinary) return;
  // The signature, then 32-bit flags (no OIDs) and the header extension's length, both 0.
  static constexpr char kHeader[] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";
  out->append(kHeader, sizeof kHeader - 1);
}

void AppendCopyTrailer(CopyFormat format, std::string* out) {
  if (format == CopyFormat::kBinary) out->append("\377\377", 2);  // a field count of -1
}

Status AppendCopyRows(DataTable table, const BlockData& data, CopyFormat format, std::string* out) {
  return format == CopyFormat::kBinary ? AppendRows<BinaryRow>(table, data, out)
                                       : AppendRows<TextRow>(table, data, out);
}

Status CopyBlocks(PgConn& conn, DataTable table, const std::string& target,
                  const std::vector<BlockData>& blocks, CopyFormat format, size_t chunk_bytes,
                  std::string* buffer) {
  size_t rows = 0;
  for (const BlockData& d : blocks) rows += RowCount(table, d);
  if (rows == 0) return Status::Ok();
  CopyWriter copy(conn, buffer, chunk_bytes);
  GAPLESS_RETURN_IF_ERROR(copy.Begin(CopyStatement(table, target, format)));
  AppendCopyHeader(format, copy.buffer());
  for (const BlockData& d : blocks) {
    GAPLESS_RETURN_IF_ERROR(AppendCopyRows(table, d, format, copy.buffer()));
    GAPLESS_RETURN_IF_ERROR(copy.MaybeFlush());
  }
  AppendCopyTrailer(format, copy.buffer());
  return copy.Finish();
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
