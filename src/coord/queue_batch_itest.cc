// Batch claims (Queue::ClaimBatch, Queue::CompleteAndClaimBatch) against real redis-servers: each
// task of a batch is leased as if claimed alone, and the one data-set check per batch refuses
// the whole batch, before any write, on a server the counter was not floored on.
#include <string>
#include <vector>

#include "coord/queue.h"
#include "testing/redis_failover.h"
#include "testing/redis_server.h"
#include "testing/redis_test_db.h"

namespace gapless {
namespace {

using V = std::vector<std::string>;

std::vector<std::string> List(RedisConn& conn, const std::string& key) {
  auto r = conn.Command({"LRANGE", key, "0", "-1"});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> out;
  if (r.ok()) {
    for (auto& e : r->elements) out.push_back(e.str);
  }
  return out;
}

std::vector<std::string> Ids(const std::vector<Lease>& leases) {
  std::vector<std::string> out;
  for (const Lease& l : leases) out.push_back(l.task.id());
  return out;
}

int64_t HLen(RedisConn& conn, const std::string& key) {
  auto r = conn.Command({"HLEN", key});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->integer : -1;
}

class QueueBatchItest : public RedisTest {
 protected:
  void SetUp() override {
    RedisTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    queue_ = std::make_unique<Queue>(&conn(), keys());
  }
  Queue& q() { return *queue_; }
  std::vector<std::string> Pending() { return List(conn(), keys().pending()); }
  std::vector<std::string> Processing() { return List(conn(), keys().processing()); }

