// schedule: the chaos harness's fault plan (issue 16), a pure function of a seed.
//
// MakeSchedule(seed, options) draws the faults of one scenario: when each starts (milliseconds
// after the fleet started), what it is, what it hits and for how long. The same seed and options
// give the same schedule on every machine (a SplitMix64 stream, no std:: distribution, whose
// output the standard leaves to the implementation), so a failing seed replays its faults
// exactly; only the processes' reactions to them vary with timing.
//
// Fault kinds (what the harness does with each is in harness.h):
//   kill         SIGKILL a gapless process; restarted after `duration_ms`
//   stop         SIGSTOP a gapless process for `duration_ms` (past the lease TTL), then SIGCONT
//   lock-node    kill a lock-node redis-server; restarted empty (no persistence) after duration
//   coord-redis  kill the coordination Redis; restarted empty after duration (Redis loses its
//                data: reconcile from PostgreSQL)
//   partition    black-hole one link (a process's proxy to one server) for duration
//   cut          close every connection of one link (they reconnect at once)
//   latency      add `latency_ms` (jittered) to one link for duration
//   reorg        re-org the chain `depth` blocks deep (1..max_reorg_depth), new transactions in
//                the new fork
//   bus-down     stop the events bus for duration (the relay keeps the backlog)
//   rpc          the RPC node, as one leader or worker sees it, answers badly for duration: `mode`
//                is 429 (with Retry-After), 5xx, truncated (a body cut short), malformed (JSON
//                that does not parse) or other-hash (a worker's backend that serves another hash
//                at a height near the tip: a lagging or forked backend; workers only)
//   pg-restart   restart PostgreSQL (every connection cut; fast shutdown) — only when the harness
//                owns the server
//
// Thread-safety: pure functions and values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gapless::chaos {

enum class FaultKind {
  kKill,
  kStop,
  kLockNode,
  kCoordRedis,
  kPartition,
  kCut,
  kLatency,
  kReorg,
  kBusDown,
  kRpc,
  kPgRestart,
};

std::string_view FaultKindName(FaultKind kind);
// All kinds, in declaration order.
const std::vector<FaultKind>& AllFaultKinds();
// "kill" -> kKill; false for an unknown name.
bool ParseFaultKind(std::string_view name, FaultKind* out);

struct Fault {
  int64_t at_ms = 0;  // after the scenario's start
  FaultKind kind = FaultKind::kKill;
  std::string target;       // a process, a lock node ("lock-1"), a link ("worker-2>pg"), ""
  int64_t duration_ms = 0;  // how long it lasts before the harness heals it (0: instant)
  int64_t latency_ms = 0;   // latency faults
  uint64_t depth = 0;       // re-orgs
  std::string mode;         // rpc faults: "429", "5xx", "truncated", "malformed", "other-hash"
  std::string Describe() const;
};

struct ScheduleOptions {
  int64_t duration_ms = 120'000;  // faults start within [0, duration_ms)
  double faults_per_minute = 12;
  std::vector<FaultKind> kinds = AllFaultKinds();
  std::vector<std::string> processes;    // kill / stop targets
  std::vector<std::string> links;        // partition / cut / latency targets
  std::vector<std::string> rpc_clients;  // rpc targets (leaders and workers)
  int lock_nodes = 3;
  uint64_t max_reorg_depth = 8;
  int64_t lease_ttl_ms = 3'000;  // stops last longer than this
};

// The faults of seed `seed`, ordered by at_ms. Kinds without a target (no processes, no links)
// are not drawn. A lock node is never hit while another is down, so a quorum of the three stays
// (the harness tests the design inside its fault model, seed 001 §2).
std::vector<Fault> MakeSchedule(uint64_t seed, const ScheduleOptions& options);

}  // namespace gapless::chaos
