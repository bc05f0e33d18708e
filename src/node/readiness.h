// readiness: what /readyz answers (node/ops_server.h). Each dependency's check runs on a thread
// of its own, every interval (1 s by default; a check may ask for a longer one, as the RPC
// node's does, 5 s, so a paid provider is not billed for probes), and keeps its last result.
// /readyz reads the results and never waits on a server, and a check that hangs (a paused
// server that keeps the TCP connection open) holds up no other.
//
// Ready means: the process has finished starting (SetStarted), and every check's last result is
// OK and recent. A result older than three times its interval plus the probe timeout counts as
// failed ("no result for N s"): a check that hangs cannot keep a process ready.
//
// The checks a fleet process registers (node/fleet_command.cc): PostgreSQL (SELECT 1),
// the coordination Redis (PING), the lock quorum (PING each lock node: at least a quorum answer),
// the RPC node (eth_chainId), and for a leader candidate the leader (this process leads, or a
// holder is on a quorum of lock nodes). Each check uses connections of its own with short
// timeouts, never the workers'.
//
// Destruction waits up to 3 s for the probes in progress; one still stuck on a server is left to
// finish (or not) on its own: a probe must own what it uses (its connections), or use only objects
// that outlive the prober and answer without I/O.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "core/status.h"

namespace gapless {

class ReadinessProber {
 public:
  // probe: OK with a short description of the state ("3 of 3 lock nodes"), or a failure whose
  // message says what is wrong. Called on the prober thread only.
  using Probe = std::function<Result<std::string>()>;

  explicit ReadinessProber(std::chrono::milliseconds interval = std::chrono::seconds(1));
  ~ReadinessProber();  // stops the thread
  ReadinessProber(const ReadinessProber&) = delete;
  ReadinessProber& operator=(const ReadinessProber&) = delete;

  // Adds a check, probed every max(every, interval) from Start on (at once when started).
  void Add(std::string name, Probe probe, std::chrono::milliseconds every = {});
  // What the process is doing before it is started ("opening the coordination Redis"): shown by
  // /readyz until SetStarted.
  void SetStarting(std::string what);
  void SetStarted();

  // Starts probing (idempotent).
  void Start();
  // Stops probing: no probe starts after this returns; waits up to 3 s for those in progress.
  // Call it before destroying what a probe uses (the destructor calls it too).
  void Stop();

  struct Report {
    bool ready = false;
    std::string text;  // "ready\n" or "not ready\n", then "name: ok|FAILED: detail" lines
  };
  Report Read() const;

 private:
  struct Entry {
    std::string name;
    Probe probe;
    std::chrono::milliseconds every;
    bool probed = false;  // the fields below are guarded by State::mu
    bool ok = false;
    std::string detail;
    std::chrono::steady_clock::time_point at{};
  };
  // Shared with the probe threads, which may outlive the prober: a probe stuck on a server that
  // stopped answering is left behind (detached) at destruction rather than hang the process's
  // exit. It touches only its own connections and this state.
  struct State {
    mutable std::mutex mu;
    std::condition_variable wake;
    std::deque<Entry> entries;  // stable addresses: each thread holds its entry
    std::string starting = "starting";
    bool started = false;
    bool running = false;
    bool quit = false;
    int threads_running = 0;
  };
  static void Loop(std::shared_ptr<State> state, Entry* e);
  void StartLocked(Entry* e);

  const std::chrono::milliseconds interval_;
  std::shared_ptr<State> state_;
};

}  // namespace gapless
