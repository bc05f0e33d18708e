#include "rpc/json_rpc.h"

#include <fmt/format.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <numeric>

#include "core/metrics.h"
#include "core/text.h"

namespace gapless {

namespace od = simdjson::ondemand;

struct JsonRpcClient::Parser {
  od::parser parser;
};

namespace {

constexpr size_t kPadding = simdjson::SIMDJSON_PADDING;

// A copy of s with simdjson's padding as spare capacity, so callers can parse it in place.
std::string PaddedCopy(std::string_view s) {
  std::string out;
  out.reserve(s.size() + kPadding);
  out.append(s);
  return out;
}

void EnsurePadding(std::string& s) {
  if (s.capacity() < s.size() + kPadding) s.reserve(s.size() + kPadding);
}

simdjson::padded_string_view Padded(std::string& s) {
  EnsurePadding(s);
  return simdjson::padded_string_view(s.data(), s.size(), s.capacity());
}

// Printable, bounded excerpt of untrusted text for error messages.
std::string Snippet(std::string_view s, size_t max = 160) {
  std::string out;
  size_t n = std::min(s.size(), max);
  out.reserve(n + 3);
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    out.push_back(c < 0x20 || c == 0x7f ? ' ' : static_cast<char>(c));
  }
  if (s.size() > max) out.append("...");
  return out;
}

std::string DescribeCall(const RpcRequest& call) {
  return fmt::format("{}({})", call.method, Snippet(call.params_json, 120));
}

std::string DescribeCalls(std::span<const RpcRequest> calls, const std::vector<size_t>& pending,
                          bool single) {
  if (single || pending.size() == 1) return DescribeCall(calls[pending.front()]);
  return fmt::format("batch of {} calls {} .. {}", pending.size(),
                     DescribeCall(calls[pending.front()]), DescribeCall(calls[pending.back()]));
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

bool IsNullJson(std::string_view json) { return json == "null"; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool IsHexData(std::string_view s) {
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  for (char c : s.substr(2)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
  }
  return true;
}

bool IsMethodName(std::string_view m) {
  if (m.empty()) return false;
  for (char c : m) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

// The document was consumed to its end (no trailing content).
bool AtEnd(od::document& doc) { return doc.current_location().error() == simdjson::OUT_OF_BOUNDS; }

// The raw JSON text of v (an object, array or scalar), validated for scalars, without trailing
// whitespace. Consumes v.
simdjson::error_code RawJson(od::value v, std::string_view* out) {
  od::json_type type;
  if (auto e = v.type().get(type)) return e;
  switch (type) {
    case od::json_type::object: {
      od::object o;
      if (auto e = v.get_object().get(o)) return e;
      if (auto e = o.raw_json().get(*out)) return e;
      break;
    }
    case od::json_type::array: {
      od::array a;
      if (auto e = v.get_array().get(a)) return e;
      if (auto e = a.raw_json().get(*out)) return e;
      break;
    }
    case od::json_type::null: {
      *out = v.raw_json_token();
      bool is_null = false;
      if (auto e = v.is_null().get(is_null)) return e;
      if (!is_null) return simdjson::N_ATOM_ERROR;
      break;
    }
    case od::json_type::string: {
      *out = v.raw_json_token();
      std::string_view unused;
      if (auto e = v.get_string().get(unused)) return e;
      break;
    }
    case od::json_type::boolean: {
      *out = v.raw_json_token();
      bool unused = false;
      if (auto e = v.get_bool().get(unused)) return e;
      break;
    }
    case od::json_type::number: {
      *out = v.raw_json_token();
      std::string_view t = TrimRight(*out);
      if (t.empty()) return simdjson::NUMBER_ERROR;
      for (char c : t) {
        if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E')) {
          return simdjson::NUMBER_ERROR;
        }
      }
      break;
    }
  }
  *out = TrimRight(*out);
  return simdjson::SUCCESS;
}

// One JSON-RPC response object.
struct Envelope {
  enum class Id { kAbsent, kNull, kNumber, kOther };
  Id id_kind = Id::kAbsent;
  uint64_t id = 0;
  bool has_result = false;
  std::string_view result;  // into the body
  bool has_error = false;
  int64_t error_code = 0;
  std::string error_message;
  std::string error_data;
};

simdjson::error_code ParseErrorObject(od::value v, Envelope* env) {
  od::json_type type;
  if (auto e = v.type().get(type)) return e;
  if (type == od::json_type::null) return simdjson::SUCCESS;  // "error": null
  env->has_error = true;
  if (type != od::json_type::object) {
    std::string_view raw;
    if (auto e = RawJson(v, &raw)) return e;
    env->error_message = Snippet(raw);
    return simdjson::SUCCESS;
  }
  od::object obj;
  if (auto e = v.get_object().get(obj)) return e;
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return e;
    od::value fv;
    if (auto e = field.value().get(fv)) return e;
    if (key == "code") {
      if (auto e = fv.get_int64().get(env->error_code)) return e;
    } else if (key == "message") {
      std::string_view message;
      if (fv.get_string().get(message) != simdjson::SUCCESS) {
        std::string_view raw;
        if (auto e2 = RawJson(fv, &raw)) return e2;
        message = raw;
      }
      env->error_message = Snippet(message, 300);
    } else if (key == "data") {
      std::string_view raw;
      if (auto e = RawJson(fv, &raw)) return e;
      env->error_data = Snippet(raw, 200);
    }
  }
  return simdjson::SUCCESS;
}

simdjson::error_code ParseEnvelope(od::object obj, Envelope* env) {
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return e;
    od::value v;
    if (auto e = field.value().get(v)) return e;
    if (key == "id") {
      od::json_type type;
      if (auto e = v.type().get(type)) return e;
      env->id_kind = Envelope::Id::kOther;
      if (type == od::json_type::null) {
        env->id_kind = Envelope::Id::kNull;
      } else if (type == od::json_type::number) {
        if (!v.get_uint64().get(env->id)) env->id_kind = Envelope::Id::kNumber;
      } else if (type == od::json_type::string) {
        std::string_view s;
        if (auto e = v.get_string().get(s)) return e;
        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), env->id);
        if (ec == std::errc() && ptr == s.data() + s.size() && !s.empty()) {
          env->id_kind = Envelope::Id::kNumber;
        }
      }
    } else if (key == "result") {
      if (auto e = RawJson(v, &env->result)) return e;
      env->has_result = true;
    } else if (key == "error") {
      if (auto e = ParseErrorObject(v, env)) return e;
    }
  }
  return simdjson::SUCCESS;
}

