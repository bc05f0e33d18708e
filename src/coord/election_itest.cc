// The HA leader against real redis-servers: three private lock nodes per test (started, killed,
// paused and restarted by the test; testing/redis_server.h). What a user relies on: one leader at
// a time, a deposed leader's writes never land, no height gets two hashes, a partial write is
// repaired, losing one node of three changes nothing, losing two stops production until one is
// back, and takeover after a crash or a graceful stepdown.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "coord/election.h"
#include "coord/elector.h"
#include "coord/lock_nodes.h"
#include "testing/redis_server.h"
#include "testing/wait_for.h"

namespace gapless {
namespace {

using namespace std::chrono_literals;

using testing_util::NowMs;
using testing_util::WaitFor;

ElectorOptions Opts(const std::string& name, int64_t poll_ms = 500) {
  ElectorOptions o;
  o.name = name;
  o.poll_ms = poll_ms;
  return o;
}

HeadEntry Block(uint64_t n, const std::string& fork = "a") {
  return HeadEntry{n, "0x" + fork + std::to_string(n), "0x" + fork + std::to_string(n - 1), 0};
}

// A chain that grows when the test says so; fails on demand (an unreachable RPC node).
// ReorgAbove(F) replaces every block above F with another fork's (a re-org); the source reports
// the fork point when the log's tip is no longer on the chain (what node/head_tracker.h finds by
// walking back).
class FakeChain : public HeadSource {
 public:
  Result<HeadUpdate> Next(const std::optional<HeadEntry>& tip, size_t max) override {
    if (down.load()) return Unavailable("fake chain: down");
    std::lock_guard lock(mu_);
    uint64_t head = height.load();
    HeadUpdate out;
    uint64_t next = tip.has_value() ? tip->height + 1 : 1;
    if (tip.has_value() && At(tip->height).hash != tip->hash) {
      out.fork = At(fork_point_);
      next = fork_point_ + 1;
    }
    for (uint64_t h = next; h <= head && out.entries.size() < max; ++h) {
      out.entries.push_back(At(h));
    }
    return out;
  }
  void ReorgAbove(uint64_t fork_point, const std::string& name) {
    std::lock_guard lock(mu_);
    fork_point_ = fork_point;
    upper_ = name;
  }
  HeadEntry At(uint64_t h) const {
    if (h <= fork_point_) return Block(h);
    HeadEntry e = Block(h, upper_);
    if (h == fork_point_ + 1) e.parent = Block(fork_point_).hash;
    return e;
  }
  std::atomic<uint64_t> height{1};
  std::atomic<bool> down{false};

