// The JSON-RPC wire format (declared in json_rpc_wire.h): request bodies, reading answers and
// batches matched by id, the classification of HTTP statuses and JSON-RPC error objects into
// Status codes and reasons (the table in json_rpc.h), the block scan, and json_rpc.h's free
// functions (RpcErrorCode, CodeForRpcError, hex quantities). No I/O and no client state here.
#include "rpc/json_rpc_wire.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "rpc/json_rpc.h"

namespace gapless {
namespace json_rpc_wire {

namespace od = simdjson::ondemand;

namespace {

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

std::string DescribeCall(const RpcRequest& call) {
  return fmt::format("{}({})", call.method, Snippet(call.params_json, 120));
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
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
  std::string error_message;       // for error messages: a snippet
  std::string error_message_full;  // as sent (up to 4096 bytes): for ReadRpcError
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
    env->error_message_full = std::string(raw.substr(0, 4096));
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
      env->error_message_full = std::string(message.substr(0, 4096));
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

}  // namespace

std::string Snippet(std::string_view s, size_t max) {
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

std::string DescribeCalls(std::span<const RpcRequest> calls, const std::vector<size_t>& pending,
                          bool single) {
  if (single || pending.size() == 1) return DescribeCall(calls[pending.front()]);
  return fmt::format("batch of {} calls {} .. {}", pending.size(),
                     DescribeCall(calls[pending.front()]), DescribeCall(calls[pending.back()]));
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

std::optional<RpcErrorObject> ReadRpcError(od::parser& parser, std::string& body) {
  od::document doc;
  od::object obj;
  Envelope env;
  if (parser.iterate(Padded(body)).get(doc) || doc.get_object().get(obj) ||
      ParseEnvelope(obj, &env) || !env.has_error) {
    return std::nullopt;
  }
  return RpcErrorObject{env.error_code, std::move(env.error_message_full)};
}

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

}  // namespace json_rpc_wire

using json_rpc_wire::IsRateLimit;
using json_rpc_wire::Snippet;

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

}  // namespace gapless