std::string IdText(const Envelope& env) {
  switch (env.id_kind) {
    case Envelope::Id::kAbsent:
      return "none";
    case Envelope::Id::kNull:
      return "null";
    case Envelope::Id::kNumber:
      return std::to_string(env.id);
    case Envelope::Id::kOther:
      return "(not a number)";
  }
  return "?";
}

bool IsRateLimit(int64_t code, std::string_view message) {
  if (code == -32005 || code == 429) return true;
  std::string m = Lower(message);
  return m.find("rate limit") != std::string::npos ||
         m.find("limit exceeded") != std::string::npos ||
         m.find("too many requests") != std::string::npos;
}

// Execution reverted: error 3 (a revert with data), or geth's -32000 "execution reverted" (a
// revert without data: the node's message is the only signal there).
bool IsRevert(int64_t code, std::string_view message) {
  return code == 3 || (code == -32000 && message.find("revert") != std::string_view::npos);
}

// "Batch size too large", "batch limit exceeded", "too many requests in batch".
bool MentionsBatch(std::string_view message) {
  std::string lower(message);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find("batch") != std::string::npos;
}

Status RpcErrorStatus(const std::string& what, const Envelope& env, const std::string& endpoint) {
  Status st(CodeForRpcError(env.error_code, env.error_message),
            fmt::format("{}: JSON-RPC error {}: {}{}{} (from {})", what, env.error_code,
                        env.error_message, env.error_data.empty() ? "" : " data=", env.error_data,
                        endpoint));
  if (IsRateLimit(env.error_code, env.error_message)) {
    st = st.WithReason(std::string(kRpcRateLimitedReason));
  } else if (IsRevert(env.error_code, env.error_message)) {
    st = st.WithReason(std::string(kRpcRevertedReason));
  }
  return st;
}

Result<std::string> ElementResult(const Envelope& env, const RpcRequest& call,
                                  const std::string& endpoint) {
  if (env.has_error) return RpcErrorStatus(DescribeCall(call), env, endpoint);
  if (!env.has_result) {
    return InvalidData(fmt::format("{}: answer has neither \"result\" nor \"error\" (from {})",
                                   DescribeCall(call), endpoint));
  }
  return PaddedCopy(env.result);
}

// The failure an HTTP status means (without the reason), OK for 2xx.
Status HttpStatusFailure(const HttpResponse& r, const std::string& what,
                         const std::string& endpoint) {
  long s = r.status;  // NOLINT(runtime/int)
  if (s >= 200 && s < 300) return Status::Ok();
  std::string excerpt = Snippet(r.body);
  if (s == 429) {
    return Unavailable(fmt::format(
        "{}: HTTP 429 Too Many Requests from {}{}: {}", what, endpoint,
        r.retry_after_micros ? fmt::format(" (Retry-After {} ms)", *r.retry_after_micros / 1000)
                             : "",
        excerpt));
  }
  if (s >= 500 || s == 408) {
    return Unavailable(fmt::format("{}: HTTP {} from {}: {}", what, s, endpoint, excerpt));
  }
  if (s >= 400) {
    const char* hint = "";
    if (s == 401 || s == 403) hint = " (check the API key / credentials in the RPC URL)";
    if (s == 404 || s == 405) hint = " (check the RPC URL)";
    if (s == 413) hint = " (request too large: lower the batch size)";
    return FailedPrecondition(
        fmt::format("{}: HTTP {} from {}{}: {}", what, s, endpoint, hint, excerpt));
  }
  if (s >= 300) {
    return FailedPrecondition(
        fmt::format("{}: HTTP {} redirect from {} (not followed for POST: fix the RPC URL)", what,
                    s, endpoint));
  }
  return InvalidData(fmt::format("{}: unexpected HTTP status {} from {}", what, s, endpoint));
}

