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
//   partition    black-hole one link (a process's proxy to one server) for duration; `mode`
//                "both" ways, or one way only: "to-server" (requests vanish, answers flow) or
//                "to-client" (requests arrive, answers vanish)
//   cut          one link's connections closed: `mode` "now" (every open one, once; they
//                reconnect at once) or "after-bytes" (for duration, every connection closed
//                once it has carried `bytes` more bytes: a connection that dies mid-message)
//   latency      one link slowed for duration: `mode` "delay" (`latency_ms` per chunk,
//                jittered ±25%) or "bandwidth" (`bytes` per second each way)
//   reorg        re-org the chain `depth` blocks deep (1..max_reorg_depth), new transactions in
//                the new fork
//   bus-down     one events bus down for duration (the relay keeps the backlog): `target` is
//                "redis" (the server SIGSTOPped), "amqp" (RabbitMQ stopped, then started again
//                with its data) or "kafka-N" (broker N of the mock cluster down)
//   rpc          the RPC node, as one leader or worker sees it, answers badly for duration: `mode`
//                is 429 (with Retry-After), 5xx, truncated (a body cut short), malformed (JSON
//                that does not parse), other-hash (a worker's backend that serves another hash
//                at a height near the tip: a lagging or forked backend; workers only) or down
//                (every connection reset: an endpoint that is gone)
//   pg-restart   restart PostgreSQL (every connection cut; fast shutdown) — only when the harness
//                owns the server
//   coord-failover  the coordination Redis fails over to a lagging replica: replication stops
//                for `latency_ms`, then the primary dies and the replica, without the writes of
//                that time (the fence counter rolled back, leases and completions lost), is
//                promoted and every process is moved to it; a new replica joins after duration
//   flip-flop    the chain goes A -> B -> A: `depth` blocks of fork A are mined and indexed,
//                re-orged away by fork B (one block longer), then A comes back with its exact
//                blocks (anvil replays them: same transactions, timestamps and base fees), plus a
//                block on top
//   clock-skew   a process's wall clock runs `skew_ms` off (libfaketime; the monotonic clock is
//                left alone, as NTP leaves it) for duration
//   rpc-other-chain  one endpoint of a process's RPC pool (a worker's or Kafka worker's first
//                one, never a leader's: a leader has no second endpoint) answers as another chain
//                for duration: another eth_chainId, another block 0 and other blocks. Opt-in:
//                not in AllFaultKinds (so `all` draws what it drew before), named in a --scenario
//                list
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
  kCoordFailover,
  kClockSkew,
  kFlipFlop,
  kRpcOtherChain,  // opt-in: not in AllFaultKinds (see above)
};

std::string_view FaultKindName(FaultKind kind);
// The kinds `all` draws, in declaration order: every kind but the opt-in ones (kRpcOtherChain),
// so that a kind added later leaves the schedules of existing seeds as they were.
const std::vector<FaultKind>& AllFaultKinds();
// "kill" -> kKill (an opt-in kind too); false for an unknown name.
bool ParseFaultKind(std::string_view name, FaultKind* out);

struct Fault {
  int64_t at_ms = 0;  // after the scenario's start
  FaultKind kind = FaultKind::kKill;
  std::string target;       // a process, a lock node ("lock-1"), a link ("worker-2>pg"), ""
  int64_t duration_ms = 0;  // how long it lasts before the harness heals it (0: instant)
  int64_t latency_ms = 0;   // latency faults; coord-failover: how long the replica lags
  int64_t skew_ms = 0;      // clock-skew: the offset of the process's wall clock
  uint64_t depth = 0;       // re-orgs
  std::string mode;         // rpc, partition, cut and latency faults: which kind (above)
  int64_t bytes = 0;        // cut after-bytes: the budget; latency bandwidth: bytes per second
  std::string Describe() const;
};

struct ScheduleOptions {
  int64_t duration_ms = 120'000;  // faults start within [0, duration_ms)
  double faults_per_minute = 12;
  std::vector<FaultKind> kinds = AllFaultKinds();
  std::vector<std::string> processes;    // kill / stop / clock-skew targets
  std::vector<std::string> links;        // partition / cut / latency targets
  std::vector<std::string> rpc_clients;  // rpc targets (leaders and workers); rpc-other-chain:
                                         // those not named leader-* (a pool of two endpoints)
  std::vector<std::string> buses;        // bus-down targets: "redis", "amqp", "kafka-1", ...
  int lock_nodes = 3;
  uint64_t max_reorg_depth = 8;
  int64_t lease_ttl_ms = 3'000;  // stops last longer than this
};

// The faults of seed `seed`, ordered by at_ms. Kinds without a target (no processes, no links)
// are not drawn. A lock node is never hit while another is down, so a quorum of the three stays
// (the harness tests the design inside its fault model, seed 001 §2).
std::vector<Fault> MakeSchedule(uint64_t seed, const ScheduleOptions& options);

}  // namespace gapless::chaos
