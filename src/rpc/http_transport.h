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

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gapless {

struct HttpResponse {
  long status = 0;  // NOLINT(runtime/int): libcurl's type for the status code
  std::string body;
  // The server's Retry-After (429/503), converted to a delay from now; nullopt when absent or
  // unparseable.
  std::optional<int64_t> retry_after_micros;
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

  // For a transport over several endpoints (rpc/endpoint_pool.h): MarkAnswers starts a group of
  // requests (one unit of work: a range's blocks, receipts and traces); DistrustAnswers says the
  // answers since then were wrong (a block hash not the head log's), so the endpoints that gave
  // them are counted as failing and the next request goes elsewhere. No-ops for one endpoint.
  virtual void MarkAnswers() {}
  virtual void DistrustAnswers() {}
};

}  // namespace gapless
