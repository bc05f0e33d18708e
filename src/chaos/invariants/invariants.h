// invariants: the named checks of harness.h, each a function over the deployment's final state
// (the database, the node's chain, the buses, the coordination Redis, the lock nodes, the logs)
// and what the run recorded on the way (RunRecord: the samples' first violations, the
// situations' findings, the processes that exited by themselves). A function returns "" when its
// invariant holds, else what broke; one that checks a family at once adds its rows to the report.
// One file per family:
//   chain.cc         canonical-chain, frontier-not-ahead, partitions-indexed, no-orphan-rows,
//                    traces-whole, equals-clean-run, verify-deep; Recovered (the settle wait)
//   events.cc        events-order, events-complete, events-retracted, events-transfers (per bus)
//   balances.cc      balances (per bus), with the dumps a failing check leaves
//   coordination.cc  one-leader-per-epoch, dlq-empty, keys-bounded, head-log-unique,
//                    head-log-chained, lease-held, no-stale-write, tokens-unique
//   ops.cc           ops-ready, ops-metrics, ops-one-leader
//   contracts.cc     decoded-equals-clean-run, decoded-canonical, decoded-complete (the
//                    contracts mode); the blocks events mode must hold
// invariants.cc runs them all in the report's order (CheckAll), and processes-alive.
//
// Thread-safety: the scenario's thread only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "chaos/deployment/deployment.h"
#include "chaos/harness.h"
#include "events/event.h"

namespace gapless::chaos {

using Bus = Deployment::Bus;

// What the run saw on its way, for the checks at the end.
struct RunRecord {
  std::string frontier_violation;    // frontier-not-ahead: the first the samples saw
  std::string head_log_violation;    // head-log-unique: likewise (every 5 s)
  std::string head_chain_violation;  // head-log-chained: likewise
  std::string lease_violation;       // lease-held: the stale-completion situation's
  std::map<std::string, std::pair<int, std::string>> exits;  // process -> (times, last status)
};

// Every invariant, in the report's order, after the recovery wait (recovered is the caller's).
void CheckAll(Deployment& d, const RunRecord& run, uint64_t tip, SeedReport* report);

// Also sampled during the run, or the settle wait's test.
// Empty when the database holds the node's chain 0..tip exactly.
std::string DifferenceFromChain(Deployment& d, uint64_t tip);
// Empty when every block below the persisted frontier is stored.
std::string FrontierAhead(Deployment& d);
// "" when every block partition has all its secondary indexes, valid (store/partition_indexes.h);
// once the fleet has caught up with a still chain, every partition is due.
std::string UnindexedPartitions(PgConn& conn);
// The head log on the lock nodes: within the newest fork generation, no node holds two hashes at
// one height and no two hashes are on a quorum at one height. Empty when it holds (nodes that do
// not answer, being down, are left out). `chained` gets a problem when the committed entries do
// not chain (one entry's parent is not the committed entry below it). With `chain` (height ->
// hash, the final chain): every committed entry must be on it too.
std::string HeadLogProblem(Deployment& d, std::string* chained,
                           const std::map<uint64_t, std::string>* chain = nullptr);
// The fleet is back: the chain stored, the frontier at tip + 1, the relay published to it, no
// retraction pending, every partition indexed, every balances group caught up; else *why.
bool Recovered(Deployment& d, uint64_t tip, std::string* why);

// chain.cc
std::string PartitionsIndexed(Deployment& d);
std::string NoOrphanRows(Deployment& d);
std::string TracesWhole(Deployment& d);
std::string EqualsCleanRun(Deployment& d, uint64_t tip);
std::string VerifyDeep(Deployment& d, uint64_t tip);
// contracts.cc: the contracts mode's three invariants (after EqualsCleanRun, whose clean run
// they compare with).
void CheckContracts(Deployment& d, uint64_t tip, SeedReport* report);
// Events mode: the blocks holding a log events mode keeps (the token's, the factory's, any
// Transfer: a child's) on the node's chain 0..tip (number -> hash), which the database must hold
// and no other.
Result<std::map<uint64_t, std::string>> MatchingBlocks(Deployment& d, uint64_t tip);
// events.cc: the four events invariants of one bus.
void CheckEvents(Deployment& d, uint64_t tip, const Bus& bus, SeedReport* report);
// Every event of the given types on a bus, in the bus's order (per topic). `tip`: the chain's
// tip, whose block.new is the last event: a queue or topic is read until it has come and nothing
// more does for a while (on a busy machine a pause of seconds between deliveries is no end).
Result<std::map<std::string, std::vector<Envelope>>> ReadBus(const Bus& bus,
                                                             const std::vector<std::string>& types,
                                                             uint64_t tip);
// balances.cc
std::string CheckBalances(Deployment& d, const Bus& bus);
// coordination.cc
std::string OneLeaderPerEpoch(Deployment& d);
void CheckQueueAndKeys(Deployment& d, SeedReport* report);  // dlq-empty, keys-bounded
// head-log-unique, head-log-chained, then lease-held (in the report it comes after them).
void CheckHeadLog(Deployment& d, const RunRecord& run, uint64_t tip, SeedReport* report);
std::string NoStaleWrite(Deployment& d);
std::string TokensUnique(Deployment& d);
std::string Compacted(Deployment& d);
// ops.cc
void CheckOps(Deployment& d, SeedReport* report);

}  // namespace gapless::chaos
