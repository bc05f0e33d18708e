// What an endpoint's answer means for the RPC endpoint pool (rpc/endpoint_pool.h): its outcome
// (ClassifyAnswer: usable, transport failure, 429, 5xx, a bad key, a batch refused, a method
// missing), the methods of a request (MethodsOf), and which of them an answer says are missing
// (MethodsAnsweredMissing, by call id). EndpointPool::Record learns from them
// (endpoint_pool.cc). Stateless, thread-safe.
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "rpc/endpoint_pool.h"
#include "rpc/endpoint_pool_internal.h"

namespace gapless {

using pool_internal::Trim;

namespace {

bool ContainsNoCase(std::string_view text, std::string_view word) {
  auto it = std::search(text.begin(), text.end(), word.begin(), word.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
  return it != text.end();
}

}  // namespace

std::string_view EndpointOutcomeName(EndpointOutcome outcome) {
  switch (outcome) {
    case EndpointOutcome::kGood:
      return "good";
    case EndpointOutcome::kTransport:
      return "transport";
    case EndpointOutcome::kRateLimited:
      return "rate_limited";
    case EndpointOutcome::kServerError:
      return "server_error";
    case EndpointOutcome::kClientError:
      return "client_error";
    case EndpointOutcome::kBatchRejected:
      return "batch_rejected";
    case EndpointOutcome::kMissingMethod:
      return "missing_method";
    case EndpointOutcome::kOtherChain:
      return "other_chain";
  }
  return "unknown";
}

std::vector<std::string> MethodsOf(std::string_view body, size_t* calls) {
  std::vector<std::string> methods;
  size_t n = 0;
  constexpr std::string_view kKey = R"("method":")";
  for (size_t at = body.find(kKey); at != body.npos; at = body.find(kKey, at)) {
    at += kKey.size();
    size_t end = body.find('"', at);
    if (end == body.npos) break;
    std::string method(body.substr(at, end - at));
    if (std::find(methods.begin(), methods.end(), method) == methods.end()) {
      methods.push_back(std::move(method));
    }
    ++n;
    at = end;
  }
  if (calls != nullptr) *calls = std::max<size_t>(n, 1);
  return methods;
}

EndpointOutcome ClassifyAnswer(const Result<HttpResponse>& response, size_t calls) {
  if (!response.ok()) return EndpointOutcome::kTransport;
  const HttpResponse& r = *response;
  if (r.status == 429) return EndpointOutcome::kRateLimited;
  if (r.status == 413) return EndpointOutcome::kBatchRejected;
  if (r.status == 408 || r.status >= 500) return EndpointOutcome::kServerError;
  if (r.status < 200 || r.status >= 300) return EndpointOutcome::kClientError;
  std::string_view body = Trim(r.body);
  // A batch answered with one object: the node refused the whole request.
  if (calls > 1 && !body.empty() && body.front() == '{') {
    if (ContainsNoCase(body, "batch")) return EndpointOutcome::kBatchRejected;
    if (body.find("-32005") != body.npos || ContainsNoCase(body, "rate limit") ||
        ContainsNoCase(body, "too many requests")) {
      return EndpointOutcome::kRateLimited;
    }
    return EndpointOutcome::kServerError;
  }
  if (body.find("-32601") != body.npos) return EndpointOutcome::kMissingMethod;
  return EndpointOutcome::kGood;
}

namespace {

// An id as the client matches it (rpc/json_rpc_wire.cc ParseEnvelope): a number and a string of its
// digits are the same id; anything else by its JSON text. "" for none.
std::string IdKey(simdjson::dom::element parent) {
  simdjson::dom::element id;
  if (parent["id"].get(id) != simdjson::SUCCESS) return "";
  std::string_view text;
  if (id.get_string().get(text) == simdjson::SUCCESS && !text.empty() &&
      text.find_first_not_of("0123456789") == std::string_view::npos) {
    return std::string(text);
  }
  return simdjson::minify(id);
}

}  // namespace

std::vector<std::string> MethodsAnsweredMissing(std::string_view request, std::string_view answer) {
  std::vector<std::string> out;
  simdjson::dom::parser parser;
  // The request's calls by id (IdKey: ids may be numbers or strings).
  std::vector<std::pair<std::string, std::string>> calls;
  simdjson::dom::element req;
  if (parser.parse(simdjson::padded_string(request)).get(req) != simdjson::SUCCESS) return out;
  auto add_call = [&](simdjson::dom::element c) {
    std::string_view method;
    if (c["method"].get_string().get(method) != simdjson::SUCCESS) return;
    calls.emplace_back(IdKey(c), std::string(method));
  };
  simdjson::dom::array list;
  if (req.get_array().get(list) == simdjson::SUCCESS) {
    for (simdjson::dom::element c : list) add_call(c);
  } else {
    add_call(req);
  }
  simdjson::dom::element ans;
  if (parser.parse(simdjson::padded_string(answer)).get(ans) != simdjson::SUCCESS) return out;
  auto check = [&](simdjson::dom::element a) {
    int64_t code = 0;
    if (a["error"]["code"].get_int64().get(code) != simdjson::SUCCESS || code != -32601) return;
    const std::string id_text = IdKey(a);
    // The methods of the calls with that id: one, unless the request repeats the id.
    std::set<std::string> matching;
    for (const auto& [call_id, call_method] : calls) {
      if (!id_text.empty() && call_id == id_text) matching.insert(call_method);
    }
    // An answer without a usable id (or one that two calls of other methods share) names a method
    // only when the request has one.
    if (matching.empty()) {
      for (const auto& call : calls) matching.insert(call.second);
    }
    std::optional<std::string> method;
    if (matching.size() == 1) method = *matching.begin();
    if (method.has_value() && std::find(out.begin(), out.end(), *method) == out.end()) {
      out.push_back(std::move(*method));
    }
  };
  if (ans.get_array().get(list) == simdjson::SUCCESS) {
    for (simdjson::dom::element a : list) check(a);
  } else {
    check(ans);
  }
  return out;
}

}  // namespace gapless
