#include "events/event.h"

#include <openssl/evp.h>
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <ctime>

#include "fmt/format.h"
#include "fmt/ranges.h"

namespace gapless {
namespace {

namespace dom = simdjson::dom;

bool ParseUuid(std::string_view text, std::array<unsigned char, 16>& out) {
  size_t n = 0;
  int high = -1;
  for (char c : text) {
    if (c == '-') continue;
    int v = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (v < 0 || n >= 16) return false;
    if (high < 0) {
      high = v;
    } else {
      out[n++] = static_cast<unsigned char>(high << 4 | v);
      high = -1;
    }
  }
  return n == 16 && high < 0;
}

// 8-4-4-4-12 lower-case hex of 16 bytes.
std::string FormatUuid(const unsigned char* b) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(36, '-');
  size_t at = 0;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) ++at;  // the dash
    out[at++] = kHex[b[i] >> 4];
    out[at++] = kHex[b[i] & 0xf];
  }
  return out;
}

// RFC 4122 version-5 UUID: SHA-1 of the namespace's bytes then `name`. The digest is fetched once
// (OpenSSL 3's implicit fetch per call is most of a short digest's cost) and each thread reuses
// one context.
std::string Uuid5(const std::array<unsigned char, 16>& ns, std::string_view name) {
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA1", nullptr);
  struct Context {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~Context() { EVP_MD_CTX_free(ctx); }
  };
  thread_local Context c;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestInit_ex2(c.ctx, md != nullptr ? md : EVP_sha1(), nullptr);
  EVP_DigestUpdate(c.ctx, ns.data(), ns.size());
  EVP_DigestUpdate(c.ctx, name.data(), name.size());
  EVP_DigestFinal_ex(c.ctx, digest, &len);
  digest[6] = static_cast<unsigned char>((digest[6] & 0x0f) | 0x50);  // version 5
  digest[8] = static_cast<unsigned char>((digest[8] & 0x3f) | 0x80);  // RFC 4122 variant
  return FormatUuid(digest);
}

void AppendNumber(std::string& out, uint64_t value) {
  char buf[20];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, value).ptr);
}

void AppendOptionalString(std::string& out, const std::optional<std::string>& s) {
  if (s) {
    AppendJsonString(out, *s);
  } else {
    out += "null";
  }
}

// A small writer of one JSON object's members, in order.
class ObjectWriter {
 public:
  explicit ObjectWriter(std::string& out) : out_(out) { out_ += '{'; }
  void Key(std::string_view key) {
    if (!first_) out_ += ',';
    first_ = false;
    AppendJsonString(out_, key);
    out_ += ':';
  }
  void String(std::string_view key, std::string_view value) {
    Key(key);
    AppendJsonString(out_, value);
  }
  void OptionalString(std::string_view key, const std::optional<std::string>& value) {
    Key(key);
    AppendOptionalString(out_, value);
  }
  void Number(std::string_view key, uint64_t value) {
    Key(key);
    AppendNumber(out_, value);
  }
  void Raw(std::string_view key, std::string_view json) {
    Key(key);
    out_ += json;
  }
  void End() { out_ += '}'; }

 private:
  std::string& out_;
  bool first_ = true;
};

std::string BlockPayload(uint64_t chain_id, const Block& b) {
  std::string out;
  ObjectWriter w(out);
  w.Number("chain_id", chain_id);
  w.Number("block_number", b.number);
  w.String("hash", b.hash);
  w.String("parent_hash", b.parent_hash);
  w.String("timestamp", IsoTime(b.timestamp));
  w.Number("transaction_count", b.transaction_count);
  w.String("miner", b.miner);
  w.Number("gas_used", b.gas_used);
  w.Number("gas_limit", b.gas_limit);
  w.OptionalString("base_fee_per_gas", b.base_fee_per_gas
                                           ? std::optional(b.base_fee_per_gas->ToDecimal())
                                           : std::nullopt);
  w.End();
  return out;
}

std::string TransactionPayload(uint64_t chain_id, const Transaction& t) {
  std::string out;
  ObjectWriter w(out);
  w.Number("chain_id", chain_id);
  w.String("hash", t.hash);
  w.Number("block_number", t.block_number);
  w.String("block_hash", t.block_hash);
  w.Number("transaction_index", t.transaction_index);
  w.String("from_address", t.from_address);
  w.OptionalString("to_address", t.to_address);
  w.OptionalString("contract_address", t.contract_address);
  w.String("value", t.value.ToDecimal());
  w.OptionalString("status", t.status
                                 ? std::optional<std::string>(*t.status == 1 ? "success" : "failed")
                                 : std::nullopt);
  w.Number("gas_used", t.gas_used);
  w.OptionalString("effective_gas_price", t.effective_gas_price
                                              ? std::optional(t.effective_gas_price->ToDecimal())
                                              : std::nullopt);
  w.End();
  return out;
}

