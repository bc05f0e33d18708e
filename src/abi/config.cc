// config: the contracts config (config.h), read with yaml-cpp, whose exceptions stay in this file.
//
// Where the format leaves a choice, this parser takes the stricter reading and says so in one
// line naming file, line and key; the first error stops the parse:
//   - Every key is known; a key given twice, or given with no value ("start_block:"), is an error
//     (a null end_block is not read as "open-ended": leaving the key out is).
//   - The schema name is [a-z_][a-z0-9_]*, at most 63 bytes, and not "public" (gapless's own
//     tables live there, "token_transfers" among them), "information_schema" or "pg_*"
//     (reserved by PostgreSQL).
//   - A contract name is letters, digits and "_" in any case ("WETH"); its snake-cased form names
//     the tables, so it must not start with a digit, and two names with one snake-cased form
//     ("WETH", "weth") are duplicates.
//   - Addresses are "0x" and 40 hex digits in any case, lower-cased; a list is sorted and its
//     duplicates dropped. No EIP-55 checksum is enforced, as explorers and tools print addresses
//     in every case; the cost is that a mistyped hex digit is not caught here.
//   - `address`, `events` take one scalar as a list of one; an empty list is an error.
//   - `events` entries match an event's name, or with "(" its signature (blanks ignored); a name
//     or signature listed twice selects its event once. An ABI with no events is an error.
//   - Two events of an ABI with one signature that differ (in indexed flags, input names or
//     anonymity) cannot be told apart by topic 0: an error if selected. Exact duplicates (an ABI
//     merged from a proxy and its implementation) are dropped.
//   - A factory's `parameter` is an input's name as the ABI writes it, or its index (digits: no
//     Solidity name starts with one) for an unnamed input; it must be of type address. The
//     factory's event must not be anonymous (its logs are found by topic 0). Identical factories
//     are listed once.
//   - Blocks are decimal integers in 0..2^63-1 (BIGINT); start_block may equal end_block.
//   - An ABI file is read once however many contracts and factories name it.
#include "abi/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "abi/tables.h"

namespace gapless::abi {
namespace {

constexpr size_t kMaxShown = 80;       // bytes of a value an error echoes
constexpr size_t kMaxMessage = 300;    // bytes of a message from elsewhere (reader, ABI parser)
constexpr size_t kMaxIdentifier = 63;  // PostgreSQL's NAMEDATALEN - 1
constexpr size_t kMaxListed = 8;       // candidates an error names

// Text for an error line: control bytes escaped as \xNN (so it stays one line), and with
// `quote` quotes and backslashes too; cut at max bytes on a UTF-8 character boundary, "..."
// marking the cut.
std::string OneLine(std::string_view text, size_t max, bool quote = false) {
  size_t n = std::min(text.size(), max);
  while (n > 0 && n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = text[i];
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      if (quote && (c == '"' || c == '\\')) out += '\\';
      out += static_cast<char>(c);
    }
  }
  if (n < text.size()) out += "...";
  return out;
}

// A value from the config as an error echoes it: quoted, one line, at most kMaxShown bytes.
std::string Shown(std::string_view value) { return "\"" + OneLine(value, kMaxShown, true) + "\""; }

// "a, b or c", at most kMaxListed of them.
std::string ListOf(const std::vector<std::string>& items) {
  std::string out;
  const size_t n = std::min(items.size(), kMaxListed);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += i + 1 == n && n == items.size() ? " or " : ", ";
    out += items[i];
  }
  if (n < items.size()) out += " or " + std::to_string(items.size() - n) + " more";
  return out;
}

const char* KindOf(const YAML::Node& node) {
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  if (node.IsNull()) return "no value";
  return "a scalar";
}

