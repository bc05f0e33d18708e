// ops_server: the HTTP endpoint of a long-running process (--metrics-addr HOST:PORT): what
// Prometheus, a load balancer, a Kubernetes probe and a person with a browser read.
//
//   GET /metrics      the process's metrics (core/metrics.h), Prometheus text format 0.0.4
//   GET /healthz      200 "ok" while the process runs (liveness: it answers at all)
//   GET /readyz       200 "ready" or 503 "not ready", then one line per dependency with its state
//                     (node/readiness.h); answered from the prober's last results, never by
//                     probing on the request, so it answers at once however the servers behave
//   GET /status.json  the fleet's status as `gapless status --json` prints it, when the process
//                     has one to give (404 otherwise); gathered by one request at a time, the
//                     others answered at once with the last body
//   GET /             the live status page (src/node/status_page.html, embedded in the binary),
//                     which reads /status.json every 2 s; a list of these paths when the
//                     process serves no status
//
// It binds before the process opens its first connection and serves from two threads of its own,
// so a process that waits for its database or Redis still answers /healthz and says why it is
// not ready. Nothing it serves carries a secret: metric labels and status are built from redacted
// URLs (core/redact.h).
//
// Thread-safety: the handlers run on the server's threads; the callbacks given must be
// thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"

namespace gapless {

class ReadinessProber;

struct OpsServerOptions {
  std::string address;                   // "HOST:PORT"; PORT 0 picks a free one (tests)
  ReadinessProber* readiness = nullptr;  // not owned; null: /readyz answers "ready" once started
  // The body of /status.json; null: /status.json and / answer 404.
  std::function<Result<std::string>()> status_json;
};

class OpsServer {
 public:
  // Binds and starts serving. FailedPrecondition naming --metrics-addr when the address does not
  // parse or cannot be bound (in use, not local).
  static Result<std::unique_ptr<OpsServer>> Start(OpsServerOptions options);
  ~OpsServer();  // stops serving and joins the threads
  OpsServer(const OpsServer&) = delete;
  OpsServer& operator=(const OpsServer&) = delete;

  // The bound port, and "http://HOST:PORT/" for messages.
  int port() const;
  std::string url() const;

 private:
  struct Impl;
  explicit OpsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "HOST:PORT" -> host and port; "[::1]:9" for IPv6. FailedPrecondition naming --metrics-addr.
Result<std::pair<std::string, int>> ParseListenAddress(const std::string& address);

}  // namespace gapless
