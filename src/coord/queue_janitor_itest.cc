// The queue's janitor against the real test redis-server: expired leases requeued at the head,
// never a live one, bounded work per call, and a poison range dead-lettered after max_expiries
// lease expiries.
#include <chrono>
#include <thread>

#include "coord/queue_itest.h"

namespace gapless {
namespace {

TEST_F(QueueItest, JanitorRequeuesExpiredLeasesAndNeverALiveOne) {
  ASSERT_TRUE(q().Push({kA, kB, kC}).ok());
  Lease a = MustClaim("dead", 50);
  Lease b = MustClaim("alive", 60'000);
  Lease c = MustClaim("dead", 50);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  auto requeued = q().Janitor();
  ASSERT_TRUE(requeued.ok()) << requeued.status().ToString();
  EXPECT_EQ(Tasks(*requeued), (std::vector<TaskRange>{kA, kC}));
  for (const ExpiredTask& e : *requeued) {
    EXPECT_EQ(e.outcome, FailOutcome::kRequeued) << e.task.id();
    EXPECT_EQ(e.expiries, 1) << e.task.id();
    EXPECT_EQ(e.worker, "dead") << e.task.id();
  }
  // Expired work goes to the head of pending; the live lease stays.
  EXPECT_EQ(Pending(), (V{"200-249", "100-149"}));
  EXPECT_EQ(Processing(), (V{"150-199"}));
  EXPECT_TRUE(q().Renew(kB, "alive", b.token, 60'000).ok());
  // Running it again finds nothing.
  requeued = q().Janitor();
  ASSERT_TRUE(requeued.ok());
  EXPECT_TRUE(requeued->empty());
  EXPECT_TRUE(q().Complete(kB, "alive", b.token).ok());
  (void)a;
  (void)c;
}

TEST_F(QueueItest, JanitorRequeuesAProcessingTaskWithoutALease) {
  // A task in processing with no lease (state written by an older version, or by hand) is orphaned.
  ASSERT_TRUE(conn().Command({"RPUSH", keys().processing(), "100-149"}).ok());
  auto requeued = q().Janitor();
  ASSERT_TRUE(requeued.ok());
  EXPECT_EQ(Tasks(*requeued), (std::vector<TaskRange>{kA}));
  EXPECT_EQ((*requeued)[0].worker, "");  // no holder known
  EXPECT_EQ((*requeued)[0].expiries, 1);
  EXPECT_EQ(Pending(), (V{"100-149"}));
}

TEST_F(QueueItest, JanitorWorkIsBoundedAndWalksTheWholeList) {
  std::vector<TaskRange> tasks = SplitRange(0, 999, 100);  // 10 tasks
  ASSERT_TRUE(q().Push(tasks).ok());
  for (int i = 0; i < 9; ++i) MustClaim("alive", 60'000);
  Lease last = MustClaim("dead", 50);  // at the tail of processing
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  auto first = q().Janitor(4);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->empty());  // looked at 4 live ones only
  auto second = q().Janitor(4);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->empty());
  auto third = q().Janitor(4);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(Tasks(*third), (std::vector<TaskRange>{last.task}));
  EXPECT_EQ(Processing().size(), 9u);
}

// --- Janitor: a poison range goes to the DLQ after max_expiries lease expiries ----------------

TEST_F(QueueItest, JanitorDeadLettersATaskWhoseLeaseExpiredMaxTimes) {
  ASSERT_TRUE(q().Push({kA, kB}).ok());
  // A failure recorded on the way: the attempts count leaves with the task too.
  Lease f = MustClaim("w0");
  ASSERT_EQ(q().Fail(kA, "w0", f.token, "rpc timeout", 5)->outcome, FailOutcome::kRequeued);
  ASSERT_EQ(Pending(), (V{"150-199", "100-149"}));
  MustClaim("alive", 60'000);  // B, kept live throughout

  for (int i = 1; i <= 3; ++i) {
    const std::string worker = "crash-" + std::to_string(i);
    TaskRange claimed;
    std::vector<ExpiredTask> expired = ClaimAndExpire(worker, 3, &claimed);
    ASSERT_EQ(claimed, kA);  // an expired task goes back to the head: the next claim takes it
    ASSERT_EQ(expired.size(), 1u) << "round " << i;
    EXPECT_EQ(expired[0].task, kA);
    EXPECT_EQ(expired[0].expiries, i);
    EXPECT_EQ(expired[0].worker, worker);
    if (i < 3) {
      EXPECT_EQ(expired[0].outcome, FailOutcome::kRequeued);
      EXPECT_EQ(HGet(keys().expiries(), kA.id()), std::to_string(i));
      EXPECT_EQ(Pending(), (V{"100-149"}));
    } else {
      EXPECT_EQ(expired[0].outcome, FailOutcome::kDeadLettered);
    }
  }
  auto dlq = q().DlqList();
  ASSERT_TRUE(dlq.ok()) << dlq.status().ToString();
  ASSERT_EQ(dlq->size(), 1u);
  EXPECT_EQ((*dlq)[0].task, kA);
  EXPECT_EQ((*dlq)[0].error,
            "lease expired 3 times without completing (the workers holding it died or stalled)");
  EXPECT_EQ((*dlq)[0].attempts, 3);
  EXPECT_EQ((*dlq)[0].worker, "crash-3");
  EXPECT_GT((*dlq)[0].failed_at_ms, 0);
  // Out of the queue entirely, counts dropped; the seeder does not bring it back.
  EXPECT_TRUE(Pending().empty());
  EXPECT_EQ(Processing(), (V{"150-199"}));
  EXPECT_FALSE(HExists(keys().expiries(), kA.id()));
  EXPECT_FALSE(HExists(keys().attempts(), kA.id()));
  EXPECT_FALSE(HExists(keys().leases(), kA.id()));
  EXPECT_EQ(*q().Push({kA}), 0);
}

TEST_F(QueueItest, JanitorUsesTheDefaultOfTenExpiries) {
  ASSERT_TRUE(q().Push({kA}).ok());
  ASSERT_TRUE(conn().Command({"HSET", keys().expiries(), kA.id(), "8"}).ok());
  MustClaim("w1", 50);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  auto ninth = q().Janitor();
  ASSERT_TRUE(ninth.ok()) << ninth.status().ToString();
  ASSERT_EQ(ninth->size(), 1u);
  EXPECT_EQ((*ninth)[0].outcome, FailOutcome::kRequeued);
  EXPECT_EQ((*ninth)[0].expiries, 9);
  MustClaim("w1", 50);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  auto tenth = q().Janitor();
  ASSERT_TRUE(tenth.ok()) << tenth.status().ToString();
  ASSERT_EQ(tenth->size(), 1u);
  EXPECT_EQ((*tenth)[0].outcome, FailOutcome::kDeadLettered);
  EXPECT_EQ((*tenth)[0].expiries, kDefaultMaxLeaseExpiries);
  EXPECT_EQ((*q().DlqList())[0].error,
            "lease expired 10 times without completing (the workers holding it died or stalled)");
}

TEST_F(QueueItest, CompletingATaskClearsItsExpiryCount) {
  ASSERT_TRUE(q().Push({kA, kB, kC}).ok());
  ASSERT_EQ(ClaimAndExpire("crash", 10).size(), 1u);  // A, once
  Lease a = MustClaim("w1");
  ASSERT_EQ(a.task, kA);
  EXPECT_EQ(HGet(keys().expiries(), kA.id()), "1");
  ASSERT_TRUE(q().Complete(kA, "w1", a.token).ok());
  EXPECT_FALSE(HExists(keys().expiries(), kA.id()));

  ASSERT_EQ(ClaimAndExpire("crash", 10).size(), 1u);  // B, once
  Lease b = MustClaim("w1");
  ASSERT_EQ(b.task, kB);
  auto r = q().CompleteAndClaim(kB, "w1", b.token, 60'000);
  ASSERT_TRUE(r.ok() && r->completed.ok());
  EXPECT_FALSE(HExists(keys().expiries(), kB.id()));
}

TEST_F(QueueItest, DlqRetryResetsTheExpiryCount) {
  ASSERT_TRUE(q().Push({kA}).ok());
  std::vector<ExpiredTask> first = ClaimAndExpire("crash", 2);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].outcome, FailOutcome::kRequeued);
  std::vector<ExpiredTask> second = ClaimAndExpire("crash", 2);
  ASSERT_EQ(second.size(), 1u);
  ASSERT_EQ(second[0].outcome, FailOutcome::kDeadLettered);
  ASSERT_TRUE(*q().DlqRetry(kA));
  // A fresh count: the next expiry is the first again, not the third.
  std::vector<ExpiredTask> expired = ClaimAndExpire("crash", 2);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].outcome, FailOutcome::kRequeued);
  EXPECT_EQ(expired[0].expiries, 1);

  // Dead-lettered by Fail instead: the expiry count leaves with it too, so DlqRetryAll also
  // starts from zero.
  Lease a = MustClaim("w1");
  ASSERT_EQ(q().Fail(kA, "w1", a.token, "boom", 1)->outcome, FailOutcome::kDeadLettered);
  EXPECT_FALSE(HExists(keys().expiries(), kA.id()));
  ASSERT_TRUE(conn().Command({"HSET", keys().expiries(), kA.id(), "1"}).ok());  // left over
  ASSERT_EQ(*q().DlqRetryAll(), 1);
  EXPECT_FALSE(HExists(keys().expiries(), kA.id()));
}

TEST_F(QueueItest, JanitorNeverCountsOrDeadLettersALiveLease) {
  ASSERT_TRUE(q().Push({kA, kB}).ok());
  Lease live = MustClaim("alive", 60'000);
  MustClaim("dead", 50);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  for (int i = 0; i < 3; ++i) {
    // max_expiries 1: the first expiry dead-letters; a live lease is never even counted.
    auto expired = q().Janitor(100, 1);
    ASSERT_TRUE(expired.ok()) << expired.status().ToString();
    if (i == 0) {
      ASSERT_EQ(expired->size(), 1u);
      EXPECT_EQ((*expired)[0].task, kB);
      EXPECT_EQ((*expired)[0].outcome, FailOutcome::kDeadLettered);
    } else {
      EXPECT_TRUE(expired->empty());
    }
  }
  EXPECT_EQ(Processing(), (V{"100-149"}));
  EXPECT_FALSE(HExists(keys().expiries(), kA.id()));
  EXPECT_TRUE(q().Renew(kA, "alive", live.token, 60'000).ok());
  EXPECT_TRUE(q().Complete(kA, "alive", live.token).ok());
}

TEST_F(QueueItest, JanitorRejectsABadMaxExpiriesBeforeWriting) {
  ASSERT_TRUE(q().Push({kA}).ok());
  MustClaim("dead", 50);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_EQ(q().Janitor(100, 0).status().code(), Code::kInternal);
  EXPECT_EQ(Processing(), (V{"100-149"}));
}

}  // namespace
}  // namespace gapless
