#include "store/decoded_events.h"

#include <fmt/format.h>

#include <algorithm>

#include "abi/tables.h"
#include "core/text.h"

namespace gapless {
namespace {

// Decoded tables' names are [a-z0-9_] (store/decoded.h); quoted all the same.
std::string Quoted(std::string_view schema, std::string_view table) {
  return fmt::format("\"{}\".\"{}\"", schema, table);
}

// What to SELECT for a column of `type`, as text.
std::string ColumnSql(const std::string& name, abi::ColumnType type) {
  const std::string quoted = "\"" + name + "\"";
  switch (type) {
    case abi::ColumnType::kBytea:
      return "'0x' || encode(" + quoted + ", 'hex')";
    case abi::ColumnType::kText:
      return quoted;
    case abi::ColumnType::kBigint:
    case abi::ColumnType::kNumeric:
    case abi::ColumnType::kBoolean:
    case abi::ColumnType::kJsonb:
      return quoted + "::text";
  }
  return quoted;
}

void AppendKey(std::string_view name, std::string* out) {
  if (!out->empty()) out->push_back(',');
  AppendJsonText(name, out);
  out->push_back(':');
}

// One input column's value as abi::ToJson renders the input (decoded_events.h).
Status AppendValue(const abi::EventTable& table, const abi::Column& column, const PgResult& r,
                   int row, int col, std::string* out) {
  AppendKey(column.name, out);
  if (r.IsNull(row, col)) {
    out->append("null");
    return Status::Ok();
  }
  const std::string_view text = r.Get(row, col);
  const abi::Type& type = table.event.inputs[static_cast<size_t>(column.input)].type;
  switch (column.type) {
    case abi::ColumnType::kBigint:
      if (type.bits <= 48) {
        out->append(text);
      } else {
        AppendJsonText(text, out);
      }
      return Status::Ok();
    case abi::ColumnType::kNumeric:
    case abi::ColumnType::kBytea:
    case abi::ColumnType::kText:
      AppendJsonText(text, out);
      return Status::Ok();
    case abi::ColumnType::kBoolean:
      out->append(text == "true" || text == "t" ? "true" : "false");
      return Status::Ok();
    case abi::ColumnType::kJsonb: {
      std::optional<std::string> json = abi::NormalizeJson(text, type);
      if (!json.has_value()) {
        return InvalidData(fmt::format("{}.{}: column {} holds {}, not a {}", table.schema,
                                       table.table, column.name, text, type.Canonical()));
      }
      out->append(*json);
      return Status::Ok();
    }
  }
  return Status::Ok();
}

}  // namespace

std::string DecodedEventType(std::string_view schema, std::string_view contract,
                             std::string_view table) {
  const std::string prefix = abi::SnakeCase(contract) + "_";
  const std::string_view event =
      table.substr(0, prefix.size()) == prefix ? table.substr(prefix.size()) : table;
  return fmt::format("{}.{}.{}", schema, abi::SnakeCase(contract), event);
}

Result<std::vector<DecodedRow>> ReadDecodedRows(PgConn& conn, const ContractTables& tables,
                                                uint64_t from, uint64_t to) {
  struct Keyed {
    DecodedRow row;
    size_t table = 0;
  };
  std::vector<Keyed> keyed;
  for (size_t t = 0; t < tables.tables().size(); ++t) {
    const abi::EventTable& table = tables.tables()[t];
    std::string sql =
        "SELECT block_number, '0x' || encode(block_hash, 'hex'), block_timestamp,"
        " '0x' || encode(transaction_hash, 'hex'), transaction_index, log_index,"
        " '0x' || encode(address, 'hex')";
    for (const abi::Column& c : table.columns) sql += ", " + ColumnSql(c.name, c.type);
    sql += " FROM " + Quoted(table.schema, table.table) +
           " WHERE block_number BETWEEN $1 AND $2 ORDER BY block_number, log_index";
    GAPLESS_ASSIGN_OR_RETURN(PgResult r,
                             conn.Query(sql, {std::to_string(from), std::to_string(to)}));
    const std::string type = DecodedEventType(table.schema, table.contract, table.table);
    for (int i = 0; i < r.rows(); ++i) {
      Keyed k;
      k.table = t;
      DecodedRow& row = k.row;
      GAPLESS_ASSIGN_OR_RETURN(int64_t number, r.GetInt64(i, 0));
      GAPLESS_ASSIGN_OR_RETURN(int64_t timestamp, r.GetInt64(i, 2));
      GAPLESS_ASSIGN_OR_RETURN(int64_t log_index, r.GetInt64(i, 5));
      row.block_number = static_cast<uint64_t>(number);
      row.block_hash = std::string(r.Get(i, 1));
      row.block_timestamp = static_cast<uint64_t>(timestamp);
      row.log_index = static_cast<uint64_t>(log_index);
      row.event_type = type;
      std::string& f = row.fields_json;
      f.reserve(256);
      AppendKey("block_number", &f);
      f.append(r.Get(i, 0));
      AppendKey("block_hash", &f);
      AppendJsonText(r.Get(i, 1), &f);
      AppendKey("block_timestamp", &f);
      f.append(r.Get(i, 2));
      AppendKey("transaction_hash", &f);
      AppendJsonText(r.Get(i, 3), &f);
      AppendKey("transaction_index", &f);
      f.append(r.Get(i, 4));
      AppendKey("log_index", &f);
      f.append(r.Get(i, 5));
      AppendKey("address", &f);
      AppendJsonText(r.Get(i, 6), &f);
      for (size_t c = 0; c < table.columns.size(); ++c) {
        GAPLESS_RETURN_IF_ERROR(
            AppendValue(table, table.columns[c], r, i, static_cast<int>(7 + c), &f)
                .WithContext(fmt::format("block {} log {}", number, log_index)));
      }
      keyed.push_back(std::move(k));
    }
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    if (a.row.block_number != b.row.block_number) return a.row.block_number < b.row.block_number;
    if (a.row.log_index != b.row.log_index) return a.row.log_index < b.row.log_index;
    return a.table < b.table;
  });
  std::vector<DecodedRow> out;
  out.reserve(keyed.size());
  for (Keyed& k : keyed) out.push_back(std::move(k.row));
  return out;
}