// Interprets the HTTP status. OK means "parse the body"; a failure carries HttpStatusReason.
Status CheckHttpStatus(const HttpResponse& r, const std::string& what,
                       const std::string& endpoint) {
  return HttpStatusFailure(r, what, endpoint).WithReason(HttpStatusReason(r.status));
}

// Parses the answer to calls[pending[k]] (sent with id base_id + k) into results.
Status ParseAnswer(od::parser& parser, std::string& body, bool single, uint64_t base_id,
                   std::span<const RpcRequest> calls, const std::vector<size_t>& pending,
                   std::vector<Result<std::string>>& results, const std::string& what,
                   const std::string& endpoint) {
  auto malformed = [&](std::string_view problem) {
    return InvalidData(fmt::format("{}: {} in the answer from {} (body starts: {})", what, problem,
                                   endpoint, Snippet(body)));
  };
  size_t first = body.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return malformed("empty body");
  if (body[first] != '{' && body[first] != '[') return malformed("not JSON");

  od::document doc;
  if (auto e = parser.iterate(Padded(body)).get(doc)) {
    return malformed(fmt::format("malformed JSON ({})", simdjson::error_message(e)));
  }
  od::json_type type;
  if (auto e = doc.type().get(type)) {
    return malformed(fmt::format("malformed JSON ({})", simdjson::error_message(e)));
  }

  if (single || type == od::json_type::object) {
    if (type != od::json_type::object) {
      return malformed("an array where one JSON-RPC response object was expected");
    }
    od::object obj;
    Envelope env;
    if (auto e = doc.get_object().get(obj)) {
      return malformed(fmt::format("malformed JSON ({})", simdjson::error_message(e)));
    }
    if (auto e = ParseEnvelope(obj, &env)) {
      return malformed(fmt::format("malformed JSON ({})", simdjson::error_message(e)));
    }
    if (!AtEnd(doc)) return malformed("trailing content after the JSON value");
    if (!single) {
      // Some nodes answer a batch they reject as a whole (rate limit, batch too large) with one
      // error object.
      if (env.has_error) {
        Status st = RpcErrorStatus(what + ": the node rejected the whole batch", env, endpoint);
        if (st.reason().empty() && MentionsBatch(env.error_message)) {
          st = st.WithReason(std::string(kBatchTooLargeReason));
        }
        return st;
      }
      return malformed("an object where a JSON array answering the batch was expected");
    }
    if (env.id_kind != Envelope::Id::kNumber || env.id != base_id) {
      // A node that could not read a request answers it with an error and id null.
      if (!(env.has_error && env.id_kind == Envelope::Id::kNull)) {
        return malformed(fmt::format("id {} answering request id {}", IdText(env), base_id));
      }
    }
    results[pending[0]] = ElementResult(env, calls[pending[0]], endpoint);
    return Status::Ok();
  }

  if (type != od::json_type::array) return malformed("a JSON value that is not a JSON-RPC answer");
  od::array arr;
  if (auto e = doc.get_array().get(arr)) {
    return malformed(fmt::format("malformed JSON ({})", simdjson::error_message(e)));
  }
  std::vector<char> seen(pending.size(), 0);
  for (auto element : arr) {
    od::object obj;
    if (auto e = element.get_object().get(obj)) {
      return malformed(e == simdjson::INCORRECT_TYPE
                           ? std::string("a batch element that is not an object")
                           : fmt::format("malformed JSON ({})", simdjson::error_message(e)));
    }
    Envelope env;
    if (auto e = ParseEnvelope(obj, &env)) {
      return malformed(fmt::format("malformed JSON ({})", simdjson::error_message(e)));
    }
    if (env.id_kind != Envelope::Id::kNumber || env.id < base_id ||
        env.id - base_id >= pending.size()) {
      if (env.has_error && env.id_kind == Envelope::Id::kNull) {
        return RpcErrorStatus(what + ": the node answered with an error without id", env, endpoint);
      }
      return malformed(fmt::format("an answer with unknown id {} (ids sent: {}..{})", IdText(env),
                                   base_id, base_id + pending.size() - 1));
    }
    size_t k = env.id - base_id;
    if (seen[k]) return malformed(fmt::format("two answers for id {}", env.id));
    seen[k] = 1;
    results[pending[k]] = ElementResult(env, calls[pending[k]], endpoint);
  }
  if (!AtEnd(doc)) return malformed("trailing content after the JSON array");
  for (size_t k = 0; k < pending.size(); ++k) {
    if (!seen[k]) {
      results[pending[k]] =
          InvalidData(fmt::format("{}: no answer for this call (id {}) in the batch answer from {}",
                                  DescribeCall(calls[pending[k]]), base_id + k, endpoint));
    }
  }
  return Status::Ok();
}

