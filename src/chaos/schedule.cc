#include "chaos/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace gapless::chaos {
namespace {

// SplitMix64: a fixed, portable stream of 64-bit values from a seed.
class Stream {
 public:
  explicit Stream(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi] (inclusive; the modulo bias is irrelevant at these sizes).
  int64_t Between(int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Next() % v.size()];
  }

 private:
  uint64_t state_;
};

constexpr std::array<std::pair<FaultKind, std::string_view>, 15> kNames = {{
    {FaultKind::kKill, "kill"},
    {FaultKind::kStop, "stop"},
    {FaultKind::kLockNode, "lock-node"},
    {FaultKind::kCoordRedis, "coord-redis"},
    {FaultKind::kPartition, "partition"},
    {FaultKind::kCut, "cut"},
    {FaultKind::kLatency, "latency"},
    {FaultKind::kReorg, "reorg"},
    {FaultKind::kBusDown, "bus-down"},
    {FaultKind::kRpc, "rpc"},
    {FaultKind::kPgRestart, "pg-restart"},
    {FaultKind::kCoordFailover, "coord-failover"},
    {FaultKind::kClockSkew, "clock-skew"},
    {FaultKind::kFlipFlop, "flip-flop"},
    {FaultKind::kRpcOtherChain, "rpc-other-chain"},
}};

// Drawn only when a --scenario list names them: `all` stays the kinds it was, and so do the
// schedules of existing seeds (a kind in the draw changes every later pick of the seed's stream).
bool OptIn(FaultKind k) { return k == FaultKind::kRpcOtherChain; }

// rpc-other-chain's targets: the processes with an RPC pool of two (workers, Kafka workers).
std::vector<std::string> PoolClients(const std::vector<std::string>& rpc_clients) {
  std::vector<std::string> out;
  for (const std::string& c : rpc_clients) {
    if (c.rfind("leader", 0) != 0) out.push_back(c);
  }
  return out;
}

}  // namespace

std::string_view FaultKindName(FaultKind kind) {
  for (const auto& [k, name] : kNames) {
    if (k == kind) return name;
  }
  return "?";
}

const std::vector<FaultKind>& AllFaultKinds() {
  static const std::vector<FaultKind> all = [] {
    std::vector<FaultKind> v;
    for (const auto& [k, name] : kNames) {
      if (!OptIn(k)) v.push_back(k);
    }
    return v;
  }();
  return all;
}

bool ParseFaultKind(std::string_view name, FaultKind* out) {
  for (const auto& [k, n] : kNames) {
    if (n == name) {
      *out = k;
      return true;
    }
  }
  return false;
}

std::string Fault::Describe() const {
  std::string what(FaultKindName(kind));
  if (!target.empty()) what += " " + target;
  if (kind == FaultKind::kReorg || kind == FaultKind::kFlipFlop) {
    what += fmt::format(" depth {}", depth);
  }
  if (kind == FaultKind::kPartition && mode != "both") what += " " + mode;
  if (kind == FaultKind::kCut && mode == "after-bytes")
    what += fmt::format(" after {} bytes", bytes);
  if (kind == FaultKind::kLatency && mode == "bandwidth") what += fmt::format(" {} B/s", bytes);
  if (kind == FaultKind::kLatency && mode != "bandwidth")
    what += fmt::format(" +{} ms", latency_ms);
  if (kind == FaultKind::kRpc) what += " " + mode;
  if (kind == FaultKind::kCoordFailover) what += fmt::format(" (replica {} ms behind)", latency_ms);
  if (kind == FaultKind::kClockSkew) what += fmt::format(" {:+} ms", skew_ms);
  if (duration_ms > 0) what += fmt::format(" for {} ms", duration_ms);
  return what;
}

