// tables: table and column names and types for the configured events (tables.h).
//
// SnakeCase's rule, for names written in camelCase, PascalCase or snake_case:
//   - an upper-case letter starts a word after a lower-case letter or a digit ("tickSpacing",
//     "amount0In" -> "amount0_in", "ERC20Token" -> "erc20_token");
//   - an acronym ends before its last capital when a lower-case letter follows ("USDCVault" ->
//     "usdc_vault"), except an acronym's plural "s" ("tokenIDs" -> "token_ids", "NFTsOwned" ->
//     "nfts_owned");
//   - digits stay with what precedes them ("sqrtPriceX96" -> "sqrt_price_x96");
//   - any byte other than an ASCII letter, digit or "_" (Solidity allows "$"; ABI JSON allows
//     anything) becomes "_", then leading underscores are dropped ("_value" -> "value").
// So the result holds only [a-z0-9_]; it may be empty or start with a digit, which the callers
// check (a column then falls back to arg{i}, a contract name is refused by the config).
#include "abi/tables.h"

#include <cstdio>
#include <set>

namespace gapless::abi {
namespace {

constexpr size_t kMaxIdentifier = 63;  // PostgreSQL's NAMEDATALEN - 1

bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A snake-cased name PostgreSQL takes unquoted and untruncated (SQL keywords aside: the SQL that
// uses the columns quotes them, since "from" and "to" are common input names).
bool UsableColumnName(const std::string& name) {
  return !name.empty() && name.size() <= kMaxIdentifier && !IsDigit(name[0]);
}

// The type as Definition() records it: the canonical form, with tuple members' names, which key
// the JSONB objects (abi::ToJson) and so belong to the table's shape too.
std::string DescribeType(const Type& type) {
  switch (type.kind) {
    case TypeKind::kTuple: {
      std::string out = "(";
      for (size_t i = 0; i < type.components.size(); ++i) {
        if (i > 0) out += ',';
        out += DescribeType(type.components[i]);
        const std::string name = i < type.component_names.size() ? type.component_names[i] : "";
        if (!name.empty()) out += " " + name;
      }
      return out + ")";
    }
    case TypeKind::kArray:
      return DescribeType(type.components.at(0)) + "[]";
    case TypeKind::kFixedArray:
      return DescribeType(type.components.at(0)) + "[" + std::to_string(type.size) + "]";
    default:
      return type.Canonical();
  }
}

// A name from the ABI in Definition(): quoted, with quotes, backslashes and control bytes
// escaped so that every field stays on its line.
std::string Quoted(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

}  // namespace

const char* ColumnTypeSql(ColumnType type) {
  switch (type) {
    case ColumnType::kBigint:
      return "BIGINT";
    case ColumnType::kNumeric:
      return "NUMERIC(78,0)";
    case ColumnType::kBytea:
      return "BYTEA";
    case ColumnType::kBoolean:
      return "BOOLEAN";
    case ColumnType::kText:
      return "TEXT";
    case ColumnType::kJsonb:
      return "JSONB";
  }
  return "?";
}

std::string SnakeCase(std::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!IsUpper(c)) {
      out += IsLower(c) || IsDigit(c) || c == '_' ? c : '_';
      continue;
    }
    bool starts_word = false;
    if (i > 0) {
      const char prev = name[i - 1];
      if (IsLower(prev) || IsDigit(prev)) {
        starts_word = true;
      } else if (IsUpper(prev) && i + 1 < name.size() && IsLower(name[i + 1])) {
        const bool plural_s = name[i + 1] == 's' && (i + 2 == name.size() || !IsLower(name[i + 2]));
        starts_word = !plural_s;
      }
    }
    if (starts_word && !out.empty() && out.back() != '_') out += '_';
    out += static_cast<char>(c - 'A' + 'a');
  }
  const size_t first = out.find_first_not_of('_');
  return first == std::string::npos ? std::string() : out.substr(first);
}

ColumnType ColumnTypeOf(const Param& input) {
  const Type& type = input.type;
  switch (type.kind) {
    case TypeKind::kUint:
      // BIGINT is signed: uint64 does not fit, uint56 is the widest unsigned type that does.
      return type.bits <= 56 ? ColumnType::kBigint : ColumnType::kNumeric;
    case TypeKind::kInt:
      return type.bits <= 64 ? ColumnType::kBigint : ColumnType::kNumeric;
    case TypeKind::kAddress:
    case TypeKind::kFixedBytes:
    case TypeKind::kBytes:
      return ColumnType::kBytea;
    case TypeKind::kBool:
      return ColumnType::kBoolean;
    case TypeKind::kString:
      return input.indexed ? ColumnType::kBytea : ColumnType::kText;
    case TypeKind::kArray:
    case TypeKind::kFixedArray:
    case TypeKind::kTuple:
      // Indexed, every array and tuple (static ones too) is kept only as its hash in a topic,
      // which the decoder gives as the topic itself (abi.h, Value::Kind::kTopicHash).
      return input.indexed ? ColumnType::kBytea : ColumnType::kJsonb;
  }
  return ColumnType::kJsonb;
}

std::string EventTable::Definition() const {
  // Versioned, so that a later change of this text (or of the naming rules it records the result
  // of) can be told from an ABI change by whoever compares it.
  std::string out = "gapless event table v1\n";
  out += "event " + event.Signature() + "\n";
  out += std::string("anonymous ") + (event.anonymous ? "true" : "false") + "\n";
  for (size_t i = 0; i < event.inputs.size(); ++i) {
    const Param& input = event.inputs[i];
    out += "input " + std::to_string(i) + " " + Quoted(input.name) + " " +
           DescribeType(input.type) + (input.indexed ? " indexed" : "");
    for (const Column& column : columns) {
      if (column.input == static_cast<int>(i)) {
        out += " -> " + column.name + " " + ColumnTypeSql(column.type);
      }
    }
    out += "\n";
  }
  return out;
}

std::vector<EventTable> PlanTables(const ContractsConfig& config) {
  std::vector<EventTable> tables;
  for (const ContractSpec& contract : config.contracts) {
    const std::set<std::string> overloaded(contract.overloaded_names.begin(),
                                           contract.overloaded_names.end());
    for (const Event& event : contract.events) {
      // Two selected events of one name are overloads even when overloaded_names (filled by the
      // config parser from the whole ABI) does not say so, e.g. for a hand-built config.
      int same_name = 0;
      for (const Event& other : contract.events) same_name += other.name == event.name ? 1 : 0;
      EventTable table;
      table.schema = config.name;
      table.contract = contract.name;
      table.event = event;
      table.table = SnakeCase(contract.name) + "_" + SnakeCase(event.name);
      if (same_name > 1 || overloaded.count(event.name) > 0) {
        table.table += "_" + Hex(event.Topic0().substr(0, 4));
      }
      if (!event.anonymous) table.topic0 = event.Topic0();
      std::set<std::string> taken(std::begin(kFixedColumns), std::end(kFixedColumns));
      for (size_t i = 0; i < event.inputs.size(); ++i) {
        std::string name = SnakeCase(event.inputs[i].name);
        if (!UsableColumnName(name) || taken.count(name) > 0) {
          name = "arg" + std::to_string(i);
          // Only an earlier input literally named "arg{i}" can hold it; the suffix keeps the
          // columns apart without renaming that input.
          while (taken.count(name) > 0) name += "_";
        }
        taken.insert(name);
        table.columns.push_back(Column{name, ColumnTypeOf(event.inputs[i]), static_cast<int>(i)});
      }
      tables.push_back(std::move(table));
    }
  }
  return tables;
}

}  // namespace gapless::abi