void AppendRequest(std::string& body, const RpcRequest& call, uint64_t id) {
  body.append(R"({"jsonrpc":"2.0","id":)");
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), id);
  body.append(digits, end);
  body.append(R"(,"method":")");
  body.append(call.method);
  body.append(R"(","params":)");
  body.append(call.params_json.empty() ? std::string_view("[]") : call.params_json);
  body.push_back('}');
}

// What FetchBlocks needs to know about a block's JSON.
struct BlockSummary {
  uint64_t number = 0;
  std::string hash;
  std::vector<std::string> tx_hashes;
};

Status ScanBlock(od::parser& parser, std::string& json, BlockSummary* out) {
  auto bad = [&](std::string_view problem) {
    return InvalidData(fmt::format("eth_getBlockByNumber: {}", problem));
  };
  od::document doc;
  od::object obj;
  if (auto e = parser.iterate(Padded(json)).get(doc); e || (e = doc.get_object().get(obj))) {
    return bad(fmt::format("the block is not a JSON object ({})", simdjson::error_message(e)));
  }
  bool has_number = false;
  for (auto field : obj) {
    std::string_view key;
    od::value v;
    if (auto e = field.unescaped_key().get(key); e || (e = field.value().get(v))) {
      return bad(fmt::format("malformed block JSON ({})", simdjson::error_message(e)));
    }
    if (key == "number") {
      std::string_view raw;
      if (RawJson(v, &raw) != simdjson::SUCCESS) return bad("malformed \"number\"");
      Result<uint64_t> n = ParseHexQuantity(raw);
      if (!n.ok()) return bad(fmt::format("bad \"number\" {}", Snippet(raw)));
      out->number = *n;
      has_number = true;
    } else if (key == "hash") {
      std::string_view s;
      if (v.get_string().get(s) == simdjson::SUCCESS) out->hash = std::string(s);
    } else if (key == "transactions") {
      od::array txs;
      if (v.get_array().get(txs) != simdjson::SUCCESS) {
        return bad("\"transactions\" is not an array");
      }
      for (auto tx : txs) {
        od::value tv;
        od::json_type type;
        if (auto e = tx.get(tv); e || (e = tv.type().get(type))) {
          return bad(fmt::format("malformed \"transactions\" ({})", simdjson::error_message(e)));
        }
        std::string_view hash;
        if (type == od::json_type::string) {  // eth_getBlockByNumber(n, false)
          if (tv.get_string().get(hash)) return bad("malformed transaction hash");
        } else if (type == od::json_type::object) {
          od::object tobj;
          if (tv.get_object().get(tobj) ||
              tobj.find_field_unordered("hash").get_string().get(hash)) {
            return bad(fmt::format("transaction {} has no \"hash\"", out->tx_hashes.size()));
          }
        } else {
          return bad("a transaction that is neither an object nor a hash");
        }
        if (!IsHexData(hash)) return bad(fmt::format("bad transaction hash {}", Snippet(hash)));
        out->tx_hashes.emplace_back(hash);
      }
    }
  }
  if (!AtEnd(doc)) return bad("trailing content after the block");
  if (!has_number) return bad("the block has no \"number\"");
  return Status::Ok();
}

}  // namespace

std::string HttpStatusReason(long status) {  // NOLINT(runtime/int)
  return "http:" + std::to_string(status);
}

Code CodeForRpcError(int64_t code, std::string_view message) {
  if (code == -32601 || code == -32602) return Code::kFailedPrecondition;
  if (code <= -32000 && code >= -32099) return Code::kUnavailable;
  if (IsRateLimit(code, message)) return Code::kUnavailable;
  return Code::kInvalidData;
}

std::optional<int64_t> RpcErrorCode(const Status& status) {
  constexpr std::string_view kMarker = "JSON-RPC error ";
  const std::string& m = status.message();
  size_t pos = m.find(kMarker);
  if (status.ok() || pos == std::string::npos) return std::nullopt;
  const char* begin = m.data() + pos + kMarker.size();
  int64_t code = 0;
  auto [ptr, ec] = std::from_chars(begin, m.data() + m.size(), code);
  if (ec != std::errc() || ptr == begin) return std::nullopt;
  return code;
}

Result<uint64_t> ParseHexQuantity(std::string_view text) {
  std::string_view s = text;
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) {
    return InvalidData(fmt::format("not a hex quantity: {}", Snippet(text, 40)));
  }
  std::string_view digits = s.substr(2);
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, 16);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) {
    return InvalidData(fmt::format("not a 64-bit hex quantity: {}", Snippet(text, 40)));
  }
  return value;
}

std::string HexQuantity(uint64_t n) { return fmt::format("0x{:x}", n); }

