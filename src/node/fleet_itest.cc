// The fleet roles (Leader, Worker) against a real PostgreSQL, redis-server and the anvil devnet
// (CTest fixtures pg, redis, anvil):
//  - a Leader and 3 Workers (threads) index the devnet: every block exactly once, rows equal a
//    single-process Indexer run (table checksums), frontier persisted = last block + 1; the same
//    under a tight memory budget;
//  - the fence: a worker whose lease expired (as if SIGSTOPped past its TTL) and whose task was
//    re-leased and committed by another cannot commit, renew or complete; nothing is doubled; a
//    refusal by the re-org fence raises a lagging counter instead of dead-lettering;
//  - an RPC that fails one range every time: dead-lettered with its error after max_attempts;
//    DlqRetry after the RPC heals completes it; a fixed run stuck on a dead letter stops naming it.
// The other families: fleet_startup_itest.cc (servers away at start), fleet_redis_loss_itest.cc
// (Redis lost or failed over), fleet_prefetch_itest.cc (the prefetching worker),
// fleet_reorg_itest.cc (rollbacks and the head log). Shared: fleet_itest_util.h.
#include <gtest/gtest.h>

#include "node/fleet_itest_util.h"

namespace gapless::fleet_testing {
namespace {

TEST_F(FleetTest, LeaderAndThreeWorkersIndexTheDevnetLikeOneProcess) {
  const DevnetManifest& devnet = LoadDevnet();
  const uint64_t last = devnet.last_block;
  FleetRun run =
      RunFleet(redis_.url(), keys(), pool_.get(), FixedLeader(0, last, 20), 3, kAnvilUrl);
  ASSERT_TRUE(run.finished) << "the fleet did not finish";
  EXPECT_TRUE(run.leader_status.ok()) << run.leader_status.ToString();
  for (const Status& st : run.worker_status) EXPECT_TRUE(st.ok()) << st.ToString();
  ExpectComplete(pool_.get(), 0, last);
  // A healthy run does every task once.
  EXPECT_EQ(run.blocks, last + 1);
  EXPECT_EQ(run.tasks, (last + 1 + 19) / 20);
  {
    auto conn = pool_->Acquire();
    auto frontier = LoadFrontier(*conn);
    ASSERT_TRUE(frontier.ok());
    EXPECT_EQ(frontier->value_or(0), last + 1);
  }
  Queue queue(redis_.conn(), keys());
  auto depths = queue.Depths();
  ASSERT_TRUE(depths.ok());
  EXPECT_EQ(depths->pending + depths->processing + depths->dlq, 0);
  // The leader sampled the coordination Redis's key count (coord/key_watch.h) for status.
  auto samples = redis_.conn()->Command({"LRANGE", keys().key_count_samples(), "0", "-1"});
  ASSERT_TRUE(samples.ok());
  EXPECT_GE(samples->elements.size(), 1u) << "the leader recorded no key-count sample";

  // The same blocks through the single-process Indexer, into another database.
  PgTestDb reference_db;
  ASSERT_FALSE(reference_db.failed());
  auto reference = OpenPool(reference_db, 3);
  IndexerOptions options;
  options.from = 0;
  options.to = last;
  options.range_size = 20;
  options.fetch_workers = 2;
  options.chain_id = devnet.chain_id;
  Indexer indexer(options, ClientsFor(kAnvilUrl), reference.get());
  ASSERT_TRUE(indexer.Plan().ok());
  Status st = indexer.Run();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(DataChecksums(pool_.get(), 0, last), DataChecksums(reference.get(), 0, last));
}

TEST_F(FleetTest, UnderATightMemoryBudgetRangesAreCommittedInPartsWithTheSameRows) {
  const DevnetManifest& devnet = LoadDevnet();
  const uint64_t last = devnet.last_block;
  // 8 KiB a thread: a few devnet blocks at a time, one per request.
  MemoryBudget budget(MemoryBudget::kBaseBytes + 3 * (MemoryBudget::kThreadBytes + 8 * 1024), 3);
  FleetRun run = RunFleet(redis_.url(), keys(), pool_.get(), FixedLeader(0, last, 20), 3, kAnvilUrl,
                          nullptr, 120, [&budget](WorkerOptions& w) { w.memory_budget = &budget; });
  ASSERT_TRUE(run.finished) << "the fleet did not finish";
  for (const Status& st : run.worker_status) EXPECT_TRUE(st.ok()) << st.ToString();
  ExpectComplete(pool_.get(), 0, last);
  EXPECT_EQ(run.blocks, last + 1);
  EXPECT_EQ(run.tasks, (last + 1 + 19) / 20);  // each task completed once, after its last part
  auto Parts = [](PgPool* pool) {
    auto conn = pool->Acquire();
    auto n = conn->Query("SELECT count(*) FROM indexed_ranges");
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? *n->GetInt64(0, 0) : -1;
  };
  EXPECT_GT(Parts(pool_.get()), static_cast<int64_t>(run.tasks)) << "no range was split";

  // The same blocks through the Indexer, without a budget and with one: the same rows.
  for (uint64_t budget_bytes :
       {uint64_t{0}, MemoryBudget::kBaseBytes + 2 * (MemoryBudget::kThreadBytes + 8 * 1024)}) {
    PgTestDb reference_db;
    ASSERT_FALSE(reference_db.failed());
    auto reference = OpenPool(reference_db, 3);
    IndexerOptions options;
    options.from = 0;
    options.to = last;
    options.range_size = 20;
    options.fetch_workers = 2;
    options.chain_id = devnet.chain_id;
    options.memory_budget_bytes = budget_bytes;
    Indexer indexer(options, ClientsFor(kAnvilUrl), reference.get());
    ASSERT_TRUE(indexer.Plan().ok());
    Status st = indexer.Run();
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(indexer.counters().blocks.load(), last + 1);
    EXPECT_EQ(DataChecksums(pool_.get(), 0, last), DataChecksums(reference.get(), 0, last))
        << "budget " << budget_bytes;
    if (budget_bytes > 0) {
      EXPECT_GT(Parts(reference.get()), static_cast<int64_t>((last + 1 + 19) / 20));
    } else {
      EXPECT_EQ(Parts(reference.get()), static_cast<int64_t>((last + 1 + 19) / 20));
    }
  }
}

TEST_F(FleetTest, StaleLeaseCannotCommitAfterTheRangeWasReleased) {
  const TaskRange task{20, 39};
  Queue queue(redis_.conn(), keys());
  ASSERT_TRUE(queue.Push({task}).ok());

  // Worker A claims with a short lease and fetches the range...
  auto a = queue.Claim("A", 200);
  ASSERT_TRUE(a.ok() && a->has_value());
  RpcBlockSource rpc(ClientsFor(kAnvilUrl)());
  RangeWrite stale{20, 39, {}, (*a)->token, "A"};
  ASSERT_TRUE(FetchAndDecodeRange(rpc, 20, 39, 10, BlockChecks(LoadDevnet().chain_id), nullptr,
                                  nullptr, &stale.blocks)
                  .ok());
  // ...then is paused past its TTL: the janitor requeues the task.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto requeued = queue.Janitor();
  ASSERT_TRUE(requeued.ok());
  ASSERT_EQ(requeued->size(), 1u);

  // Worker B (a real Worker) claims it with a higher token, commits and completes it.
  WorkerOptions b = FastWorker("B");
  b.done = QueueDrained();
  Worker worker(b, RpcBlockSources(ClientsFor(kAnvilUrl)), redis_.url(), keys(), pool_.get());
  std::atomic<bool> stop{false};
  ASSERT_TRUE(worker.Run(stop).ok());
  EXPECT_EQ(worker.counters().tasks.load(), 1u);
  auto sums = DataChecksums(pool_.get(), 0, 100);

  // A resumes: its commit is fenced off, and so are its renewal and completion.
  {
    auto conn = pool_->Acquire();
    Status st = WriteRange(*conn, stale);
    EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
    EXPECT_EQ(st.reason(), kStaleFenceReason) << st.ToString();
  }
  EXPECT_EQ(queue.Renew(task, "A", (*a)->token, 1000).status().code(), Code::kAborted);
  EXPECT_EQ(queue.Complete(task, "A", (*a)->token).code(), Code::kAborted);
  EXPECT_EQ(DataChecksums(pool_.get(), 0, 100), sums);
  ExpectComplete(pool_.get(), 20, 39);
  auto conn = pool_->Acquire();
  auto max_token = MaxFenceToken(*conn);
  ASSERT_TRUE(max_token.ok());
  EXPECT_GT(*max_token, (*a)->token);
}

// A failover to a lagging replica can put the fence counter back below a re-org's floor: until
// the leader's next term floors it again, every claim above the fork point gets a token the
// re-org fence refuses, and each refusal spent an attempt (chaos seed 160 dead-lettered three
// ranges so). The first refusal raises the counter to PostgreSQL's highest token instead, so the
// next claim writes; the range is indexed, nothing is dead-lettered.
TEST_F(FleetTest, AReorgFenceRefusalRaisesALaggingCounterInsteadOfDeadLettering) {
  {
    auto conn = pool_->Acquire();
    RollbackRequest request{
        .fork_point = 4, .new_hashes = {}, .leader_epoch = 1, .fence_floor = 50};
    ASSERT_TRUE(RollBack(*conn, request).ok());
  }
  // The lagging replica's counter: present (so no fresh-start floor applies), below the floor.
  ASSERT_TRUE(redis_.conn()->Command({"SET", keys().fence_counter(), "3"}).ok());
  Queue queue(redis_.conn(), keys());
  ASSERT_TRUE(queue.Push({TaskRange{10, 19}}).ok());

  WorkerOptions options = FastWorker("w");
  options.local_attempts = 1;
  options.max_attempts = 2;
  options.done = QueueDrained();
  Worker worker(options, RpcBlockSources(ClientsFor(kAnvilUrl)), redis_.url(), keys(), pool_.get());
  std::atomic<bool> stop{false};
  ASSERT_TRUE(worker.Run(stop).ok());

  auto dead = queue.DlqList();
  ASSERT_TRUE(dead.ok());
  EXPECT_TRUE(dead->empty()) << "dead-lettered: " << dead->front().error;
  ExpectComplete(pool_.get(), 10, 19);
  auto counter = redis_.conn()->Command({"GET", keys().fence_counter()});
  ASSERT_TRUE(counter.ok());
  EXPECT_GT(std::stoll(counter->str), 50) << "the counter was not raised above the floor";
}

TEST_F(FleetTest, RangeThatAlwaysFailsIsDeadLetteredThenRetriedAfterTheRpcHeals) {
  // A proxy in front of anvil that answers garbage for the range 40-59 until healed.
  std::atomic<bool> healed{false};
  std::mutex mu;
  CurlTransport upstream(kAnvilUrl);
  HttpTestServer proxy([&](const HttpTestServer::Request& req) {
    if (!healed.load() && req.body.find("\"0x28\"") != std::string::npos) {
      return HttpTestServer::Response::Json("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{tru");
    }
    std::lock_guard<std::mutex> lock(mu);
    auto res = upstream.Post(req.body);
    if (!res.ok()) return HttpTestServer::Response::Reset();
    return HttpTestServer::Response::Json(res->body, static_cast<int>(res->status));
  });

  const TaskRange bad{40, 59};
  std::atomic<bool> checked{false};
  auto during = [&](const std::vector<std::unique_ptr<Worker>>&) {
    auto conn = redis_.Connect();
    ASSERT_TRUE(conn.ok());
    Queue queue(conn->get(), keys());
    std::vector<DeadLetter> dead;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (dead.empty() && std::chrono::steady_clock::now() < deadline) {
      auto list = queue.DlqList();
      ASSERT_TRUE(list.ok());
      dead = *list;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(dead.size(), 1u);
    EXPECT_EQ(dead[0].task, bad);
    EXPECT_EQ(dead[0].attempts, 2);
    EXPECT_NE(dead[0].error.find("InvalidData"), std::string::npos) << dead[0].error;
    // Everything else is done; the frontier waits at the dead range.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto pg = pool_->Acquire();
    auto done = CommittedRanges(*pg, 0, 79);
    ASSERT_TRUE(done.ok());
    std::vector<std::pair<uint64_t, uint64_t>> expected = {{0, 39}, {60, 79}};
    EXPECT_EQ(*done, expected);

    healed.store(true);
    auto retried = queue.DlqRetry(bad);
    ASSERT_TRUE(retried.ok());
    EXPECT_TRUE(*retried);
    checked.store(true);
  };
  FleetRun run = RunFleet(redis_.url(), keys(), pool_.get(), FixedLeader(0, 79, 20), 1, proxy.url(),
                          during, 120, [](WorkerOptions& w) {
                            w.local_attempts = 2;
                            w.max_attempts = 2;
                            w.blocks_per_request = 20;
                          });
  ASSERT_TRUE(checked.load());
  ASSERT_TRUE(run.finished) << "the retried range did not complete";
  ExpectComplete(pool_.get(), 0, 79);
}

// Nobody retries the dead letter: a fixed run cannot finish, and instead of waiting forever the
// leader gives up (after give_up_when_stuck_ms) naming the range, its error and the way out.
TEST_F(FleetTest, AFixedRunStuckOnADeadLetterStopsNamingIt) {
  CurlTransport upstream(kAnvilUrl);
  std::mutex mu;
  HttpTestServer proxy([&](const HttpTestServer::Request& req) {
    if (req.body.find("\"0x28\"") != std::string::npos) {  // block 40: range 40-59
      return HttpTestServer::Response::Json("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{tru");
    }
    std::lock_guard<std::mutex> lock(mu);
    auto res = upstream.Post(req.body);
    if (!res.ok()) return HttpTestServer::Response::Reset();
    return HttpTestServer::Response::Json(res->body, static_cast<int>(res->status));
  });
  LeaderOptions leader = FixedLeader(0, 79, 20);
  leader.give_up_when_stuck_ms = 300;
  FleetRun run = RunFleet(redis_.url(), keys(), pool_.get(), leader, 1, proxy.url(), nullptr, 120,
                          [](WorkerOptions& w) {
                            w.local_attempts = 2;
                            w.max_attempts = 2;
                            w.blocks_per_request = 20;
                          });
  EXPECT_FALSE(run.finished);
  const Status& st = run.leader_status;
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("range 40-59 is dead-lettered after 2 attempts"), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("InvalidData"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("gapless dlq retry 40-59"), std::string::npos) << st.ToString();
  // Everything else was committed.
  auto pg = pool_->Acquire();
  auto done = CommittedRanges(*pg, 0, 79);
  ASSERT_TRUE(done.ok());
  std::vector<std::pair<uint64_t, uint64_t>> expected = {{0, 39}, {60, 79}};
  EXPECT_EQ(*done, expected);
}

}  // namespace
}  // namespace gapless::fleet_testing