bool IsDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsSchemaName(std::string_view s) {
  if (s.empty() || s.size() > kMaxIdentifier || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool SameEvent(const Event& a, const Event& b) {
  if (a.name != b.name || a.anonymous != b.anonymous || a.inputs.size() != b.inputs.size()) {
    return false;
  }
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const Param& x = a.inputs[i];
    const Param& y = b.inputs[i];
    if (x.name != y.name || !(x.type == y.type) || x.indexed != y.indexed) return false;
  }
  return true;
}

// An ABI file's events, exact duplicates dropped, and the names it overloads.
struct Abi {
  std::string path;  // as written in the config
  std::vector<Event> events;
  std::vector<std::string> overloaded;  // sorted
};

std::string ConflictMessage(const Abi& abi, const std::string& signature) {
  return abi.path + " declares " + signature +
         " twice, differing in indexed flags, input names or anonymity; a log cannot tell them "
         "apart";
}

// Finds `wanted`, an event name or (with "(") a signature, in the ABI. The error is the message
// without file and key.
Result<size_t> FindEvent(const Abi& abi, std::string_view wanted) {
  std::string compact;
  for (char c : wanted) {
    if (c != ' ' && c != '\t') compact += c;
  }
  const bool by_signature = compact.find_first_of("()") != std::string::npos;
  const std::string name = compact.substr(0, compact.find('('));
  std::vector<size_t> matches;
  std::vector<std::string> same_name;
  std::vector<std::string> names;
  for (size_t i = 0; i < abi.events.size(); ++i) {
    const Event& e = abi.events[i];
    if (by_signature ? e.Signature() == compact : e.name == name) matches.push_back(i);
    if (e.name == name) same_name.push_back(e.Signature());
    if (std::find(names.begin(), names.end(), e.name) == names.end()) names.push_back(e.name);
  }
  if (matches.size() == 1) return matches[0];
  if (matches.size() > 1) {
    const std::string signature = abi.events[matches[0]].Signature();
    const bool one_signature = std::all_of(matches.begin(), matches.end(), [&](size_t i) {
      return abi.events[i].Signature() == signature;
    });
    if (one_signature) return FailedPrecondition(ConflictMessage(abi, signature));
    return FailedPrecondition(Shown(wanted) + " is overloaded in " + abi.path +
                              "; give the full signature: " + ListOf(same_name));
  }
  std::string what = Shown(wanted) + " is not an event of " + abi.path;
  if (!same_name.empty()) {
    what += " (its " + name + " events: " + ListOf(same_name) + ")";
  } else {
    what += " (its events: " + ListOf(names) + ")";
  }
  if (by_signature && (compact.find('(') == std::string::npos || compact.back() != ')')) {
    what += "; quote a signature inside [...], whose commas split it";
  }
  return FailedPrecondition(what);
}

// A key and its value in a mapping.
struct Field {
  YAML::Node key;
  YAML::Node value;
};
using Fields = std::map<std::string, Field>;

class ConfigParser {
 public:
  ConfigParser(std::string_view path, const FileReader& read_file)
      : path_(path), read_file_(read_file) {}

  Result<ContractsConfig> Parse(std::string_view text);

 private:
  // "dex.yaml:7: contracts[1].address: what"; key may be empty (a YAML syntax error).
  Status Error(int line, const std::string& key, const std::string& what) const {
    return FailedPrecondition(path_ + ":" + std::to_string(line) + ": " +
                              (key.empty() ? "" : key + ": ") + what);
  }
  // 1-based; 1 for a node without a mark (an empty document).
  static int LineOf(const YAML::Node& node) { return std::max(node.Mark().line, 0) + 1; }
  // The value's line, or the key's where yaml-cpp marks a null value at the next token.
  static int LineOf(const Field& field) {
    return field.value.IsNull() ? LineOf(field.key) : LineOf(field.value);
  }

  Result<Fields> ReadMap(const YAML::Node& node, int line, const std::string& key,
                         const std::vector<std::string>& allowed, const char* expected) const;
  Status Require(const Fields& fields, int line, const std::string& key, const std::string& name,
                 const char* what) const;
  Result<std::string> ReadScalar(const YAML::Node& node, int line, const std::string& key,
                                 const char* what) const;
  Result<std::vector<std::pair<YAML::Node, std::string>>> ReadScalars(const Field& field,
                                                                      const std::string& key,
                                                                      const char* what) const;
  Result<std::string> ReadAddress(const YAML::Node& node, int line, const std::string& key) const;
  Result<uint64_t> ReadBlock(const Field& field, const std::string& key) const;
  Result<const Abi*> LoadAbi(const Field& field, const std::string& key);
  Result<ContractSpec> ReadContract(const YAML::Node& node, const std::string& key);
  Result<std::vector<FactorySpec>> ReadFactories(const Field& field, const std::string& key,
                                                 const Abi& contract_abi);
  Result<FactorySpec> ReadFactory(const YAML::Node& node, const std::string& key,
                                  const Abi& contract_abi);
  Status CheckTables(const ContractsConfig& config) const;

  const std::string path_;
  const FileReader& read_file_;
  std::map<std::string, Abi> abis_;  // by resolved path
  // Per contract, for CheckTables' errors: its name's line, and the line and key of its events
  // (`events`, or `abi` when all of them are taken).
  std::vector<int> name_lines_;
  std::vector<std::pair<int, std::string>> events_keys_;
};

Result<Fields> ConfigParser::ReadMap(const YAML::Node& node, int line, const std::string& key,
                                     const std::vector<std::string>& allowed,
                                     const char* expected) const {
  if (!node.IsMap()) {
    return Error(line, key, std::string("expected ") + expected + ", not " + KindOf(node));
  }
  Fields fields;
  for (const auto& entry : node) {
    const std::string prefix = key.empty() ? "" : key + ".";
    if (!entry.first.IsScalar()) {
      return Error(LineOf(entry.first), key, std::string("a key is ") + KindOf(entry.first));
    }
    const std::string name = entry.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      return Error(LineOf(entry.first), prefix + OneLine(name, kMaxShown),
                   "unknown key (expected " + ListOf(allowed) + ")");
    }
    if (fields.count(name) > 0) {
      return Error(LineOf(entry.first), prefix + name,
                   "given twice (also on line " + std::to_string(LineOf(fields[name].key)) + ")");
    }
    fields[name] = Field{entry.first, entry.second};
    if (entry.second.IsNull()) {
      return Error(LineOf(entry.first), prefix + name, "has no value");
    }
  }
  return fields;
}

