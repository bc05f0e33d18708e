// harness: the chaos harness (issue 16, seed 001 §12, for the whole system). One scenario per
// seed: a whole deployment of real processes, a seeded fault schedule (chaos/schedule.h) played
// against it, and invariant checkers during and after, each named in the report when it fails.
//
// The deployment of one seed (everything private to it, torn down at its end):
//   - a PostgreSQL server of its own (testing/pg_server.h; or databases on pg_admin_url), with
//     the deployment's database and one for the clean run;
//   - the coordination redis-server and its replica (following it through a proxy of the
//     harness's, which coord-failover faults pause), three lock-node redis-servers and one for
//     the consumers' processing keys, all without persistence (testing/redis_server.h);
//   - the events buses (`buses`): a redis-server (Redis Streams), a RabbitMQ node
//     (testing/rabbitmq_server.h) and a Kafka mock cluster of 3 brokers (testing/kafka_mock.h);
//   - an anvil chain (--anvil) with token traffic: an emitter contract whose every call logs an
//     ERC-20 Transfer, value transfers, a block every ~300 ms;
//   - two `gapless leader` candidates (following the tip, HA election over the lock nodes, the
//     relays to every bus), `workers` `gapless worker` processes, and two `gapless consume
//     balances` consumers per bus (a group per bus, each keeping its balances in a schema of its
//     own); with the Kafka source (`source`), two Kafka workers besides, the leaders in
//     --source kafka, and the harness producing the block stream as the chain moves;
//   - every gapless process under libfaketime (clock-skew faults), when it is installed;
//   - a TCP proxy (testing/tcp_proxy.h) on every link of every gapless process: to the
//     coordination Redis, each lock node, PostgreSQL, the RPC node; the leaders share one link
//     to the Redis bus and one to RabbitMQ (the relay names a bus, and its cursor, by the URL);
//     Kafka's brokers are reached directly (they advertise their own addresses). Link names are
//     "<process>><server>", e.g. "worker-2>pg", "leader-a>lock-3".
// Before the fleet starts, blocks 0..9 and 20..29 are indexed by `gapless index` without events
// (a user who indexed part of the chain before turning events on): the fleet's relay must
// publish 10..29 without a hole (events_from is 10, the end of the committed prefix). One worker
// (worker-1) runs with the failpoint worker-stop-before-write: it stops itself right before its
// fenced write, once per process start; the harness re-orgs under its range and resumes it after
// the rollback (or, when it cannot, after twice the lease TTL), so every scenario has a stale
// writer that only the fence can refuse. Another (worker-2) runs with worker-stop-before-complete:
// it stops itself between its write and its completion; the harness re-orgs under its range,
// waits for another worker to claim the revoked task, stops that one and resumes the first, so
// only the queue's lease-owner check can refuse the stale completion. Every second re-org fault
// first moves the head on a minority of the lock nodes (HeadOnAMinority, faults/chain_faults.cc),
// so only the head log's height check keeps a node from holding two hashes at a height.
// Faults are applied at their times and healed after their durations; every fault and recovery
// is written to the timeline (timeline.txt in the seed's directory, with milliseconds since the
// start). After the fault window the chain stops moving and the harness waits (up to settle_ms)
// for the fleet to be back: the database equal to the node's chain, the frontier at its tip + 1,
// the bus published to it, the consumers caught up; that wait is the recovery time.
//
// Invariants (names as in the report):
//   frontier-not-ahead   sampled every second during the run and checked at the end: every block
//                        below the persisted frontier is stored
//   canonical-chain      every block 0..tip stored exactly once, with the node's hash
//   no-orphan-rows       no transaction, log, token transfer or withdrawal without its block
//   equals-clean-run     per-table checksums equal a clean single-process index of the final chain
//   verify-deep          `gapless verify --deep --anvil-blob-roots` over 0..tip passes
//   one-leader-per-epoch no epoch started a term in two leaders (from the leaders' logs)
//   head-log-unique      within the newest fork generation, no lock node holds two hashes at a
//                        height and no two hashes are on a quorum at a height (sampled every 5 s
//                        and at the end)
//   head-log-chained     the committed head log is one chain: every committed entry's parent is
//                        the committed entry right below it (sampled and checked likewise)
//   lease-held           in the stale-completion situation, the new holder (stopped 0.5 s, well
//                        within its lease) still holds the task after the revoked holder tried
//                        to complete it: not lease gone and task ended meanwhile
// The events invariants and balances are checked per bus, named "events-order (redis)" etc.:
//   events-order         in the bus's block.new stream, each block above events_from comes
//                        after its parent's: the latest block.new at the height below (among
//                        first deliveries of an event id) names the block's parent hash
//                        (BlockNewOrderViolation)
//   events-complete      every canonical block from events_from on has its block.new
//   events-retracted     every block.new of an orphaned block has a block.reverted
//   events-transfers     every canonical block's token.transfer events in effect (less the ids a
//                        block.reverted took back) equal its rows
//   balances             the bus's consumer group's token_balances equals the SQL aggregate
//   dlq-empty            nothing dead-lettered: every task ended committed
//   keys-bounded         every coordination key has a TTL or is one of the bounded keys
//   no-stale-write       no range was rewritten by another lease holder without a higher token
//                        (a trigger the harness adds to indexed_ranges records such writes)
//   processes-alive      no gapless process exited by itself
//   recovered            the fleet was back within settle_ms after the last fault
//
// Thread-safety: RunSeed may run for different seeds at once (every deployment is private: free
// ports, databases named after the seed and the process); each runs on its calling thread plus
// threads of its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "chaos/schedule.h"
#include "core/status.h"

