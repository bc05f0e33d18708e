// invariants/ops: every running fleet process's ops endpoint after the recovery
// (node/ops_server.h; invariants.h): ops-ready (/readyz answers 200 within 20 s), ops-metrics
// (/metrics answers, each histogram's +Inf bucket equals its _count), ops-one-leader (exactly one
// process reports gapless_leader 1).
#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <sstream>
#include <thread>

#include "chaos/invariants/invariants.h"

namespace gapless::chaos {

void CheckOps(Deployment& d, SeedReport* report) {
  auto add = [&](const std::string& name, const std::string& problem) {
    report->invariants.push_back({name, problem.empty(), problem});
  };
  std::string unready, malformed, leaders_problem;
  int leaders = 0;
  for (auto& [name, p] : d.procs_) {
    if (p.metrics_port == 0 || p.pid <= 0) continue;
    httplib::Client client("127.0.0.1", p.metrics_port);
    client.set_connection_timeout(2);
    client.set_read_timeout(5);
    // Ready within 20 s of the recovery: each check reports every second or so (the RPC
    // node's every 5 s), and the last faults healed moments ago.
    std::string last = "no answer";
    bool ready = false;
    const Clock::time_point start = Clock::now();
    while (!ready && MillisSince(start) < 20'000) {
      auto res = client.Get("/readyz");
      if (res) {
        last = res->body;
        ready = res->status == 200;
      }
      if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (!ready && unready.empty()) {
      std::replace(last.begin(), last.end(), '\n', ';');
      unready = name + ": " + last;
    }
    auto metrics = client.Get("/metrics");
    if (!metrics || metrics->status != 200) {
      if (malformed.empty()) malformed = name + ": /metrics did not answer";
      continue;
    }
    // Histograms: the +Inf bucket equals _count (every series); the leader gauge.
    std::map<std::string, std::string> inf, count;
    std::istringstream lines(metrics->body);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line[0] == '#') continue;
      const size_t space = line.rfind(' ');
      const std::string series = line.substr(0, space), value = line.substr(space + 1);
      if (series == "gapless_leader" && value == "1") ++leaders;
      const size_t at = series.find("_bucket{");
      if (at != std::string::npos && series.find("le=\"+Inf\"") != std::string::npos) {
        std::string labels = series.substr(at + 7);
        labels = std::regex_replace(labels, std::regex(R"(,?le="\+Inf")"), "");
        if (labels == "{}") labels.clear();
        inf[series.substr(0, at) + labels] = value;
      }
      const size_t c = series.find("_count");
      if (c != std::string::npos) count[series.substr(0, c) + series.substr(c + 6)] = value;
    }
    if (inf.empty() && malformed.empty()) malformed = name + ": no histogram in /metrics";
    for (const auto& [series, value] : inf) {
      if (count[series] != value && malformed.empty()) {
        malformed =
            fmt::format("{}: {} has +Inf {} but _count {}", name, series, value, count[series]);
      }
    }
  }
  if (leaders != 1) {
    leaders_problem = fmt::format("{} processes report gapless_leader 1", leaders);
  }
  add("ops-ready", unready);
  add("ops-metrics", malformed);
  add("ops-one-leader", leaders_problem);
}

}  // namespace gapless::chaos