std::string TransferPayload(uint64_t chain_id, const Block& b, const TokenTransfer& t,
                            const Token* token) {
  std::string out;
  ObjectWriter w(out);
  w.Number("chain_id", chain_id);
  w.String("token_address", t.token_address);
  w.String("token_standard", TokenStandardName(t.standard));
  w.OptionalString("token_symbol", token != nullptr ? token->symbol : std::nullopt);
  if (token != nullptr && token->decimals.has_value()) {
    w.Number("token_decimals", *token->decimals);
  } else {
    w.OptionalString("token_decimals", std::nullopt);
  }
  w.String("from_address", t.from_address);
  w.String("to_address", t.to_address);
  w.String("amount", t.value.ToDecimal());
  w.OptionalString("token_id", t.token_id ? std::optional(t.token_id->ToDecimal()) : std::nullopt);
  w.OptionalString("operator_address", t.operator_address);
  w.String("transaction_hash", t.transaction_hash);
  w.Number("log_index", t.log_index);
  w.Number("batch_index", t.batch_index);
  w.Number("block_number", b.number);
  w.String("block_hash", b.hash);
  w.End();
  return out;
}

std::string InternalTransferPayload(uint64_t chain_id, const Block& b, const Trace& t) {
  std::string out;
  ObjectWriter w(out);
  w.Number("chain_id", chain_id);
  w.Number("block_number", b.number);
  w.String("block_hash", b.hash);
  w.OptionalString("transaction_hash", t.transaction_hash);
  w.Number("transaction_index", t.transaction_index.value_or(0));
  w.Raw("trace_address", "[" + fmt::format("{}", fmt::join(t.trace_address, ",")) + "]");
  w.String("trace_type", t.trace_type);
  w.OptionalString("from_address", t.from_address);
  w.OptionalString("to_address", t.to_address);
  w.String("value", t.value.has_value() ? t.value->ToDecimal() : "0");
  w.End();
  return out;
}

Status FieldError(std::string_view what, std::string_view field) {
  return InvalidData(fmt::format("{}: field \"{}\" is missing or malformed", what, field));
}

// Reads a string field; InvalidData naming it when absent or not a string.
Status GetString(dom::object o, std::string_view what, std::string_view field, std::string& out) {
  std::string_view v;
  if (o[field].get_string().get(v) != simdjson::SUCCESS) return FieldError(what, field);
  out.assign(v);
  return Status::Ok();
}

Status GetNumber(dom::object o, std::string_view what, std::string_view field, uint64_t& out) {
  if (o[field].get_uint64().get(out) != simdjson::SUCCESS) return FieldError(what, field);
  return Status::Ok();
}

Status GetOptionalString(dom::object o, std::string_view what, std::string_view field,
                         std::optional<std::string>& out) {
  dom::element e;
  if (o[field].get(e) != simdjson::SUCCESS || e.is_null()) {
    out.reset();
    return Status::Ok();
  }
  std::string_view v;
  if (e.get_string().get(v) != simdjson::SUCCESS) return FieldError(what, field);
  out = std::string(v);
  return Status::Ok();
}

