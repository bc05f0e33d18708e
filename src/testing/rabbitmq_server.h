// RabbitMqServer: a private RabbitMQ node of one test, for tests that stop and restart the broker
// (and so cannot use the shared fixture node of scripts/rabbitmq.sh).
//
// The node listens on 127.0.0.1 on a free port, with its own node name
// (gapless-amqp-test-<port>@localhost), its own directory (data, log, config, Erlang cookie) and
// a free Erlang distribution port, no plugins, and nothing read from /etc/rabbitmq. As root it
// runs as user rabbitmq (Debian's package requires it) through runuser. Stop() is graceful
// (SIGTERM to the node's pid: durable queues and persistent messages survive); Restart() after
// Stop() starts the node again on the same port with the same data. The destructor stops the
// node it started (by its pid, never anything else) and removes the directory. Starting takes
// about 5 s.
//
// Thread-safety: not thread-safe; one owner (Stop may be called from another thread while
// clients use the broker: it touches only the process).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "testing/tls_certs.h"

namespace gapless {

class RabbitMqServer {
 public:
  // Creates the directory, picks the ports and starts the node; Unavailable if it does not
  // answer within 60 s (the message carries the log's tail).
  static Result<std::unique_ptr<RabbitMqServer>> Start();
  // TLS only (AMQPS on port(), no plain listener), with `tls`'s server certificate; clients'
  // certificates are not asked for.
  static Result<std::unique_ptr<RabbitMqServer>> StartTls(const TlsCertificates& tls);
  ~RabbitMqServer();
  RabbitMqServer(const RabbitMqServer&) = delete;
  RabbitMqServer& operator=(const RabbitMqServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "amqp://guest:guest@127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // Graceful shutdown (SIGTERM), waiting until the process is gone (SIGKILL after 30 s).
  void Stop();
  // Starts the node again on the same port, with its data (stopping it first if running).
  Status Restart();

 private:
  RabbitMqServer(int port, int dist_port, std::string dir);
  static Result<std::unique_ptr<RabbitMqServer>> StartWith(const TlsCertificates* tls);
  Status Spawn();
  std::string LogTail() const;

  int port_;
  int dist_port_;
  std::string dir_;
  pid_t pid_ = -1;
  std::optional<TlsCertificates> tls_;
};

}  // namespace gapless
