// gapless-chaos: runs the chaos harness (chaos/harness.h) over a range of seeds and prints a
// table: seed, faults, invariants checked, violations, recovery time. A failing seed keeps its
// directory (timeline.txt, every process's log); a passing one is removed unless --keep-logs.
// Exit status: 0 when every seed passed, 1 when an invariant was violated, 2 on a setup error, bad
// flags, or an interruption (SIGINT/SIGTERM: running seeds tear their deployments down first).
//
//   gapless-chaos --seeds 1..100 --minutes 2 [--scenario
//   all|processes|network|redis|servers|reorgs|
//                 KIND,KIND...] [--workers 3] [--settle 180] [--work-dir DIR] [--pg-url URL]
//                 [--gapless PATH] [--anvil PATH] [--faults-per-minute 12] [--keep-logs]
//                 [--parallel N] [--buses redis,amqp,kafka] [--source rpc|kafka|mixed]
//                 [--contracts full|events|mixed|off]
//                 [--mutation fence|reorg-floor|relay-contiguity|lease-owner|head-log-height]
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chaos/harness.h"
#include "chaos/schedule.h"

namespace {

using gapless::chaos::FaultKind;

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

// "1..100", "7", "1,5,9" -> seeds; false when malformed.
bool ParseSeeds(const std::string& text, std::vector<uint64_t>* out) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string part =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t dots = part.find("..");
    try {
      if (dots == std::string::npos) {
        out->push_back(std::stoull(part));
      } else {
        uint64_t a = std::stoull(part.substr(0, dots)), b = std::stoull(part.substr(dots + 2));
        if (b < a || b - a > 100'000) return false;
        for (uint64_t s = a; s <= b; ++s) out->push_back(s);
      }
    } catch (...) {
      return false;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return !out->empty();
}

bool ParseScenario(const std::string& text, std::vector<FaultKind>* out) {
  using K = FaultKind;
  if (text == "all") return true;  // empty: every kind
  if (text == "processes") {
    *out = {K::kKill, K::kStop, K::kClockSkew};
  } else if (text == "network") {
    *out = {K::kPartition, K::kCut, K::kLatency};
  } else if (text == "redis") {
    *out = {K::kLockNode, K::kCoordRedis, K::kCoordFailover};
  } else if (text == "servers") {
    *out = {K::kLockNode, K::kCoordRedis, K::kCoordFailover, K::kBusDown, K::kPgRestart};
  } else if (text == "reorgs") {
    *out = {K::kReorg, K::kFlipFlop, K::kKill};
  } else {
    size_t start = 0;
    while (true) {
      size_t comma = text.find(',', start);
      FaultKind k;
      if (!gapless::chaos::ParseFaultKind(text.substr(start, comma - start), &k)) return false;
      out->push_back(k);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return true;
}

std::string SiblingGapless() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "gapless";
  auto candidate = self.parent_path().parent_path() / "cli" / "gapless";
  return std::filesystem::exists(candidate) ? candidate.string() : "gapless";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "gapless-chaos: a whole gapless deployment of real processes (a PostgreSQL server, the "
      "coordination Redis and its replica, 3 lock nodes, an anvil chain with token traffic, 2 "
      "leader candidates, workers, events on Redis Streams, RabbitMQ and a Kafka mock cluster "
      "with 2 balances consumers each, a TCP proxy on every link) under a fault schedule drawn "
      "from each seed; invariants checked during and after (docs/chaos.md)"};
  std::string seeds_text = "1..3";
  double minutes = 2;
  std::string scenario = "all";
  gapless::chaos::HarnessOptions options;
  options.gapless_bin = SiblingGapless();
  if (const char* anvil = std::getenv("GAPLESS_ANVIL")) options.anvil_bin = anvil;
  options.work_dir = "chaos-runs";
  int64_t settle_s = 180;
  int parallel = 1;
  app.add_option("--seeds", seeds_text, "Seeds: N, A..B, or a comma-separated list")
      ->capture_default_str();
  app.add_option("--minutes", minutes, "Minutes of faults per seed")->capture_default_str();
  app.add_option(
         "--scenario", scenario,
         "Fault kinds: all, processes, network, redis, servers, reorgs, or a list of kill, stop, "
         "clock-skew, rpc, lock-node, coord-redis, coord-failover, pg-restart, partition, cut, "
         "latency, reorg, flip-flop, bus-down; opt-in (not in all): rpc-other-chain")
      ->capture_default_str();
  app.add_option("--faults-per-minute", options.faults_per_minute, "Fault rate")
      ->capture_default_str();
  app.add_option("--workers", options.workers, "gapless worker processes")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  app.add_option("--max-reorg-depth", options.max_reorg_depth, "Deepest re-org drawn")
      ->capture_default_str();
  app.add_option("--settle", settle_s, "Seconds the fleet gets to recover after the last fault")
      ->capture_default_str();
  app.add_option("--work-dir", options.work_dir, "Where each seed's timeline and logs go")
      ->capture_default_str();
  app.add_option("--pg-url", options.pg_admin_url,
                 "A PostgreSQL server where the harness creates its databases, instead of a "
                 "server of each seed's own (then no pg-restart faults)");
  std::string buses = "redis,amqp,kafka";
  app.add_option("--buses", buses,
                 "Events buses, each with 2 balances consumers: redis, amqp, kafka")
      ->capture_default_str();
  app.add_option("--source", options.source,
                 "Where the fleet's blocks come from: rpc, kafka (a block stream the harness "
                 "produces, Kafka workers, RPC workers for gaps), or mixed (kafka for odd seeds)")
      ->capture_default_str()
      ->check(CLI::IsMember({"rpc", "kafka", "mixed"}));
  app.add_option("--contracts", options.contracts,
                 "The contracts mode: full (every seed decodes a contracts config, a factory "
                 "among it), events (RPC seeds in --data events), mixed (RPC seeds 0 mod 4 in "
                 "events, the rest full) or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"full", "events", "mixed", "off"}));
  app.add_option("--gapless", options.gapless_bin, "The gapless binary")->capture_default_str();
  app.add_option("--anvil", options.anvil_bin, "The anvil binary (default: $GAPLESS_ANVIL)");
  app.add_flag("--keep-logs", options.keep_passing_logs, "Keep the directories of passing seeds");
  double keep_logs_over_s = 30;
  app.add_option("--keep-logs-over", keep_logs_over_s,
                 "Keep the directory of a passing seed that took more than this many seconds to "
                 "recover (negative: never)")
      ->capture_default_str();
  app.add_option("--parallel", parallel,
                 "Seeds run at once (each is a whole deployment: about 2 cores apiece)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--mutation", options.mutation,
                 "Run the gapless processes without one safety check (fence, reorg-floor, "
                 "relay-contiguity, lease-owner, head-log-height); needs a gapless built with "
                 "-DGAPLESS_MUTATIONS=ON. The run passes when the harness reports a violation")
      ->check(CLI::IsMember(
          {"fence", "reorg-floor", "relay-contiguity", "lease-owner", "head-log-height"}));
  CLI11_PARSE(app, argc, argv);
  options.keep_logs_over_ms =
      keep_logs_over_s < 0 ? -1 : static_cast<int64_t>(keep_logs_over_s * 1000);

  std::vector<uint64_t> seeds;
  if (!ParseSeeds(seeds_text, &seeds)) {
    fmt::print(stderr, "--seeds: cannot read \"{}\" (N, A..B or a list)\n", seeds_text);
    return 2;
  }
  if (!ParseScenario(scenario, &options.kinds)) {
    fmt::print(stderr, "--scenario: unknown \"{}\"\n", scenario);
    return 2;
  }
  if (options.anvil_bin.empty()) {
    fmt::print(stderr, "--anvil is required (or GAPLESS_ANVIL)\n");
    return 2;
  }
  options.buses.clear();
  for (size_t start = 0; start <= buses.size();) {
    size_t comma = std::min(buses.find(',', start), buses.size());
    const std::string bus = buses.substr(start, comma - start);
    if (bus != "redis" && bus != "amqp" && bus != "kafka") {
      fmt::print(stderr, "--buses: unknown \"{}\" (redis, amqp, kafka)\n", bus);
      return 2;
    }
    options.buses.push_back(bus);
    start = comma + 1;
  }
  options.fault_ms = static_cast<int64_t>(minutes * 60'000);
  options.settle_ms = settle_s * 1000;
  spdlog::set_level(spdlog::level::err);  // the table stays readable

  fmt::print("{:>6} {:>6} {:>7} {:>11} {:>11} {:>11} {:>6} {:>7}  {}\n", "seed", "source", "faults",
             "invariants", "violations", "recovery_s", "tip", "reorgs", "failed");
  std::fflush(stdout);
  size_t failed_seeds = 0, total_violations = 0;
  size_t setup_failed = 0, interrupted = 0;
  std::mutex mu;  // the table and the totals
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t i = next++; i < seeds.size() && !g_stop.load(); i = next++) {
      const uint64_t seed = seeds[i];
      auto report = gapless::chaos::RunSeed(seed, options);
      std::lock_guard<std::mutex> lock(mu);
      if (!report.ok() && g_stop.load()) {
        fmt::print("{:>6} interrupted\n", seed);
        ++interrupted;
        continue;
      }
      if (!report.ok()) {
        fmt::print("{:>6} setup failed: {}\n", seed, report.status().ToString());
        ++setup_failed;
        continue;
      }
      std::string failed;
      for (const auto& inv : report->invariants) {
        if (!inv.ok) failed += (failed.empty() ? "" : ",") + inv.name;
      }
      fmt::print("{:>6} {:>6} {:>7} {:>11} {:>11} {:>11} {:>6} {:>7}  {}\n", seed, report->source,
                 report->faults, report->invariants.size(), report->violations(),
                 report->recovery_ms < 0 ? std::string("-")
                                         : fmt::format("{:.1f}", report->recovery_ms / 1000.0),
                 report->tip, report->reorgs,
                 failed.empty() ? "" : failed + " (" + report->dir + ")");
      // What each violation was, so that a CI log says why without the run's directory.
      for (const auto& inv : report->invariants) {
        if (inv.ok) continue;
        std::string problem = inv.detail;
        if (problem.size() > 600) problem = problem.substr(0, 600) + "...";
        fmt::print("{:>6}   {}: {}\n", "", inv.name, problem);
      }
      std::fflush(stdout);
      total_violations += report->violations();
      if (report->violations() > 0) ++failed_seeds;
    }
  };
  // Ctrl-C / SIGTERM: every running seed tears its deployment down; no new seed starts.
  options.stop = &g_stop;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::vector<std::thread> threads;
  for (int i = 0; i < parallel; ++i) threads.emplace_back(run);
  for (auto& t : threads) t.join();
  // A seed whose set-up failed or that was interrupted ran no check: it is counted apart, never
  // among the seeds without violations.
  fmt::print("{} seeds, {} with violations, {} violations in all", seeds.size(), failed_seeds,
             total_violations);
  if (setup_failed > 0) fmt::print(", {} not run (set-up failed)", setup_failed);
  if (interrupted > 0) fmt::print(", {} interrupted", interrupted);
  fmt::print("\n");
  if (setup_failed > 0 || interrupted > 0) return 2;
  return failed_seeds > 0 ? 1 : 0;
}
