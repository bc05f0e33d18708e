#include "store/export.h"

#include <algorithm>

#include "store/queries.h"

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

// `json` (PostgreSQL's text of a jsonb: ", " and ": " between items) without the whitespace
// outside its strings. Inside a string a backslash escapes the next character.
void CompactJson(std::string_view json, std::string* out) {
  out->clear();
  bool in_string = false, escaped = false;
  for (char c : json) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      continue;
    } else if (c == '"') {
      in_string = true;
    }
    out->push_back(c);
  }
}

// Runs `sql` and writes its rows as CSV under `header` (nothing for no rows). The columns flagged
// in `json_columns` (columns past its end are not JSON) are made compact first.
Status StreamCsv(PgConn& conn, std::string_view header, const std::string& sql,
                 const std::vector<PgParam>& params, const std::vector<bool>& json_columns,
                 std::ostream& out) {
  std::string buf;
  buf.reserve(kOutputChunk + 4096);
  std::string compact;
  bool header_written = false;
  auto flush = [&]() -> Status {
    out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    buf.clear();
    if (!out) return FailedPrecondition("export: writing the output failed");
    return Status::Ok();
  };
  GAPLESS_RETURN_IF_ERROR(conn.QueryEach(sql, params, [&](const PgResult& row) -> Status {
    if (!header_written) {
      buf += header;
      buf.push_back('\n');
      header_written = true;
    }
    for (int c = 0; c < row.columns(); ++c) {
      if (c > 0) buf.push_back(',');
      if (row.IsNull(0, c)) continue;
      if (static_cast<size_t>(c) < json_columns.size() && json_columns[c]) {
        CompactJson(row.Get(0, c), &compact);
        AppendCsvField(compact, &buf);
      } else {
        AppendCsvField(row.Get(0, c), &buf);
      }
    }
    buf.push_back('\n');
    return buf.size() >= kOutputChunk ? flush() : Status::Ok();
  }));
  GAPLESS_RETURN_IF_ERROR(flush());
  out.flush();
  if (!out) return FailedPrecondition("export: writing the output failed");
  return Status::Ok();
}

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
  return StreamCsv(conn, q.header, q.sql, params, {}, out);
}

bool IsDecodedTableName(std::string_view name) { return name.find('.') != std::string_view::npos; }

Result<DecodedExportTable> FindDecodedTable(PgConn& conn, std::string_view name) {
  const size_t dot = name.find('.');
  const std::string schema(name.substr(0, dot));
  const std::string table(dot == std::string_view::npos ? "" : name.substr(dot + 1));
  GAPLESS_ASSIGN_OR_RETURN(auto registered,
                           conn.Query("SELECT schema_name, table_name FROM decoded_tables"
                                      " WHERE schema_name = $1 AND table_name = $2",
                                      {schema, table}));
  if (registered.rows() != 1) {
    GAPLESS_ASSIGN_OR_RETURN(auto others,
                             conn.Query("SELECT schema_name, table_name FROM decoded_tables"
                                        " WHERE schema_name = $1 ORDER BY table_name",
                                        {schema}));
    std::string message = "unknown export table " + std::string(name) + ": ";
    if (others.rows() == 0) {
      GAPLESS_ASSIGN_OR_RETURN(
          auto schemas,
          conn.Query("SELECT string_agg(DISTINCT schema_name, ', ' ORDER BY schema_name)"
                     " FROM decoded_tables"));
      message += "no decoded table is registered in schema " + schema;
      message += schemas.IsNull(0, 0)
                     ? " (nor in any: the contracts mode never wrote here)"
                     : " (schemas with decoded tables: " + std::string(schemas.Get(0, 0)) + ")";
      return FailedPrecondition(message);
    }
    message += "the decoded tables registered in schema " + schema + " are ";
    for (int i = 0; i < others.rows(); ++i) {
      message +=
          (i > 0 ? ", " : "") + std::string(others.Get(i, 0)) + "." + std::string(others.Get(i, 1));
    }
    return FailedPrecondition(message);
  }
  DecodedExportTable out;
  out.schema = registered.Get(0, 0);
  out.table = registered.Get(0, 1);
  GAPLESS_ASSIGN_OR_RETURN(
      auto columns,
      conn.Query("SELECT a.attname, format_type(a.atttypid, NULL) FROM pg_catalog.pg_attribute a"
                 " JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
                 " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                 " WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0"
                 " AND NOT a.attisdropped ORDER BY a.attnum",
                 {out.schema, out.table}));
  for (int i = 0; i < columns.rows(); ++i) {
    out.columns.push_back({std::string(columns.Get(i, 0)), std::string(columns.Get(i, 1))});
  }
  if (out.columns.empty()) {
    return FailedPrecondition("export table " + std::string(name) +
                              " is registered in decoded_tables but not in the database");
  }
  GAPLESS_ASSIGN_OR_RETURN(
      auto key, conn.Query("SELECT a.attname FROM pg_catalog.pg_constraint k"
                           " JOIN pg_catalog.pg_class c ON c.oid = k.conrelid"
                           " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                           " CROSS JOIN LATERAL unnest(k.conkey) WITH ORDINALITY AS u(attnum, i)"
                           " JOIN pg_catalog.pg_attribute a"
                           "   ON a.attrelid = c.oid AND a.attnum = u.attnum"
                           " WHERE n.nspname = $1 AND c.relname = $2 AND k.contype = 'p'"
                           " ORDER BY u.i",
                           {out.schema, out.table}));
  for (int i = 0; i < key.rows(); ++i) out.order.emplace_back(key.Get(i, 0));
  // Every decoded table has this key's first two columns; a table without a key (made by hand)
  // is still ordered by block.
  if (out.order.empty()) out.order = {"block_number", "log_index"};
  return out;
}

