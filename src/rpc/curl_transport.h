// CurlTransport: HttpTransport over libcurl, for http:// and https:// JSON-RPC endpoints.
//
// Each object owns one CURL easy handle and reuses it for every Post, so libcurl keeps the
// connection alive between calls (HTTP/1.1 keep-alive, TCP keepalive probes on a long-idle
// socket) and a worker does one TCP/TLS handshake, not one per block range. After a failure
// libcurl drops the broken connection and the next Post opens a new one.
//
// Failures (connect refused, DNS, TLS, timeout, reset, a body shorter than its Content-Length,
// an answer larger than max_response_bytes) are Unavailable with a message naming the redacted
// URL and libcurl's description. Any HTTP status is returned as an answer; JsonRpcClient decides
// what it means.
//
// Not thread-safe: a CURL handle must not be used by two threads at once. Give each thread its
// own CurlTransport (and JsonRpcClient).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "rpc/http_transport.h"

namespace gapless {

struct CurlTransportOptions {
  int64_t connect_timeout_ms = 5'000;
  // The whole exchange: connect, send, wait, receive.
  int64_t request_timeout_ms = 60'000;
  // Extra request headers, e.g. "Authorization: Bearer ..." (never logged).
  std::vector<std::string> headers;
  // Answers above this size fail with Unavailable instead of exhausting memory.
  size_t max_response_bytes = size_t{1} << 30;
  // Wall clock for Retry-After given as an HTTP date. Not owned; nullptr = Env::Default().
  Env* env = nullptr;
};

class CurlTransport : public HttpTransport {
 public:
  // Creates the handle; fails only if libcurl cannot (out of memory), which surfaces as
  // Unavailable on the first Post.
  explicit CurlTransport(std::string url, CurlTransportOptions options = {});
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  Result<HttpResponse> Post(std::string_view body) override;
  std::string Describe() const override { return redacted_url_; }
  std::string Scrub(std::string text) const override;

 private:
  struct Handle;
  std::string url_;
  std::string redacted_url_;
  std::vector<std::string> secrets_;  // SecretsOf(url_)
  CurlTransportOptions options_;
  std::unique_ptr<Handle> handle_;
};

// Parses a Retry-After value: delay-seconds ("120") or an HTTP date ("Wed, 21 Oct 2015 07:28:00
// GMT", relative to now_unix_micros; a date in the past gives 0). nullopt when unparseable.
std::optional<int64_t> ParseRetryAfter(std::string_view value, int64_t now_unix_micros);

}  // namespace gapless
