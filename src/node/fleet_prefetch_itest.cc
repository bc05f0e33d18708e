// The prefetching worker (node/worker.h "Prefetch") in a fleet (fixtures pg, redis, anvil): a task
// fetched ahead keeps its lease while it waits behind a slow write; a stale fence on one range
// leaves the range fetched behind it alone; a stopped worker ends both stages and loses nothing.
// Shared helpers in fleet_itest_util.h.
#include <gtest/gtest.h>

#include "node/fleet_itest_util.h"

namespace gapless::fleet_testing {
namespace {

// Prefetch (node/worker.h): a worker claims and fetches range n+1 while range n is written. The
// task fetched ahead waits behind that write, here for longer than its lease TTL (PostgreSQL is
// reached through a link that adds 30 ms to every chunk it forwards): its lease must be renewed
// meanwhile, or the janitor (run here every 50 ms, as a leader would) requeues it as expired, its
// renewal before the write is refused and the range is dropped. The keeper renews every task the
// worker holds, not only the one being written.
TEST_F(FleetTest, APrefetchedTaskKeepsItsLeaseWhileItWaitsBehindASlowWrite) {
  SlowPostgres slow = SlowPostgresFor(db_.url());
  ASSERT_NE(slow.pool, nullptr);
  Queue queue(redis_.conn(), keys());
  ASSERT_TRUE(queue.Push({TaskRange{0, 9}, TaskRange{10, 19}, TaskRange{20, 29}}).ok());
  WorkerOptions options = PrefetchingWorker("w");
  options.done = QueueDrained();
  Worker worker(options, RpcBlockSources(ClientsFor(kAnvilUrl)), redis_.url(), keys(),
                slow.pool.get());
  std::atomic<bool> stop{false};
  Status result;
  std::thread run([&] { result = worker.Run(stop); });
  auto janitor_conn = redis_.Connect();
  ASSERT_TRUE(janitor_conn.ok()) << janitor_conn.status().ToString();
  Queue janitor_queue(janitor_conn->get(), keys());
  std::vector<std::string> expired;
  const WorkerCounters& c = worker.counters();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (c.tasks.load() < 3 && c.leases_lost.load() == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    auto requeued = janitor_queue.Janitor();
    EXPECT_TRUE(requeued.ok()) << requeued.status().ToString();
    if (requeued.ok()) {
      for (const ExpiredTask& e : *requeued) expired.push_back(e.task.id());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop.store(true);
  run.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
  EXPECT_TRUE(expired.empty()) << "requeued as expired: " << expired.front();
  ASSERT_GT(c.written_micros.load() / 3, 1'000'000u)
      << "the writes were not slower than the lease TTL: the test proves nothing";
  EXPECT_EQ(c.leases_lost.load(), 0u) << "a task fetched ahead lost its lease while it waited";
  EXPECT_EQ(c.tasks.load(), 3u);
  ExpectComplete(pool_.get(), 0, 29);
}

// A write of range n refused by the fence (a newer owner committed it) drops range n only: range
// n+1, claimed and fetched while n was written (so with a token from before the refusal), is
// written and completed with its own token; n is left to its lease expiry and the janitor, and
// then done again with a token above the newer owner's.
TEST_F(FleetTest, AStaleFenceOnOneRangeLeavesTheRangeFetchedBehindItAlone) {
  RpcBlockSource rpc(ClientsFor(kAnvilUrl)());
  RangeWrite newer{0, 9, {}, 1000, "newer-owner"};
  ASSERT_TRUE(FetchAndDecodeRange(rpc, 0, 9, 10, BlockChecks(LoadDevnet().chain_id), nullptr,
                                  nullptr, &newer.blocks)
                  .ok());
  {
    auto conn = pool_->Acquire();
    Status st = WriteRange(*conn, newer);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  Queue queue(redis_.conn(), keys());
  ASSERT_TRUE(queue.FloorFenceCounter(5).ok());  // behind the newer owner's token
  ASSERT_TRUE(queue.Push({TaskRange{0, 9}, TaskRange{10, 19}, TaskRange{20, 29}}).ok());
  WorkerOptions options = PrefetchingWorker("w");
  options.done = QueueDrained();
  Worker worker(options, RpcBlockSources(ClientsFor(kAnvilUrl)), redis_.url(), keys(), pool_.get());
  std::atomic<bool> stop{false};
  Status result;
  std::thread run([&] { result = worker.Run(stop); });
  const WorkerCounters& c = worker.counters();
  auto wait_for = [&](const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return done();
  };
  EXPECT_TRUE(wait_for([&] { return c.leases_lost.load() >= 1 && c.tasks.load() >= 2; }))
      << "lost " << c.leases_lost.load() << ", tasks " << c.tasks.load();
  {
    auto conn = pool_->Acquire();
    auto token = conn->Query("SELECT fence_token FROM indexed_ranges WHERE from_block = 10");
    ASSERT_TRUE(token.ok() && token->rows() == 1);
    EXPECT_LT(*token->GetInt64(0, 0), 1000) << "10-19 was not the range fetched ahead";
  }
  // 0-9's lease expires (nobody renews it); the janitor requeues it and the worker redoes it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1'300));
  auto requeued = queue.Janitor();
  ASSERT_TRUE(requeued.ok());
  ASSERT_EQ(requeued->size(), 1u);
  EXPECT_EQ(requeued->front().task, (TaskRange{0, 9}));
  EXPECT_TRUE(wait_for([&] { return c.tasks.load() >= 3; })) << "tasks " << c.tasks.load();
  stop.store(true);
  run.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
  EXPECT_EQ(c.leases_lost.load(), 1u);
  EXPECT_EQ(c.failed.load(), 0u);
  ExpectComplete(pool_.get(), 0, 29);
  auto conn = pool_->Acquire();
  auto token = conn->Query("SELECT fence_token FROM indexed_ranges WHERE from_block = 0");
  ASSERT_TRUE(token.ok() && token->rows() == 1);
  EXPECT_GT(*token->GetInt64(0, 0), 1000);
}

// Stopping a prefetching worker mid-write ends both of its stages: Run returns once the write in
// flight has ended (a write is never cut short), the task fetched ahead is left to its lease
// expiry. Nothing is lost: after the janitor, another worker does the rest, every block once.
TEST_F(FleetTest, AStoppedPrefetchingWorkerEndsBothStagesAndLosesNothing) {
  SlowPostgres slow = SlowPostgresFor(db_.url());
  ASSERT_NE(slow.pool, nullptr);
  Queue queue(redis_.conn(), keys());
  std::vector<TaskRange> tasks;
  for (int64_t from = 0; from < 50; from += 10) tasks.push_back(TaskRange{from, from + 9});
  ASSERT_TRUE(queue.Push(tasks).ok());
  Worker worker(PrefetchingWorker("w"), RpcBlockSources(ClientsFor(kAnvilUrl)), redis_.url(),
                keys(), slow.pool.get());
  std::atomic<bool> stop{false};
  Status result;
  std::atomic<bool> returned{false};
  std::thread run([&] {
    result = worker.Run(stop);
    returned.store(true);
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (worker.counters().tasks.load() < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(worker.counters().tasks.load(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the next write under way
  auto stopped = std::chrono::steady_clock::now();
  stop.store(true);
  while (!returned.load() &&
         std::chrono::steady_clock::now() < stopped + std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(returned.load()) << "Run did not return after stop";
  run.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
  const uint64_t first = worker.counters().tasks.load();
  EXPECT_LT(first, tasks.size());
  auto depths = queue.Depths();
  ASSERT_TRUE(depths.ok());
  EXPECT_LE(depths->processing, 2) << "more than the task written and the one fetched ahead";

  std::this_thread::sleep_for(std::chrono::milliseconds(1'300));  // their leases expire
  auto requeued = queue.Janitor();
  ASSERT_TRUE(requeued.ok());
  WorkerOptions rest = FastWorker("w2");
  rest.done = QueueDrained();
  Worker second(rest, RpcBlockSources(ClientsFor(kAnvilUrl)), redis_.url(), keys(), pool_.get());
  std::atomic<bool> no_stop{false};
  Status st = second.Run(no_stop);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(first + second.counters().tasks.load(), tasks.size());
  ExpectComplete(pool_.get(), 0, 49);
}

}  // namespace
}  // namespace gapless::fleet_testing
