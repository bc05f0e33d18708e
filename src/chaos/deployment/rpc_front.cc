// rpc_front: see rpc_front.h.
#include "chaos/deployment/rpc_front.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <cctype>
#include <charconv>
#include <map>
#include <set>

#include "rpc/curl_transport.h"

namespace gapless::chaos {

bool IsWorkerFront(const std::string& name) {
  return name.rfind("worker", 0) == 0 && name.find(kSpareSuffix) == std::string::npos;
}

std::string ComplementWords(std::string body) {
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  for (size_t at = 0; (at = body.find("\"0x", at)) != std::string::npos; ++at) {
    const size_t digits = at + 3;
    size_t end = digits;
    while (end < body.size() && hex(body[end])) ++end;
    if (end - digits != 64 || end >= body.size() || body[end] != '"') continue;
    for (size_t i = digits; i < end; ++i) {
      const char c = body[i];
      const int v = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c | 0x20) - 'a' + 10;
      const char* digits_of =
          std::isupper(static_cast<unsigned char>(c)) ? "0123456789ABCDEF" : "0123456789abcdef";
      body[i] = digits_of[15 - v];
    }
    at = end;
  }
  return body;
}

std::string OtherChainId(const std::string& request, const std::string& answer) {
  simdjson::dom::parser req_parser, ans_parser;
  simdjson::dom::element req, ans;
  if (req_parser.parse(request).get(req) || ans_parser.parse(answer).get(ans)) return answer;
  // The ids of the eth_chainId calls, as JSON text.
  std::set<std::string> ids;
  auto note = [&](simdjson::dom::element call) {
    std::string_view method;
    simdjson::dom::element id;
    if (!call["method"].get(method) && method == "eth_chainId" && !call["id"].get(id)) {
      ids.insert(simdjson::minify(id));
    }
  };
  simdjson::dom::array calls;
  if (!req.get_array().get(calls)) {
    for (simdjson::dom::element call : calls) note(call);
  } else {
    note(req);
  }
  if (ids.empty()) return answer;
  auto rewrite = [&](simdjson::dom::element reply) -> std::string {
    simdjson::dom::element id;
    std::string_view result;
    uint64_t chain = 0;
    if (reply["id"].get(id) || !ids.count(simdjson::minify(id)) || reply["result"].get(result) ||
        result.size() < 3 ||
        std::from_chars(result.data() + 2, result.data() + result.size(), chain, 16).ec !=
            std::errc()) {
      return simdjson::minify(reply);
    }
    return fmt::format(R"({{"jsonrpc":"2.0","id":{},"result":"0x{:x}"}})", simdjson::minify(id),
                       chain + kOtherChainOffset);
  };
  simdjson::dom::array replies;
  if (ans.get_array().get(replies)) return rewrite(ans);
  std::string out = "[";
  for (simdjson::dom::element reply : replies) {
    if (out.size() > 1) out += ",";
    out += rewrite(reply);
  }
  return out + "]";
}

HttpTestServer::Response RpcFront::Handle(const HttpTestServer::Request& req) {
  std::string mode, real, fake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    mode = mode_;
    real = real_;
    fake = fake_;
  }
  // down: every request, the endpoint is gone (a worker's pool fails over to its spare).
  if (mode == "down") return HttpTestServer::Response::Reset();
  const bool hit = !mode.empty() && (requests_++ % 2 == 0);
  if (hit && mode == "429") {
    auto r = HttpTestServer::Response::Json(R"({"error":"rate limited"})", 429);
    r.headers.push_back({"Retry-After", "1"});
    return r;
  }
  if (hit && mode == "5xx") return HttpTestServer::Response::Json("upstream error", 503);
  thread_local std::map<std::string, std::unique_ptr<CurlTransport>> transports;
  auto& transport = transports[upstream_];
  if (transport == nullptr) transport = std::make_unique<CurlTransport>(upstream_);
  if (mode == "other-hash" && real.empty()) {
    // The real hash of the target height, once it is mined.
    auto header = transport->Post(fmt::format(
        R"({{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x{:x}",false]}})",
        height_.load()));
    size_t at = header.ok() ? header->body.find("\"hash\":\"") : std::string::npos;
    if (at != std::string::npos) {
      std::lock_guard<std::mutex> lock(mu_);
      real_ = real = header->body.substr(at + 8, 66);
    }
  }
  // other-chain: the request in the real chain's words, the answer in the other chain's.
  const bool other_chain = mode == "other-chain";
  auto res = transport->Post(other_chain ? ComplementWords(req.body) : req.body);
  if (!res.ok()) return HttpTestServer::Response::Reset();
  std::string body = res->body;
  if (other_chain) {
    body = ComplementWords(OtherChainId(req.body, body));
    return HttpTestServer::Response::Json(body, static_cast<int>(res->status));
  }
  if (hit && mode == "truncated" && body.size() > 2) {
    return HttpTestServer::Response::Truncated(body, body.size() / 2);
  }
  if (hit && mode == "malformed" && body.size() > 2) {
    body.resize(body.size() - 2);  // the closing brackets gone
    return HttpTestServer::Response::Json(body, static_cast<int>(res->status));
  }
  if (mode == "other-hash" && !real.empty()) {
    for (size_t at = 0; (at = body.find(real, at)) != std::string::npos; at += fake.size()) {
      body.replace(at, real.size(), fake);
    }
  }
  return HttpTestServer::Response::Json(body, static_cast<int>(res->status));
}

}  // namespace gapless::chaos