// The fields of a token.transfer payload from `o` (a payload, or an element of a block.reverted
// payload's token_transfers); InvalidData naming the field.
Status ReadTransfer(dom::object o, std::string_view what, TransferEvent& t) {
  GAPLESS_RETURN_IF_ERROR(GetString(o, what, "token_address", t.token_address));
  GAPLESS_RETURN_IF_ERROR(GetString(o, what, "token_standard", t.token_standard));
  GAPLESS_RETURN_IF_ERROR(GetString(o, what, "from_address", t.from_address));
  GAPLESS_RETURN_IF_ERROR(GetString(o, what, "to_address", t.to_address));
  GAPLESS_RETURN_IF_ERROR(GetString(o, what, "amount", t.amount));
  GAPLESS_RETURN_IF_ERROR(GetOptionalString(o, what, "token_id", t.token_id));
  // Optional (absent before the tokens table existed; null when not known).
  GAPLESS_RETURN_IF_ERROR(GetOptionalString(o, what, "token_symbol", t.token_symbol));
  dom::element decimals;
  if (o["token_decimals"].get(decimals) == simdjson::SUCCESS && !decimals.is_null()) {
    uint64_t d = 0;
    if (decimals.get_uint64().get(d) != simdjson::SUCCESS || d > 255) {
      return FieldError(what, "token_decimals");
    }
    t.token_decimals = d;
  }
  GAPLESS_RETURN_IF_ERROR(GetString(o, what, "transaction_hash", t.transaction_hash));
  GAPLESS_RETURN_IF_ERROR(GetNumber(o, what, "log_index", t.log_index));
  GAPLESS_RETURN_IF_ERROR(GetNumber(o, what, "batch_index", t.batch_index));
  GAPLESS_RETURN_IF_ERROR(GetNumber(o, what, "block_number", t.block_number));
  GAPLESS_RETURN_IF_ERROR(GetString(o, what, "block_hash", t.block_hash));
  auto decimal = [](std::string_view v) {
    return !v.empty() && v.size() <= 78 && v.find_first_not_of("0123456789") == v.npos;
  };
  if (!decimal(t.amount)) return FieldError(what, "amount");
  if (t.token_id && !decimal(*t.token_id)) return FieldError(what, "token_id");
  if (t.token_standard != "erc20" && t.token_standard != "erc721" &&
      t.token_standard != "erc1155") {
    return FieldError(what, "token_standard");
  }
  return Status::Ok();
}

}  // namespace

bool IsDecodedEventType(std::string_view type) {
  int parts = 1;
  size_t length = 0;
  for (char c : type) {
    if (c == '.') {
      if (length == 0) return false;
      ++parts;
      length = 0;
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') {
      ++length;
    } else {
      return false;
    }
  }
  return parts == 3 && length > 0;
}

const std::vector<std::string_view>& EventTypes() {
  static const std::vector<std::string_view> types = {
      kBlockNew,         kTransactionConfirmed, kTokenTransfer,   kTransactionPending,
      kContractVerified, kBlockReverted,        kInternalTransfer};
  return types;
}

std::string EventTopic(std::string_view event_type, uint64_t chain_id) {
  return fmt::format("{}.{}", event_type, chain_id);
}

std::string NameBasedUuid(std::string_view namespace_uuid, std::string_view name) {
  std::array<unsigned char, 16> ns{};
  if (!ParseUuid(namespace_uuid, ns)) return {};
  return Uuid5(ns, name);
}

std::string EventId(uint64_t chain_id, std::string_view event_type, std::string_view identity) {
  // NameBasedUuid(kEventNamespace, "{chain_id}/{event_type}/{identity}"), the namespace parsed
  // once.
  static const std::array<unsigned char, 16> ns = [] {
    std::array<unsigned char, 16> out{};
    ParseUuid(kEventNamespace, out);
    return out;
  }();
  std::string name;
  name.reserve(24 + event_type.size() + identity.size());
  AppendNumber(name, chain_id);
  name += '/';
  name += event_type;
  name += '/';
  name += identity;
  return Uuid5(ns, name);
}

std::string IsoTime(uint64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  // Runs of characters that need no escape (all of a hash, an address or a number) in one append.
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    }
  }
  out.append(s.data() + run, s.size() - run);
  out += '"';
}

std::string_view PhaseName(EventPhase phase) {
  return phase == EventPhase::kLive ? "live" : "backfill";
}

OutgoingEvent MakeEvent(uint64_t chain_id, std::string_view event_type, std::string event_id,
                        std::string_view timestamp, std::string_view payload_json,
                        EventPhase phase) {
  OutgoingEvent e;
  e.key.reserve(20);
  AppendNumber(e.key, chain_id);
  e.topic.reserve(event_type.size() + 1 + e.key.size());
  e.topic.append(event_type).append(".").append(e.key);  // EventTopic
  e.event_type = std::string(event_type);
  e.event_id = std::move(event_id);
  static const std::string backfill =
      fmt::format(R"({{"producer":"{}","version":"{}","phase":"{}"}})", kEventProducer,
                  kEventVersion, PhaseName(EventPhase::kBackfill));
  static const std::string live =
      fmt::format(R"({{"producer":"{}","version":"{}","phase":"{}"}})", kEventProducer,
                  kEventVersion, PhaseName(EventPhase::kLive));
  const std::string& metadata = phase == EventPhase::kLive ? live : backfill;
  e.body.reserve(128 + e.event_id.size() + timestamp.size() + payload_json.size());
  ObjectWriter w(e.body);
  w.String("event_type", event_type);
  w.String("event_id", e.event_id);
  w.String("timestamp", timestamp);
  w.Number("chain_id", chain_id);
  w.Raw("payload", payload_json);
  w.Raw("metadata", metadata);
  w.End();
  return e;
}

