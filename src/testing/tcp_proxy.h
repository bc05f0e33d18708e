// TcpProxy: a TCP forwarder on 127.0.0.1 for failover and chaos tests. A client connects to the
// proxy instead of a server; the proxy connects it on to a target host:port that the test can
// change at any time, and can cut (CloseAll), black-hole (Pause) and heal (Resume) the
// connections it carries, so a test can move a client from one server to another, or partition
// it, without the client's knowledge.
//
// Contract:
//  - Listens on 127.0.0.1:<ephemeral port> from construction until Stop() (the destructor calls
//    it). Aborts the process if it cannot listen (a test helper).
//  - Each accepted connection is connected to the target that is current when it is accepted;
//    SetTarget() affects only connections accepted afterwards, existing ones stay where they are.
//    When the target cannot be reached, the client's connection is closed (the client reads EOF).
//  - Bytes are forwarded unchanged in both directions. When either side closes, the proxy closes
//    the other (no half-close).
//  - CloseAll() closes every connection open at the time, both sides, and returns when they are
//    closed. The listening socket stays open: new connections are accepted as usual.
//  - Pause() stops forwarding in both directions on every connection, open or accepted later,
//    without closing anything: a black hole. Nothing is dropped: the proxy stops reading, so the
//    bytes wait in the kernel's socket buffers (like a partition during which TCP keeps
//    retransmitting) and are delivered after Resume(). While paused, new connections are still
//    accepted and connected to the target, but carry nothing. When Pause() returns, no further
//    byte is forwarded (a chunk being forwarded at the time is finished first).
//  - SetLatency(ms, jitter_ms) delays every chunk read from either side by ms plus a uniform
//    [0, jitter_ms] before it is forwarded (0, 0: none), on open connections and later ones; a
//    slow link rather than a packet-level model (a chunk is up to 16 KiB; one connection's two
//    directions share its delay).
//  - Stop() closes everything and joins every thread. Idempotent.
//
// Threads: one accept thread and one thread per connection, which connects to the target and then
// polls both sockets with a short timeout (~10 ms), so Pause, CloseAll and Stop take effect within
// about that long. Finished connection threads are joined as new connections arrive and at Stop.
//
// Thread-safety: every public method is thread-safe and may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>

namespace gapless {

class TcpProxy {
 public:
  // Starts listening; new connections are forwarded to target_host:target_port (a numeric address
  // or a host name).
  TcpProxy(std::string target_host, int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  // The proxy's own port on 127.0.0.1.
  int port() const { return port_; }

  // Connections accepted from now on go to host:port; open ones are not moved.
  void SetTarget(std::string host, int port);
  // Closes every open connection (both sides).
  void CloseAll();
  // Stops / restarts forwarding on every connection (see the contract above).
  void Pause();
  void Resume();
  // Added latency per forwarded chunk (see the contract above).
  void SetLatency(int64_t ms, int64_t jitter_ms = 0);

  // Connections accepted since construction, and those still open.
  int64_t connections_accepted() const { return accepted_.load(); }
  int open_connections() const;

  void Stop();

 private:
  struct Conn;
  void AcceptLoop();
  void Serve(Conn* conn);
  // Joins the threads of finished connections. Requires mu_.
  void ReapFinishedLocked();

  int port_ = 0;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> paused_{false};
  std::atomic<int64_t> latency_ms_{0};
  std::atomic<int64_t> jitter_ms_{0};
  std::atomic<int64_t> accepted_{0};
  // Held shared by a connection thread while it forwards one chunk, exclusively by Pause(), so
  // that nothing is forwarded once Pause() has returned.
  std::shared_mutex forwarding_;

  mutable std::mutex mu_;  // guards target_*, conns_
  std::string target_host_;
  int target_port_ = 0;
  std::list<std::unique_ptr<Conn>> conns_;
  std::thread accept_thread_;
};

}  // namespace gapless