namespace {

// The client's metrics (core/metrics.h), shared by every client of the process.
struct RpcMetrics {
  Counter& requests;
  Counter& calls;
  Counter& rate_limited;
  Family<Counter>& errors;
  Histogram& latency;
};

RpcMetrics& Metrics() {
  static RpcMetrics metrics{
      MetricsRegistry::Default()
          .CounterFamily("gapless_rpc_requests_total",
                         "JSON-RPC HTTP requests (POSTs) sent, retries included")
          .Get(),
      MetricsRegistry::Default()
          .CounterFamily("gapless_rpc_calls_total",
                         "JSON-RPC calls sent (a batch of n counts n), retries included")
          .Get(),
      MetricsRegistry::Default()
          .CounterFamily("gapless_rpc_rate_limited_total", "JSON-RPC requests answered HTTP 429")
          .Get(),
      MetricsRegistry::Default().CounterFamily(
          "gapless_rpc_errors_total",
          "Failed JSON-RPC requests, by typed reason (http-429, http-502, rpc:-32005, ...) or "
          "error code (unavailable: a transport failure, invalid_data: a malformed answer)",
          {"reason"}),
      MetricsRegistry::Default()
          .HistogramFamily("gapless_rpc_request_seconds",
                           "Time from sending a JSON-RPC request to its whole answer",
                           LatencyBuckets())
          .Get()};
  return metrics;
}

}  // namespace

JsonRpcClient::JsonRpcClient(HttpTransport* transport, JsonRpcClientOptions options)
    : transport_(transport), options_(options), parser_(std::make_unique<Parser>()) {
  if (options_.env == nullptr) options_.env = Env::Default();
  if (options_.max_attempts < 1) options_.max_attempts = 1;
}

JsonRpcClient::JsonRpcClient(std::unique_ptr<HttpTransport> transport, JsonRpcClientOptions options)
    : JsonRpcClient(transport.get(), options) {
  owned_transport_ = std::move(transport);
}

JsonRpcClient::~JsonRpcClient() = default;

Result<std::vector<Result<std::string>>> JsonRpcClient::Execute(std::span<const RpcRequest> calls,
                                                                bool single, bool retry_rpc_errors,
                                                                std::span<uint64_t> served_by) {
  for (const RpcRequest& call : calls) {
    if (!IsMethodName(call.method)) {
      return Internal(fmt::format("invalid JSON-RPC method name \"{}\"", Snippet(call.method)));
    }
  }
  std::vector<Result<std::string>> results(calls.size(),
                                           Result<std::string>(Internal("no answer yet")));
  std::vector<size_t> pending(calls.size());
  std::iota(pending.begin(), pending.end(), size_t{0});
  const std::string endpoint = transport_->Describe();
  std::string body;
  for (int attempt = 0;; ++attempt) {
    const bool last_attempt = attempt + 1 >= options_.max_attempts;
    const uint64_t base_id = next_id_;
    next_id_ += pending.size();
    body.clear();
    if (!single) body.push_back('[');
    for (size_t k = 0; k < pending.size(); ++k) {
      if (k > 0) body.push_back(',');
      AppendRequest(body, calls[pending[k]], base_id + k);
    }
    if (!single) body.push_back(']');
    const std::string what = DescribeCalls(calls, pending, single);

    ++stats_.posts;
    stats_.calls += pending.size();
    if (attempt > 0) ++stats_.retries;
    const auto post_started = std::chrono::steady_clock::now();
    Result<HttpResponse> response = transport_->Post(body);
    RpcMetrics& metrics = Metrics();
    metrics.requests.Inc();
    metrics.calls.Inc(static_cast<double>(pending.size()));
    metrics.latency.Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - post_started).count());
    Status failure = response.ok() ? CheckHttpStatus(*response, what, endpoint)
                                   : response.status().WithContext(what);
    if (failure.ok()) {
      failure = ParseAnswer(parser_->parser, response->body, single, base_id, calls, pending,
                            results, what, endpoint);
      for (size_t i : pending) results[i] = ScrubbedResult(std::move(results[i]));
      if (!served_by.empty()) {
        for (size_t i : pending) served_by[i] = response->served_by;
      }
    }
    failure = Scrubbed(failure);
    if (!failure.ok()) {
      // By the typed reason ("http-429", "rpc:-32005"), else the code: a fixed set of words.
      metrics.errors.With({failure.reason().empty() ? CodeName(failure.code()) : failure.reason()})
          .Inc();
      if (response.ok() && response->status == 429) metrics.rate_limited.Inc();
    }
    if (!failure.ok()) {
      if (failure.code() != Code::kUnavailable) return failure;
      if (last_attempt) {
        return Unavailable(
                   fmt::format("{} (gave up after {} attempts)", failure.message(), attempt + 1))
            .WithReason(failure.reason());
      }
      int64_t wait = 0;
      if (response.ok() && response->retry_after_micros) {
        wait = std::min(*response->retry_after_micros, options_.max_retry_after_micros);
      } else {
        wait = BackoffMicros(options_.env, attempt, options_.backoff_base_micros,
                             options_.backoff_cap_micros);
      }
      spdlog::warn("{} (attempt {} of {}); retrying in {} ms", failure.message(), attempt + 1,
                   options_.max_attempts, wait / 1000);
      options_.env->SleepMicros(wait);
      continue;
    }
    if (!retry_rpc_errors) break;
    std::vector<size_t> again;
    for (size_t i : pending) {
      if (!results[i].ok() && results[i].status().code() == Code::kUnavailable) again.push_back(i);
    }
    if (again.empty() || last_attempt) break;
    int64_t wait = BackoffMicros(options_.env, attempt, options_.backoff_base_micros,
                                 options_.backoff_cap_micros);
    spdlog::warn("{} (attempt {} of {}); retrying {} call(s) in {} ms",
                 results[again.front()].status().message(), attempt + 1, options_.max_attempts,
                 again.size(), wait / 1000);
    options_.env->SleepMicros(wait);
    pending = std::move(again);
  }
  return results;
}

