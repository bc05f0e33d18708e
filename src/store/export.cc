#include "store/export.h"

#include <algorithm>

namespace gapless {
namespace {

std::string H(const char* column) { return std::string("'0x' || encode(") + column + ", 'hex')"; }

struct ExportQuery {
  const char* header;
  std::string sql;  // $1 = from, $2 = to (and $3 = token standards for token_transfers)
};

ExportQuery QueryFor(ExportTable table) {
  switch (table) {
    case ExportTable::kBlocks:
      return {
          "number,hash,parent_hash,nonce,sha3_uncles,logs_bloom,transactions_root,state_root,"
          "receipts_root,miner,difficulty,total_difficulty,size,extra_data,gas_limit,gas_used,"
          "timestamp,transaction_count,base_fee_per_gas,withdrawals_root,withdrawals",
          "SELECT b.number, " + H("b.hash") + ", " + H("b.parent_hash") + ", " + H("b.nonce") +
              ", " + H("b.sha3_uncles") + ", " + H("b.logs_bloom") + ", " +
              H("b.transactions_root") + ", " + H("b.state_root") + ", " + H("b.receipts_root") +
              ", " + H("b.miner") + ", b.difficulty, b.total_difficulty, b.size, " +
              H("b.extra_data") +
              ", b.gas_limit, b.gas_used, b.timestamp, b.transaction_count,"
              " b.base_fee_per_gas, " +
              H("b.withdrawals_root") +
              ", (SELECT string_agg('{\"index\":' || w.withdrawal_index ||"
              " ',\"validator_index\":' || w.validator_index ||"
              " ',\"address\":\"0x' || encode(w.address, 'hex') ||"
              " '\",\"amount\":' || w.amount_gwei || '}', ',' ORDER BY w.withdrawal_index)"
              "  FROM withdrawals w WHERE w.block_number = b.number)"
              " FROM blocks b WHERE b.number BETWEEN $1 AND $2 ORDER BY b.number"};
    case ExportTable::kTransactions:
      return {
          "hash,nonce,block_hash,block_number,transaction_index,from_address,to_address,value,"
          "gas,gas_price,input,block_timestamp,max_fee_per_gas,max_priority_fee_per_gas,"
          "transaction_type",
          "SELECT " + H("t.hash") + ", t.nonce, " + H("t.block_hash") +
              ", t.block_number, t.transaction_index, " + H("t.from_address") + ", " +
              H("t.to_address") + ", t.value, t.gas, t.gas_price, " + H("t.input") +
              ", b.timestamp, t.max_fee_per_gas, t.max_priority_fee_per_gas,"
              " t.transaction_type"
              " FROM transactions t LEFT JOIN blocks b ON b.number = t.block_number"
              " WHERE t.block_number BETWEEN $1 AND $2"
              " ORDER BY t.block_number, t.transaction_index"};
    case ExportTable::kReceipts:
      return {
          "transaction_hash,transaction_index,block_hash,block_number,cumulative_gas_used,"
          "gas_used,contract_address,root,status,effective_gas_price,l1_fee,l1_gas_used,"
          "l1_gas_price,l1_fee_scalar",
          "SELECT " + H("hash") + ", transaction_index, " + H("block_hash") +
              ", block_number, cumulative_gas_used, gas_used, " + H("contract_address") + ", " +
              H("root") +
              ", status, effective_gas_price, NULL, NULL, NULL, NULL FROM transactions"
              " WHERE block_number BETWEEN $1 AND $2"
              " ORDER BY block_number, transaction_index"};
    case ExportTable::kLogs:
      return {
          "log_index,transaction_hash,transaction_index,block_hash,block_number,address,data,"
          "topics",
          "SELECT log_index, " + H("transaction_hash") + ", transaction_index, " + H("block_hash") +
              ", block_number, " + H("address") + ", " + H("data") + ", concat_ws(',', " +
              H("topic0") + ", " + H("topic1") + ", " + H("topic2") + ", " + H("topic3") +
              ") FROM logs WHERE block_number BETWEEN $1 AND $2"
              " ORDER BY block_number, log_index"};
    case ExportTable::kTokenTransfers:
      return {"token_address,from_address,to_address,value,transaction_hash,log_index,block_number",
              "SELECT " + H("token_address") + ", " + H("from_address") + ", " + H("to_address") +
                  ", CASE WHEN token_standard = 721 THEN coalesce(token_id, value) ELSE value END,"
                  " " +
                  H("transaction_hash") +
                  ", log_index, block_number FROM token_transfers"
                  " WHERE block_number BETWEEN $1 AND $2 AND token_standard = ANY($3::smallint[])"
                  " ORDER BY block_number, log_index, batch_index"};
    case ExportTable::kTraces:
      return {
          "block_number,transaction_hash,transaction_index,from_address,to_address,value,input,"
          "output,trace_type,call_type,reward_type,gas,gas_used,subtraces,trace_address,error,"
          "status,trace_id",
          "SELECT block_number, " + H("transaction_hash") + ", transaction_index, " +
              H("from_address") + ", " + H("to_address") + ", value, " + H("input") + ", " +
              H("output") +
              ", trace_type, call_type, reward_type, gas, gas_used, subtraces,"
              " array_to_string(trace_address, ','), error, status, trace_id FROM traces"
              " WHERE block_number BETWEEN $1 AND $2 ORDER BY block_number, trace_index"};
    case ExportTable::kContracts:
      // Python's str() of a bool, as ethereum-etl's CSV writes it.
      return {"address,bytecode,function_sighashes,is_erc20,is_erc721,block_number",
              "SELECT " + H("address") + ", " + H("bytecode") +
                  ", array_to_string(function_sighashes, ','),"
                  " CASE WHEN is_erc20 THEN 'True' ELSE 'False' END,"
                  " CASE WHEN is_erc721 THEN 'True' ELSE 'False' END, block_number"
                  " FROM contracts WHERE block_number BETWEEN $1 AND $2"
                  " ORDER BY block_number, contract_index"};
    case ExportTable::kTokens:
      return {"address,symbol,name,decimals,total_supply,block_number",
              "SELECT " + H("address") +
                  ", symbol, name, decimals, total_supply, block_number FROM tokens"
                  " WHERE block_number BETWEEN $1 AND $2 ORDER BY block_number, address"};
  }
  return {"", ""};
}

constexpr size_t kOutputChunk = 64 << 10;

}  // namespace

Result<ExportTable> ParseExportTable(std::string_view name) {
  for (ExportTable t : {ExportTable::kBlocks, ExportTable::kTransactions, ExportTable::kReceipts,
                        ExportTable::kLogs, ExportTable::kTokenTransfers, ExportTable::kTraces,
                        ExportTable::kContracts, ExportTable::kTokens}) {
    if (name == ExportTableName(t)) return t;
  }
  return FailedPrecondition(
      "unknown export table " + std::string(name) +
      " (blocks, transactions, receipts, logs, token_transfers, traces, contracts, tokens)");
}

const char* ExportTableName(ExportTable table) {
  switch (table) {
    case ExportTable::kBlocks:
      return "blocks";
    case ExportTable::kTransactions:
      return "transactions";
    case ExportTable::kReceipts:
      return "receipts";
    case ExportTable::kLogs:
      return "logs";
    case ExportTable::kTokenTransfers:
      return "token_transfers";
    case ExportTable::kTraces:
      return "traces";
    case ExportTable::kContracts:
      return "contracts";
    case ExportTable::kTokens:
      return "tokens";
  }
  return "unknown";
}

Result<std::vector<TokenStandard>> ParseTokenStandards(std::string_view list) {
  std::vector<TokenStandard> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view item = list.substr(pos, comma - pos);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    std::optional<TokenStandard> standard;
    for (TokenStandard s :
         {TokenStandard::kErc20, TokenStandard::kErc721, TokenStandard::kErc1155}) {
      if (item == TokenStandardName(s)) standard = s;
    }
    if (!standard.has_value()) {
      return FailedPrecondition("token standard \"" + std::string(item) + "\" in \"" +
                                std::string(list) + "\": expected erc20, erc721 or erc1155");
    }
    if (std::find(out.begin(), out.end(), *standard) == out.end()) out.push_back(*standard);
    pos = comma + 1;
  }
  return out;
}

