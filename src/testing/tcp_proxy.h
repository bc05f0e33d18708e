// TcpProxy: a TCP forwarder on 127.0.0.1 for failover and chaos tests. A client connects to the
// proxy instead of a server; the proxy connects it on to a target host:port that the test can
// change at any time, and can cut (CloseAll, CloseAfterBytes), black-hole (Pause, both ways or one
// way), slow down (SetLatency, SetBandwidth) and heal (Resume, Heal) the connections it carries,
// so a test can move a client from one server to another, or partition it, without the client's
// knowledge.
//
// Contract:
//  - Listens on 127.0.0.1:<ephemeral port> from construction until Stop() (the destructor calls
//    it). Aborts the process if it cannot listen (a test helper).
//  - Each accepted connection is connected to the target that is current when it is accepted;
//    SetTarget() affects only connections accepted afterwards, existing ones stay where they are.
//    When the target cannot be reached, the client's connection is closed (the client reads EOF).
//  - Bytes are forwarded unchanged and in order in both directions. When either side closes, the
//    proxy closes the other (no half-close).
//  - Every fault below (except CloseAll) applies to every connection, open or accepted later,
//    until it is lifted; they compose (a connection can be paused one way, slowed and counted for
//    CloseAfterBytes at the same time).
//  - CloseAll() closes every connection open at the time, both sides, and returns when they are
//    closed. The listening socket stays open: new connections are accepted as usual.
//  - Pause() stops forwarding in both directions without closing anything: a black hole.
//    Pause(direction) does the same for one direction only (kToServer: client -> target,
//    kToClient: target -> client), a one-way black hole; the other direction keeps flowing.
//    Nothing is dropped: the proxy stops reading the paused side, so its bytes wait in the
//    kernel's socket buffers (like a partition during which TCP keeps retransmitting), plus at
//    most one chunk the proxy had already read, and all are delivered after Resume(). While
//    paused, new connections are still accepted and connected to the target, but carry nothing
//    in the paused direction. When Pause returns, no further byte of the paused direction is
//    forwarded. Resume() lifts every pause (both directions); pauses do not nest.
//  - SetLatency(ms, jitter_ms) delays every chunk read from either side by ms plus a uniform
//    [0, jitter_ms] before it is forwarded (0, 0: none), on open connections and later ones; a
//    slow link rather than a packet-level model (a chunk is up to 16 KiB and each direction
//    holds one chunk at a time, so latency also caps a direction at 16 KiB per delay). A chunk
//    read before a change keeps the delay it was given.
//  - SetBandwidth(bytes_per_second) limits each direction of each connection to that rate (0:
//    unlimited): a token bucket that holds at most 1/20 s worth of bytes (at least 1), so a burst
//    is small. It applies after the latency: a chunk waits out its delay, then is paced.
//  - CloseAfterBytes(n) with n > 0 gives every connection, open or accepted later, a budget of n
//    more bytes counted from the call (both directions summed, from when the call returns): the
//    proxy forwards exactly n bytes (splitting a chunk if need be), then closes both sides, which
//    read the forwarded bytes and then EOF. A new call replaces the budget of every connection
//    with a fresh one; n <= 0 lifts it (open connections with budget left then stay open).
//  - Heal() lifts every fault: Resume(), SetLatency(0, 0), SetBandwidth(0), CloseAfterBytes(0).
//    It does not change the target and does not reopen anything closed.
//  - Stop() closes everything and joins every thread. Idempotent.
//
// Threads: one accept thread and one thread per connection, which connects to the target and then
// polls both sockets with a short timeout (~10 ms), never blocking in a read or a write, so
// Pause, CloseAll and Stop take effect within about that long, and the other settings on the next
// chunk. Finished connection threads are joined as new connections arrive and at Stop.
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
  // The two directions of a connection.
  enum class Direction {
    kToServer,  // client -> target
    kToClient,  // target -> client
  };

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
  // Stops forwarding on every connection, both ways or one way; Resume() restarts both (see the
  // contract above).
  void Pause();
  void Pause(Direction direction);
  void Resume();
  // Added latency per forwarded chunk (see the contract above).
  void SetLatency(int64_t ms, int64_t jitter_ms = 0);
  // Per-connection, per-direction rate limit; 0 (or less): unlimited.
  void SetBandwidth(int64_t bytes_per_second);
  // Closes each connection once it has forwarded n more bytes; n <= 0: off.
  void CloseAfterBytes(int64_t n);
  // Lifts every pause, latency, bandwidth limit and byte budget.
  void Heal();

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
  std::atomic<bool> paused_[2] = {false, false};  // indexed by Direction
  std::atomic<int64_t> latency_ms_{0};
  std::atomic<int64_t> jitter_ms_{0};
  std::atomic<int64_t> bandwidth_{0};  // bytes per second, 0: unlimited
  // CloseAfterBytes: each call bumps the generation; a connection that sees a new generation
  // takes a fresh budget of close_after_ bytes (<= 0: none).
  std::atomic<int64_t> close_after_generation_{0};
  std::atomic<int64_t> close_after_{0};
  std::atomic<int64_t> accepted_{0};
  // Held shared by a connection thread around each (non-blocking) read or write it forwards,
  // exclusively by Pause() and CloseAfterBytes(), so that once they return no connection acts on
  // the old setting.
  std::shared_mutex forwarding_;

  mutable std::mutex mu_;  // guards target_*, conns_
  std::string target_host_;
  int target_port_ = 0;
  std::list<std::unique_ptr<Conn>> conns_;
  std::thread accept_thread_;
};

}  // namespace gapless
