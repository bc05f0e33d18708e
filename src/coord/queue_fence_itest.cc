// The queue's fencing tokens against real redis-servers: the counter's floor, and grants refused
// on a data set the counter was not floored on (a failover to a lagging replica, a deleted
// counter, a restart), unless the server hides INFO.
#include "coord/queue_itest.h"
#include "coord/range_lock.h"
#include "testing/redis_server.h"

namespace gapless {
namespace {

TEST_F(QueueItest, FenceCounterFloorNeverLowers) {
  EXPECT_EQ(q().FloorFenceCounter(41)->counter, 41);
  EXPECT_EQ(q().FloorFenceCounter(10)->counter, 41);
  ASSERT_TRUE(q().Push({kA}).ok());
  EXPECT_EQ(MustClaim("w1").token, 42);
}

TEST_F(QueueItest, FenceCounterIsReadAsANumberOrMissing) {
  auto missing = q().FenceCounter();
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  ASSERT_TRUE(q().FloorFenceCounter(41).ok());
  EXPECT_EQ(q().FenceCounter().value(), std::optional<int64_t>(41));
  ASSERT_TRUE(conn().Command({"SET", keys().fence_counter(), "4x"}).ok());
  auto corrupt = q().FenceCounter();
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find("4x"), std::string::npos);
}

TEST_F(QueueItest, AfterLosingRedisDataTheFenceRestartsUnlessFloored) {
  ASSERT_TRUE(q().Push({kA, kB}).ok());
  Lease a = MustClaim("w1");
  Lease b = MustClaim("w1");
  ASSERT_GT(b.token, a.token);
  // Lose every key of this chain (what FLUSHALL or a restart without persistence does to it;
  // FLUSHALL itself would disturb the other tests sharing the server).
  ASSERT_TRUE(db().DeleteKeys().ok());
  ASSERT_TRUE(q().Push({kA}).ok());
  Lease again = MustClaim("w2");
  EXPECT_EQ(again.token, 1);  // restarted: PostgreSQL holds b.token for this range already
  EXPECT_LE(again.token, b.token);
  // Reconciliation floors the counter from PostgreSQL's highest recorded token (the lead's side);
  // then new grants are above every earlier one again.
  ASSERT_TRUE(q().FloorFenceCounter(b.token).ok());
  ASSERT_TRUE(q().Push({kB}).ok());
  EXPECT_GT(MustClaim("w2").token, b.token);
}

// A failover to a replica that lagged brings the fence counter as it was some grants ago, with
// the record of the data set it was floored on (replicated with it): a grant there must be
// refused, before any write, until the counter is floored again on this server. Here the record
// names another server's replication id, as the promoted replica's would.
TEST_F(QueueItest, AGrantOnAnotherDataSetIsRefusedUntilTheCounterIsFlooredThere) {
  ASSERT_TRUE(q().Push({kA, kB}).ok());
  Lease first = MustClaim("w1");  // a fresh data set grants, and records itself
  ASSERT_TRUE(
      conn().Command({"SET", keys().fence_dataset(), "another-servers-replication-id"}).ok());
  auto refused = q().Claim("w1", 60'000);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(IsFenceDataSetRefusal(refused.status())) << refused.status().ToString();
  EXPECT_EQ(Pending(), (V{kB.id()})) << "the refused claim moved a task";
  EXPECT_EQ(q().FenceCounter().value(), std::optional<int64_t>(first.token));
  // So is the claim that completes the previous task: neither happens.
  auto both = q().CompleteAndClaim(first.task, "w1", first.token, 60'000);
  ASSERT_FALSE(both.ok());
  EXPECT_TRUE(IsFenceDataSetRefusal(both.status())) << both.status().ToString();
  EXPECT_EQ(Pending(), (V{kB.id()}));
  // And the Kafka source's range lock.
  RangeLocks locks(&conn(), keys());
  auto lock = locks.Acquire(kB, "w1", 60'000);
  ASSERT_FALSE(lock.ok());
  EXPECT_TRUE(IsFenceDataSetRefusal(lock.status())) << lock.status().ToString();
  EXPECT_FALSE(locks.Holder(kB)->has_value()) << "the refused acquire took the lock";

  // Another process restores it on this data set (node/reconcile.h); then grants go on, above.
  auto skipped = q().FloorFenceCounter(first.token + 100, /*only_on_new_data_set=*/true);
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  EXPECT_TRUE(skipped->floored);
  EXPECT_TRUE(q().FenceFlooredOnThisDataSet().value());
  EXPECT_EQ(MustClaim("w1").token, first.token + 101);
  // A second restore for the same failover finds it done and leaves it.
  auto again = q().FloorFenceCounter(first.token + 500, /*only_on_new_data_set=*/true);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->floored);
  EXPECT_EQ(again->counter, first.token + 101);
}

// The counter gone while its record stayed (a deleted key): a grant would start again at 1, so it
// is refused like another data set's; a data set with neither (a fresh one) grants.
TEST_F(QueueItest, AGrantFromADeletedCounterIsRefused) {
  ASSERT_TRUE(q().Push({kA, kB}).ok());
  MustClaim("w1");
  EXPECT_TRUE(q().FenceFlooredOnThisDataSet().value());
  ASSERT_TRUE(conn().Command({"DEL", keys().fence_counter()}).ok());
  EXPECT_FALSE(q().FenceFlooredOnThisDataSet().value());
  auto refused = q().Claim("w1", 60'000);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(IsFenceDataSetRefusal(refused.status())) << refused.status().ToString();
  ASSERT_TRUE(conn().Command({"DEL", keys().fence_dataset()}).ok());
  EXPECT_EQ(MustClaim("w1").token, 1);
}

// Where INFO is refused (an ACL, a proxy that hides it) no data set can be told apart: grants are
// never refused for it (what was checked before the record existed). A server of its own: the
// ACL change would reach the other tests.
TEST(QueueDataSetItest, WithoutInfoNothingIsRefused) {
  auto server = RedisServer::Start();
  if (!server.ok()) GTEST_SKIP() << server.status().ToString();
  auto c = RedisConn::Connect((*server)->url());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Keys keys(7);
  Queue queue(c->get(), keys);
  ASSERT_TRUE(queue.Push({{0, 9}, {10, 19}}).ok());
  ASSERT_TRUE(queue.Claim("w", 60'000).ok());
  ASSERT_TRUE((*c)->Command({"SET", keys.fence_dataset(), "another"}).ok());
  ASSERT_TRUE((*c)->Command({"ACL", "SETUSER", "default", "-info"}).ok());
  auto claim = queue.Claim("w", 60'000);
  ASSERT_TRUE(claim.ok()) << claim.status().ToString();
  EXPECT_EQ((*claim)->token, 2);
  EXPECT_FALSE(queue.FenceFlooredOnThisDataSet().value());
}

}  // namespace
}  // namespace gapless