void AppendCsvField(std::string_view field, std::string* out) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    out->append(field);
    return;
  }
  out->push_back('"');
  for (char c : field) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

Status ExportCsv(PgConn& conn, ExportTable table, uint64_t from, uint64_t to, std::ostream& out,
                 const ExportOptions& options) {
  if (from > to) return Status::Ok();
  ExportQuery q = QueryFor(table);
  std::vector<PgParam> params = {std::to_string(from), std::to_string(to)};
  if (table == ExportTable::kTokenTransfers) {
    if (options.token_standards.empty()) return Status::Ok();
    std::string array = "{";
    for (size_t i = 0; i < options.token_standards.size(); ++i) {
      if (i > 0) array += ",";
      array += std::to_string(static_cast<int>(options.token_standards[i]));
    }
    params.push_back(array + "}");
  }
  std::string buf;
  buf.reserve(kOutputChunk + 4096);
  bool header_written = false;
  auto flush = [&]() -> Status {
    out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    buf.clear();
    if (!out) return FailedPrecondition("export: writing the output failed");
    return Status::Ok();
  };
  GAPLESS_RETURN_IF_ERROR(conn.QueryEach(q.sql, params, [&](const PgResult& row) -> Status {
    if (!header_written) {
      buf += q.header;
      buf.push_back('\n');
      header_written = true;
    }
    for (int c = 0; c < row.columns(); ++c) {
      if (c > 0) buf.push_back(',');
      if (!row.IsNull(0, c)) AppendCsvField(row.Get(0, c), &buf);
    }
    buf.push_back('\n');
    return buf.size() >= kOutputChunk ? flush() : Status::Ok();
  }));
  GAPLESS_RETURN_IF_ERROR(flush());
  out.flush();
  if (!out) return FailedPrecondition("export: writing the output failed");
  return Status::Ok();
}

