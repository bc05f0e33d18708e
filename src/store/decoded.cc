// decoded: the typed tables' DDL, registry, rows and deletes (decoded.h).
#include "store/decoded.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "core/keccak.h"
#include "store/outbox.h"
#include "store/partitions.h"
#include "store/row_builders.h"
#include "store/writer.h"

namespace gapless {
namespace {

using store_detail::TextRow;

// The migration lock (store/migrate.cc): tables made from the config are migrations too.
constexpr const char* kMigrationLockSql = "SELECT pg_advisory_xact_lock(7350693551146172769)";
constexpr std::string_view kUndecodedTable = "undecoded";
constexpr std::string_view kUndecodedDefinition = "undecoded v1";
constexpr std::string_view kChildrenTable = "children";
constexpr std::string_view kChildrenDefinition = "children v1";
// The children's lock (decoded.h "Factories"): fixed, and not the migration's or partitions'.
constexpr const char* kChildrenLockKey = "7350693551146172771";

std::string Quote(std::string_view id) { return "\"" + std::string(id) + "\""; }
std::string Qualified(std::string_view schema, std::string_view table) {
  return Quote(schema) + "." + Quote(table);
}

std::string ColumnsDdl(const abi::EventTable& t) {
  std::string ddl =
      "block_number BIGINT NOT NULL, block_hash BYTEA NOT NULL, block_timestamp BIGINT NOT NULL, "
      "transaction_hash BYTEA NOT NULL, transaction_index INTEGER NOT NULL, "
      "log_index INTEGER NOT NULL, address BYTEA NOT NULL";
  for (const abi::Column& c : t.columns) {
    ddl += ", " + Quote(c.name) + " " + abi::ColumnTypeSql(c.type);
  }
  return ddl + ", PRIMARY KEY (block_number, log_index)";
}

constexpr const char* kUndecodedDdl =
    "block_number BIGINT NOT NULL, log_index INTEGER NOT NULL, table_name TEXT NOT NULL, "
    "block_hash BYTEA NOT NULL, transaction_hash BYTEA NOT NULL, address BYTEA NOT NULL, "
    "reason TEXT NOT NULL, PRIMARY KEY (block_number, log_index, table_name)";

std::string CopyColumns(const abi::EventTable& t) {
  std::string cols =
      "block_number, block_hash, block_timestamp, transaction_hash, transaction_index, "
      "log_index, address";
  for (const abi::Column& c : t.columns) cols += ", " + Quote(c.name);
  return cols;
}

constexpr const char* kChildrenDdl =
    "block_number BIGINT NOT NULL, log_index INTEGER NOT NULL, contract TEXT NOT NULL, "
    "address BYTEA NOT NULL, factory BYTEA NOT NULL, "
    "PRIMARY KEY (block_number, log_index, contract)";
constexpr const char* kChildrenColumns = "block_number, log_index, contract, address, factory";

constexpr const char* kUndecodedColumns =
    "block_number, log_index, table_name, block_hash, transaction_hash, address, reason";

// Raw bytes as COPY text bytea hex input.
void AppendBytea(std::string_view raw, std::string* out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  out->append("\\\\x", 3);
  for (char c : raw) {
    auto b = static_cast<uint8_t>(c);
    out->push_back(kDigits[b >> 4]);
    out->push_back(kDigits[b & 15]);
  }
  out->push_back('\t');
}

// Creates (or checks) one table under the migration lock: registered with `definition`.
Status ApplyTable(PgConn& conn, const std::string& schema, const std::string& table,
                  const std::string& contract, const std::string& signature,
                  const std::string& definition, const std::string& columns_ddl, bool rebuild) {
  GAPLESS_ASSIGN_OR_RETURN(
      auto registered,
      conn.Query("SELECT definition FROM decoded_tables WHERE schema_name = $1 AND table_name = $2",
                 {schema, table}));
  if (registered.rows() == 1 && registered.Get(0, 0) == definition) return Status::Ok();
  if (registered.rows() == 1) {
    if (!rebuild) {
      return FailedPrecondition(fmt::format(
          "table {}.{} holds the event {} as its ABI defined it before ({}); the contracts config "
          "now defines it as {}: keep the old ABI, or drop and refill the table with --rebuild "
          "{}.{}",
          schema, table, signature, std::string(registered.Get(0, 0)), definition, schema, table));
    }
    GAPLESS_RETURN_IF_ERROR(conn.Exec("DROP TABLE " + Qualified(schema, table)));
    GAPLESS_RETURN_IF_ERROR(
        conn.Query("DELETE FROM decoded_tables WHERE schema_name = $1 AND table_name = $2",
                   {schema, table})
            .status());
  }
  GAPLESS_RETURN_IF_ERROR(conn.Exec("CREATE TABLE " + Qualified(schema, table) + " (" +
                                    columns_ddl + ") PARTITION BY RANGE (block_number)"));
  GAPLESS_RETURN_IF_ERROR(CreatePartitionsOf(conn, schema, table));
  return conn
      .Query(
          "INSERT INTO decoded_tables (schema_name, table_name, contract, event_signature, "
          "definition) VALUES ($1, $2, $3, $4, $5)",
          {schema, table, contract, signature, definition})
      .status();
}

bool InRebuild(const std::vector<std::string>& rebuild, const std::string& schema,
               const std::string& table) {
  return std::any_of(rebuild.begin(), rebuild.end(),
                     [&](const std::string& r) { return r == table || r == schema + "." + table; });
}

}  // namespace

std::string DecodedTableDataset(const abi::EventTable& table, const std::string& sources) {
  Hash32 hash = Keccak256(table.Definition() + "\n" + sources);
  std::string hex = ToHex(std::string_view(reinterpret_cast<const char*>(hash.data()), 4));
  return "decoded:" + table.schema + "." + table.table + "." + hex.substr(2);
}

Result<ContractTables> ContractTables::Make(const abi::ContractsConfig& config) {
  ContractTables out;
  out.schema_ = config.name;
  out.tables_ = abi::PlanTables(config);
  // Where each contract's logs come from, for its tables' datasets.
  std::map<std::string, std::string> sources;
  for (const abi::ContractSpec& spec : config.contracts) {
    std::string& text = sources[spec.name];
    for (const std::string& a : spec.addresses) text += "address " + a + "\n";
    for (const abi::FactorySpec& f : spec.factories) {
      text += "factory " + f.address + " " + f.event.Signature() + " " +
              std::to_string(f.parameter) + "\n";
    }
    text += fmt::format("blocks {} {}\n", spec.start_block.value_or(0),
                        spec.end_block.value_or(UINT64_MAX));
  }
  for (const abi::EventTable& t : out.tables_) {
    if (t.table.size() > kMaxDecodedTableName) {
      return FailedPrecondition(fmt::format(
          "{}: table {}.{} is {} bytes long, more than the {} its partitions' names allow: "
          "shorten the contract's name",
          config.path, t.schema, t.table, t.table.size(), kMaxDecodedTableName));
    }
    out.datasets_.Add(DecodedTableDataset(t, sources[t.contract]));
  }
  // PlanTables gives the tables in config order, contract by contract.
  size_t next = 0;
  for (const abi::ContractSpec& spec : config.contracts) {
    Contract c;
    c.from = spec.start_block.value_or(0);
    c.to = spec.end_block.value_or(UINT64_MAX);
    for (size_t e = 0; e < spec.events.size(); ++e, ++next) {
      const int index = static_cast<int>(next);
      const abi::EventTable& t = out.tables_[next];
      if (t.event.anonymous) {
        c.anonymous.push_back(index);
      } else {
        c.by_topic0[ToHex(t.topic0)].push_back(index);
      }
    }
    const int contract_index = static_cast<int>(out.contracts_.size());
    out.contracts_.push_back(std::move(c));
    out.contract_names_.push_back(spec.name);
    for (const std::string& address : spec.addresses) {
      out.by_address_[address].push_back(contract_index);
    }
    for (const abi::FactorySpec& f : spec.factories) {
      out.factories_.push_back(
          Factory{contract_index, f.address, ToHex(f.event.Topic0()), f.event, f.parameter});
    }
  }
  return out;
}

bool ContractTables::IsFactoryOf(int contract, const std::string& factory) const {
  return std::any_of(factories_.begin(), factories_.end(), [&](const Factory& f) {
    return f.contract == contract && f.address == factory;
  });
}

std::vector<std::string> ContractTables::FilterAddresses() const {
  std::vector<std::string> out;
  for (const auto& [address, contracts] : by_address_) out.push_back(address);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> ContractTables::FilterTopic0s() const {
  std::vector<std::string> out;
  for (const abi::EventTable& t : tables_) {
    if (t.event.anonymous) return {};
    out.push_back(ToHex(t.topic0));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> ContractTables::FactoryFilterTopic0s() const {
  std::vector<std::string> out = FilterTopic0s();
  if (out.empty()) return out;
  for (const Factory& f : factories_) out.push_back(f.topic0);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void ContractTables::KeepMatching(std::vector<BlockData>* blocks) const {
  auto keeps = [&](const Log& log) {
    if (by_address_.count(log.address) != 0) return true;
    for (const Factory& f : factories_) {
      if (log.address == f.address) return true;
      if (!log.topics.empty() &&
          contracts_[static_cast<size_t>(f.contract)].by_topic0.count(log.topics[0]) != 0) {
        return true;
      }
    }
    return false;
  };
  for (BlockData& block : *blocks) {
    std::erase_if(block.logs, [&](const Log& log) { return !keeps(log); });
  }
  std::erase_if(*blocks, [](const BlockData& block) { return block.logs.empty(); });
}

Status ContractTables::FindChildren(const std::vector<BlockData>& blocks,
                                    std::vector<Child>* children, Rows* out) const {
  children->clear();
  if (factories_.empty()) return Status::Ok();
  std::vector<std::string> topics;
  std::string data;
  for (const BlockData& block : blocks) {
    for (const Log& log : block.logs) {
      if (log.topics.empty()) continue;
      for (const Factory& f : factories_) {
        if (log.address != f.address || log.topics[0] != f.topic0) continue;
        const std::string where = fmt::format("block {} log {}", log.block_number, log.log_index);
        topics.assign(log.topics.size(), std::string());
        for (size_t i = 0; i < log.topics.size(); ++i) {
          if (!HexToBytes(log.topics[i], &topics[i])) return InvalidData(where + ": bad topic");
        }
        if (!HexToBytes(log.data, &data)) return InvalidData(where + ": bad data");
        const std::string table = contract_names_[static_cast<size_t>(f.contract)] + ".factory";
        Result<std::vector<abi::Value>> values = abi::DecodeLog(f.event, topics, data);
        if (!values.ok()) {
          AppendUndecoded(log, table, "factory event: " + values.status().message(), out);
          continue;
        }
        const abi::Value& child = values.value()[static_cast<size_t>(f.parameter)];
        if (child.kind != abi::Value::Kind::kAddress) {
          AppendUndecoded(log, table, "factory event names no address", out);
          continue;
        }
        children->push_back(
            Child{f.contract, ToHex(child.bytes), log.block_number, log.log_index, f.address});
      }
    }
  }
  return Status::Ok();
}

Status ContractTables::Decode(const std::vector<BlockData>& blocks, const Children& children,
                              Rows* out, bool children_only) const {
  out->tables.assign(tables_.size(), std::string());
  out->counts.assign(tables_.size(), 0);
  for (const BlockData& block : blocks) {
    for (const Log& log : block.logs) {
      if (auto it = by_address_.find(log.address); !children_only && it != by_address_.end()) {
        for (int c : it->second) {
          const Contract& contract = contracts_[static_cast<size_t>(c)];
          if (log.block_number < contract.from || log.block_number > contract.to) continue;
          GAPLESS_RETURN_IF_ERROR(DecodeLog(block, log, contract, out));
        }
      }
      if (children.empty()) continue;
      if (auto it = children.find(log.address); it != children.end()) {
        // An address created twice for one contract (two factories naming it, a factory event
        // repeated, a CREATE2 redeployment) is that contract's child once, from its first
        // creation: its logs are decoded once.
        for (const Child& child : it->second) {
          const bool earlier =
              std::any_of(it->second.begin(), it->second.end(), [&](const Child& other) {
                return other.contract == child.contract &&
                       (other.block < child.block ||
                        (other.block == child.block && &other < &child));
              });
          if (earlier) continue;
          const Contract& contract = contracts_[static_cast<size_t>(child.contract)];
          if (log.block_number < std::max(contract.from, child.block) ||
              log.block_number > contract.to) {
            continue;
          }
          GAPLESS_RETURN_IF_ERROR(DecodeLog(block, log, contract, out));
        }
      }
    }
  }
  return Status::Ok();
}

void ContractTables::AppendUndecoded(const Log& log, const std::string& table,
                                     const std::string& reason, Rows* out) const {
  TextRow row(&out->undecoded);
  row.Int8(log.block_number, "block_number");
  row.Int4(log.log_index, "log_index");
  row.Text(table, "table_name");
  row.Hex(log.block_hash, "block_hash");
  row.Hex(log.transaction_hash, "transaction_hash");
  row.Hex(log.address, "address");
  row.Text(reason, "reason");
  row.EndRow();
  ++out->undecoded_count;
}

Status ContractTables::DecodeLog(const BlockData& block, const Log& log, const Contract& contract,
                                 Rows* out) const {
  const std::vector<int>* candidates = &contract.anonymous;
  if (!log.topics.empty()) {
    auto it = contract.by_topic0.find(log.topics[0]);
    if (it != contract.by_topic0.end()) candidates = &it->second;
  }
  if (candidates->empty()) return Status::Ok();
  const std::string where = fmt::format("block {} log {}", log.block_number, log.log_index);
  std::vector<std::string> topics(log.topics.size());
  for (size_t i = 0; i < log.topics.size(); ++i) {
    if (!HexToBytes(log.topics[i], &topics[i])) {
      return InvalidData(where + ": topic " + std::to_string(i) + " is not hex");
    }
  }
  std::string data;
  if (!HexToBytes(log.data, &data)) return InvalidData(where + ": data is not hex");
  const bool anonymous = candidates == &contract.anonymous;
  auto undecoded = [&](const abi::EventTable& t, const std::string& reason) {
    AppendUndecoded(log, t.table, reason, out);
    return Status::Ok();
  };
  // An anonymous log goes to the first anonymous event (ABI order) it fits; when it fits none of
  // those with its topic count, it is listed against the first of them.
  const abi::EventTable* first_misfit = nullptr;
  std::string first_reason;
  for (int index : *candidates) {
    const abi::EventTable& t = tables_[static_cast<size_t>(index)];
    if (anonymous && static_cast<int>(topics.size()) != t.event.TopicCount()) continue;
    Result<std::vector<abi::Value>> values = abi::DecodeLog(t.event, topics, data);
    if (!values.ok()) {
      if (!anonymous) {
        GAPLESS_RETURN_IF_ERROR(undecoded(t, values.status().message()));
      } else if (first_misfit == nullptr) {
        first_misfit = &t;
        first_reason = values.status().message();
      }
      continue;
    }
    first_misfit = nullptr;
    std::string& buffer = out->tables[static_cast<size_t>(index)];
    TextRow row(&buffer);
    row.Int8(log.block_number, "block_number");
    row.Hex(log.block_hash, "block_hash");
    row.Int8(block.block.timestamp, "block_timestamp");
    row.Hex(log.transaction_hash, "transaction_hash");
    row.Int4(log.transaction_index, "transaction_index");
    row.Int4(log.log_index, "log_index");
    row.Hex(log.address, "address");
    std::string unstorable;
    for (const abi::Column& c : t.columns) {
      const abi::Value& v = values.value()[static_cast<size_t>(c.input)];
      const abi::Param& input = t.event.inputs[static_cast<size_t>(c.input)];
      if (v.kind == abi::Value::Kind::kTopicHash) {
        AppendBytea(v.bytes, &buffer);
        continue;
      }
      switch (c.type) {
        case abi::ColumnType::kBigint:
        case abi::ColumnType::kNumeric:
          buffer += abi::ToDecimal(v);
          buffer.push_back('\t');
          break;
        case abi::ColumnType::kBytea:
          AppendBytea(v.bytes, &buffer);
          break;
        case abi::ColumnType::kBoolean:
          row.Bool(v.boolean);
          break;
        case abi::ColumnType::kText:
          if (abi::IsStorableText(v.bytes)) {
            row.Text(v.bytes, "string");
          } else {
            row.Null();
            unstorable += (unstorable.empty() ? "" : ", ") + c.name;
          }
          break;
        case abi::ColumnType::kJsonb: {
          std::optional<std::string> json = abi::ToJson(v, input.type);
          if (json.has_value()) {
            row.Text(*json, "json");
          } else {
            row.Null();
            unstorable += (unstorable.empty() ? "" : ", ") + c.name;
          }
          break;
        }
      }
    }
    row.EndRow();
    if (row.failed()) return row.Error(where);
    ++out->counts[static_cast<size_t>(index)];
    if (!unstorable.empty()) {
      GAPLESS_RETURN_IF_ERROR(undecoded(
          t,
          "a string PostgreSQL cannot store (not UTF-8, or a NUL byte) is NULL in " + unstorable));
    }
    if (anonymous) return Status::Ok();  // the first anonymous event that fits takes the log
  }
  if (first_misfit != nullptr) return undecoded(*first_misfit, first_reason);
  return Status::Ok();
}

Status ApplyContractTables(PgConn& conn, const ContractTables& tables,
                           const std::vector<std::string>& rebuild) {
  PgTransaction txn(conn);
  GAPLESS_RETURN_IF_ERROR(txn.Begin());
  GAPLESS_RETURN_IF_ERROR(conn.Exec(kMigrationLockSql));
  GAPLESS_RETURN_IF_ERROR(conn.Exec("CREATE SCHEMA IF NOT EXISTS " + Quote(tables.schema())));
  for (const std::string& r : rebuild) {
    const bool known =
        std::any_of(tables.tables().begin(), tables.tables().end(),
                    [&](const abi::EventTable& t) { return InRebuild({r}, t.schema, t.table); });
    if (!known) {
      return FailedPrecondition("--rebuild " + r +
                                ": no table of the contracts config has that "
                                "name (schema " +
                                tables.schema() + ")");
    }
  }
  GAPLESS_RETURN_IF_ERROR(ApplyTable(conn, tables.schema(), std::string(kUndecodedTable), "", "",
                                     std::string(kUndecodedDefinition), kUndecodedDdl, false));
  if (tables.has_factories()) {
    GAPLESS_RETURN_IF_ERROR(ApplyTable(conn, tables.schema(), std::string(kChildrenTable), "", "",
                                       std::string(kChildrenDefinition), kChildrenDdl, false));
  }
  for (const abi::EventTable& t : tables.tables()) {
    GAPLESS_RETURN_IF_ERROR(ApplyTable(conn, t.schema, t.table, t.contract, t.event.Signature(),
                                       t.Definition(), ColumnsDdl(t),
                                       InRebuild(rebuild, t.schema, t.table)));
  }
  return txn.Commit();
}

namespace {

// The COPY of `text` (COPY text rows) into target's columns; nothing for no rows.
Status CopyText(PgConn& conn, const std::string& target, const std::string& columns,
                const std::string& text, std::string* buffer) {
  if (text.empty()) return Status::Ok();
  CopyWriter writer(conn, buffer);
  GAPLESS_RETURN_IF_ERROR(writer.Begin("COPY " + target + " (" + columns + ") FROM STDIN"));
  writer.buffer()->append(text);
  return writer.Finish();
}

// `names` as a SQL text[] literal, each element quoted (an unquoted NULL is a null element);
// they are identifiers and contract names of [A-Za-z0-9_.] (abi/config.h), nothing to escape.
std::string TextArray(const std::vector<std::string>& names) {
  std::string out = "'{";
  for (size_t i = 0; i < names.size(); ++i) out += (i > 0 ? ",\"" : "\"") + names[i] + "\"";
  return out + "}'::text[]";
}

// The children created below `below` (decoded.h "Factories").
Status LoadChildren(PgConn& conn, const ContractTables& tables, uint64_t below,
                    ContractTables::Children* out) {
  GAPLESS_ASSIGN_OR_RETURN(
      auto res,
      conn.Query("SELECT contract, '0x' || encode(address, 'hex'), block_number,"
                 " log_index, '0x' || encode(factory, 'hex') FROM " +
                     Qualified(tables.schema(), kChildrenTable) + " WHERE block_number < $1",
                 {std::to_string(below)}));
  const auto& names = tables.contract_names();
  for (int i = 0; i < res.rows(); ++i) {
    auto it = std::find(names.begin(), names.end(), res.Get(i, 0));
    if (it == names.end()) continue;  // a contract no longer configured
    ContractTables::Child child;
    child.contract = static_cast<int>(it - names.begin());
    child.address = std::string(res.Get(i, 1));
    GAPLESS_ASSIGN_OR_RETURN(int64_t block, res.GetInt64(i, 2));
    GAPLESS_ASSIGN_OR_RETURN(int64_t log_index, res.GetInt64(i, 3));
    child.block = static_cast<uint64_t>(block);
    child.log_index = static_cast<uint32_t>(log_index);
    child.factory = std::string(res.Get(i, 4));
    // A child of a factory the config no longer names is not this contract's any more.
    if (!tables.IsFactoryOf(child.contract, child.factory)) continue;
    (*out)[child.address].push_back(std::move(child));
  }
  return Status::Ok();
}

// The stored logs of `addresses` ("0x" hex) in blocks above `above`, by address, each as blocks
// holding only its logs: one query for all the children a write found.
Result<std::unordered_map<std::string, std::vector<BlockData>>> StoredLogsAbove(
    PgConn& conn, const std::vector<std::string>& addresses, uint64_t above) {
  std::unordered_map<std::string, std::vector<BlockData>> out;
  if (addresses.empty()) return out;
  std::string array = "{";
  for (const std::string& a : addresses) {
    array += (array.size() > 1 ? ",\"\\\\x" : "\"\\\\x") + a.substr(2) + "\"";
  }
  array += "}";
  GAPLESS_ASSIGN_OR_RETURN(
      auto res,
      conn.Query("SELECT l.block_number, l.log_index, l.transaction_index,"
                 " '0x' || encode(l.transaction_hash, 'hex'), '0x' || encode(l.block_hash, 'hex'),"
                 " '0x' || encode(l.data, 'hex'), '0x' || encode(l.topic0, 'hex'),"
                 " '0x' || encode(l.topic1, 'hex'), '0x' || encode(l.topic2, 'hex'),"
                 " '0x' || encode(l.topic3, 'hex'), b.timestamp, '0x' || encode(l.address, 'hex')"
                 " FROM logs l JOIN blocks b ON b.number = l.block_number"
                 " WHERE l.address = ANY($1::bytea[]) AND l.block_number > $2"
                 " ORDER BY l.block_number, l.log_index",
                 {array, std::to_string(above)}));
  for (int i = 0; i < res.rows(); ++i) {
    GAPLESS_ASSIGN_OR_RETURN(int64_t number, res.GetInt64(i, 0));
    std::vector<BlockData>& blocks = out[std::string(res.Get(i, 11))];
    if (blocks.empty() || blocks.back().block.number != static_cast<uint64_t>(number)) {
      blocks.emplace_back();
      blocks.back().block.number = static_cast<uint64_t>(number);
      GAPLESS_ASSIGN_OR_RETURN(int64_t timestamp, res.GetInt64(i, 10));
      blocks.back().block.timestamp = static_cast<uint64_t>(timestamp);
    }
    Log log;
    log.block_number = static_cast<uint64_t>(number);
    GAPLESS_ASSIGN_OR_RETURN(int64_t log_index, res.GetInt64(i, 1));
    GAPLESS_ASSIGN_OR_RETURN(int64_t tx_index, res.GetInt64(i, 2));
    log.log_index = static_cast<uint32_t>(log_index);
    log.transaction_index = static_cast<uint32_t>(tx_index);
    log.transaction_hash = std::string(res.Get(i, 3));
    log.block_hash = std::string(res.Get(i, 4));
    log.address = std::string(res.Get(i, 11));
    log.data = std::string(res.Get(i, 5));
    for (int t = 6; t <= 9 && !res.IsNull(i, t); ++t) log.topics.emplace_back(res.Get(i, t));
    blocks.back().logs.push_back(std::move(log));
  }
  return out;
}

}  // namespace

Status LockForChildren(PgConn& conn, const ContractTables& tables, const RangeWrite& write) {
  if (!tables.has_factories()) return Status::Ok();
  ContractTables::Rows ignored;
  std::vector<ContractTables::Child> found;
  GAPLESS_RETURN_IF_ERROR(tables.FindChildren(write.blocks, &found, &ignored));
  return conn.Exec(std::string(found.empty() ? "SELECT pg_advisory_xact_lock_shared("
                                             : "SELECT pg_advisory_xact_lock(") +
                   kChildrenLockKey + ")");
}

Status WriteDecodedRows(PgConn& conn, const ContractTables& tables, const RangeWrite& write,
                        std::string* buffer) {
  ContractTables::Rows rows;
  std::vector<ContractTables::Child> found;
  GAPLESS_RETURN_IF_ERROR(tables.FindChildren(write.blocks, &found, &rows));
  ContractTables::Children children;
  if (tables.has_factories()) {
    GAPLESS_RETURN_IF_ERROR(LoadChildren(conn, tables, write.from_block, &children));
  }
  for (const ContractTables::Child& child : found) {
    TextRow row(&rows.children);
    row.Int8(child.block, "block_number");
    row.Int4(child.log_index, "log_index");
    row.Text(tables.contract_names()[static_cast<size_t>(child.contract)], "contract");
    row.Hex(child.address, "address");
    row.Hex(child.factory, "factory");
    row.EndRow();
    children[child.address].push_back(child);
  }
  GAPLESS_RETURN_IF_ERROR(tables.Decode(write.blocks, children, &rows));

  const std::string between =
      fmt::format(" WHERE block_number BETWEEN {} AND {}", write.from_block, write.to_block);
  const std::string undecoded = Qualified(tables.schema(), kUndecodedTable);
  std::vector<std::string> names;
  for (const abi::EventTable& t : tables.tables()) names.push_back(t.table);
  for (const std::string& c : tables.contract_names()) names.push_back(c + ".factory");
  std::string sql;
  for (const abi::EventTable& t : tables.tables()) {
    sql += "DELETE FROM " + Qualified(t.schema, t.table) + between + ";\n";
  }
  // Only this config's tables' undecoded rows and children: a removed contract's stay.
  sql +=
      "DELETE FROM " + undecoded + between + " AND table_name = ANY(" + TextArray(names) + ");\n";
  if (tables.has_factories()) {
    sql += "DELETE FROM " + Qualified(tables.schema(), kChildrenTable) + between +
           " AND contract = ANY(" + TextArray(tables.contract_names()) + ");\n";
  }
  GAPLESS_RETURN_IF_ERROR(conn.Exec(sql));

  // The children found here whose logs in committed blocks above the range no write has decoded
  // (decoded.h "Factories"): their tables' rows of those blocks, from the stored logs.
  std::vector<std::pair<int, std::string>> backfilled;  // (contract, address): once each
  std::vector<std::string> addresses;
  std::vector<uint64_t> late_blocks;  // the blocks above it that changed
  for (const ContractTables::Child& child : found) {
    const std::pair<int, std::string> key{child.contract, child.address};
    if (std::find(backfilled.begin(), backfilled.end(), key) != backfilled.end()) continue;
    backfilled.push_back(key);
    if (std::find(addresses.begin(), addresses.end(), child.address) == addresses.end()) {
      addresses.push_back(child.address);
    }
  }
  GAPLESS_ASSIGN_OR_RETURN(auto stored_above, StoredLogsAbove(conn, addresses, write.to_block));
  std::string deletes;
  for (const ContractTables::Child& child : found) {
    const std::pair<int, std::string> key{child.contract, child.address};
    auto done = std::find(backfilled.begin(), backfilled.end(), key);
    if (done == backfilled.end()) continue;  // this (contract, address) was done already
    backfilled.erase(done);
    auto above = stored_above.find(child.address);
    if (above == stored_above.end()) continue;
    // Only the child's contract's rows: the same address may be another contract's too.
    const std::string& contract = tables.contract_names()[static_cast<size_t>(child.contract)];
    std::vector<std::string> own;
    for (const abi::EventTable& t : tables.tables()) {
      if (t.contract != contract) continue;
      own.push_back(t.table);
      deletes += "DELETE FROM " + Qualified(t.schema, t.table) + " WHERE block_number > " +
                 std::to_string(write.to_block) + " AND address = decode('" +
                 child.address.substr(2) + "', 'hex');\n";
    }
    if (own.empty()) continue;
    deletes += "DELETE FROM " + undecoded + " WHERE block_number > " +
               std::to_string(write.to_block) + " AND address = decode('" +
               child.address.substr(2) + "', 'hex') AND table_name = ANY(" + TextArray(own) +
               ");\n";
    ContractTables::Children only{{child.address, {child}}};
    ContractTables::Rows late;
    GAPLESS_RETURN_IF_ERROR(tables.Decode(above->second, only, &late, /*children_only=*/true));
    for (const BlockData& b : above->second) late_blocks.push_back(b.block.number);
    for (size_t i = 0; i < tables.tables().size(); ++i) rows.tables[i] += late.tables[i];
    rows.undecoded += late.undecoded;
  }
  if (!deletes.empty()) GAPLESS_RETURN_IF_ERROR(conn.Exec(deletes));

  for (size_t i = 0; i < tables.tables().size(); ++i) {
    const abi::EventTable& t = tables.tables()[i];
    GAPLESS_RETURN_IF_ERROR(
        CopyText(conn, Qualified(t.schema, t.table), CopyColumns(t), rows.tables[i], buffer)
            .WithContext("decoded table " + t.schema + "." + t.table));
  }
  GAPLESS_RETURN_IF_ERROR(CopyText(conn, Qualified(tables.schema(), kChildrenTable),
                                   kChildrenColumns, rows.children, buffer)
                              .WithContext("table " + tables.schema() + ".children"));
  GAPLESS_RETURN_IF_ERROR(CopyText(conn, undecoded, kUndecodedColumns, rows.undecoded, buffer)
                              .WithContext("table " + tables.schema() + ".undecoded"));
  if (late_blocks.empty()) return Status::Ok();
  // The blocks above got decoded events: their outbox rows, if any, count them
  // (store/outbox.h).
  return conn.Exec("UPDATE event_outbox o SET event_count = " +
                   OutboxCountSql("o.block_number", &tables) + " WHERE o.block_number = ANY('{" +
                   fmt::format("{}", fmt::join(late_blocks, ",")) + "}'::bigint[]);\n");
}

Result<std::vector<std::string>> RegisteredDecodedTables(PgConn& conn) {
  // A schema older than migration 015 (a test writing into it, a database mid-upgrade) has none.
  GAPLESS_ASSIGN_OR_RETURN(auto exists,
                           conn.Query("SELECT to_regclass('decoded_tables') IS NOT NULL"));
  if (exists.Get(0, 0) != "t") return std::vector<std::string>();
  GAPLESS_ASSIGN_OR_RETURN(
      auto res, conn.Query("SELECT schema_name, table_name FROM decoded_tables ORDER BY 1, 2"));
  std::vector<std::string> out;
  for (int i = 0; i < res.rows(); ++i) out.push_back(Qualified(res.Get(i, 0), res.Get(i, 1)));
  return out;
}

Result<std::string> DeleteDecodedAboveSql(PgConn& conn, uint64_t fork) {
  GAPLESS_ASSIGN_OR_RETURN(auto tables, RegisteredDecodedTables(conn));
  std::string sql;
  for (const std::string& t : tables) {
    sql += fmt::format("DELETE FROM {} WHERE block_number > {};\n", t, fork);
  }
  return sql;
}

}  // namespace gapless