Result<OutgoingEvent> ProducerEvent(uint64_t chain_id, std::string_view event_type,
                                    std::string_view identity, std::string_view payload_json,
                                    uint64_t unix_seconds) {
  const std::vector<std::string_view>& types = EventTypes();
  if (std::find(types.begin(), types.end(), event_type) == types.end()) {
    return FailedPrecondition("event type \"" + std::string(event_type) + "\" is not one of " +
                              fmt::format("{}", fmt::join(types, ", ")));
  }
  if (identity.empty()) return FailedPrecondition("an event needs an identity (its object's key)");
  dom::parser parser;
  dom::element doc;
  dom::object o;
  if (parser.parse(payload_json.data(), payload_json.size()).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(o) != simdjson::SUCCESS) {
    return FailedPrecondition("the payload of a " + std::string(event_type) +
                              " event must be a JSON object");
  }
  std::string payload = simdjson::minify(o);
  dom::element chain;
  if (o["chain_id"].get(chain) != simdjson::SUCCESS) {
    payload = "{\"chain_id\":" + std::to_string(chain_id) + (payload.size() > 2 ? "," : "") +
              payload.substr(1);
  }
  return MakeEvent(chain_id, event_type, EventId(chain_id, event_type, identity),
                   IsoTime(unix_seconds), payload);
}

OutgoingEvent ContractVerifiedEvent(uint64_t chain_id, std::string_view address,
                                    std::string_view verification_status, uint64_t verified_at) {
  std::string lower(address);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string payload;
  ObjectWriter w(payload);
  w.Number("chain_id", chain_id);
  w.String("address", lower);
  w.String("verification_status", verification_status);
  w.String("verified_at", IsoTime(verified_at));
  w.End();
  return MakeEvent(chain_id, kContractVerified,
                   EventId(chain_id, kContractVerified, lower + "/" + std::to_string(verified_at)),
                   IsoTime(verified_at), payload);
}

namespace {

// The block hash as identities hold it: "hash", or "hash#n" for incarnation n > 0 (event.h).
std::string Incarnated(std::string_view block_hash, uint64_t incarnation) {
  if (incarnation == 0) return std::string(block_hash);
  return fmt::format("{}#{}", block_hash, incarnation);
}

}  // namespace

std::string BlockNewEventId(uint64_t chain_id, std::string_view block_hash, uint64_t incarnation) {
  return EventId(chain_id, kBlockNew, Incarnated(block_hash, incarnation));
}

std::string TransactionEventId(uint64_t chain_id, std::string_view block_hash,
                               std::string_view transaction_hash, uint64_t incarnation) {
  std::string identity = Incarnated(block_hash, incarnation);
  identity += '/';
  identity += transaction_hash;
  return EventId(chain_id, kTransactionConfirmed, identity);
}

std::string TransferEventId(uint64_t chain_id, std::string_view block_hash, uint64_t log_index,
                            uint64_t batch_index, uint64_t incarnation) {
  return EventId(
      chain_id, kTokenTransfer,
      fmt::format("{}/{}/{}", Incarnated(block_hash, incarnation), log_index, batch_index));
}

std::string InternalTransferEventId(uint64_t chain_id, std::string_view block_hash,
                                    const Trace& trace, uint64_t incarnation) {
  return EventId(
      chain_id, kInternalTransfer,
      fmt::format("{}/{}/{}", Incarnated(block_hash, incarnation),
                  trace.transaction_hash.value_or(""), fmt::join(trace.trace_address, "_")));
}

std::string DecodedEventId(uint64_t chain_id, std::string_view event_type,
                           std::string_view block_hash, uint64_t log_index, uint64_t incarnation) {
  return EventId(chain_id, event_type,
                 fmt::format("{}/{}", Incarnated(block_hash, incarnation), log_index));
}