Result<std::vector<std::pair<uint64_t, uint64_t>>> MissingBlocks(PgConn& conn, uint64_t from,
                                                                 uint64_t to, size_t limit) {
  // Gaps between the blocks present, plus the run before the first and after the last one.
  GAPLESS_ASSIGN_OR_RETURN(
      auto res,
      conn.Query("WITH present AS (SELECT DISTINCT number FROM blocks"
                 "                 WHERE number BETWEEN $1::bigint AND $2::bigint),"
                 " gaps AS (SELECT number + 1 AS lo, lead(number) OVER (ORDER BY number) - 1 AS hi"
                 "          FROM present)"
                 " SELECT lo, hi FROM gaps WHERE hi >= lo"
                 " UNION ALL SELECT $1::bigint, coalesce((SELECT min(number) FROM present) - 1,"
                 "                                      $2::bigint)"
                 "   WHERE NOT EXISTS (SELECT 1 FROM present WHERE number = $1::bigint)"
                 " UNION ALL SELECT max(number) + 1, $2::bigint FROM present"
                 "   HAVING max(number) < $2::bigint"
                 " ORDER BY 1 LIMIT $3",
                 {std::to_string(from), std::to_string(to), std::to_string(limit)}));
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (int i = 0; i < res.rows(); ++i) {
    GAPLESS_ASSIGN_OR_RETURN(int64_t lo, res.GetInt64(i, 0));
    GAPLESS_ASSIGN_OR_RETURN(int64_t hi, res.GetInt64(i, 1));
    out.emplace_back(static_cast<uint64_t>(lo), static_cast<uint64_t>(hi));
  }
  return out;
}

}  // namespace gapless
