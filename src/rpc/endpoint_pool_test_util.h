// Test helpers for the RPC endpoint pool's tests (endpoint_pool_test.cc,
// endpoint_pool_chain_test.cc, endpoint_pool_hedge_test.cc): endpoints whose answers a function
// decides (ScriptedEndpoint), their usual answers, and a Fixture holding a pool and one client's
// PoolTransport over them.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "rpc/endpoint_pool.h"
#include "rpc/json_rpc.h"
#include "testing/replay_transport.h"

namespace gapless::pool_test {

// An endpoint whose answers a function decides; it may advance a SimEnv to take "latency".
class ScriptedEndpoint : public HttpTransport {
 public:
  using Handler = std::function<Result<HttpResponse>(const std::vector<JsonRpcCall>&, bool batch)>;
  ScriptedEndpoint(std::string name, Handler handler)
      : name_(std::move(name)), handler_(std::move(handler)) {}
  Result<HttpResponse> Post(std::string_view body) override {
    bool batch = false;
    auto calls = ParseJsonRpcRequests(body, &batch);
    if (!calls.ok()) return calls.status();
    posts_ += 1;
    return handler_(*calls, batch);
  }
  std::string Describe() const override { return name_; }
  std::atomic<int> posts_{0};

 private:
  std::string name_;
  Handler handler_;
};

// Every call answered with "0x1".
inline Result<HttpResponse> AnswerAll(const std::vector<JsonRpcCall>& calls, bool batch) {
  std::string body;
  for (const auto& c : calls) {
    if (!body.empty()) body += ",";
    body += fmt::format(R"({{"jsonrpc":"2.0","id":{},"result":"0x1"}})", c.id_json);
  }
  return HttpResponse{200, batch ? "[" + body + "]" : body, std::nullopt};
}

inline ScriptedEndpoint::Handler Healthy() { return AnswerAll; }
inline ScriptedEndpoint::Handler Down() {
  return [](const std::vector<JsonRpcCall>&, bool) -> Result<HttpResponse> {
    return Unavailable("connection refused");
  };
}

inline PoolOptions Options(bool hedge, int take_out_after = 3) {
  PoolOptions o;
  o.hedge = hedge;
  o.take_out_after = take_out_after;
  return o;
}

struct Fixture {
  // The chain check is off unless asked: the scripted endpoints answer every call "0x1".
  explicit Fixture(std::vector<ScriptedEndpoint::Handler> handlers, PoolOptions options = {},
                   std::vector<double> weights = {}, bool check_chain = false) {
    if (options.env == nullptr) options.env = &env;
    options.check_chain = check_chain;
    std::vector<EndpointSpec> specs;
    std::vector<std::unique_ptr<HttpTransport>> transports;
    for (size_t i = 0; i < handlers.size(); ++i) {
      specs.push_back({fmt::format("http://e{}:8545/", i), weights.empty() ? 1.0 : weights[i], 0});
      auto t = std::make_unique<ScriptedEndpoint>(fmt::format("e{}", i), handlers[i]);
      endpoints.push_back(t.get());
      transports.push_back(std::move(t));
    }
    pool = std::make_shared<EndpointPool>(specs, options);
    transport = std::make_unique<PoolTransport>(pool, std::move(transports));
  }
  // Each request its own unit of answers (Answered() names its endpoint).
  Result<HttpResponse> Call(std::string_view method = "eth_blockNumber") {
    transport->MarkAnswers();
    return transport->Post(
        fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"{}","params":[]}})", method));
  }
  Result<HttpResponse> Batch(size_t n, std::string_view method = "eth_getBlockByNumber") {
    transport->MarkAnswers();
    std::string body = "[";
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) body += ",";
      body +=
          fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":"{}","params":[]}})", i + 1, method);
    }
    return transport->Post(body + "]");
  }
  // The endpoint (index) that answered the last good request.
  int Answered() const {
    for (size_t i = 0; i < 64; ++i) {
      if (transport->answered() == (uint64_t{1} << i)) return static_cast<int>(i);
    }
    return -1;
  }

  SimEnv env{7};
  std::vector<ScriptedEndpoint*> endpoints;
  std::shared_ptr<EndpointPool> pool;
  std::unique_ptr<PoolTransport> transport;
};

}  // namespace gapless::pool_test