Status ConfigParser::Require(const Fields& fields, int line, const std::string& key,
                             const std::string& name, const char* what) const {
  if (fields.count(name) > 0) return Status::Ok();
  return Error(line, key.empty() ? name : key + "." + name, std::string("missing (") + what + ")");
}

Result<std::string> ConfigParser::ReadScalar(const YAML::Node& node, int line,
                                             const std::string& key, const char* what) const {
  if (!node.IsScalar()) {
    return Error(line, key, std::string("expected ") + what + ", not " + KindOf(node));
  }
  return node.Scalar();
}

Result<std::vector<std::pair<YAML::Node, std::string>>> ConfigParser::ReadScalars(
    const Field& field, const std::string& key, const char* what) const {
  std::vector<std::pair<YAML::Node, std::string>> out;
  if (field.value.IsScalar()) {
    out.emplace_back(field.value, field.value.Scalar());
    return out;
  }
  if (!field.value.IsSequence()) {
    return Error(
        LineOf(field), key,
        std::string("expected ") + what + " or a list of them, not " + KindOf(field.value));
  }
  if (field.value.size() == 0) return Error(LineOf(field), key, "an empty list");
  int i = 0;
  for (const auto& item : field.value) {
    const std::string item_key = key + "[" + std::to_string(i++) + "]";
    GAPLESS_ASSIGN_OR_RETURN(std::string text, ReadScalar(item, LineOf(item), item_key, what));
    out.emplace_back(item, std::move(text));
  }
  return out;
}