OutgoingEvent DecodedLogEvent(uint64_t chain_id, std::string_view event_type,
                              std::string_view block_hash, uint64_t log_index,
                              uint64_t block_timestamp, std::string_view fields_json,
                              uint64_t incarnation, EventPhase phase) {
  std::string payload;
  payload.reserve(24 + fields_json.size());
  payload += "{\"chain_id\":";
  AppendNumber(payload, chain_id);
  if (!fields_json.empty()) payload += ',';
  payload.append(fields_json);
  payload += '}';
  return MakeEvent(chain_id, event_type,
                   DecodedEventId(chain_id, event_type, block_hash, log_index, incarnation),
                   IsoTime(block_timestamp), payload, phase);
}

std::vector<OutgoingEvent> BlockEvents(uint64_t chain_id, const BlockData& data,
                                       uint64_t incarnation, EventPhase phase) {
  const Block& b = data.block;
  std::vector<OutgoingEvent> out;
  out.reserve(1 + data.transactions.size() + data.token_transfers.size());
  const std::string time = IsoTime(b.timestamp);
  out.push_back(MakeEvent(chain_id, kBlockNew, BlockNewEventId(chain_id, b.hash, incarnation), time,
                          BlockPayload(chain_id, b), phase));
  for (const Transaction& t : data.transactions) {
    out.push_back(MakeEvent(chain_id, kTransactionConfirmed,
                            TransactionEventId(chain_id, b.hash, t.hash, incarnation), time,
                            TransactionPayload(chain_id, t), phase));
  }
  for (const TokenTransfer& t : data.token_transfers) {
    const Token* token = nullptr;
    for (const Token& k : data.tokens) {
      if (k.address == t.token_address) token = &k;
    }
    out.push_back(
        MakeEvent(chain_id, kTokenTransfer,
                  TransferEventId(chain_id, b.hash, t.log_index, t.batch_index, incarnation), time,
                  TransferPayload(chain_id, b, t, token), phase));
  }
  for (const Trace& t : data.traces) {
    if (!IsInternalTransfer(t)) continue;
    out.push_back(MakeEvent(chain_id, kInternalTransfer,
                            InternalTransferEventId(chain_id, b.hash, t, incarnation), time,
                            InternalTransferPayload(chain_id, b, t), phase));
  }
  return out;
}

OutgoingEvent BlockRevertedEvent(uint64_t chain_id, const BlockData& orphaned, uint64_t generation,
                                 uint64_t reverted_at, uint64_t incarnation,
                                 const std::vector<std::pair<std::string, uint64_t>>& decoded) {
  const Block& b = orphaned.block;
  std::string ids = "[";
  auto add_id = [&ids](const std::string& id) {
    if (ids.size() > 1) ids += ',';
    AppendJsonString(ids, id);
  };
  add_id(BlockNewEventId(chain_id, b.hash, incarnation));
  for (const Transaction& t : orphaned.transactions) {
    add_id(TransactionEventId(chain_id, b.hash, t.hash, incarnation));
  }
  std::string transfers = "[";
  for (const TokenTransfer& t : orphaned.token_transfers) {
    const std::string id =
        TransferEventId(chain_id, b.hash, t.log_index, t.batch_index, incarnation);
    add_id(id);
    // {"event_id":"...", then the token.transfer payload's members.
    if (transfers.size() > 1) transfers += ',';
    transfers += "{\"event_id\":";
    AppendJsonString(transfers, id);
    transfers += ',';
    // The token's symbol and decimals are not kept for a retraction: null here.
    transfers += std::string_view(TransferPayload(chain_id, b, t, nullptr)).substr(1);
  }
  for (const Trace& t : orphaned.traces) {
    if (IsInternalTransfer(t)) add_id(InternalTransferEventId(chain_id, b.hash, t, incarnation));
  }
  for (const auto& [event_type, log_index] : decoded) {
    add_id(DecodedEventId(chain_id, event_type, b.hash, log_index, incarnation));
  }
  ids += ']';
  transfers += ']';
  std::string payload;
  ObjectWriter w(payload);
  w.Number("chain_id", chain_id);
  w.Number("block_number", b.number);
  w.String("block_hash", b.hash);
  w.Number("reorg_generation", generation);
  w.Raw("reverted_event_ids", ids);
  w.Raw("token_transfers", transfers);
  w.End();
  return MakeEvent(chain_id, kBlockReverted,
                   EventId(chain_id, kBlockReverted, fmt::format("{}/{}", b.hash, generation)),
                   IsoTime(reverted_at), payload);
}