Status JsonRpcClient::Scrubbed(const Status& st) const {
  if (st.ok()) return st;
  std::string message = transport_->Scrub(st.message());
  if (message == st.message()) return st;
  return Status(st.code(), std::move(message)).WithReason(st.reason());
}

Result<std::string> JsonRpcClient::ScrubbedResult(Result<std::string> r) const {
  if (r.ok()) return r;
  return Scrubbed(r.status());
}

Result<std::string> JsonRpcClient::Call(std::string_view method, std::string_view params_json) {
  RpcRequest call{std::string(method), std::string(params_json)};
  GAPLESS_ASSIGN_OR_RETURN(auto results, Execute(std::span<const RpcRequest>(&call, 1),
                                                 /*single=*/true, /*retry_rpc_errors=*/true));
  return std::move(results.front());
}

Result<std::string> JsonRpcClient::CallNoRpcRetry(std::string_view method,
                                                  std::string_view params_json) {
  RpcRequest call{std::string(method), std::string(params_json)};
  GAPLESS_ASSIGN_OR_RETURN(auto results, Execute(std::span<const RpcRequest>(&call, 1),
                                                 /*single=*/true, /*retry_rpc_errors=*/false));
  return std::move(results.front());
}

Result<std::vector<Result<std::string>>> JsonRpcClient::Batch(const std::vector<RpcRequest>& calls,
                                                              bool retry_rpc_errors,
                                                              std::vector<uint64_t>* served_by) {
  std::vector<Result<std::string>> all;
  all.reserve(calls.size());
  if (served_by != nullptr) served_by->assign(calls.size(), 0);
  std::span<const RpcRequest> rest(calls);
  while (!rest.empty()) {
    const size_t chunk = options_.max_batch_size == 0 ? calls.size() : options_.max_batch_size;
    size_t n = std::min(chunk, rest.size());
    std::span<uint64_t> served;
    if (served_by != nullptr) served = std::span<uint64_t>(*served_by).subspan(all.size(), n);
    auto part = Execute(rest.first(n), /*single=*/false, retry_rpc_errors, served);
    if (!part.ok() && n > 1 &&
        (part.status().reason() == kBatchTooLargeReason ||
         part.status().reason() == HttpStatusReason(413))) {
      // The node takes fewer calls per batch: learned for this client, and the chunk sent again
      // in halves (a provider's limit is found in a few halvings).
      options_.max_batch_size = std::max<size_t>(1, n / 2);
      spdlog::warn("{}; sending at most {} calls per batch from now on", part.status().message(),
                   options_.max_batch_size);
      continue;
    }
    if (!part.ok()) return part.status();
    for (auto& r : *part) all.push_back(std::move(r));
    rest = rest.subspan(n);
  }
  return all;
}

Result<uint64_t> JsonRpcClient::ChainId() {
  GAPLESS_ASSIGN_OR_RETURN(std::string raw, Call("eth_chainId", "[]"));
  Result<uint64_t> id = ParseHexQuantity(raw);
  if (!id.ok()) return id.status().WithContext("eth_chainId() from " + Describe());
  return id;
}

Result<uint64_t> JsonRpcClient::BlockNumber() {
  GAPLESS_ASSIGN_OR_RETURN(std::string raw, Call("eth_blockNumber", "[]"));
  Result<uint64_t> n = ParseHexQuantity(raw);
  if (!n.ok()) return n.status().WithContext("eth_blockNumber() from " + Describe());
  return n;
}