Status ExportDecodedCsv(PgConn& conn, const DecodedExportTable& table, uint64_t from, uint64_t to,
                        std::ostream& out) {
  if (from > to) return Status::Ok();
  std::string header, select;
  std::vector<bool> json_columns;
  for (const DecodedExportTable::Column& c : table.columns) {
    if (!header.empty()) header.push_back(',');
    AppendCsvField(c.name, &header);
    const std::string id = PgQuoteIdent(c.name);
    if (!select.empty()) select += ", ";
    if (c.type == "bytea") {
      select += "'0x' || encode(" + id + ", 'hex')";
    } else if (c.type == "boolean") {
      select += id + "::text";  // 'true' / 'false' (the type's own output is 't' / 'f')
    } else {
      select += id;
    }
    json_columns.push_back(c.type == "jsonb" || c.type == "json");
  }
  std::string order;
  for (const std::string& c : table.order) order += (order.empty() ? "" : ", ") + PgQuoteIdent(c);
  const std::string sql = "SELECT " + select + " FROM " + PgQuoteIdent(table.schema) + "." +
                          PgQuoteIdent(table.table) +
                          " WHERE block_number BETWEEN $1 AND $2 ORDER BY " + order;
  return StreamCsv(conn, header, sql, {std::to_string(from), std::to_string(to)}, json_columns,
                   out);
}

Result<std::vector<std::pair<uint64_t, uint64_t>>> MissingBlocks(PgConn& conn, uint64_t from,
                                                                 uint64_t to, size_t limit) {
  // An events-mode database stores only the blocks with matching logs: there a block is missing
  // when no committed range covers it.
  GAPLESS_ASSIGN_OR_RETURN(
      auto mode, conn.Query("SELECT value FROM indexer_state WHERE key = 'data_mode'"));
  if (mode.rows() == 1 && mode.Get(0, 0) == "events") {
    GAPLESS_ASSIGN_OR_RETURN(auto committed, CommittedRanges(conn, from, to));
    std::vector<std::pair<uint64_t, uint64_t>> gaps;
    uint64_t next = from;
    for (const auto& [a, b] : committed) {
      if (a > next && gaps.size() < limit) gaps.emplace_back(next, a - 1);
      next = b + 1;
    }
    if (next <= to && gaps.size() < limit &&
        (committed.empty() || committed.back().second < to)) {
      gaps.emplace_back(next, to);
    }
    return gaps;
  }
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
