// RedisServer: a private redis-server process of one test, for tests that kill, pause or restart
// servers (lock-node quorums, failovers) and so cannot use the shared fixture server.
//
// It listens on 127.0.0.1 on a free port, without persistence, with maxmemory-policy noeviction
// and keyspace notifications for expired and generic events (Egx, what the HA leader's followers
// subscribe to). Kill() is SIGKILL, Pause()/Resume() SIGSTOP/SIGCONT, Restart() starts a new
// process on the same port with an empty data set (a node restarted without persistence). The
// destructor kills the process it started (by pid, never anything else).
//
// Thread-safety: not thread-safe; one owner.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace gapless {

class RedisServer {
 public:
  // Starts redis-server (from PATH) and waits until it answers PING. `extra` are more
  // command-line arguments ("--rename-command", "CONFIG", "").
  static Result<std::unique_ptr<RedisServer>> Start(std::vector<std::string> extra = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  void Kill();    // SIGKILL and reap; the port is free again
  void Pause();   // SIGSTOP
  void Resume();  // SIGCONT
  // Kill (if running) and start again on the same port, empty.
  Status Restart();

 private:
  RedisServer(int port, std::vector<std::string> extra, std::string dir);
  Status Spawn();

  int port_;
  std::vector<std::string> extra_;
  std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace gapless