Result<uint64_t> JsonRpcClient::ResolveBlockTag(std::string_view tag_in) {
  const std::string tag = Lower(tag_in);
  auto invalid = [&] {
    return FailedPrecondition(fmt::format(
        "invalid block \"{}\": expected latest, safe, finalized, earliest, pending, a decimal "
        "number or a 0x-hex number",
        Snippet(tag_in, 80)));
  };
  if (tag.empty()) return invalid();
  if (tag.starts_with("0x")) {
    Result<uint64_t> n = ParseHexQuantity(tag);
    if (!n.ok()) return invalid();
    return n;
  }
  if (tag.front() >= '0' && tag.front() <= '9') {
    uint64_t n = 0;
    auto [ptr, ec] = std::from_chars(tag.data(), tag.data() + tag.size(), n);
    if (ec != std::errc() || ptr != tag.data() + tag.size()) return invalid();
    return n;
  }
  if (tag != "latest" && tag != "safe" && tag != "finalized" && tag != "earliest" &&
      tag != "pending") {
    return invalid();
  }
  const bool post_merge_tag = tag == "safe" || tag == "finalized";
  const std::string params = fmt::format(R"(["{}",false])", tag);
  Result<std::string> block = post_merge_tag ? CallNoRpcRetry("eth_getBlockByNumber", params)
                                             : Call("eth_getBlockByNumber", params);
  if (!block.ok()) {
    std::optional<int64_t> code = RpcErrorCode(block.status());
    if (post_merge_tag && code && block.status().reason() != kRpcRateLimitedReason) {
      return FailedPrecondition(fmt::format(
          "the node at {} does not support the \"{}\" block tag (a pre-merge chain or an old "
          "client?); use \"latest\" with confirmations instead: {}",
          Describe(), tag, block.status().message()));
    }
    return block.status();
  }
  if (IsNullJson(*block)) {
    if (post_merge_tag) {
      return FailedPrecondition(fmt::format(
          "the node at {} has no \"{}\" block (a pre-merge chain or an old client?); use "
          "\"latest\" with confirmations instead",
          Describe(), tag));
    }
    return NotFound(
        fmt::format("eth_getBlockByNumber({}) from {} returned null", params, Describe()));
  }
  BlockSummary summary;
  Status st = ScanBlock(parser_->parser, *block, &summary);
  if (!st.ok()) return st.WithContext(fmt::format("resolving \"{}\" at {}", tag, Describe()));
  return summary.number;
}

Result<std::vector<RawBlock>> JsonRpcClient::FetchBlocks(uint64_t first, uint64_t count) {
  std::vector<RawBlock> blocks;
  if (count == 0) return blocks;
  if (first + count < first) {
    return Internal(fmt::format("FetchBlocks({}, {}): range overflows", first, count));
  }
  const std::string range = count == 1 ? fmt::format("block {}", first)
                                       : fmt::format("blocks {}..{}", first, first + count - 1);
  const bool with_receipts = block_receipts_supported_;
  std::vector<RpcRequest> calls;
  calls.reserve(with_receipts ? 2 * count : count);
  for (uint64_t n = first; n < first + count; ++n) {
    const std::string hex = HexQuantity(n);
    calls.push_back({"eth_getBlockByNumber", fmt::format(R"(["{}",true])", hex)});
    if (with_receipts) calls.push_back({"eth_getBlockReceipts", fmt::format(R"(["{}"])", hex)});
  }
  std::vector<uint64_t> served_by;
  Result<std::vector<Result<std::string>>> batch = Batch(calls, true, &served_by);
  if (!batch.ok()) return batch.status().WithContext(range);

  const size_t stride = with_receipts ? 2 : 1;
  blocks.resize(count);
  std::vector<BlockSummary> summaries(count);
  bool fallback = !with_receipts;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t n = first + i;
    const std::string context = fmt::format("block {}", n);
    RawBlock& block = blocks[i];
    block.number = n;
    Result<std::string>& b = (*batch)[i * stride];
    if (!b.ok()) return b.status().WithContext(context);
    if (IsNullJson(*b)) {
      return NotFound(
          fmt::format("block {} not found: eth_getBlockByNumber returned null from {} "
                      "(above the node's head?)",
                      n, Describe()));
    }
    block.block_json = std::move(*b);
    block.served_by |= served_by[i * stride];
    if (!with_receipts) continue;
    Result<std::string>& r = (*batch)[i * stride + 1];
    if (!r.ok()) {
      if (RpcErrorCode(r.status()) == -32601) {
        fallback = true;
        continue;
      }
      return r.status().WithContext(context);
    }
    if (IsNullJson(*r)) {
      return NotFound(
          fmt::format("block {}: eth_getBlockReceipts returned null from {} (receipts "
                      "not available yet?)",
                      n, Describe()));
    }
    block.receipts_json = std::move(*r);
    block.served_by |= served_by[i * stride + 1];
  }
  if (fallback) {
    if (with_receipts) {
      block_receipts_supported_ = false;
      spdlog::info(
          "{} does not serve eth_getBlockReceipts; fetching receipts one transaction at "
          "a time",
          Describe());
    }
    // Receipts by hash for every block still without them, in one batch. Only here is the
    // block read (for its transaction hashes); every other check is the decoder's.
    std::vector<RpcRequest> receipt_calls;
    for (uint64_t i = 0; i < count; ++i) {
      if (!blocks[i].receipts_json.empty()) continue;
      Status st = ScanBlock(parser_->parser, blocks[i].block_json, &summaries[i]);
      if (!st.ok()) return st.WithContext(fmt::format("block {}", blocks[i].number));
      for (const std::string& hash : summaries[i].tx_hashes) {
        receipt_calls.push_back({"eth_getTransactionReceipt", fmt::format(R"(["{}"])", hash)});
      }
    }
    std::vector<uint64_t> receipts_served_by;
    Result<std::vector<Result<std::string>>> receipts =
        Batch(receipt_calls, true, &receipts_served_by);
    if (!receipts.ok()) return receipts.status().WithContext(range + " receipts");
    size_t next = 0;
    for (uint64_t i = 0; i < count; ++i) {
      RawBlock& block = blocks[i];
      if (!block.receipts_json.empty()) continue;
      const std::vector<std::string>& hashes = summaries[i].tx_hashes;
      size_t total = 2;
      for (size_t k = 0; k < hashes.size(); ++k) {
        if ((*receipts)[next + k].ok()) total += (*receipts)[next + k]->size() + 1;
      }
      block.receipts_json.reserve(total + kPadding);
      block.receipts_json.push_back('[');
      for (size_t k = 0; k < hashes.size(); ++k, ++next) {
        Result<std::string>& r = (*receipts)[next];
        if (!r.ok()) {
          return r.status().WithContext(
              fmt::format("block {} transaction {}", block.number, hashes[k]));
        }
        if (IsNullJson(*r)) {
          return InvalidData(fmt::format(
              "block {}: eth_getTransactionReceipt({}) returned null from {}: the node does not "
              "know the block's transaction (re-org, or a node without the tx index?)",
              block.number, hashes[k], Describe()));
        }
        if (k > 0) block.receipts_json.push_back(',');
        block.receipts_json.append(*r);
        block.served_by |= receipts_served_by[next];
      }
      block.receipts_json.push_back(']');
    }
  }
  if (options_.traces) GAPLESS_RETURN_IF_ERROR(FetchTraces(blocks));
  return blocks;
}

