// The HA leader against real redis-servers: three private lock nodes per test (started, killed,
// paused and restarted by the test; testing/redis_server.h). What a user relies on: one leader at
// a time, a deposed leader's writes never land, no height gets two hashes, a partial write is
// repaired, losing one node of three changes nothing, losing two stops production until one is
// back, and takeover after a crash or a graceful stepdown.
// The head log's repairs and truncations: election_head_log_itest.cc. Shared:
// election_itest_util.h.
#include <gtest/gtest.h>

#include "coord/election_itest_util.h"

namespace gapless::election_testing {
namespace {

using namespace std::chrono_literals;

using testing_util::NowMs;
using testing_util::WaitFor;

TEST_F(ElectionTest, OneLeaderAtATimeAndTokensIncrease) {
  Election a = Candidate("a");
  Election b = Candidate("b");
  QuorumOutcome pa = a.Promote();
  ASSERT_TRUE(pa.quorum) << pa.Summary();
  ASSERT_GE(pa.max_epoch, 1u);
  ASSERT_TRUE(a.Renew(pa.max_epoch).quorum);

  QuorumOutcome pb = b.Promote();
  EXPECT_FALSE(pb.quorum) << pb.Summary();
  for (NodeVerdict v : pb.verdicts) EXPECT_EQ(v, NodeVerdict::kLockHeld);

  ASSERT_TRUE(a.Release().quorum);
  pb = b.Promote();
  ASSERT_TRUE(pb.quorum) << pb.Summary();
  EXPECT_GT(pb.max_epoch, pa.max_epoch);
  // The deposed leader can no longer renew.
  QuorumOutcome renew = a.Renew(pa.max_epoch);
  EXPECT_FALSE(renew.quorum);
  EXPECT_TRUE(renew.deposed()) << renew.Summary();
}

// The workers of one process share one LockNodes: their reads queue per node, none is turned away.
TEST_F(ElectionTest, ConcurrentCallersOfOneProcessAllGetAnswers) {
  Election e = Candidate("reader");
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        if (!e.Committed(0, 100).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(ElectionTest, ThreeCandidatesRacingForAFreeLockExactlyOneWins) {
  std::vector<Election> candidates = {Candidate("c0"), Candidate("c1"), Candidate("c2")};
  for (int round = 0; round < 20; ++round) {
    std::barrier sync(3);
    std::vector<QuorumOutcome> out(3);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < 3; ++i) {
      threads.emplace_back([&, i] {
        sync.arrive_and_wait();
        out[i] = candidates[i].Promote();
      });
    }
    for (auto& t : threads) t.join();
    int winners = 0;
    std::string winner;
    for (size_t i = 0; i < 3; ++i) {
      if (out[i].quorum) {
        ++winners;
        winner = "c" + std::to_string(i);
      }
    }
    ASSERT_LE(winners, 1) << "round " << round;
    // Losers released their partial locks: every lock is the winner's (or free if none won).
    for (size_t n = 0; n < 3; ++n) {
      RedisReply holder = On(n, {"GET", keys_.election_lock()});
      if (winners == 1) {
        EXPECT_TRUE(holder.is_nil() || holder.str == winner) << "round " << round << " node " << n;
      } else {
        EXPECT_TRUE(holder.is_nil()) << "round " << round << " node " << n << ": " << holder.str;
      }
    }
    for (auto& c : candidates) (void)c.Release();
  }
}

TEST_F(ElectionTest, ADeposedLeaderCannotWriteAndNoHeightGetsTwoHashes) {
  Election a = Candidate("a", /*ttl_ms=*/400);
  Election b = Candidate("b", /*ttl_ms=*/3'000);
  QuorumOutcome pa = a.Promote();
  ASSERT_TRUE(pa.quorum);
  ASSERT_TRUE(a.Renew(pa.max_epoch).quorum);
  std::vector<HeadEntry> first = {Block(1), Block(2), Block(3)};
  ASSERT_TRUE(a.WriteHead(pa.max_epoch, first).quorum);

  // a pauses past its TTL; b takes over.
  std::this_thread::sleep_for(500ms);
  QuorumOutcome pb = b.Promote();
  ASSERT_TRUE(pb.quorum) << pb.Summary();
  ASSERT_TRUE(b.Renew(pb.max_epoch).quorum);
  ASSERT_GT(pb.max_epoch, pa.max_epoch);

  // a wakes up and writes: refused everywhere.
  std::vector<HeadEntry> zombie = {Block(4, "z")};
  zombie[0].parent = Block(3).hash;
  QuorumOutcome late = a.WriteHead(pa.max_epoch, zombie);
  EXPECT_FALSE(late.quorum) << late.Summary();
  EXPECT_TRUE(late.deposed()) << late.Summary();
  EXPECT_EQ(late.accepted, 0u);

  // b cannot put another hash at a committed height either.
  std::vector<HeadEntry> rewrite = {Block(2, "b")};
  QuorumOutcome conflict = b.WriteHead(pb.max_epoch, rewrite);
  EXPECT_FALSE(conflict.quorum);
  for (NodeVerdict v : conflict.verdicts) EXPECT_EQ(v, NodeVerdict::kConflict);
  // ... but re-writing the same entry is fine (and renews the lease).
  EXPECT_TRUE(b.WriteHead(pb.max_epoch, std::vector<HeadEntry>{Block(3)}).quorum);
  std::vector<HeadEntry> next = {Block(4)};
  ASSERT_TRUE(b.WriteHead(pb.max_epoch, next).quorum);

  auto committed = b.Committed(1, 10);
  ASSERT_TRUE(committed.ok());
  ASSERT_EQ(committed->size(), 4u);
  for (uint64_t h = 1; h <= 4; ++h) EXPECT_EQ(committed->at(h).hash, Block(h).hash);
  // No node holds a second entry at any height.
  for (size_t n = 0; n < 3; ++n) {
    EXPECT_EQ(On(n, {"ZCARD", keys_.head_heights()}).integer, 4) << "node " << n;
  }
}

// A promotion that raced the previous holder's release on one node leads on a bare quorum; its
// next write retakes the freed lock, so losing one node later does not stop it. A free node whose
// epoch a newer promotion moved is not retaken (and is not mistaken for a deposition).
TEST_F(ElectionTest, ALeaderRetakesAFreedLockButNotOneANewerPromotionMoved) {
  Election x = Candidate("x");
  Election l = Candidate("l");
  // x holds node 2 only (the old leader's lock not yet released there).
  auto conn2 = RedisConn::Connect(servers_[2]->url());
  ASSERT_TRUE(conn2.ok());
  ASSERT_TRUE((*conn2)->Command({"SET", keys_.election_lock(), "x", "PX", "10000"}).ok());
  QuorumOutcome p = l.Promote();
  ASSERT_TRUE(p.quorum) << p.Summary();
  ASSERT_EQ(p.accepted, 2u);
  ASSERT_TRUE(l.Renew(p.max_epoch).quorum);
  // Still held by x: not taken.
  QuorumOutcome w1 = l.WriteHead(p.max_epoch, std::vector<HeadEntry>{Block(1)});
  ASSERT_TRUE(w1.quorum);
  EXPECT_EQ(w1.accepted, 2u);
  // x releases: the next write takes node 2 too, which then holds the entries.
  ASSERT_TRUE(x.Release().accepted >= 1);
  QuorumOutcome w2 = l.WriteHead(p.max_epoch, std::vector<HeadEntry>{Block(1), Block(2)});
  ASSERT_TRUE(w2.quorum);
  EXPECT_EQ(w2.accepted, 3u) << w2.Summary();
  EXPECT_EQ(On(2, {"GET", keys_.election_lock()}).str, "l");
  EXPECT_EQ(On(2, {"ZCARD", keys_.head_heights()}).integer, 2);
  servers_[0]->Kill();  // one node down: the leader still has a quorum
  EXPECT_TRUE(l.WriteHead(p.max_epoch, std::vector<HeadEntry>{Block(3)}).quorum);

  // A newer (failed) promotion moved node 1's epoch while its lock was free: not retaken.
  ASSERT_TRUE(On(1, {"DEL", keys_.election_lock()}).integer == 1);
  ASSERT_TRUE(On(1, {"SET", keys_.election_epoch(), std::to_string(p.max_epoch + 5)}).str == "OK");
  QuorumOutcome w3 = l.WriteHead(p.max_epoch, std::vector<HeadEntry>{Block(4)});
  EXPECT_FALSE(w3.quorum);
  EXPECT_EQ(w3.verdicts[1], NodeVerdict::kNotOwner);
  EXPECT_FALSE(w3.deposed()) << w3.Summary();
  EXPECT_TRUE(On(1, {"GET", keys_.election_lock()}).is_nil());
}

TEST_F(ElectionTest, OneNodeDownChangesNothingTwoDownStopsProductionUntilOneIsBack) {
  FakeChain chain;
  Election e = Candidate("e", /*ttl_ms=*/1'500);
  Elector elector(&e, &chain, Opts("e", 100));
  elector.Start();
  ASSERT_TRUE(WaitFor([&] { return elector.LeaderToken().has_value(); }, 5'000));
  chain.height = 10;
  ASSERT_TRUE(WaitFor(
      [&] { return elector.committed_tip() && elector.committed_tip()->height == 10; }, 5'000));

  servers_[2]->Kill();
  chain.height = 20;
  ASSERT_TRUE(WaitFor(
      [&] { return elector.committed_tip() && elector.committed_tip()->height == 20; }, 5'000))
      << "one node of three down must not stop production";
  EXPECT_TRUE(elector.LeaderToken().has_value());

  servers_[1]->Kill();
  chain.height = 30;
  // Within one TTL the leader knows it cannot renew and stops acting as leader.
  int64_t t0 = NowMs();
  ASSERT_TRUE(WaitFor([&] { return !elector.LeaderToken().has_value(); }, 3'000));
  EXPECT_LE(NowMs() - t0, 1'500 + 300);
  EXPECT_LT(elector.committed_tip()->height, 30u);

  // Node 1 comes back without its data: production resumes, and its log is repaired.
  ASSERT_TRUE(servers_[1]->Restart().ok());
  ASSERT_TRUE(WaitFor(
      [&] { return elector.committed_tip() && elector.committed_tip()->height == 30; }, 10'000));
  EXPECT_TRUE(WaitFor(
      [&] {
        return On(1, {"ZCARD", keys_.head_heights()}).integer >= 30;
      },
      5'000))
      << "node 1 holds " << On(1, {"ZCARD", keys_.head_heights()}).integer << " heights";
  elector.Stop();
}

TEST_F(ElectionTest, AFollowerTakesOverAfterACrashWithinTheTtlAndAtOnceAfterAStepdown) {
  FakeChain chain;
  chain.height = 3;
  constexpr int64_t kTtl = 1'000;
  Election ea = Candidate("a", kTtl);
  Election eb = Candidate("b", kTtl);
  auto a = std::make_unique<Elector>(&ea, &chain, Opts("a"));
  Elector b(&eb, &chain, Opts("b"));
  a->Start();
  ASSERT_TRUE(WaitFor([&] { return a->LeaderToken().has_value(); }, 5'000));
  b.Start();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(b.role(), Role::kFollower);
  uint64_t token_a = *a->LeaderToken();

  // Crash: a stops without releasing.
  int64_t crashed = NowMs();
  a->Stop(/*release=*/false);
  ASSERT_TRUE(WaitFor([&] { return b.LeaderToken().has_value(); }, 5'000));
  int64_t takeover = NowMs() - crashed;
  EXPECT_LE(takeover, kTtl + 600) << "takeover after a crash took " << takeover << " ms";
  EXPECT_GT(*b.LeaderToken(), token_a);

  // Graceful stepdown: a new follower takes over at once, well before the TTL.
  Election ec = Candidate("c", kTtl);
  Elector c(&ec, &chain, Opts("c"));
  c.Start();
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(c.role(), Role::kFollower);
  int64_t stepped = NowMs();
  b.Stop();
  ASSERT_TRUE(WaitFor([&] { return c.LeaderToken().has_value(); }, 5'000));
  int64_t handover = NowMs() - stepped;
  EXPECT_LT(handover, kTtl / 2) << "takeover after a stepdown took " << handover << " ms";
  EXPECT_GT(c.stats().notifications, 0u) << "keyspace notifications did not arrive";
  c.Stop();
}

TEST_F(ElectionTest, ALeaderThatCannotReachItsSourceLosesTheLease) {
  FakeChain chain;
  Election ea = Candidate("a", 900);
  Election eb = Candidate("b", 900);
  Elector a(&ea, &chain, Opts("a"));
  a.Start();
  ASSERT_TRUE(WaitFor([&] { return a.LeaderToken().has_value(); }, 5'000));
  FakeChain healthy;
  Elector b(&eb, &healthy, Opts("b"));
  b.Start();
  chain.down = true;  // a cannot reach its RPC node: no head write, no renewal
  ASSERT_TRUE(WaitFor([&] { return b.LeaderToken().has_value(); }, 5'000));
  EXPECT_FALSE(a.LeaderToken().has_value());
  a.Stop();
  b.Stop();
}

// A candidate whose lock nodes are all unreachable says so at warning level (the failures are
// debug lines, one per poll), once the outage has lasted quorum_warning_after_ms and then at most
// every warning interval, and says when the quorum answers again: an operator reading the log
// of a process that never leads learns why.
TEST_F(ElectionTest, ACandidateWithoutItsLockQuorumSaysSoAndWhenItIsBack) {
  auto log = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*log);
  sink->set_pattern("%l %v");
  spdlog::default_logger()->sinks().push_back(sink);
  FakeChain chain;
  chain.height = 3;
  Election ea = Candidate("a", 900);
  ElectorOptions options = Opts("a", 100);
  options.quorum_warning_after_ms = 300;
  Elector a(&ea, &chain, options);
  for (auto& s : servers_) s->Kill();
  a.Start();
  const std::string warning = "warning elector a: 0 of 3 lock nodes answer (quorum 2) for";
  auto text = [&] {
    sink->flush();
    return log->str();
  };
  EXPECT_TRUE(WaitFor([&] { return text().find(warning) != std::string::npos; }, 10'000)) << text();
  for (auto& s : servers_) ASSERT_TRUE(s->Restart().ok());
  EXPECT_TRUE(WaitFor([&] { return a.LeaderToken().has_value(); }, 15'000)) << text();
  EXPECT_NE(text().find("info elector a: the lock quorum answers again"), std::string::npos)
      << text();
  // Once, not once per poll, within the first interval.
  const std::string all = text();
  size_t warnings = 0;
  for (size_t at = all.find(warning); at != std::string::npos; at = all.find(warning, at + 1)) {
    ++warnings;
  }
  EXPECT_LE(warnings, 2u) << all;
  a.Stop();
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
}

}  // namespace
}  // namespace gapless::election_testing
