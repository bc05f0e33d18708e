// The fault schedule is a pure function of the seed: the same seed replays the same faults, other
// seeds give other schedules, every kind is drawn across seeds, and the bounds hold (a stop lasts
// past the lease TTL, a re-org is 1..max deep, one lock node down at a time, every proxy mode and
// its parameters).
#include "chaos/schedule.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

namespace gapless::chaos {
namespace {

ScheduleOptions Options() {
  ScheduleOptions o;
  o.duration_ms = 120'000;
  o.faults_per_minute = 12;
  o.processes = {"leader-a", "leader-b", "worker-1", "worker-2", "consumer-1"};
  o.links = {"leader-a>coord", "worker-1>pg", "worker-2>lock-1", "leader-b>rpc"};
  o.rpc_clients = {"leader-a", "worker-1", "worker-2"};
  o.buses = {"redis", "amqp", "kafka-1"};
  o.max_reorg_depth = 8;
  o.lease_ttl_ms = 3'000;
  return o;
}

std::string Render(const std::vector<Fault>& faults) {
  std::string out;
  for (const Fault& f : faults) out += std::to_string(f.at_ms) + " " + f.Describe() + "\n";
  return out;
}

TEST(ScheduleTest, TheSameSeedReplaysTheSameScheduleAndOthersDiffer) {
  const auto a = MakeSchedule(42, Options());
  EXPECT_EQ(Render(a), Render(MakeSchedule(42, Options())));
  EXPECT_NE(Render(a), Render(MakeSchedule(43, Options())));
  ASSERT_FALSE(a.empty());
  // About faults_per_minute over the window.
  EXPECT_GE(a.size(), 12u);
  EXPECT_LE(a.size(), 48u);
  for (size_t i = 1; i < a.size(); ++i) EXPECT_GE(a[i].at_ms, a[i - 1].at_ms);
  EXPECT_LT(a.back().at_ms, 120'000);
}

TEST(ScheduleTest, EveryKindIsDrawnAndTheBoundsHold) {
  std::set<FaultKind> seen;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    int64_t lock_down_until = -1;
    for (const Fault& f : MakeSchedule(seed, Options())) {
      seen.insert(f.kind);
      switch (f.kind) {
        case FaultKind::kStop:
          EXPECT_GT(f.duration_ms, 3'000) << "a stop must outlast the lease";
          break;
        case FaultKind::kReorg:
          EXPECT_GE(f.depth, 1u);
          EXPECT_LE(f.depth, 8u);
          break;
        case FaultKind::kFlipFlop:
          EXPECT_GE(f.depth, 1u);
          EXPECT_LE(f.depth, 4u);
          break;
        case FaultKind::kLockNode:
          EXPECT_GE(f.at_ms, lock_down_until)
              << "two lock nodes down at once (seed " << seed << ")";
          lock_down_until = f.at_ms + f.duration_ms;
          break;
        case FaultKind::kRpc:
          EXPECT_FALSE(f.mode.empty());
          if (f.mode == "other-hash") {
            EXPECT_EQ(f.target.rfind("worker", 0), 0u) << f.Describe();
          }
          break;
        case FaultKind::kClockSkew:
          EXPECT_GE(std::abs(f.skew_ms), 1'000) << f.Describe();
          EXPECT_GT(f.duration_ms, 0);
          EXPECT_FALSE(f.target.empty());
          break;
        case FaultKind::kCoordFailover:
          EXPECT_GE(f.latency_ms, 100) << "the replica must lag";
          EXPECT_GT(f.duration_ms, 0);
          break;
        case FaultKind::kPartition:
          EXPECT_TRUE(f.mode == "both" || f.mode == "to-server" || f.mode == "to-client")
              << f.Describe();
          EXPECT_FALSE(f.target.empty());
          break;
        case FaultKind::kCut:
          if (f.mode == "after-bytes") {
            EXPECT_GT(f.bytes, 0);
            EXPECT_GT(f.duration_ms, 0) << "turned off again";
          } else {
            EXPECT_EQ(f.mode, "now");
          }
          break;
        case FaultKind::kLatency:
          if (f.mode == "bandwidth") {
            EXPECT_GT(f.bytes, 0);
          } else {
            EXPECT_EQ(f.mode, "delay");
            EXPECT_GT(f.latency_ms, 0);
          }
          EXPECT_FALSE(f.target.empty());
          break;
        case FaultKind::kKill:
        case FaultKind::kBusDown:
          EXPECT_FALSE(f.target.empty());
          break;
        default:
          break;
      }
    }
  }
  EXPECT_EQ(seen.size(), AllFaultKinds().size());
  std::set<std::string> modes;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    for (const Fault& f : MakeSchedule(seed, Options())) modes.insert(f.mode);
  }
  for (const char* mode : {"both", "to-server", "to-client", "now", "after-bytes", "delay",
                           "bandwidth", "429", "other-hash"}) {
    EXPECT_TRUE(modes.count(mode)) << mode << " never drawn";
  }
}

TEST(ScheduleTest, KindsWithoutTargetsAreNotDrawn) {
  ScheduleOptions o = Options();
  o.processes.clear();
  o.links.clear();
  o.rpc_clients.clear();
  o.buses.clear();
  o.kinds = {FaultKind::kKill,  FaultKind::kPartition, FaultKind::kRpc,
             FaultKind::kReorg, FaultKind::kBusDown,   FaultKind::kClockSkew};
  for (const Fault& f : MakeSchedule(7, o)) EXPECT_EQ(f.kind, FaultKind::kReorg) << f.Describe();
  o.kinds = {FaultKind::kKill};
  EXPECT_TRUE(MakeSchedule(7, o).empty());
}

TEST(ScheduleTest, KindNamesRoundTrip) {
  for (FaultKind k : AllFaultKinds()) {
    FaultKind back;
    ASSERT_TRUE(ParseFaultKind(FaultKindName(k), &back));
    EXPECT_EQ(back, k);
  }
  FaultKind unused;
  EXPECT_FALSE(ParseFaultKind("meteor", &unused));
  FaultKind other;
  ASSERT_TRUE(ParseFaultKind("rpc-other-chain", &other));
  EXPECT_EQ(other, FaultKind::kRpcOtherChain);
}

// rpc-other-chain is opt-in: `all` draws what it drew before the kind existed (so existing seeds
// replay the same faults), and a --scenario list that names it draws it, on processes with a pool
// of two only (never a leader).
TEST(ScheduleTest, TheOtherChainIsOptInAndHitsPoolsOnly) {
  for (FaultKind k : AllFaultKinds()) EXPECT_NE(k, FaultKind::kRpcOtherChain);
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    for (const Fault& f : MakeSchedule(seed, Options())) {
      EXPECT_NE(f.kind, FaultKind::kRpcOtherChain) << f.Describe();
    }
  }
  ScheduleOptions o = Options();
  o.kinds = {FaultKind::kRpcOtherChain, FaultKind::kKill};
  size_t drawn = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    for (const Fault& f : MakeSchedule(seed, o)) {
      if (f.kind != FaultKind::kRpcOtherChain) continue;
      ++drawn;
      EXPECT_TRUE(f.target == "worker-1" || f.target == "worker-2") << f.Describe();
      EXPECT_GE(f.duration_ms, 2'000);
      EXPECT_LE(f.duration_ms, 8'000);
      EXPECT_EQ(f.Describe().rfind("rpc-other-chain worker-", 0), 0u) << f.Describe();
    }
  }
  EXPECT_GT(drawn, 20u);
  o.rpc_clients = {"leader-a", "leader-b"};  // no pool of two: not drawn
  for (const Fault& f : MakeSchedule(3, o)) EXPECT_EQ(f.kind, FaultKind::kKill) << f.Describe();
}

}  // namespace
}  // namespace gapless::chaos