Status JsonRpcClient::FetchTraces(std::vector<RawBlock>& blocks) {
  if (blocks.empty()) return Status::Ok();
  // The debug API is asked by the block's hash, so its answer is of this very block or an error
  // (another endpoint, or the node after a re-org, may hold another block at this height).
  // trace_block takes a number only; every trace of its answer states its blockHash, which the
  // decoder checks (decode/traces.h DecodeParityTraces).
  std::vector<std::string> hashes;
  for (int round = 0; round < 3; ++round) {
    const RawBlock::TraceApi api = trace_api_;
    const bool by_hash = api == RawBlock::TraceApi::kDebugTrace && debug_trace_by_hash_;
    if (by_hash && hashes.empty()) {
      for (RawBlock& b : blocks) {
        BlockSummary summary;
        Status st = ScanBlock(parser_->parser, b.block_json, &summary);
        if (!st.ok()) return st.WithContext(fmt::format("block {}", b.number));
        if (!IsHexData(summary.hash)) {
          return InvalidData(fmt::format("block {}: eth_getBlockByNumber: no \"hash\" from {}",
                                         b.number, Describe()));
        }
        hashes.push_back(std::move(summary.hash));
      }
    }
    std::vector<RpcRequest> calls;
    calls.reserve(blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i) {
      const std::string hex = HexQuantity(blocks[i].number);
      if (api == RawBlock::TraceApi::kTraceBlock) {
        calls.push_back({"trace_block", fmt::format(R"(["{}"])", hex)});
      } else if (by_hash) {
        calls.push_back({"debug_traceBlockByHash",
                         fmt::format(R"(["{}",{{"tracer":"callTracer"}}])", hashes[i])});
      } else {
        calls.push_back(
            {"debug_traceBlockByNumber", fmt::format(R"(["{}",{{"tracer":"callTracer"}}])", hex)});
      }
    }
    std::vector<uint64_t> served_by;
    Result<std::vector<Result<std::string>>> batch = Batch(calls, true, &served_by);
    if (!batch.ok()) {
      return batch.status().WithContext(
          fmt::format("traces of blocks {}..{}", blocks.front().number, blocks.back().number));
    }
    bool switched = false;
    for (size_t i = 0; i < blocks.size(); ++i) {
      Result<std::string>& r = (*batch)[i];
      if (!r.ok()) {
        if (RpcErrorCode(r.status()) == -32601 && api == RawBlock::TraceApi::kTraceBlock) {
          trace_api_ = RawBlock::TraceApi::kDebugTrace;
          spdlog::info(
              "{} does not serve trace_block; tracing with debug_traceBlockByHash "
              "(callTracer)",
              Describe());
          switched = true;
          break;
        }
        if (RpcErrorCode(r.status()) == -32601 && by_hash) {
          debug_trace_by_hash_ = false;
          spdlog::info(
              "{} does not serve debug_traceBlockByHash; tracing with debug_traceBlockByNumber "
              "(each transaction's trace checked against the block's)",
              Describe());
          switched = true;
          break;
        }
        if (RpcErrorCode(r.status()) == -32601) {
          return FailedPrecondition(fmt::format(
              "block {}: the node at {} serves neither trace_block nor debug_traceBlockByNumber: "
              "--traces needs a node with a tracing API (an archive node for old blocks)",
              blocks[i].number, Describe()));
        }
        return r.status().WithContext(fmt::format("block {} traces", blocks[i].number));
      }
      blocks[i].traces_api = api;
      blocks[i].traces_json = std::move(*r);
      blocks[i].traces_json.reserve(blocks[i].traces_json.size() + kPadding);
      blocks[i].served_by |= served_by[i];
    }
    if (!switched) return Status::Ok();
  }
  return Internal("FetchTraces: no tracing API left");
}

}  // namespace gapless