Result<std::string> ConfigParser::ReadAddress(const YAML::Node& node, int line,
                                              const std::string& key) const {
  GAPLESS_ASSIGN_OR_RETURN(std::string text, ReadScalar(node, line, key, "an address"));
  bool ok = text.size() == 42 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  for (size_t i = 2; ok && i < text.size(); ++i) {
    ok = std::isxdigit(static_cast<unsigned char>(text[i])) != 0;
  }
  if (!ok) {
    return Error(line, key, Shown(text) + " is not a 20-byte address (\"0x\" and 40 hex digits)");
  }
  // Mixed case is accepted without an EIP-55 checksum check (see the top of this file).
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

Result<uint64_t> ConfigParser::ReadBlock(const Field& field, const std::string& key) const {
  GAPLESS_ASSIGN_OR_RETURN(std::string text,
                           ReadScalar(field.value, LineOf(field), key, "a block number"));
  if (!IsDigits(text)) {
    return Error(LineOf(field), key,
                 Shown(text) + " is not a block number (a non-negative integer)");
  }
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  uint64_t n = 0;
  for (char c : text) {
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (n > (kMax - digit) / 10) {
      return Error(LineOf(field), key, Shown(text) + " is past the largest block number (2^63-1)");
    }
    n = n * 10 + digit;
  }
  return n;
}

Result<const Abi*> ConfigParser::LoadAbi(const Field& field, const std::string& key) {
  GAPLESS_ASSIGN_OR_RETURN(std::string written,
                           ReadScalar(field.value, LineOf(field), key, "a path to an ABI file"));
  if (written.empty()) return Error(LineOf(field), key, "an empty path");
  const std::filesystem::path base = std::filesystem::path(path_).parent_path();
  const std::string resolved = (base / written).string();  // an absolute path stays as it is
  auto cached = abis_.find(resolved);
  if (cached != abis_.end()) return &cached->second;

  auto text = read_file_(resolved);
  if (!text.ok()) {
    return Error(
        LineOf(field), key,
        "cannot read " + Shown(resolved) + ": " + OneLine(text.status().message(), kMaxMessage));
  }
  auto events = ParseEvents(*text);
  if (!events.ok()) {
    return Error(
        LineOf(field), key,
        Shown(written) + " is not an ABI: " + OneLine(events.status().message(), kMaxMessage));
  }
  if (events->empty()) return Error(LineOf(field), key, Shown(written) + " has no events");
  Abi abi;
  abi.path = written;
  std::map<std::string, std::set<std::string>> signatures_by_name;
  for (Event& event : *events) {
    const bool duplicate = std::any_of(abi.events.begin(), abi.events.end(),
                                       [&](const Event& e) { return SameEvent(e, event); });
    if (duplicate) continue;
    signatures_by_name[event.name].insert(event.Signature());
    abi.events.push_back(std::move(event));
  }
  for (const auto& [name, signatures] : signatures_by_name) {
    if (signatures.size() > 1) abi.overloaded.push_back(name);
  }
  return &abis_.emplace(resolved, std::move(abi)).first->second;
}

Result<FactorySpec> ConfigParser::ReadFactory(const YAML::Node& node, const std::string& key,
                                              const Abi& contract_abi) {
  const int line = LineOf(node);
  GAPLESS_ASSIGN_OR_RETURN(Fields fields,
                           ReadMap(node, line, key, {"address", "event", "parameter", "abi"},
                                   "a mapping {address, event, parameter}"));
  GAPLESS_RETURN_IF_ERROR(Require(fields, line, key, "address", "the factory's address"));
  GAPLESS_RETURN_IF_ERROR(Require(fields, line, key, "event", "the event that names a child"));
  GAPLESS_RETURN_IF_ERROR(
      Require(fields, line, key, "parameter", "the event's input holding the child's address"));
  FactorySpec factory;
  const Field& address = fields["address"];
  GAPLESS_ASSIGN_OR_RETURN(factory.address,
                           ReadAddress(address.value, LineOf(address), key + ".address"));
  const Abi* abi = &contract_abi;
  if (fields.count("abi") > 0) {
    GAPLESS_ASSIGN_OR_RETURN(abi, LoadAbi(fields["abi"], key + ".abi"));
  }

  const Field& event_field = fields["event"];
  const std::string event_key = key + ".event";
  GAPLESS_ASSIGN_OR_RETURN(std::string wanted, ReadScalar(event_field.value, LineOf(event_field),
                                                          event_key, "an event name or signature"));
  auto found = FindEvent(*abi, wanted);
  if (!found.ok()) {
    std::string what = found.status().message();
    if (fields.count("abi") == 0) what += "; give the factory's own ABI as " + key + ".abi";
    return Error(LineOf(event_field), event_key, what);
  }
  factory.event = abi->events[*found];
  if (factory.event.anonymous) {
    return Error(
        LineOf(event_field), event_key,
        factory.event.Signature() + " is anonymous: a factory's logs are found by topic 0");
  }

  const Field& parameter_field = fields["parameter"];
  const std::string parameter_key = key + ".parameter";
  GAPLESS_ASSIGN_OR_RETURN(std::string parameter,
                           ReadScalar(parameter_field.value, LineOf(parameter_field), parameter_key,
                                      "an input's name or index"));
  const std::vector<Param>& inputs = factory.event.inputs;
  std::vector<std::string> address_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].type.kind == TypeKind::kAddress) {
      address_inputs.push_back(inputs[i].name.empty() ? std::to_string(i) : inputs[i].name);
    }
  }
  const std::string candidates = address_inputs.empty()
                                     ? "it has no address input"
                                     : "its address inputs: " + ListOf(address_inputs);
  int index = -1;
  if (IsDigits(parameter)) {
    if (parameter.size() < 4 && std::stoul(parameter) < inputs.size()) index = std::stoi(parameter);
  } else {
    for (size_t i = 0; i < inputs.size() && index < 0; ++i) {
      if (inputs[i].name == parameter) index = static_cast<int>(i);
    }
  }
  if (index < 0) {
    return Error(LineOf(parameter_field), parameter_key,
                 Shown(parameter) + " is not an input of " + factory.event.Signature() + " (" +
                     candidates + ")");
  }
  if (inputs[index].type.kind != TypeKind::kAddress) {
    return Error(LineOf(parameter_field), parameter_key,
                 Shown(parameter) + " is a " + inputs[index].type.Canonical() +
                     ", not an address (" + candidates + ")");
  }
  factory.parameter = index;
  return factory;
}

