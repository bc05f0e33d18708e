// invariants: CheckAll, the report's order (invariants.h), and processes-alive.
#include "chaos/invariants/invariants.h"

#include <fmt/format.h>

namespace gapless::chaos {
namespace {

std::string ProcessesAlive(const RunRecord& run) {
  std::string exits;
  for (const auto& [name, e] : run.exits) {
    exits += fmt::format("{}{} exited by itself {} times (last: {})", exits.empty() ? "" : "; ",
                         name, e.first, e.second);
  }
  return exits;
}

}  // namespace

void CheckAll(Deployment& d, const RunRecord& run, uint64_t tip, SeedReport* report) {
  auto add = [&](const std::string& name, const std::string& problem) {
    report->invariants.push_back({name, problem.empty(), problem});
  };
  CheckOps(d, report);
  std::string ahead = FrontierAhead(d);
  add("frontier-not-ahead", run.frontier_violation.empty() ? ahead : run.frontier_violation);
  add("canonical-chain", DifferenceFromChain(d, tip));
  add("partitions-indexed", PartitionsIndexed(d));
  add("no-orphan-rows", NoOrphanRows(d));
  // RPC seeds index traces (the Kafka stream carries none).
  if (!d.kafka_source_ && !d.events_mode_) add("traces-whole", TracesWhole(d));
  add("equals-clean-run", EqualsCleanRun(d, tip));
  if (d.contracts_) CheckContracts(d, tip, report);
  add(d.events_mode_ ? "verify" : "verify-deep", VerifyDeep(d, tip));
  add("one-leader-per-epoch", OneLeaderPerEpoch(d));
  for (const Bus& bus : d.buses_) {
    CheckEvents(d, tip, bus, report);
    add("balances (" + bus.name + ")", CheckBalances(d, bus));
  }
  CheckQueueAndKeys(d, report);
  CheckHeadLog(d, run, tip, report);
  add("no-stale-write", NoStaleWrite(d));
  // A Kafka worker writes a window's runs under its one lock token.
  if (!d.kafka_source_) add("tokens-unique", TokensUnique(d));
  if (d.compact_) add("compacted", Compacted(d));
  add("processes-alive", ProcessesAlive(run));
}

}  // namespace gapless::chaos
