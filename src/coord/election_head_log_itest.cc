// The HA leader's head log against real redis-servers (three private lock nodes per test,
// testing/redis_server.h): a partial write is repaired by the next leader, sub-quorum heads of two
// forks become one chain, a fork below a quorum is not repaired under the committed tip; a re-org
// truncates the log, and no node that missed a truncation (or lost its data) ever brings the old
// fork back or keeps a candidate from leading on the new one. Shared: election_itest_util.h.
#include <gtest/gtest.h>

#include "coord/election_itest_util.h"
#include "testing/tcp_proxy.h"

namespace gapless::election_testing {
namespace {

using testing_util::WaitFor;

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

// Chaos seed 13: a re-org's write reached the nodes but their answers did not come back in time,
// so the elector saw it short of a quorum. The truncation is on the nodes all the same, with the
// new fork's entries above the fork point; finding the fork point again from that log gives a
// higher one (the new fork's entries match the chain). The elector must finish the truncation it
// began (same generation, same point): the leader's duties roll back to where the chain and the
// stored blocks really part, not to where the half-written log says.
TEST_F(ElectionTest, ARetriedTruncationKeepsItsForkPointWhenTheFirstWriteLandedUnseen) {
  TcpProxy p1("127.0.0.1", servers_[1]->port());
  TcpProxy p2("127.0.0.1", servers_[2]->port());
  LockNodesOptions options;
  options.node_timeout_ms = 300;
  auto nodes =
      LockNodes::Open({servers_[0]->url(), "redis://127.0.0.1:" + std::to_string(p1.port()),
                       "redis://127.0.0.1:" + std::to_string(p2.port())},
                      options);
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  Election ea(nodes->get(), keys_, ElectionOptions{"a", 3'000, 1'000});
  FakeChain chain;
  chain.height = 10;
  chain.walk = &ea;
  std::thread resume;
  chain.on_fork = [&] {
    // The write that follows reaches nodes 1 and 2, which run it; their answers wait past the
    // node timeout.
    p1.Pause(TcpProxy::Direction::kToClient);
    p2.Pause(TcpProxy::Direction::kToClient);
    resume = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(900));
      p1.Resume();
      p2.Resume();
    });
  };
  Elector a(&ea, &chain, Opts("a"));
  a.Start();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto tip = a.committed_tip();
        return tip.has_value() && tip->height == 10;
      },
      5'000));
  chain.ReorgAbove(3, "b");
  chain.height = 12;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto tip = a.committed_tip();
        return tip.has_value() && tip->hash == Block(12, "b").hash;
      },
      10'000));
  if (resume.joinable()) resume.join();
  ASSERT_TRUE(a.ForksSince(0).has_value());
  EXPECT_EQ(*a.ForksSince(0), (HeadFork{1, 3})) << "the rollback would keep blocks 4.. of fork a";
  EXPECT_EQ(a.fork(), (HeadFork{1, 3}));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(On(i, {"GET", keys_.head_fork()}).str, "1:3") << "node " << i;
  }
  auto committed = ea.Committed(1, 20);
  ASSERT_TRUE(committed.ok());
  ASSERT_EQ(committed->size(), 12u);
  for (uint64_t h = 1; h <= 3; ++h) EXPECT_EQ(committed->at(h).hash, Block(h).hash);
  for (uint64_t h = 4; h <= 12; ++h) EXPECT_EQ(committed->at(h).hash, Block(h, "b").hash);
  a.Stop();
}

}  // namespace
}  // namespace gapless::election_testing