Result<std::vector<FactorySpec>> ConfigParser::ReadFactories(const Field& field,
                                                             const std::string& key,
                                                             const Abi& contract_abi) {
  std::vector<FactorySpec> out;
  auto add = [&](const FactorySpec& f) {
    const bool seen = std::any_of(out.begin(), out.end(), [&](const FactorySpec& o) {
      return o.address == f.address && o.parameter == f.parameter && SameEvent(o.event, f.event);
    });
    if (!seen) out.push_back(f);
  };
  if (field.value.IsMap()) {
    GAPLESS_ASSIGN_OR_RETURN(FactorySpec factory, ReadFactory(field.value, key, contract_abi));
    add(factory);
    return out;
  }
  if (!field.value.IsSequence()) {
    return Error(LineOf(field), key,
                 std::string("expected a mapping {address, event, parameter} or a list of them, "
                             "not ") +
                     KindOf(field.value));
  }
  if (field.value.size() == 0) return Error(LineOf(field), key, "an empty list");
  int i = 0;
  for (const auto& item : field.value) {
    const std::string item_key = key + "[" + std::to_string(i++) + "]";
    GAPLESS_ASSIGN_OR_RETURN(FactorySpec factory, ReadFactory(item, item_key, contract_abi));
    add(factory);
  }
  return out;
}