std::vector<Fault> MakeSchedule(uint64_t seed, const ScheduleOptions& options) {
  Stream rng(seed * 0x2545f4914f6cdd1dULL + 1);
  std::vector<FaultKind> kinds;
  for (FaultKind k : options.kinds) {
    const bool needs_process =
        k == FaultKind::kKill || k == FaultKind::kStop || k == FaultKind::kClockSkew;
    const bool needs_link =
        k == FaultKind::kPartition || k == FaultKind::kCut || k == FaultKind::kLatency;
    if (needs_process && options.processes.empty()) continue;
    if (needs_link && options.links.empty()) continue;
    if (k == FaultKind::kRpc && options.rpc_clients.empty()) continue;
    if (k == FaultKind::kRpcOtherChain && PoolClients(options.rpc_clients).empty()) continue;
    if (k == FaultKind::kBusDown && options.buses.empty()) continue;
    if (k == FaultKind::kLockNode && options.lock_nodes < 3) continue;
    kinds.push_back(k);
  }
  std::vector<Fault> out;
  if (kinds.empty() || options.duration_ms <= 0 || options.faults_per_minute <= 0) return out;
  const int64_t gap_ms =
      std::max<int64_t>(100, static_cast<int64_t>(60'000.0 / options.faults_per_minute));
  const std::vector<std::string> pool_clients = PoolClients(options.rpc_clients);
  int64_t lock_node_down_until = 0;
  for (int64_t at = rng.Between(0, gap_ms); at < options.duration_ms;
       at += rng.Between(gap_ms / 2, gap_ms * 3 / 2)) {
    Fault f;
    f.at_ms = at;
    f.kind = rng.Pick(kinds);
    switch (f.kind) {
      case FaultKind::kKill:
        f.target = rng.Pick(options.processes);
        f.duration_ms = rng.Between(200, 3'000);
        break;
      case FaultKind::kStop:
        f.target = rng.Pick(options.processes);
        f.duration_ms = rng.Between(options.lease_ttl_ms + 500, options.lease_ttl_ms * 2 + 1'000);
        break;
      case FaultKind::kLockNode:
        if (at < lock_node_down_until) {  // one lock node down at a time: a quorum stays
          f.kind = FaultKind::kCut;
          f.mode = "now";
          f.target = options.links.empty() ? "" : rng.Pick(options.links);
          if (f.target.empty()) continue;
          break;
        }
        f.target = fmt::format("lock-{}", rng.Between(1, options.lock_nodes));
        f.duration_ms = rng.Between(500, 5'000);
        lock_node_down_until = at + f.duration_ms + 1'000;
        break;
      case FaultKind::kCoordRedis:
        f.duration_ms = rng.Between(200, 3'000);
        break;
      case FaultKind::kPartition: {
        static const std::vector<std::string> modes = {"both", "to-server", "to-client"};
        f.target = rng.Pick(options.links);
        f.mode = rng.Pick(modes);
        f.duration_ms = rng.Between(500, options.lease_ttl_ms * 2);
        break;
      }
      case FaultKind::kCut: {
        static const std::vector<std::string> modes = {"now", "after-bytes"};
        f.target = rng.Pick(options.links);
        f.mode = rng.Pick(modes);
        if (f.mode == "after-bytes") {
          f.bytes = rng.Between(64, 16'384);
          f.duration_ms = rng.Between(1'000, 6'000);
        }
        break;
      }
      case FaultKind::kLatency: {
        static const std::vector<std::string> modes = {"delay", "bandwidth"};
        f.target = rng.Pick(options.links);
        f.mode = rng.Pick(modes);
        f.duration_ms = rng.Between(1'000, 8'000);
        if (f.mode == "delay") {
          f.latency_ms = rng.Between(20, 400);
        } else {
          f.bytes = rng.Between(2'048, 65'536);
        }
        break;
      }
      case FaultKind::kReorg:
        f.depth = static_cast<uint64_t>(
            rng.Between(1, static_cast<int64_t>(std::max<uint64_t>(1, options.max_reorg_depth))));
        break;
      case FaultKind::kBusDown:
        f.target = rng.Pick(options.buses);
        f.duration_ms = rng.Between(500, 5'000);
        break;
      case FaultKind::kRpc: {
        f.target = rng.Pick(options.rpc_clients);
        static const std::vector<std::string> modes = {"429",       "5xx",        "truncated",
                                                       "malformed", "other-hash", "down"};
        f.mode = rng.Pick(modes);
        // Another hash is what a worker's backend serves; the head log's reader is the truth.
        if (f.mode == "other-hash" && f.target.rfind("worker", 0) != 0) f.mode = "5xx";
        f.duration_ms = rng.Between(1'000, 6'000);
        break;
      }
      case FaultKind::kRpcOtherChain:
        f.target = rng.Pick(pool_clients);
        f.duration_ms = rng.Between(2'000, 8'000);
        break;
      case FaultKind::kPgRestart:
        break;
      case FaultKind::kCoordFailover:
        f.latency_ms = rng.Between(100, 1'500);
        f.duration_ms = rng.Between(1'000, 5'000);
        break;
      case FaultKind::kFlipFlop:
        // Short forks: each step waits for the fleet to index the fork before the next.
        f.depth = static_cast<uint64_t>(rng.Between(
            1, static_cast<int64_t>(std::clamp<uint64_t>(options.max_reorg_depth, 1, 4))));
        break;
      case FaultKind::kClockSkew: {
        f.target = rng.Pick(options.processes);
        const int64_t skew = rng.Between(1, 120) * 1'000;  // whole seconds (libfaketime's)
        f.skew_ms = rng.Between(0, 1) == 0 ? -skew : skew;
        f.duration_ms = rng.Between(2'000, 10'000);
        break;
      }
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gapless::chaos