namespace gapless::chaos {

struct HarnessOptions {
  std::string gapless_bin;  // the gapless binary
  std::string anvil_bin;    // anvil
  // A PostgreSQL server where the harness creates its databases; empty: a server of each
  // seed's own (only then are pg-restart faults drawn).
  std::string pg_admin_url;
  std::string work_dir;  // each seed writes <work_dir>/seed-<n>/ (logs, timeline)
  int64_t fault_ms = 120'000;
  int64_t settle_ms = 180'000;
  double faults_per_minute = 12;
  std::vector<FaultKind> kinds;  // empty: every kind the deployment supports
  // The events buses the leaders publish to, each with two balances consumers: any of "redis"
  // (Redis Streams), "amqp" (RabbitMQ), "kafka" (the librdkafka mock cluster, 3 brokers).
  std::vector<std::string> buses = {"redis", "amqp", "kafka"};
  // Where the fleet's blocks come from: "rpc" (the work queue), "kafka" (a block stream the
  // harness produces to the Kafka mock cluster, read by Kafka workers, with the RPC workers
  // healing gaps) or "mixed" (kafka for odd seeds, rpc for even ones).
  std::string source = "mixed";
  // The contracts mode (docs/contracts.md) the fleet runs in: "full" (every seed indexes whole
  // blocks and decodes a contracts config: the chain's token, a contract whose ABI misfits it,
  // and a factory's children), "events" (RPC seeds --data events, Kafka seeds as full: events
  // mode reads eth_getLogs), "mixed" (RPC seeds 0 mod 4 events, every
  // other seed full) or "off" (no config).
  std::string contracts = "mixed";
  int workers = 3;
  uint64_t max_reorg_depth = 8;
  int64_t lease_ttl_ms = 3'000;
  bool keep_passing_logs = false;  // keep the directory of a seed without violations
  // Keep the directory of a seed without violations that took longer than this to recover
  // (milliseconds; negative: never on that account).
  int64_t keep_logs_over_ms = 30'000;
  // The safety check the gapless processes run without (GAPLESS_MUTATION, core/mutation.h; the
  // gapless binary must be built with GAPLESS_MUTATIONS=ON). Empty: none.
  std::string mutation;
  // Set (e.g. by a signal handler): the scenario stops at once, tears its deployment down and
  // returns Aborted "interrupted". Borrowed; nullable.
  const std::atomic<bool>* stop = nullptr;
};

struct InvariantResult {
  std::string name;
  bool ok = true;
  std::string detail;  // what was wrong (or a figure)
};

struct SeedReport {
  uint64_t seed = 0;
  size_t faults = 0;
  std::vector<InvariantResult> invariants;
  int64_t recovery_ms = -1;  // -1: did not recover
  uint64_t tip = 0;          // the chain's last block at the end
  uint64_t reorgs = 0;       // re-orgs the database recorded
  std::string source;        // where the fleet's blocks came from: "rpc", "rpc-ev" (the
                             // contracts mode's --data events) or "kafka"
  std::string dir;           // where its timeline and logs are (removed when it passed)
  size_t violations() const;
};

// One block.new as the harness read it off a bus, in the bus's order.
struct BlockNewSeen {
  uint64_t number = 0;
  std::string hash;
  std::string parent_hash;
  std::string event_id;
};

// The events-order invariant over one bus's block.new stream: "" when it holds, else what broke
// first. What a consumer that follows the chain needs: when it receives the block.new of a block
// above events_from, it has already received its parent's, and the latest block.new it received
// at that height is the parent (so a new fork's blocks come from the fork point up, and a block
// that came back in a flip-flop is announced again before its child). A delivery of an event id
// already delivered (a batch published again: a relay killed before its cursor moved, or a
// deposed leader's relay whose batch reached the broker after its successor's) changes nothing a
// consumer that deduplicates by id sees, so it is not looked at. So the stream starts at
// events_from (or below) and never skips a height.
std::string BlockNewOrderViolation(uint64_t events_from, const std::vector<BlockNewSeen>& stream);

// One scenario. A failure to set the deployment up is an error (not a violation).
Result<SeedReport> RunSeed(uint64_t seed, const HarnessOptions& options);

}  // namespace gapless::chaos
