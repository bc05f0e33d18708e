// RedisServer: a private redis-server process of one test, for tests that kill, pause or restart
// servers (lock-node quorums, failovers) and so cannot use the shared fixture server.
//
// It listens on 127.0.0.1 on a free port, without persistence, with maxmemory-policy noeviction
// and keyspace notifications for expired and generic events (Egx, what the HA leader's followers
// subscribe to). Kill() is SIGKILL, Pause()/Resume() SIGSTOP/SIGCONT, Restart() starts a new
// process on the same port with an empty data set (a node restarted without persistence). The
// destructor kills the process it started (by pid, never anything else) and removes its directory.
//
// A start tries up to 5 ports, each attempt in a temporary directory of its own (a failed attempt's
// server removes its directory, so the next cannot share it). When every attempt fails, the error
// carries the first attempt's (a port taken, a certificate that does not load: redis-server's own
// last log line), which later attempts would only repeat or hide.
//
// Thread-safety: not thread-safe; one owner.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "testing/tls_certs.h"

namespace gapless {

class RedisServer {
 public:
  // Where a start attempt listens: StablePort() (testing/free_port.h) unless a test hands out
  // ports of its own (a taken one, to see the next attempt start).
  using PortPicker = std::function<int()>;

  // Starts redis-server (from PATH) and waits until it answers PING. `extra` are more
  // command-line arguments ("--rename-command", "CONFIG", "").
  static Result<std::unique_ptr<RedisServer>> Start(std::vector<std::string> extra = {},
                                                    PortPicker pick_port = nullptr);
  // The same over TLS only (no plain port): redis-server's --tls-port with tls's server
  // certificate. require_client_cert: tls-auth-clients yes (a client must present a certificate
  // signed by tls.ca); otherwise none is asked for. url() is then
  // "rediss://127.0.0.1:PORT?cacertfile=CA" (plus the client certificate when one is required).
  static Result<std::unique_ptr<RedisServer>> StartTls(const TlsCertificates& tls,
                                                       bool require_client_cert = false,
                                                       std::vector<std::string> extra = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url() const;
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  void Kill();    // SIGKILL and reap; the port is free again
  void Pause();   // SIGSTOP
  void Resume();  // SIGCONT
  // Kill (if running) and start again on the same port, empty.
  Status Restart();

 private:
  RedisServer(int port, std::vector<std::string> extra, std::string dir);
  static Result<std::unique_ptr<RedisServer>> StartWith(std::vector<std::string> extra,
                                                        const TlsCertificates* tls,
                                                        bool require_client_cert,
                                                        const PortPicker& pick_port);
  // The last lines of this attempt's redis-server log ("(no log)" when it wrote none).
  std::string LogTail() const;
  Status Spawn();

  int port_;
  std::vector<std::string> extra_;
  std::string dir_;
  std::optional<TlsCertificates> tls_;
  bool require_client_cert_ = false;
  pid_t pid_ = -1;
};

}  // namespace gapless