Result<Envelope> ParseEnvelope(std::string_view json) {
  dom::parser parser;
  dom::element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS) {
    return InvalidData("event envelope: not valid JSON");
  }
  dom::object o;
  if (doc.get_object().get(o) != simdjson::SUCCESS) {
    return InvalidData("event envelope: not a JSON object");
  }
  Envelope e;
  constexpr std::string_view kWhat = "event envelope";
  GAPLESS_RETURN_IF_ERROR(GetString(o, kWhat, "event_type", e.event_type));
  GAPLESS_RETURN_IF_ERROR(GetString(o, kWhat, "event_id", e.event_id));
  GAPLESS_RETURN_IF_ERROR(GetString(o, kWhat, "timestamp", e.timestamp));
  GAPLESS_RETURN_IF_ERROR(GetNumber(o, kWhat, "chain_id", e.chain_id));
  dom::object payload;
  if (o["payload"].get_object().get(payload) != simdjson::SUCCESS) {
    return FieldError(kWhat, "payload");
  }
  e.payload_json = simdjson::minify(payload);
  dom::object metadata;
  if (o["metadata"].get_object().get(metadata) != simdjson::SUCCESS) {
    return FieldError(kWhat, "metadata");
  }
  GAPLESS_RETURN_IF_ERROR(GetString(metadata, kWhat, "producer", e.producer));
  GAPLESS_RETURN_IF_ERROR(GetString(metadata, kWhat, "version", e.version));
  dom::element phase;
  if (metadata["phase"].get(phase) == simdjson::SUCCESS) {
    GAPLESS_RETURN_IF_ERROR(GetString(metadata, kWhat, "phase", e.phase));
    if (e.phase != PhaseName(EventPhase::kBackfill) && e.phase != PhaseName(EventPhase::kLive)) {
      return InvalidData("event envelope: metadata.phase is \"" + e.phase +
                         "\", not \"backfill\" or \"live\"");
    }
  }
  return e;
}

Result<TransferEvent> ParseTransferPayload(std::string_view payload_json) {
  dom::parser parser;
  dom::element doc;
  dom::object o;
  if (parser.parse(payload_json.data(), payload_json.size()).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(o) != simdjson::SUCCESS) {
    return InvalidData("token.transfer payload: not a JSON object");
  }
  TransferEvent t;
  GAPLESS_RETURN_IF_ERROR(ReadTransfer(o, "token.transfer payload", t));
  return t;
}

Result<RevertedBlock> ParseBlockRevertedPayload(std::string_view payload_json) {
  dom::parser parser;
  dom::element doc;
  dom::object o;
  if (parser.parse(payload_json.data(), payload_json.size()).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(o) != simdjson::SUCCESS) {
    return InvalidData("block.reverted payload: not a JSON object");
  }
  constexpr std::string_view kWhat = "block.reverted payload";
  RevertedBlock r;
  GAPLESS_RETURN_IF_ERROR(GetNumber(o, kWhat, "block_number", r.block_number));
  GAPLESS_RETURN_IF_ERROR(GetString(o, kWhat, "block_hash", r.block_hash));
  GAPLESS_RETURN_IF_ERROR(GetNumber(o, kWhat, "reorg_generation", r.reorg_generation));
  dom::array ids;
  if (o["reverted_event_ids"].get_array().get(ids) != simdjson::SUCCESS) {
    return FieldError(kWhat, "reverted_event_ids");
  }
  for (dom::element e : ids) {
    std::string_view id;
    if (e.get_string().get(id) != simdjson::SUCCESS) return FieldError(kWhat, "reverted_event_ids");
    r.reverted_event_ids.emplace_back(id);
  }
  dom::array transfers;
  if (o["token_transfers"].get_array().get(transfers) != simdjson::SUCCESS) {
    return FieldError(kWhat, "token_transfers");
  }
  constexpr std::string_view kTransferWhat = "block.reverted payload token_transfers[]";
  for (dom::element e : transfers) {
    dom::object t;
    if (e.get_object().get(t) != simdjson::SUCCESS) return FieldError(kWhat, "token_transfers");
    std::pair<std::string, TransferEvent> item;
    GAPLESS_RETURN_IF_ERROR(GetString(t, kTransferWhat, "event_id", item.first));
    GAPLESS_RETURN_IF_ERROR(ReadTransfer(t, kTransferWhat, item.second));
    r.token_transfers.push_back(std::move(item));
  }
  return r;
}

}  // namespace gapless
