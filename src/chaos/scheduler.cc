// scheduler: one seed's scenario (harness.h, RunSeed): the deployment set up, the seed's fault
// schedule (chaos/schedule.h) drawn over its processes, links, RPC fronts and buses, then played:
// each fault injected at its time and healed after its duration (chaos/faults/), the failpoint
// situations watched every 100 ms (chaos/situations.h), the processes, the frontier and the head
// log sampled every second; after the fault window the chain stands still and the fleet gets
// settle_ms to recover; then every invariant is checked (chaos/invariants/) and the deployment
// torn down, its directory kept when the seed failed or recovered slowly.
#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "chaos/deployment/deployment.h"
#include "chaos/faults/faults.h"
#include "chaos/harness.h"
#include "chaos/invariants/invariants.h"
#include "chaos/situations.h"

namespace gapless::chaos {
namespace {

// One scenario. The deployment is torn down when it goes: processes first.
class Scenario {
 public:
  Scenario(uint64_t seed, HarnessOptions options) : d_(seed, std::move(options)), faults_(&d_) {}

  Result<SeedReport> Run();

 private:
  Deployment d_;
  Faults faults_;
  RunRecord record_;
  uint64_t watches_ = 0;
};

Result<SeedReport> Scenario::Run() {
  SeedReport report;
  report.seed = d_.seed_;
  report.dir = d_.dir_;
  GAPLESS_RETURN_IF_ERROR(d_.Setup());

  ScheduleOptions schedule;
  schedule.duration_ms = d_.options_.fault_ms;
  schedule.faults_per_minute = d_.options_.faults_per_minute;
  schedule.max_reorg_depth = d_.options_.max_reorg_depth;
  schedule.lease_ttl_ms = d_.options_.lease_ttl_ms;
  schedule.kinds.clear();
  for (FaultKind k : d_.options_.kinds.empty() ? AllFaultKinds() : d_.options_.kinds) {
    // What this deployment cannot do is not drawn.
    if (k == FaultKind::kPgRestart && d_.pg_ == nullptr) continue;
    if (k == FaultKind::kClockSkew && !HaveFaketime()) continue;
    schedule.kinds.push_back(k);
  }
  for (const auto& [name, p] : d_.procs_) schedule.processes.push_back(name);
  for (const auto& [name, link] : d_.links_) schedule.links.push_back(name);
  for (const auto& [name, proxies] : d_.kafka_links_) schedule.links.push_back(name);
  for (const auto& [name, front] : d_.rpc_fronts_) {
    // A worker's spare endpoint is not a fault target of its own: it stays healthy while the
    // worker's first one fails (see Deploy), and the draws stay what they were without it.
    if (name.find(kSpareSuffix) == std::string::npos) schedule.rpc_clients.push_back(name);
  }
  for (const Bus& bus : d_.buses_) {
    if (bus.name != "kafka") schedule.buses.push_back(bus.name);
  }
  // A broker of the mock cluster (the events bus, the block stream, or both; which broker leads
  // which partition varies).
  if (d_.kafka_ != nullptr) schedule.buses.insert(schedule.buses.end(), {"kafka-1", "kafka-2"});
  const std::vector<Fault> faults = MakeSchedule(d_.seed_, schedule);
  report.faults = faults.size();
  // "rpc-ev": the RPC source in the contracts mode's events data mode.
  report.source = d_.kafka_source_ ? "kafka" : d_.events_mode_ ? "rpc-ev" : "rpc";

  d_.StartTraffic();
  if (d_.kafka_source_) d_.StartProducer();
  std::multimap<int64_t, Fault> heals;  // due time (ms since faults_start) -> fault
  size_t next = 0;
  auto watch = [&] {
    for (auto& [name, p] : d_.procs_) {
      int status = 0;
      if (p.pid > 0 && waitpid(p.pid, &status, WNOHANG) == p.pid) {
        const std::string what = fmt::format(
            "{} exited by itself ({} {}; its log ends: {})", name,
            WIFEXITED(status) ? "code" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), LastLogLine(p.log));
        auto& [times, last] = record_.exits[name];
        ++times;
        last = what;
        d_.Note(what + "; restarted");
        p.pid = -1;
        p.Start();
      }
    }
    if (record_.frontier_violation.empty()) {
      record_.frontier_violation = FrontierAhead(d_);
      if (!record_.frontier_violation.empty())
        d_.Note("VIOLATION frontier-not-ahead: " + record_.frontier_violation);
    }
    // The head log, every few seconds: a node may restart empty later and hide what it held.
    if ((record_.head_log_violation.empty() || record_.head_chain_violation.empty()) &&
        ++watches_ % 5 == 0) {
      std::string chained;
      const std::string unique = HeadLogProblem(d_, &chained);
      if (record_.head_log_violation.empty() && !unique.empty()) {
        record_.head_log_violation = unique;
        d_.Note("VIOLATION head-log-unique: " + unique);
      }
      if (record_.head_chain_violation.empty() && !chained.empty()) {
        record_.head_chain_violation = chained;
        d_.Note("VIOLATION head-log-chained: " + chained);
      }
    }
  };
  auto watch_failpoints = [&] { WatchFailpoints(d_, &record_.lease_violation); };
  // Let the fleet start before the first fault, watching the failpoints (the first stop comes
  // within seconds: a worker's first task).
  for (int i = 0; i < 30; ++i) {
    watch_failpoints();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const Clock::time_point faults_start = Clock::now();
  auto last_check = Clock::now();
  auto last_failpoints = Clock::now();
  auto interrupted = [&] { return d_.options_.stop != nullptr && d_.options_.stop->load(); };
  while (true) {
    if (interrupted()) {
      d_.Note("interrupted");
      return Aborted("interrupted");
    }
    const int64_t now = MillisSince(faults_start);
    while (next < faults.size() && faults[next].at_ms <= now) {
      faults_.Inject(faults[next]);
      heals.emplace(now + faults[next].duration_ms, faults[next]);
      ++next;
    }
    while (!heals.empty() && heals.begin()->first <= now) {
      faults_.Heal(heals.begin()->second);
      heals.erase(heals.begin());
    }
    if (Clock::now() - last_failpoints > std::chrono::milliseconds(100)) {
      watch_failpoints();
      last_failpoints = Clock::now();
    }
    if (Clock::now() - last_check > std::chrono::seconds(1)) {
      watch();
      last_check = Clock::now();
    }
    if (next >= faults.size() && heals.empty() && now >= d_.options_.fault_ms) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  d_.StopTraffic();
  {
    std::lock_guard<std::mutex> lock(d_.chain_mu_);
    (void)d_.rpc_->Call("anvil_mine", R"(["0x1"])");
  }
  const uint64_t tip = d_.Tip();
  report.tip = tip;
  d_.Note(fmt::format("faults over; the chain stays at block {}: waiting for the fleet", tip));
  const Clock::time_point settle_start = Clock::now();
  std::string why;
  bool recovered = false;
  while (MillisSince(settle_start) < d_.options_.settle_ms) {
    if (interrupted()) {
      d_.Note("interrupted");
      return Aborted("interrupted");
    }
    watch();
    watch_failpoints();
    if (Recovered(d_, tip, &why)) {
      recovered = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (recovered) report.recovery_ms = MillisSince(settle_start);
  d_.Note(recovered ? fmt::format("recovered in {} ms", report.recovery_ms)
                    : "not recovered: " + why);
  report.invariants.push_back(
      {"recovered", recovered, recovered ? fmt::format("{} ms", report.recovery_ms) : why});
  CheckAll(d_, record_, tip, &report);
  {
    auto conn = d_.pool_->Acquire();
    auto r = conn->Query("SELECT count(*) FROM reorgs");
    if (r.ok()) report.reorgs = static_cast<uint64_t>(r->GetInt64(0, 0).value());
  }
  for (const InvariantResult& inv : report.invariants) {
    if (!inv.ok) d_.Note("VIOLATION " + inv.name + ": " + inv.detail);
  }
  d_.Teardown();
  const bool slow = d_.options_.keep_logs_over_ms >= 0 &&
                    (report.recovery_ms < 0 || report.recovery_ms > d_.options_.keep_logs_over_ms);
  if (slow) {
    d_.Note(
        fmt::format("recovery took over {} ms: the logs are kept", d_.options_.keep_logs_over_ms));
  }
  if (report.violations() == 0 && !d_.options_.keep_passing_logs && !slow) {
    std::error_code ignored;
    std::filesystem::remove_all(d_.dir_, ignored);
  }
  return report;
}

}  // namespace

size_t SeedReport::violations() const {
  return static_cast<size_t>(
      std::count_if(invariants.begin(), invariants.end(), [](const auto& i) { return !i.ok; }));
}

Result<SeedReport> RunSeed(uint64_t seed, const HarnessOptions& options) {
  Scenario scenario(seed, options);
  return scenario.Run();
}

}  // namespace gapless::chaos
