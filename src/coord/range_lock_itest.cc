// Range locks and completion markers against the shared test redis-server: one holder at a time
// however many race, only the owner extends or releases, a dead holder's lock expires, and both
// keys carry a TTL.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "coord/range_lock.h"
#include "testing/redis_test_db.h"

namespace gapless {
namespace {

TEST(RangeLocksItest, OneHolderAtATimeOnlyTheOwnerExtendsOrReleases) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  RangeLocks locks(db.conn(), db.keys());
  const TaskRange range{100, 149};
  auto a = locks.Acquire(range, "worker-a", 10'000);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(*a);
  EXPECT_FALSE(*locks.Acquire(range, "worker-b", 10'000));
  EXPECT_TRUE(*locks.Acquire(range, "worker-a", 10'000)) << "the owner may take it again";
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
  EXPECT_TRUE(*locks.Acquire(range, "worker-b", 10'000));
  // Another range is another lock.
  EXPECT_TRUE(*locks.Acquire(TaskRange{150, 199}, "worker-a", 10'000));
}

TEST(RangeLocksItest, ADeadHoldersLockExpiresAndItsExtendFails) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  RangeLocks locks(db.conn(), db.keys());
  const TaskRange range{0, 9};
  ASSERT_TRUE(*locks.Acquire(range, "dead", 100));
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_TRUE(*locks.Acquire(range, "alive", 10'000));
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
      if (*got) winners.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1);
}

TEST(RangeLocksItest, TheCompletionMarkerCarriesItsTtl) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  RangeLocks locks(db.conn(), db.keys());
  const TaskRange range{1000, 1049};
  EXPECT_FALSE(*locks.IsCompleted(range));
  ASSERT_TRUE(locks.MarkCompleted(range).ok());
  EXPECT_TRUE(*locks.IsCompleted(range));
  auto ttl = db.conn()->Command({"PTTL", db.keys().range_done(range.id())});
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(ttl->integer, kRangeDoneTtlMs - 60'000);
  EXPECT_LE(ttl->integer, kRangeDoneTtlMs);
  ASSERT_TRUE(locks.MarkCompleted(TaskRange{1050, 1099}, 100).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_FALSE(*locks.IsCompleted(TaskRange{1050, 1099}));
}

}  // namespace
}  // namespace gapless
