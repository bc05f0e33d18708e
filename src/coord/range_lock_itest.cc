// Range locks against the shared test redis-server: one holder at a time however many race, only
// the owner extends or releases, a dead holder's lock expires, and the key carries a TTL.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "coord/range_lock.h"
#include "coord/registry.h"
#include "testing/redis_test_db.h"

namespace gapless {
namespace {

TEST(RangeLocksItest, OneHolderAtATimeOnlyTheOwnerExtendsOrReleases) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  RangeLocks locks(db.conn(), db.keys());
  const TaskRange range{100, 149};
  auto a = locks.Acquire(range, "worker-a", 10'000);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(a->has_value());
  EXPECT_FALSE(locks.Acquire(range, "worker-b", 10'000)->has_value());
  auto again = locks.Acquire(range, "worker-a", 10'000);
  ASSERT_TRUE(again->has_value()) << "the owner may take it again";
  EXPECT_GT(**again, **a) << "every holding gets a fresh, higher fencing token";
  EXPECT_FALSE(*locks.Extend(range, "worker-b", 10'000));
  EXPECT_FALSE(*locks.Release(range, "worker-b"));
  EXPECT_EQ(locks.Holder(range)->value_or(""), "worker-a");
  EXPECT_TRUE(*locks.Extend(range, "worker-a", 10'000));
  auto ttl = db.conn()->Command({"PTTL", db.keys().range_lock(range.id())});
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(ttl->integer, 0);
  EXPECT_LE(ttl->integer, 10'000);
  EXPECT_TRUE(*locks.Release(range, "worker-a"));
  EXPECT_FALSE(locks.Holder(range)->has_value());
  auto b = locks.Acquire(range, "worker-b", 10'000);
  ASSERT_TRUE(b->has_value());
  EXPECT_GT(**b, **again);
  // Another range is another lock.
  EXPECT_TRUE(locks.Acquire(TaskRange{150, 199}, "worker-a", 10'000)->has_value());
}

TEST(RangeLocksItest, ADeadHoldersLockExpiresAndItsExtendFails) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  RangeLocks locks(db.conn(), db.keys());
  const TaskRange range{0, 9};
  ASSERT_TRUE(locks.Acquire(range, "dead", 100)->has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_TRUE(locks.Acquire(range, "alive", 10'000)->has_value());
  EXPECT_FALSE(*locks.Extend(range, "dead", 10'000)) << "a holder that lost the lock must know";
  EXPECT_EQ(locks.Holder(range)->value_or(""), "alive");
}

TEST(RangeLocksItest, ConcurrentWorkersNeverHoldOneRangeTogether) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  const TaskRange range{500, 549};
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto conn = db.Connect();
      ASSERT_TRUE(conn.ok());
      RangeLocks locks(conn->get(), db.keys());
      auto got = locks.Acquire(range, "worker-" + std::to_string(i), 10'000);
      ASSERT_TRUE(got.ok());
      if (got->has_value()) winners.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1);
}

// The reclaimer frees exactly the locks whose holder stopped beating, long before their TTL, and
// never a live holder's.
TEST(RangeLocksItest, TheReclaimerFreesOnlyLocksOfHoldersWithoutAHeartbeat) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  RangeLocks locks(db.conn(), db.keys());
  Registry registry(db.conn(), &db.keys());
  WorkerInfo alive;
  alive.worker = "host:1:0";
  ASSERT_TRUE(registry.Beat(alive, 60'000).ok());
  ASSERT_TRUE(locks.Acquire(TaskRange{0, 49}, "host:1:0", 600'000)->has_value());
  ASSERT_TRUE(locks.Acquire(TaskRange{50, 99}, "host:2:0", 600'000)->has_value());  // never beat
  WorkerInfo dying;
  dying.worker = "host:3:0";
  ASSERT_TRUE(registry.Beat(dying, 100).ok());
  ASSERT_TRUE(locks.Acquire(TaskRange{100, 149}, "host:3:0", 600'000)->has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // host:3's heartbeat expires

  auto freed = locks.ReclaimOrphans();
  ASSERT_TRUE(freed.ok()) << freed.status().ToString();
  std::sort(freed->begin(), freed->end(),
            [](const auto& a, const auto& b) { return a.first.from < b.first.from; });
  ASSERT_EQ(freed->size(), 2u);
  EXPECT_EQ((*freed)[0].first, (TaskRange{50, 99}));
  EXPECT_EQ((*freed)[0].second, "host:2:0");
  EXPECT_EQ((*freed)[1].first, (TaskRange{100, 149}));
  EXPECT_EQ((*freed)[1].second, "host:3:0");
  EXPECT_EQ(locks.Holder(TaskRange{0, 49})->value_or(""), "host:1:0");
  EXPECT_FALSE(locks.Holder(TaskRange{50, 99})->has_value());
  EXPECT_TRUE(locks.Acquire(TaskRange{100, 149}, "host:1:0", 10'000)->has_value());
  EXPECT_TRUE(locks.ReclaimOrphans()->empty());
}

}  // namespace
}  // namespace gapless