  std::unique_ptr<Queue> queue_;
};

TEST_F(QueueBatchItest, EachTaskOfABatchHasALeaseAndATokenOfItsOwn) {
  ASSERT_TRUE(q().Push(SplitRange(0, 49, 10)).ok());
  Lease first = **q().Claim("w0", 60'000);
  auto batch = q().ClaimBatch("w1", 60'000, 3);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(Ids(*batch), (V{"10-19", "20-29", "30-39"}));
  for (size_t i = 0; i < batch->size(); ++i) {
    EXPECT_EQ((*batch)[i].token, first.token + 1 + static_cast<int64_t>(i));
    EXPECT_EQ((*batch)[i].expires_ms, (*batch)[0].expires_ms);
  }
  EXPECT_EQ(Processing(), (V{"0-9", "10-19", "20-29", "30-39"}));
  EXPECT_EQ(Pending(), (V{"40-49"}));
  EXPECT_EQ(q().FenceCounter().value(), std::optional<int64_t>(first.token + 3));
  // Ordinary leases: each renewed, failed and completed on its own, by its owner only.
  const Lease& a = (*batch)[0];
  const Lease& b = (*batch)[1];
  const Lease& c = (*batch)[2];
  EXPECT_EQ(q().Renew(a.task, "w1", b.token, 60'000).status().code(), Code::kAborted)
      << "another lease's token of the same batch renewed it";
  EXPECT_TRUE(q().Renew(a.task, "w1", a.token, 60'000).ok());
  EXPECT_EQ(q().Complete(b.task, "w0", b.token).code(), Code::kAborted);
  EXPECT_TRUE(q().Complete(b.task, "w1", b.token).ok());
  auto failed = q().Fail(c.task, "w1", c.token, "boom", 5);
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  EXPECT_EQ(Pending(), (V{"40-49", "30-39"}));

  // A batch larger than pending takes what is there; then nothing.
  auto rest = q().ClaimBatch("w2", 60'000, 10);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_EQ(Ids(*rest), (V{"40-49", "30-39"}));
  auto none = q().ClaimBatch("w2", 60'000, 10);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
}

TEST_F(QueueBatchItest, CompleteAndClaimBatchCompletesEachOwnedTaskAndReportsEachRefusal) {
  ASSERT_TRUE(q().Push(SplitRange(0, 59, 10)).ok());
  auto held = q().ClaimBatch("w1", 60'000, 3);
  ASSERT_TRUE(held.ok() && held->size() == 3);
  std::vector<Lease> done = *held;
  done[1].token += 1000;  // not this lease's token: refused, the others complete
  auto r = q().CompleteAndClaimBatch(done, "w1", 60'000, 2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->completed.size(), 3u);
  EXPECT_TRUE(r->completed[0].ok()) << r->completed[0].ToString();
  EXPECT_EQ(r->completed[1].code(), Code::kAborted);
  EXPECT_NE(r->completed[1].message().find("10-19"), std::string::npos)
      << r->completed[1].ToString();
  EXPECT_TRUE(r->completed[2].ok()) << r->completed[2].ToString();
  EXPECT_EQ(Ids(r->next), (V{"30-39", "40-49"}));
  EXPECT_GT(r->next[0].token, (*held)[2].token);
  EXPECT_EQ(r->next[1].token, r->next[0].token + 1);
  EXPECT_EQ(Processing(), (V{"10-19", "30-39", "40-49"}));
  EXPECT_EQ(HLen(conn(), keys().leases()), 3);
  auto zcard = conn().Command({"ZCARD", keys().completed()});
  ASSERT_TRUE(zcard.ok());
  EXPECT_EQ(zcard->integer, 2);

  // The call that finds pending nearly empty takes what is left and still completes.
  auto last = q().CompleteAndClaimBatch(r->next, "w1", 60'000, 5);
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_TRUE(last->completed[0].ok() && last->completed[1].ok());
  EXPECT_EQ(Ids(last->next), (V{"50-59"}));
  auto empty = q().CompleteAndClaimBatch(last->next, "w1", 60'000, 5);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->completed[0].ok());
  EXPECT_TRUE(empty->next.empty());
  EXPECT_EQ(Processing(), (V{"10-19"}));
}

TEST_F(QueueBatchItest, BadBatchSizesAreRefusedBeforeAnyWrite) {
  ASSERT_TRUE(q().Push(SplitRange(0, 29, 10)).ok());
  Lease a = **q().Claim("w1", 60'000);
  for (int64_t n : {int64_t{0}, int64_t{-1}, kMaxClaimBatch + 1}) {
    EXPECT_EQ(q().ClaimBatch("w1", 60'000, n).status().code(), Code::kInternal) << n;
    EXPECT_EQ(q().CompleteAndClaimBatch({a}, "w1", 60'000, n).status().code(), Code::kInternal)
        << n;
  }
  EXPECT_EQ(q().CompleteAndClaimBatch({}, "w1", 60'000, 1).status().code(), Code::kInternal);
  // The scripts check too (what another client could send).
  const RedisScript& claim = LoadScript("queue_claim.lua");
  auto r = conn().Eval(claim,
                       {keys().pending(), keys().processing(), keys().leases(),
                        keys().fence_counter(), keys().fence_dataset()},
                       {"w1", "60000", "1001"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad count"), std::string::npos) << r.status().ToString();
  const RedisScript& both = LoadScript("queue_complete_claim.lua");
  r = conn().Eval(
      both,
      {keys().pending(), keys().processing(), keys().leases(), keys().queued(), keys().attempts(),
       keys().completed(), keys().expiries(), keys().fence_counter(), keys().fence_dataset()},
      {"w1", "60000", "1", a.task.id()});  // a task without its token
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pairs"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(Pending(), (V{"10-19", "20-29"}));
  EXPECT_EQ(Processing(), (V{"0-9"}));
}

// A TTL that passes as a number but cannot make a lease (inf, or so large that the expiry leaves
// the integers cjson and the reply keep exactly) is refused with the other arguments, before any
// write: otherwise the tasks moved and the tokens were taken before cjson refused the lease.
TEST_F(QueueBatchItest, AClaimWithATtlThatCannotMakeALeaseIsRefusedBeforeAnyWrite) {
  ASSERT_TRUE(q().Push(SplitRange(0, 29, 10)).ok());
  const RedisScript& claim = LoadScript("queue_claim.lua");
  for (const char* ttl : {"inf", "1e300", "1000000000001"}) {
    for (const char* count : {"1", "3"}) {
      auto r = conn().Eval(claim,
                           {keys().pending(), keys().processing(), keys().leases(),
                            keys().fence_counter(), keys().fence_dataset()},
                           {"w1", ttl, count});
      ASSERT_FALSE(r.ok()) << "ttl " << ttl << " count " << count << " claimed";
      EXPECT_NE(r.status().message().find("bad ttl"), std::string::npos) << r.status().ToString();
    }
  }
  EXPECT_EQ(Pending(), (V{"0-9", "10-19", "20-29"}));
  EXPECT_TRUE(Processing().empty());
  EXPECT_EQ(HLen(conn(), keys().leases()), 0);
  EXPECT_EQ(q().FenceCounter().value(), std::nullopt) << "a refused claim took tokens";
  auto longest = q().ClaimBatch("w1", 1'000'000'000'000, 2);  // the longest TTL still takes
  ASSERT_TRUE(longest.ok()) << longest.status().ToString();
  ASSERT_EQ(longest->size(), 2u);
  EXPECT_GT((*longest)[0].expires_ms, 1'000'000'000'000);
}

// A processing list of the wrong type (corrupt state) is an error that moves nothing: the batch
// must not take its tasks off pending before it knows it can put them in processing (LMOVE, the
// single-task path, checks both lists first; a batch's pop and push are two commands).
TEST_F(QueueBatchItest, ABatchIntoACorruptProcessingListLosesNoTask) {
  ASSERT_TRUE(q().Push(SplitRange(0, 29, 10)).ok());
  ASSERT_TRUE(conn().Command({"SET", keys().processing(), "not a list"}).ok());
  for (int64_t n : {int64_t{1}, int64_t{3}}) {
    EXPECT_FALSE(q().ClaimBatch("w1", 60'000, n).ok()) << n;
    EXPECT_EQ(Pending(), (V{"0-9", "10-19", "20-29"}))
        << "a failed claim of " << n << " lost tasks";
  }
  EXPECT_EQ(HLen(conn(), keys().leases()), 0);
  EXPECT_EQ(q().FenceCounter().value(), std::nullopt);
}

// The data-set check runs once per script, for every grant of the batch: on a data set the
// counter was not floored on, a batch is refused whole, before any write: no task moves, no
// token is taken, and a CompleteAndClaimBatch completes nothing either.
TEST_F(QueueBatchItest, ABatchOnAnotherDataSetIsRefusedWholeBeforeAnyWrite) {
  ASSERT_TRUE(q().Push(SplitRange(0, 49, 10)).ok());
  auto held = q().ClaimBatch("w1", 60'000, 2);  // a fresh data set grants and records itself
  ASSERT_TRUE(held.ok() && held->size() == 2);
  ASSERT_TRUE(
      conn().Command({"SET", keys().fence_dataset(), "another-servers-replication-id"}).ok());
  auto refused = q().ClaimBatch("w1", 60'000, 3);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(IsFenceDataSetRefusal(refused.status())) << refused.status().ToString();
  auto both = q().CompleteAndClaimBatch(*held, "w1", 60'000, 3);
  ASSERT_FALSE(both.ok());
  EXPECT_TRUE(IsFenceDataSetRefusal(both.status())) << both.status().ToString();
  EXPECT_EQ(Pending(), (V{"20-29", "30-39", "40-49"}));
  EXPECT_EQ(Processing(), (V{"0-9", "10-19"}));
  EXPECT_EQ(HLen(conn(), keys().leases()), 2);
  EXPECT_EQ(q().FenceCounter().value(), std::optional<int64_t>((*held)[1].token));
  auto zcard = conn().Command({"ZCARD", keys().completed()});
  ASSERT_TRUE(zcard.ok());
  EXPECT_EQ(zcard->integer, 0) << "a refused CompleteAndClaimBatch completed a task";

  // Floored on this data set: the batch goes on, above.
  ASSERT_TRUE(q().FloorFenceCounter((*held)[1].token + 100).ok());
  auto after = q().CompleteAndClaimBatch(*held, "w1", 60'000, 3);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_EQ(after->next.size(), 3u);
  EXPECT_EQ(after->next[0].token, (*held)[1].token + 101);
}

// The same on a real failover rather than a rewritten record: A grants (and records its
// replication id), B, its replica, is promoted with every write of A (nothing lagged): B's
// replication id differs, so B refuses a batch until the counter is floored there.
TEST(QueueBatchFailoverItest, APromotedReplicaRefusesABatchUntilFlooredThere) {
  auto a = RedisServer::Start({"--repl-diskless-sync-delay", "0"});
  auto b = RedisServer::Start({"--repl-diskless-sync-delay", "0"});
  if (!a.ok() || !b.ok()) GTEST_SKIP() << "no private redis-server";
  RedisOptions any;
  any.require_primary = false;
  auto admin_a = RedisConn::Connect((*a)->url(), any);
  auto admin_b = RedisConn::Connect((*b)->url(), any);
  ASSERT_TRUE(admin_a.ok() && admin_b.ok());
  ASSERT_TRUE((*admin_b)->Command({"REPLICAOF", "127.0.0.1", std::to_string((*a)->port())}).ok());
  ASSERT_TRUE(WaitForReplicaLink(**admin_b, 20'000).ok());

  const Keys keys(11);
  Queue on_a(admin_a->get(), keys);
  ASSERT_TRUE(on_a.Push(SplitRange(0, 99, 10)).ok());
  auto held = on_a.ClaimBatch("w", 60'000, 4);
  ASSERT_TRUE(held.ok() && held->size() == 4) << held.status().ToString();
  ASSERT_TRUE(ManualFailover(**admin_a, **admin_b, "127.0.0.1", (*b)->port()).ok());

  Queue on_b(admin_b->get(), keys);
  auto refused = on_b.CompleteAndClaimBatch(*held, "w", 60'000, 4);
  ASSERT_FALSE(refused.ok()) << "a promoted server granted a batch";
  EXPECT_TRUE(IsFenceDataSetRefusal(refused.status())) << refused.status().ToString();
  EXPECT_EQ(List(**admin_b, keys.pending()).size(), 6u);
  EXPECT_EQ(on_b.FenceCounter().value(), std::optional<int64_t>((*held)[3].token));
  ASSERT_TRUE(on_b.FloorFenceCounter((*held)[3].token + 10).ok());
  auto granted = on_b.CompleteAndClaimBatch(*held, "w", 60'000, 4);
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  ASSERT_EQ(granted->next.size(), 4u);
  EXPECT_EQ(granted->next[0].token, (*held)[3].token + 11);
}

}  // namespace
}  // namespace gapless