Result<ContractSpec> ConfigParser::ReadContract(const YAML::Node& node, const std::string& key) {
  const int line = LineOf(node);
  GAPLESS_ASSIGN_OR_RETURN(
      Fields fields,
      ReadMap(node, line, key,
              {"name", "abi", "address", "factory", "start_block", "end_block", "events"},
              "a mapping with name, abi and address or factory"));
  GAPLESS_RETURN_IF_ERROR(Require(fields, line, key, "name", "the contract's name"));
  GAPLESS_RETURN_IF_ERROR(Require(fields, line, key, "abi", "a path to the contract's ABI JSON"));
  const bool has_address = fields.count("address") > 0;
  const bool has_factory = fields.count("factory") > 0;
  if (has_address == has_factory) {
    return Error(has_factory ? LineOf(fields["factory"].key) : line, key,
                 has_address ? "has both address and factory; give one"
                             : "has neither address nor factory; give one");
  }

  ContractSpec contract;
  const Field& name = fields["name"];
  GAPLESS_ASSIGN_OR_RETURN(contract.name,
                           ReadScalar(name.value, LineOf(name), key + ".name", "a name"));
  const bool word_chars =
      !contract.name.empty() && std::all_of(contract.name.begin(), contract.name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      });
  const std::string snake = SnakeCase(contract.name);
  if (!word_chars || snake.empty() || std::isdigit(static_cast<unsigned char>(snake[0]))) {
    return Error(LineOf(name), key + ".name",
                 Shown(contract.name) +
                     " is not a usable contract name (letters, digits and _, not starting with a "
                     "digit: it is snake-cased into table names)");
  }
  name_lines_.push_back(LineOf(name));

  const Field& abi_field = fields["abi"];
  GAPLESS_ASSIGN_OR_RETURN(const Abi* abi, LoadAbi(abi_field, key + ".abi"));
  contract.abi_path = abi->path;
  contract.overloaded_names = abi->overloaded;

  if (has_address) {
    GAPLESS_ASSIGN_OR_RETURN(auto items,
                             ReadScalars(fields["address"], key + ".address", "an address"));
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string item_key =
          key + ".address" +
          (fields["address"].value.IsSequence() ? "[" + std::to_string(i) + "]" : "");
      GAPLESS_ASSIGN_OR_RETURN(std::string address,
                               ReadAddress(items[i].first, LineOf(items[i].first), item_key));
      contract.addresses.push_back(std::move(address));
    }
    std::sort(contract.addresses.begin(), contract.addresses.end());
    contract.addresses.erase(std::unique(contract.addresses.begin(), contract.addresses.end()),
                             contract.addresses.end());
  } else {
    GAPLESS_ASSIGN_OR_RETURN(contract.factories,
                             ReadFactories(fields["factory"], key + ".factory", *abi));
  }

  if (fields.count("start_block") > 0) {
    GAPLESS_ASSIGN_OR_RETURN(contract.start_block,
                             ReadBlock(fields["start_block"], key + ".start_block"));
  }
  if (fields.count("end_block") > 0) {
    GAPLESS_ASSIGN_OR_RETURN(contract.end_block,
                             ReadBlock(fields["end_block"], key + ".end_block"));
    if (contract.start_block && *contract.start_block > *contract.end_block) {
      return Error(LineOf(fields["end_block"]), key + ".end_block",
                   std::to_string(*contract.end_block) + " is below start_block " +
                       std::to_string(*contract.start_block));
    }
  }

  std::vector<bool> selected(abi->events.size(), fields.count("events") == 0);
  if (fields.count("events") > 0) {
    const Field& events = fields["events"];
    events_keys_.emplace_back(LineOf(events), key + ".events");
    GAPLESS_ASSIGN_OR_RETURN(auto items,
                             ReadScalars(events, key + ".events", "an event name or signature"));
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string item_key =
          key + ".events" + (events.value.IsSequence() ? "[" + std::to_string(i) + "]" : "");
      auto found = FindEvent(*abi, items[i].second);
      if (!found.ok()) return Error(LineOf(items[i].first), item_key, found.status().message());
      selected[*found] = true;
    }
  } else {
    events_keys_.emplace_back(LineOf(abi_field), key + ".abi");
  }
  std::set<std::string> signatures;
  for (size_t i = 0; i < abi->events.size(); ++i) {
    if (!selected[i]) continue;
    const std::string signature = abi->events[i].Signature();
    if (!signatures.insert(signature).second) {
      return Error(events_keys_.back().first, events_keys_.back().second,
                   ConflictMessage(*abi, signature));
    }
    contract.events.push_back(abi->events[i]);
  }
  return contract;
}