 private:
  mutable std::mutex mu_;
  uint64_t fork_point_ = UINT64_MAX - 1;
  std::string upper_ = "a";
};

class ElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      auto s = RedisServer::Start();
      if (!s.ok()) GTEST_SKIP() << s.status().ToString();
      servers_.push_back(std::move(*s));
    }
  }

  std::vector<std::string> Urls() const {
    std::vector<std::string> urls;
    for (const auto& s : servers_) urls.push_back(s->url());
    return urls;
  }

  // Lock nodes of one process (each candidate has its own connections, as separate processes do).
  LockNodes* Nodes() {
    LockNodesOptions options;
    options.node_timeout_ms = 300;  // sanitizer builds on 2 busy cores
    auto nodes = LockNodes::Open(Urls(), options);
    EXPECT_TRUE(nodes.ok()) << nodes.status().ToString();
    node_sets_.push_back(std::move(*nodes));
    return node_sets_.back().get();
  }

  Election Candidate(const std::string& owner, int64_t ttl_ms = 3'000) {
    return Election(Nodes(), keys_, ElectionOptions{owner, ttl_ms, 1'000});
  }

  // Redis command on node i directly.
  RedisReply On(size_t i, const std::vector<std::string>& argv) {
    auto conn = RedisConn::Connect(servers_[i]->url());
    EXPECT_TRUE(conn.ok());
    auto r = (*conn)->Command(argv);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : RedisReply{};
  }

  // Writes head entries to node i alone, as `owner` with `token` (a leader whose write reached
  // only that node).
  void WriteHeadOn(size_t i, const std::string& owner, uint64_t token,
                   const std::vector<HeadEntry>& entries) {
    auto conn = RedisConn::Connect(servers_[i]->url());
    ASSERT_TRUE(conn.ok());
    std::vector<std::string> argv = {owner, std::to_string(token), "400", "1000", "0", "-1"};
    for (const HeadEntry& e : entries) {
      argv.insert(argv.end(), {std::to_string(e.height), e.hash, e.parent});
    }
    auto r = (*conn)->Eval(
        LoadScript("election_write_head.lua"),
        {keys_.election_lock(), keys_.election_epoch(), keys_.head_log(), keys_.head_heights(),
         keys_.head_floor(), keys_.head_incarnation(), keys_.head_fork()},
        argv);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // Promotes `e` (token persisted) and commits blocks 1..6 of fork "a" on every node. Returns
  // the token, 0 when a step failed (reported).
  uint64_t CommitOldFork(const Election& e) {
    QuorumOutcome p = e.Promote();
    EXPECT_TRUE(p.quorum) << p.Summary();
    if (!p.quorum || !e.Renew(p.max_epoch).quorum) return 0;
    std::vector<HeadEntry> old_fork;
    for (uint64_t h = 1; h <= 6; ++h) old_fork.push_back(Block(h));
    QuorumOutcome w = e.WriteHead(p.max_epoch, old_fork);
    EXPECT_TRUE(w.quorum) << w.Summary();
    return w.quorum ? p.max_epoch : 0;
  }

  // The re-org's write of a leader over blocks 1..6: fork generation 1 above block 3, fork "b" at
  // heights 4 and 5, to node i alone, as `owner` with `token` (its lock renewed for `ttl_ms`).
  void TruncateOn(size_t i, const std::string& owner, uint64_t token, int64_t ttl_ms) {
    auto conn = RedisConn::Connect(servers_[i]->url());
    ASSERT_TRUE(conn.ok());
    auto r = (*conn)->Eval(
        LoadScript("election_write_head.lua"),
        {keys_.election_lock(), keys_.election_epoch(), keys_.head_log(), keys_.head_heights(),
         keys_.head_floor(), keys_.head_incarnation(), keys_.head_fork()},
        {owner, std::to_string(token), std::to_string(ttl_ms), "1000", "1", "3", "3", Block(3).hash,
         Block(3).parent, "4", Block(4, "b").hash, Block(3).hash, "5", Block(5, "b").hash,
         Block(4, "b").hash});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->elements[0].str, "OK") << "node " << i;
  }

  // Heights 1..top are committed, each the chain's block and the child of the one below.
  void ExpectCommittedIsTheChain(const Election& e, const FakeChain& chain, uint64_t top) {
    HeadLogReader reader(&e);
    ASSERT_TRUE(reader.Sync().ok());
    for (uint64_t h = 1; h <= top; ++h) {
      auto got = reader.CommittedAt(h);
      ASSERT_TRUE(got.has_value()) << "height " << h;
      EXPECT_EQ(got->hash, chain.At(h).hash) << "height " << h;
      if (h > 1) {
        EXPECT_EQ(got->parent, reader.CommittedAt(h - 1)->hash) << "height " << h;
      }
    }
  }

  Keys keys_{424242};
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<std::unique_ptr<LockNodes>> node_sets_;
};

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

TEST_F(ElectionTest, APartialWriteIsRepairedByTheNextLeader) {
  Election a = Candidate("a", /*ttl_ms=*/400);
  QuorumOutcome pa = a.Promote();
  ASSERT_TRUE(pa.quorum);
  ASSERT_TRUE(a.Renew(pa.max_epoch).quorum);
  std::vector<HeadEntry> first = {Block(1), Block(2)};
  ASSERT_TRUE(a.WriteHead(pa.max_epoch, first).quorum);
  // The failpoint: height 3 reached node 0 only, then a died.
  WriteHeadOn(0, "a", pa.max_epoch, {Block(3)});
  ASSERT_EQ(a.Committed(3, 3)->size(), 0u);  // below a quorum: not committed

  FakeChain chain;
  chain.height = 5;
  Election b = Candidate("b");
  Elector elector(&b, &chain, Opts("e", 100));
  elector.Start();
  ASSERT_TRUE(WaitFor([&] { return elector.role() == Role::kLeader; }, 5'000));
  ASSERT_TRUE(WaitFor(
      [&] { return elector.committed_tip().has_value() && elector.committed_tip()->height == 5; },
      5'000));
  EXPECT_GE(elector.stats().repaired, 1u);
  auto committed = b.Committed(1, 5);
  ASSERT_TRUE(committed.ok());
  ASSERT_EQ(committed->size(), 5u);
  EXPECT_EQ(committed->at(3).hash, Block(3).hash);  // a's entry, repaired, not replaced
  EXPECT_EQ(committed->at(4).parent, Block(3).hash);
  elector.Stop();
}

// Found by the chaos harness (seed 2, a head moved on a minority): a leader cut off from two of
// three nodes wrote fork a's heads 3..4 to node 0 alone; the chain re-orged, and after the links
// came back fork b's 3..5 reached node 1 alone before it was deposed. The next leader's repair
// picked per height (equal epochs) and committed a's 3..4 under b's 5: a log that does not
// chain, whose tip is on the node's chain, so no walk from the tip ever found the fork. Workers
// then refused b's block 3 against the log forever.
TEST_F(ElectionTest, SubQuorumHeadsOfTwoForksAreRepairedAsOneChain) {
  Election a = Candidate("a", /*ttl_ms=*/400);
  QuorumOutcome pa = a.Promote();
  ASSERT_TRUE(pa.quorum);
  ASSERT_TRUE(a.Renew(pa.max_epoch).quorum);
  ASSERT_TRUE(a.WriteHead(pa.max_epoch, std::vector<HeadEntry>{Block(1), Block(2)}).quorum);
  FakeChain chain;
  chain.height = 6;
  chain.ReorgAbove(2, "b");
  WriteHeadOn(0, "a", pa.max_epoch, {Block(3), Block(4)});  // fork a, node 0 only
  WriteHeadOn(1, "a", pa.max_epoch,
              {chain.At(3), chain.At(4), chain.At(5)});  // fork b, node 1 only
  ASSERT_EQ(a.Committed(3, 5)->size(), 0u);

  Election b = Candidate("b");
  Elector elector(&b, &chain, Opts("e", 100));
  elector.Start();
  ASSERT_TRUE(WaitFor([&] { return elector.role() == Role::kLeader; }, 5'000));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto tip = elector.committed_tip();
        return tip.has_value() && tip->height == 6 && tip->hash == chain.At(6).hash;
      },
      5'000));
  elector.Stop();
  // The committed log is the node's chain, every entry the child of the one below.
  ExpectCommittedIsTheChain(b, chain, 6);
}

// The same two forks, then a node restarted empty (chaos harness, chaos_short seed 2 in a CI
// run): node 0 holds fork a's 3..4 and, past the heights it refused, fork b's 6..7; node 2 holds
// b's 3..7; node 1 lost everything. b's 6..7 are still committed (nodes 0 and 2), its 3..5 and
// a's 3..4 are below a quorum. A repair that only looked upward from the last committed height
// below them re-proposed a's 3..4 and committed them under b's 6: the next leader's term start
// found PostgreSQL's block 3 off the log and asked for a rollback deeper than allowed, and every
// leader exited. The committed tip's own ancestors are what gets repaired.
TEST_F(ElectionTest, AForkBelowAQuorumIsNotRepairedUnderTheCommittedTip) {
  Election a = Candidate("a", /*ttl_ms=*/400);
  QuorumOutcome pa = a.Promote();
  ASSERT_TRUE(pa.quorum);
  ASSERT_TRUE(a.Renew(pa.max_epoch).quorum);
  ASSERT_TRUE(a.WriteHead(pa.max_epoch, std::vector<HeadEntry>{Block(1), Block(2)}).quorum);
  FakeChain chain;
  chain.height = 8;
  chain.ReorgAbove(2, "b");
  WriteHeadOn(0, "a", pa.max_epoch, {Block(3), Block(4), chain.At(6), chain.At(7)});
  WriteHeadOn(2, "a", pa.max_epoch,
              {chain.At(3), chain.At(4), chain.At(5), chain.At(6), chain.At(7)});
  On(1, {"FLUSHALL"});
  ASSERT_EQ(a.Committed(6, 7)->size(), 2u);

  Election b = Candidate("b");
  Elector elector(&b, &chain, Opts("e", 100));
  elector.Start();
  ASSERT_TRUE(WaitFor([&] { return elector.role() == Role::kLeader; }, 5'000));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto tip = elector.committed_tip();
        return tip.has_value() && tip->height == 8 && tip->hash == chain.At(8).hash;
      },
      5'000));
  elector.Stop();
  ExpectCommittedIsTheChain(b, chain, 8);
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

// A re-org truncates the head log above the fork point on a quorum; a node that missed it (paused)
// counts for nothing while behind, so the old fork's entries are never re-proposed or called
// committed, and the next write brings it up. A writer that has not seen the truncation is refused.
TEST_F(ElectionTest, AReorgTruncatesTheLogAndANodeThatMissedItNeverBringsTheOldForkBack) {
  Election a = Candidate("a", /*ttl_ms=*/3'000);
  const uint64_t token = CommitOldFork(a);
  ASSERT_NE(token, 0u);

  // The re-org's write (blocks above 3 become fork "b") reaches nodes 0 and 1 only (the leader
  // died before sending it to node 2).
  const HeadFork fork{1, 3};
  for (size_t n : {0, 1}) TruncateOn(n, "a", token, 3'000);

  auto committed = a.Committed(1, 10);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  ASSERT_EQ(committed->size(), 5u);
  for (uint64_t h = 1; h <= 3; ++h) EXPECT_EQ(committed->at(h).hash, Block(h).hash);
  for (uint64_t h = 4; h <= 5; ++h) EXPECT_EQ(committed->at(h).hash, Block(h, "b").hash);
  // Node 2 still holds the old fork up to 6, but a reader (a promoting leader's repair) neither
  // counts it nor offers its entries for re-proposal.
  EXPECT_EQ(On(2, {"ZCARD", keys_.head_heights()}).integer, 6);
  HeadLogReader reader(&a);
  ASSERT_TRUE(reader.Sync().ok());
  EXPECT_EQ(reader.fork(), fork);
  EXPECT_TRUE(reader.SubQuorum().empty()) << reader.SubQuorum().front().hash;
  ASSERT_TRUE(reader.CommittedTip().has_value());
  EXPECT_EQ(reader.CommittedTip()->hash, Block(5, "b").hash);
  EXPECT_FALSE(reader.CommittedAt(6).has_value());

  // A writer that has not seen the truncation is refused everywhere and told the newer fork.
  std::vector<HeadEntry> stale = {Block(6)};
  QuorumOutcome refused = a.WriteHead(token, stale, HeadFork{});
  EXPECT_FALSE(refused.quorum) << refused.Summary();
  EXPECT_EQ(refused.newer_fork, fork) << refused.Summary();

  // The next write with the fork brings node 2 up: it drops its old entries above 3 and takes the
  // new one (heights 4 and 5, committed on the other two, it lacks, as a node that was down would).
  std::vector<HeadEntry> six = {Block(6, "b")};
  six[0].parent = Block(5, "b").hash;
  QuorumOutcome all = a.WriteHead(token, six, fork);
  ASSERT_TRUE(all.quorum) << all.Summary();
  EXPECT_EQ(all.accepted, 3u) << all.Summary();
  for (size_t n = 0; n < 3; ++n) {
    const int64_t entries = n == 2 ? 4 : 6;
    EXPECT_EQ(On(n, {"ZCARD", keys_.head_heights()}).integer, entries) << "node " << n;
    // The stream was rebuilt from the height index: a reader starting now sees the same entries.
    EXPECT_EQ(On(n, {"XLEN", keys_.head_log()}).integer, entries) << "node " << n;
    for (const RedisReply& m :
         On(n, {"ZRANGEBYSCORE", keys_.head_heights(), "4", "+inf"}).elements) {
      EXPECT_NE(m.str.substr(m.str.find(':') + 1, 3), "0xa") << "node " << n << " kept " << m.str;
    }
  }
  EXPECT_EQ(On(2, {"GET", keys_.head_fork()}).str, "1:3");
  ASSERT_TRUE(reader.Sync().ok());
  EXPECT_EQ(reader.CommittedAt(6)->hash, Block(6, "b").hash);
  EXPECT_EQ(reader.CommittedAt(4)->hash, Block(4, "b").hash);
}

// Chaos seed 323: a deposed leader's truncation (fork generation 1) reached one lock node only,
// and the leader went away. The two nodes behind still vote below the fork point (VotesUpTo), so
// blocks 1..3 stay committed; a candidate's repair spreads the truncation and the new fork's
// entries, and it leads on the re-orged chain. Before the fix Committed skipped the nodes behind
// but counted them as answers (an empty map: "re-orged deeper than --max-reorg-depth") and the
// reader counted them as unanswered, so every repair failed "1 of 3 lock nodes answered".
TEST_F(ElectionTest, ATruncationThatReachedOneNodeOnlyStillLetsACandidateLeadOnTheNewFork) {
  Election a = Candidate("a", /*ttl_ms=*/1'000);
  const uint64_t token = CommitOldFork(a);
  ASSERT_NE(token, 0u);
  // The re-org's write (blocks above 3 become fork "b") reaches node 0 only; then "a" is gone.
  TruncateOn(0, "a", token, 1'000);

  Election eb = Candidate("b", 900);
  auto committed = eb.Committed(1, 10);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  ASSERT_EQ(committed->size(), 3u) << "blocks 1..3 are on every node; nothing above on a quorum";
  for (uint64_t h = 1; h <= 3; ++h) EXPECT_EQ(committed->at(h).hash, Block(h).hash);

  FakeChain chain;
  chain.ReorgAbove(3, "b");
  chain.height = 8;
  Elector b(&eb, &chain, Opts("b"));
  b.Start();
  EXPECT_TRUE(WaitFor(
      [&] {
        auto tip = b.committed_tip();
        return tip.has_value() && tip->hash == Block(8, "b").hash;
      },
      15'000))
      << "no candidate leads after a truncation reached one node";
  ASSERT_TRUE(b.ForksSince(0).has_value()) << "the duties would not roll back the old fork";
  EXPECT_EQ(*b.ForksSince(0), (HeadFork{1, 3}));
  b.Stop();
  ExpectCommittedIsTheChain(eb, chain, 8);
  for (size_t n = 0; n < 3; ++n) {
    EXPECT_EQ(On(n, {"GET", keys_.head_fork()}).str, "1:3") << "node " << n;
    for (const RedisReply& m :
         On(n, {"ZRANGEBYSCORE", keys_.head_heights(), "4", "+inf"}).elements) {
      EXPECT_NE(m.str.substr(m.str.find(':') + 1, 3), "0xa") << "node " << n << " kept " << m.str;
    }
  }
}

// The second half of seed 323: the one node that took the truncation then lost its data. A reader
// that saw the truncation keeps it (the nodes behind still answer and vote below its point), so
// it neither stalls ("0 of 3 lock nodes answered", forever) nor calls the old fork committed.
TEST_F(ElectionTest, AReaderKeepsATruncationWhoseOnlyNodeLostItsData) {
  Election a = Candidate("a", /*ttl_ms=*/1'000);
  const uint64_t token = CommitOldFork(a);
  ASSERT_NE(token, 0u);
  TruncateOn(0, "a", token, 1'000);

  HeadLogReader reader(&a);
  ASSERT_TRUE(reader.Sync().ok());
  EXPECT_EQ(reader.fork(), (HeadFork{1, 3}));
  ASSERT_TRUE(reader.CommittedTip().has_value());
  EXPECT_EQ(reader.CommittedTip()->hash, Block(3).hash);
  // Node 0's new fork is what a repair re-proposes, on the committed tip.
  std::vector<HeadEntry> orphans = reader.SubQuorum();
  ASSERT_EQ(orphans.size(), 2u);
  EXPECT_EQ(orphans[0].hash, Block(4, "b").hash);
  EXPECT_EQ(orphans[1].hash, Block(5, "b").hash);

  On(0, {"FLUSHALL"});
  auto synced = reader.Sync();
  ASSERT_TRUE(synced.ok()) << synced.status().ToString();
  EXPECT_EQ(reader.fork(), (HeadFork{1, 3}));
  ASSERT_TRUE(reader.CommittedTip().has_value());
  EXPECT_EQ(reader.CommittedTip()->hash, Block(3).hash) << "the old fork above 3 counted again";
  EXPECT_FALSE(reader.CommittedAt(4).has_value());
  EXPECT_TRUE(reader.SubQuorum().empty());
}

// A node that missed two truncations cannot know where the first one cut: the write that brings
// it up empties its log instead of keeping the first fork's entries below the second's point
// (which would refuse the current fork's entries there and vote for the old ones).
TEST_F(ElectionTest, ANodeThatMissedTwoTruncationsIsEmptiedByTheWriteThatBringsItUp) {
  Election a = Candidate("a", /*ttl_ms=*/3'000);
  const uint64_t token = CommitOldFork(a);
  ASSERT_NE(token, 0u);
  for (size_t n : {0, 1}) TruncateOn(n, "a", token, 3'000);  // generation 1 above 3; not node 2
  // Generation 2 above 4 (fork "b" at 4 stays, "c" from 5), written everywhere.
  HeadEntry c5 = Block(5, "c");
  c5.parent = Block(4, "b").hash;
  std::vector<HeadEntry> second = {Block(4, "b"), c5};
  second[0].parent = Block(3).hash;
  QuorumOutcome out = a.WriteHead(token, second, HeadFork{2, 4});
  ASSERT_TRUE(out.quorum) << out.Summary();
  EXPECT_EQ(out.accepted, 3u) << "node 2 refused: " << out.Summary();
  EXPECT_EQ(On(2, {"GET", keys_.head_fork()}).str, "2:4");
  EXPECT_EQ(On(2, {"ZCARD", keys_.head_heights()}).integer, 2) << "node 2 kept the first fork";
  auto committed = a.Committed(1, 10);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  ASSERT_EQ(committed->size(), 5u);
  for (uint64_t h = 1; h <= 3; ++h) EXPECT_EQ(committed->at(h).hash, Block(h).hash);
  EXPECT_EQ(committed->at(4).hash, Block(4, "b").hash);
  EXPECT_EQ(committed->at(5).hash, c5.hash);
}

// The elector follows a re-orging source: it truncates the log at the fork point, continues on the
// new fork, and tells the leader's duties where to roll back to (ForksSince).
TEST_F(ElectionTest, TheElectorTruncatesTheLogWhenTheChainReorgs) {
  FakeChain chain;
  chain.height = 10;
  Election ea = Candidate("a", 900);
  Elector a(&ea, &chain, Opts("a"));
  a.Start();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto tip = a.committed_tip();
        return tip.has_value() && tip->height == 10;
      },
      5'000));
  EXPECT_FALSE(a.ForksSince(0).has_value());
  chain.ReorgAbove(7, "c");
  chain.height = 12;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto tip = a.committed_tip();
        return tip.has_value() && tip->hash == Block(12, "c").hash;
      },
      5'000));
  EXPECT_EQ(a.fork(), (HeadFork{1, 7}));
  ASSERT_TRUE(a.ForksSince(0).has_value());
  EXPECT_EQ(*a.ForksSince(0), (HeadFork{1, 7}));
  EXPECT_FALSE(a.ForksSince(1).has_value());
  EXPECT_TRUE(a.LeaderToken().has_value());
  auto committed = ea.Committed(1, 20);
  ASSERT_TRUE(committed.ok());
  ASSERT_EQ(committed->size(), 12u);
  for (uint64_t h = 1; h <= 7; ++h) EXPECT_EQ(committed->at(h).hash, Block(h).hash);
  for (uint64_t h = 8; h <= 12; ++h) EXPECT_EQ(committed->at(h).hash, Block(h, "c").hash);
  a.Stop();
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
}  // namespace gapless
