// HttpTransport: the seam between the JSON-RPC client and the network. One call = one HTTP POST of
// a JSON body to a fixed endpoint, answered by whatever status and body came back.
//
// A transport reports only failures to get an answer (connect refused, DNS, timeout, reset,
// truncated body) as Unavailable; it does not interpret the HTTP status or the body: that policy
// lives in JsonRpcClient. Production uses CurlTransport; tests substitute ReplayTransport
// (testing/replay_transport.h), which answers from recorded fixtures without a network.
// Thread-safety is per implementation: CurlTransport is not thread-safe (one per thread),
// ReplayTransport is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gapless {

class GetLogsSizers;  // rpc/get_logs_limits.h

struct HttpResponse {
  long status = 0;  // NOLINT(runtime/int): libcurl's type for the status code
  std::string body;
  // The server's Retry-After (429/503), converted to a delay from now; nullopt when absent or
  // unparseable.
  std::optional<int64_t> retry_after_micros;
  // Which endpoint gave this answer, for a transport over several (rpc/endpoint_pool.h): bit i
  // for endpoint i. 0 from a transport over one endpoint.
  uint64_t served_by = 0;
};

class HttpTransport {
 public:
  virtual ~HttpTransport();

  // POSTs body (Content-Type: application/json) and returns the answer, whatever its status.
  // Fails with Unavailable when no complete answer arrived; the message names the endpoint
  // (without credentials) and the cause.
  virtual Result<HttpResponse> Post(std::string_view body) = 0;

  // The endpoint, safe for logs and error messages (credentials removed), e.g.
  // "https://eth-mainnet.example.com/v2/***" (core/redact.h).
  virtual std::string Describe() const = 0;

  // text without anything of the endpoint's URL that Describe hides: an answer's body, quoted in
  // an error, can echo the API key or user it was sent with (core/redact.h SecretsOf).
  virtual std::string Scrub(std::string text) const { return text; }

  // For a transport over several endpoints (rpc/endpoint_pool.h): answers of the endpoints in
  // `served_by` (HttpResponse::served_by, or several of them OR-ed) were wrong (a block hash not
  // the head log's), so those endpoints count a failure and this transport's next requests go
  // elsewhere. A no-op for one endpoint.
  virtual void Distrust(uint64_t served_by) { (void)served_by; }
  // The endpoints in `served_by`, safe for logs ("http://a/***, http://b"); Describe() for one.
  virtual std::string DescribeServers(uint64_t served_by) const {
    (void)served_by;
    return Describe();
  }

  // For a request whose body depends on the endpoint it goes to (an eth_getLogs range sized for
  // that endpoint: JsonRpcClient::GetLogs): POSTs body_for(i) to the endpoint i it routes the
  // request to, and body_for(j) to each other endpoint j it fails over or hedges to. body_for is
  // called on the calling thread, before PostFor returns, once per endpoint asked; the answer's
  // served_by says whose body it answers. `method` is the request's one method (for routing).
  // Over one endpoint: Post(body_for(0)).
  using BodyFor = std::function<std::string(size_t endpoint)>;
  virtual Result<HttpResponse> PostFor(std::string_view method, const BodyFor& body_for) {
    (void)method;
    return Post(body_for(0));
  }
  // The eth_getLogs sizers of this transport's endpoints, shared by its clients (an endpoint
  // pool's: rpc/endpoint_pool.h), or nullptr over one endpoint (the client keeps its own).
  virtual GetLogsSizers* log_sizers() { return nullptr; }
};

}  // namespace gapless