Result<std::optional<uint64_t>> FirstBlockWithoutDecoded(PgConn& conn, const ContractTables& tables,
                                                         uint64_t from, uint64_t to) {
  if (from > to || tables.datasets().empty()) return std::optional<uint64_t>();
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult r,
      conn.Query("SELECT min(b) FROM generate_series($1::bigint, $2::bigint) b"
                 " WHERE NOT EXISTS (SELECT 1 FROM indexed_ranges r"
                 " WHERE r.blocks @> b AND r.datasets @> $3::text[])",
                 {std::to_string(from), std::to_string(to), tables.datasets().SqlArray()}));
  if (r.IsNull(0, 0)) return std::optional<uint64_t>();
  GAPLESS_ASSIGN_OR_RETURN(int64_t block, r.GetInt64(0, 0));
  return std::optional<uint64_t>(static_cast<uint64_t>(block));
}

std::string DecodedCountSql(const ContractTables* tables, std::string_view block_sql) {
  if (tables == nullptr || tables->tables().empty()) return "0";
  std::string sql;
  for (const abi::EventTable& t : tables->tables()) {
    if (!sql.empty()) sql += " + ";
    sql += fmt::format("(SELECT count(*) FROM {} d WHERE d.block_number = {})",
                       Quoted(t.schema, t.table), block_sql);
  }
  return "(" + sql + ")";
}

Status RetractDecodedRows(PgConn& conn, uint64_t generation) {
  GAPLESS_ASSIGN_OR_RETURN(auto registered,
                           conn.Query("SELECT to_regclass('decoded_tables') IS NOT NULL"));
  if (registered.Get(0, 0) != "t") return Status::Ok();
  GAPLESS_ASSIGN_OR_RETURN(PgResult r,
                           conn.Query("SELECT schema_name, contract, table_name FROM decoded_tables"
                                      " WHERE contract <> '' ORDER BY 1, 3"));
  for (int i = 0; i < r.rows(); ++i) {
    GAPLESS_RETURN_IF_ERROR(
        conn.Query("INSERT INTO event_retraction_decoded (seq, log_index, event_type)"
                   " SELECT x.seq, d.log_index, $1 FROM event_retractions x JOIN " +
                       Quoted(r.Get(i, 0), r.Get(i, 2)) +
                       " d ON d.block_number = x.block_number AND d.block_hash = x.block_hash"
                       " WHERE x.generation = $2 ON CONFLICT DO NOTHING",
                   {DecodedEventType(r.Get(i, 0), r.Get(i, 1), r.Get(i, 2)),
                    std::to_string(generation)})
            .status());
  }
  return Status::Ok();
}

Result<std::map<uint64_t, std::vector<std::pair<std::string, uint64_t>>>> ReadRetractedDecoded(
    PgConn& conn, uint64_t after, uint64_t through) {
  std::map<uint64_t, std::vector<std::pair<std::string, uint64_t>>> out;
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult r, conn.Query("SELECT seq, event_type, log_index FROM event_retraction_decoded"
                             " WHERE seq > $1 AND seq <= $2 ORDER BY seq, log_index, event_type",
                             {std::to_string(after), std::to_string(through)}));
  for (int i = 0; i < r.rows(); ++i) {
    GAPLESS_ASSIGN_OR_RETURN(int64_t seq, r.GetInt64(i, 0));
    GAPLESS_ASSIGN_OR_RETURN(int64_t log_index, r.GetInt64(i, 2));
    out[static_cast<uint64_t>(seq)].emplace_back(std::string(r.Get(i, 1)),
                                                 static_cast<uint64_t>(log_index));
  }
  return out;
}

}  // namespace gapless
