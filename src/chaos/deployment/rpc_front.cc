// rpc_front: see rpc_front.h.
#include "chaos/deployment/rpc_front.h"

#include <fmt/format.h>

#include <map>

#include "rpc/curl_transport.h"

namespace gapless::chaos {

bool IsWorkerFront(const std::string& name) {
  return name.rfind("worker", 0) == 0 && name.find(kSpareSuffix) == std::string::npos;
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
  auto res = transport->Post(req.body);
  if (!res.ok()) return HttpTestServer::Response::Reset();
  std::string body = res->body;
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