Status ConfigParser::CheckTables(const ContractsConfig& config) const {
  const std::vector<EventTable> tables = PlanTables(config);
  struct Writer {
    size_t contract;
    std::string event;
  };
  std::map<std::string, Writer> writers;
  size_t t = 0;
  for (size_t c = 0; c < config.contracts.size(); ++c) {
    const std::string key = "contracts[" + std::to_string(c) + "]";
    for (size_t e = 0; e < config.contracts[c].events.size(); ++e, ++t) {
      const EventTable& table = tables.at(t);  // PlanTables keeps config order
      const std::string full = config.name + "." + table.table;
      const std::string event = table.event.Signature();
      if (table.table.size() > kMaxIdentifier) {
        return Error(name_lines_[c], key + ".name",
                     "table " + Shown(full) + " (event " + event + ") is " +
                         std::to_string(table.table.size()) +
                         " bytes, over PostgreSQL's 63; shorten the contract's name");
      }
      auto [it, fresh] = writers.emplace(table.table, Writer{c, event});
      if (fresh) continue;
      if (it->second.contract == c) {
        return Error(events_keys_[c].first, events_keys_[c].second,
                     "events " + it->second.event + " and " + event + " both write table " + full);
      }
      return Error(name_lines_[c], key + ".name",
                   "table " + full + " is written by contracts[" +
                       std::to_string(it->second.contract) + "] (event " + it->second.event +
                       ") and by this contract (event " + event + ")");
    }
  }
  return Status::Ok();
}

Result<ContractsConfig> ConfigParser::Parse(std::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Error(std::max(e.mark.line, 0) + 1, "",
                 "not valid YAML: " + OneLine(e.msg, kMaxMessage));
  }
  if (root.IsNull()) return Error(1, "", "empty; expected name and contracts");
  GAPLESS_ASSIGN_OR_RETURN(Fields fields, ReadMap(root, LineOf(root), "", {"name", "contracts"},
                                                  "a mapping with name and contracts"));
  const int line = LineOf(root);
  GAPLESS_RETURN_IF_ERROR(Require(fields, line, "", "name", "the schema the tables go into"));
  GAPLESS_RETURN_IF_ERROR(Require(fields, line, "", "contracts", "the list of contracts"));

  ContractsConfig config;
  config.path = path_;
  const Field& name = fields["name"];
  GAPLESS_ASSIGN_OR_RETURN(config.name, ReadScalar(name.value, LineOf(name), "name", "a name"));
  if (!IsSchemaName(config.name)) {
    return Error(LineOf(name), "name",
                 Shown(config.name) +
                     " is not a schema name (a lower-case identifier: [a-z_][a-z0-9_]*, at most "
                     "63 bytes)");
  }
  if (config.name == "public" || config.name == "information_schema" ||
      config.name.rfind("pg_", 0) == 0) {
    return Error(LineOf(name), "name",
                 Shown(config.name) +
                     " is reserved (gapless's own tables or PostgreSQL's); "
                     "choose a schema of its own");
  }

  const Field& contracts = fields["contracts"];
  if (!contracts.value.IsSequence()) {
    return Error(LineOf(contracts), "contracts",
                 std::string("expected a list of contracts, not ") + KindOf(contracts.value));
  }
  if (contracts.value.size() == 0) return Error(LineOf(contracts), "contracts", "an empty list");
  std::map<std::string, size_t> by_snake;
  for (const auto& item : contracts.value) {
    const size_t i = config.contracts.size();
    const std::string key = "contracts[" + std::to_string(i) + "]";
    GAPLESS_ASSIGN_OR_RETURN(ContractSpec contract, ReadContract(item, key));
    auto [it, fresh] = by_snake.emplace(SnakeCase(contract.name), i);
    if (!fresh) {
      const std::string& other = config.contracts[it->second].name;
      return Error(name_lines_[i], key + ".name",
                   Shown(contract.name) +
                       (other == contract.name
                            ? " is also the name of contracts[" + std::to_string(it->second) + "]"
                            : " names the same tables as contracts[" + std::to_string(it->second) +
                                  "] (" + Shown(other) + ")"));
    }
    config.contracts.push_back(std::move(contract));
  }
  GAPLESS_RETURN_IF_ERROR(CheckTables(config));
  return config;
}

}  // namespace

Result<ContractsConfig> ParseContractsConfig(std::string_view yaml_text,
                                             std::string_view config_path,
                                             const FileReader& read_file) {
  ConfigParser parser(config_path, read_file);
  try {
    return parser.Parse(yaml_text);
  } catch (const YAML::Exception& e) {
    // Not expected past Load (every access checks the node's kind first); kept in here anyway.
    return FailedPrecondition(std::string(config_path) + ":" +
                              std::to_string(std::max(e.mark.line, 0) + 1) + ": " +
                              OneLine(e.msg, kMaxMessage));
  }
}

}  // namespace gapless::abi
