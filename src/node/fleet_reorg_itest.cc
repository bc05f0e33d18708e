// The fleet across re-orgs (fixtures pg, redis, anvil): after a rollback the coordination Redis
// follows PostgreSQL below the fork point, also when its half of the rollback failed once or
// another leader finished it; and the HA leader (an Elector over three private lock nodes, its
// head log fed from the devnet) drives the fleet, where a worker whose RPC backend answers a block
// with another hash than the head log's retries it and never commits it.
// Shared helpers in fleet_itest_util.h.
#include <gtest/gtest.h>

#include "node/fleet_itest_util.h"

namespace gapless::fleet_testing {
namespace {

// After the leader rolled PostgreSQL back above a fork point, the coordination Redis follows it
// (reconcile.h FollowRollbacks): the frontier goes down to the fork point + 1, completed ranges
// above it go, a task in processing above it loses its lease (its holder may hold the old fork:
// its completion is refused) and is requeued first; once per re-org generation, fenced by the
// leader's epoch.
TEST_F(FleetTest, AfterARollbackRedisFollowsPostgresBelowTheForkPoint) {
  SyntheticOptions small{.transactions_per_block = 2, .seed = 1};
  for (uint64_t from : {0, 10, 20}) {
    RangeWrite w = SyntheticRange(from, from + 9, small);
    w.fence_token = 5;
    auto conn = pool_->Acquire();
    ASSERT_TRUE(WriteRange(*conn, w).ok());
  }
  Frontier frontier(redis_.conn(), keys().completed(), keys().frontier(), 0, keys().leader_epoch());
  ASSERT_TRUE(frontier.Record(0, 29).ok());
  ASSERT_TRUE(frontier.Record(35, 39).ok());  // beyond a gap
  ASSERT_EQ(frontier.Advance(1).value(), 30u);
  Queue queue(redis_.conn(), keys());
  ASSERT_TRUE(queue.Push({TaskRange{40, 44}, TaskRange{45, 49}}, 1).ok());
  auto lease = queue.Claim("old-fork-worker", 60'000);
  ASSERT_TRUE(lease.ok() && lease->has_value());
  ASSERT_EQ((*lease)->task.id(), "40-44");

  {
    auto conn = pool_->Acquire();
    RollbackRequest request{
        .fork_point = 14, .new_hashes = {}, .leader_epoch = 2, .fence_floor = 6};
    auto rolled = RollBack(*conn, request);
    ASSERT_TRUE(rolled.ok()) << rolled.status().ToString();
    ASSERT_EQ(rolled->depth, 15u);
    auto fork = FollowRollbacks(*redis_.conn(), keys(), *conn, 0, 2);
    ASSERT_TRUE(fork.ok()) << fork.status().ToString();
    ASSERT_EQ(*fork, std::optional<uint64_t>(14));
  }
  EXPECT_EQ(frontier.Get().value(), 15u);
  auto completed = redis_.conn()->Command({"ZRANGE", keys().completed(), "0", "-1"});
  ASSERT_TRUE(completed.ok());
  EXPECT_TRUE(completed->elements.empty()) << completed->elements[0].str;
  EXPECT_FALSE(queue.Complete((*lease)->task, "old-fork-worker", (*lease)->token).ok())
      << "the old fork's holder could still complete its task";
  auto first = queue.Claim("new-fork-worker", 60'000);
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->task.id(), "40-44") << "the revoked task is not requeued first";
  EXPECT_GT((*first)->token, (*lease)->token);
  EXPECT_EQ(redis_.conn()->Command({"GET", keys().reorg_generation()})->str, "1");

  // Once per generation: the frontier moves on over new completions and stays there.
  ASSERT_TRUE(frontier.Record(15, 19).ok());
  ASSERT_EQ(frontier.Advance(2).value(), 20u);
  auto conn = pool_->Acquire();
  auto again = FollowRollbacks(*redis_.conn(), keys(), *conn, 0, 2);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
  EXPECT_EQ(frontier.Get().value(), 20u);
  // A deposed leader (a lower epoch) cannot follow a newer rollback.
  ASSERT_TRUE(RollBack(*conn,
                       RollbackRequest{
                           .fork_point = 16, .new_hashes = {}, .leader_epoch = 2, .fence_floor = 9})
                  .ok());
  auto stale = FollowRollbacks(*redis_.conn(), keys(), *conn, 0, 1);
  EXPECT_TRUE(IsStaleLeaderEpoch(stale.status())) << stale.status().ToString();
  EXPECT_EQ(frontier.Get().value(), 20u);
}

// Issue 16, defect 3: the Redis half of a rollback fails once (a transient Redis error between
// PostgreSQL's rollback and reorg_reset.lua). The leader's next step must finish it: the Redis
// frontier below the fork, the generation recorded, the rolled-back heights seeded again. (It
// used to mark the truncation followed before the Redis half ran, and never retried it within the
// term: the frontier stayed above the hole until "frontier would run ahead of the data".)
TEST_F(FleetTest, ARollbackWhoseRedisHalfFailsIsFinishedByTheNextStep) {
  ScriptedLease lease;
  lease.height = 39;
  Leader leader(FixedLeader(0, 39, 10), redis_.url(), keys(), pool_.get(), &lease);
  CommitThirtyAndStep(pool_.get(), redis_.conn(), keys(), leader, 1);
  if (HasFatalFailure()) return;

  // The Redis half will fail: reorg_reset.lua refuses a generation key that is not a number.
  ASSERT_TRUE(redis_.conn()->Command({"SET", keys().reorg_generation(), "broken"}).ok());
  lease.fork = HeadFork{.generation = 1, .point = 14};
  Status failed = leader.Step(1);
  ASSERT_FALSE(failed.ok()) << "the corrupt generation key did not fail the Redis half";
  {
    auto conn = pool_->Acquire();
    ASSERT_EQ(ReorgGeneration(*conn).value(), 1u) << "PostgreSQL did not roll back";
  }
  // Redis recovers; the next step must level everything.
  ASSERT_TRUE(redis_.conn()->Command({"DEL", keys().reorg_generation()}).ok());
  Status st = leader.Step(1);
  ASSERT_TRUE(st.ok()) << st.ToString();
  Frontier frontier(redis_.conn(), keys().completed(), keys().frontier(), 0, keys().leader_epoch());
  EXPECT_EQ(frontier.Get().value(), 15u) << "the Redis frontier stayed above the rolled-back hole";
  EXPECT_EQ(redis_.conn()->Command({"GET", keys().reorg_generation()})->str, "1");
  EXPECT_EQ(leader.frontier(), 15u);
  auto pending = redis_.conn()->Command({"LRANGE", keys().pending(), "0", "-1"});
  ASSERT_TRUE(pending.ok());
  bool seeded = false;
  for (const auto& e : pending->elements) {
    auto task = ParseTask(e.str);
    if (task.ok() && task->from <= 15 && task->to >= 15) seeded = true;
  }
  EXPECT_TRUE(seeded) << "block 15 was not seeded again after the rollback";
  // And it stays level: further steps change nothing.
  ASSERT_TRUE(leader.Step(1).ok());
  EXPECT_EQ(frontier.Get().value(), 15u);
}

// The same three generations when another leader did the whole rollback (PostgreSQL and Redis)
// while this one was deposed: at its next term this leader's own cursors must follow too. (Its
// in-memory frontier used to stay above the fork, and the term's first frontier step raised Redis
// over the hole again: DataLoss, "frontier would run ahead of the data".)
TEST_F(FleetTest, ALeaderBackForANewTermFollowsARollbackAnotherLeaderFinished) {
  ScriptedLease lease;
  lease.height = 39;
  Leader leader(FixedLeader(0, 39, 10), redis_.url(), keys(), pool_.get(), &lease);
  CommitThirtyAndStep(pool_.get(), redis_.conn(), keys(), leader, 1);
  if (HasFatalFailure()) return;

  // Leader 2 rolls back to 14, in PostgreSQL and in Redis.
  {
    auto conn = pool_->Acquire();
    RollbackRequest request{.fork_point = 14,
                            .new_hashes = {},
                            .leader_epoch = 2,
                            .fence_floor = 6,
                            .head_fork_generation = 1};
    ASSERT_TRUE(RollBack(*conn, request).ok());
    auto fork = FollowRollbacks(*redis_.conn(), keys(), *conn, 0, 2);
    ASSERT_TRUE(fork.ok()) << fork.status().ToString();
  }
  lease.fork = HeadFork{.generation = 1, .point = 14};
  // This leader is elected again (epoch 3).
  lease.epoch = 3;
  Status st = leader.Step(3);
  ASSERT_TRUE(st.ok()) << st.ToString();
  Frontier frontier(redis_.conn(), keys().completed(), keys().frontier(), 0, keys().leader_epoch());
  EXPECT_EQ(frontier.Get().value(), 15u);
  EXPECT_EQ(leader.frontier(), 15u);
  auto conn = pool_->Acquire();
  EXPECT_EQ(LoadFrontier(*conn).value(), std::optional<uint64_t>(15));
}

// A load-balanced RPC backend that disagrees with the one the leader read: for its first answers
// it serves block 45 under another hash (consistently: the block's hash, its receipts' blockHash
// and block 46's parentHash), which the decoder cannot tell from the truth. Only the head log can.
TEST_F(FleetTest, ABackendThatDisagreesWithTheHeadLogNeverCommitsItsBlock) {
  const uint64_t last = std::min<uint64_t>(LoadDevnet().last_block, 99);
  std::vector<std::unique_ptr<RedisServer>> servers;
  std::vector<std::string> urls;
  for (int i = 0; i < 3; ++i) {
    auto s = RedisServer::Start();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    urls.push_back((*s)->url());
    servers.push_back(std::move(*s));
  }
  LockNodesOptions lo;
  lo.node_timeout_ms = 300;
  auto leader_nodes = LockNodes::Open(urls, lo);
  auto worker_nodes = LockNodes::Open(urls, lo);
  ASSERT_TRUE(leader_nodes.ok() && worker_nodes.ok());
  Election election(leader_nodes->get(), keys(), ElectionOptions{"test-leader", 3'000, 4'096});
  Election worker_view(worker_nodes->get(), keys(), ElectionOptions{"worker-view", 3'000, 4'096});
  HeadTrackerOptions tracker_options;
  tracker_options.from = 0;
  tracker_options.to = last;
  HeadTracker tracker(ClientsFor(kAnvilUrl)(), db_.url(), tracker_options);
  Elector elector(&election, &tracker);
  elector.Start();
  ElectorLease lease(&elector);

  auto truth = FetchHeaders(*ClientsFor(kAnvilUrl)(), 45, 45);
  ASSERT_TRUE(truth.ok()) << truth.status().ToString();
  const std::string real = truth->at(0).hash;
  const std::string fake = "0x" + std::string(64, 'f');
  CurlTransport upstream(kAnvilUrl);
  std::mutex mu;
  std::atomic<int> served_fake{0};
  HttpTestServer backend([&](const HttpTestServer::Request& req) {
    std::lock_guard<std::mutex> lock(mu);
    auto res = upstream.Post(req.body);
    if (!res.ok()) return HttpTestServer::Response::Reset();
    std::string body = res->body;
    if (served_fake.load() < 3 && body.find(real) != std::string::npos) {
      for (size_t at = 0; (at = body.find(real, at)) != std::string::npos;) {
        body.replace(at, real.size(), fake);
      }
      ++served_fake;
    }
    return HttpTestServer::Response::Json(body, static_cast<int>(res->status));
  });

  FleetRun run = RunFleet(
      redis_.url(), keys(), pool_.get(), FixedLeader(0, last, 10), 2, backend.url(), nullptr, 120,
      [&](WorkerOptions& w) {
        w.check_blocks = [&](std::span<const BlockData> blocks, size_t* wrong) {
          return HeadLogCheck(worker_view, blocks, wrong);
        };
      },
      &lease);
  elector.Stop();
  ASSERT_TRUE(run.finished) << "the fleet did not finish";
  EXPECT_GE(served_fake.load(), 1) << "the bad backend was never asked for block 45";
  ExpectComplete(pool_.get(), 0, last);
  auto conn = pool_->Acquire();
  auto stored = conn->Query("SELECT '0x' || encode(hash, 'hex') FROM blocks WHERE number = 45");
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->Get(0, 0), real) << "block 45 was committed with the backend's hash";
  // The head log committed every height once, with the chain's hash.
  auto committed = worker_view.Committed(0, last);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(committed->size(), last + 1);
  for (uint64_t h = 0; h <= last; ++h) EXPECT_TRUE(committed->count(h)) << "height " << h;
  EXPECT_EQ(committed->at(45).hash, real);
  EXPECT_GE(elector.stats().terms, 1u);
}

}  // namespace
}  // namespace gapless::fleet_testing
