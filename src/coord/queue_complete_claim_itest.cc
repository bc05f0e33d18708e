// Queue::CompleteAndClaim against the real test redis-server: one round trip per task, which
// completes the lease it holds (or is refused, as Complete would be) and still claims the next.
#include <chrono>
#include <thread>

#include "coord/queue_itest.h"

namespace gapless {
namespace {

TEST_F(QueueItest, CompleteAndClaimCompletesThenClaimsTheNext) {
  ASSERT_TRUE(q().Push({kA, kB, kC}).ok());
  Lease a = MustClaim("w1");
  auto now = conn().Command({"TIME"});
  ASSERT_TRUE(now.ok());
  int64_t now_ms = std::stoll(now->elements[0].str) * 1000;

  auto r = q().CompleteAndClaim(kA, "w1", a.token, 30'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->completed.ok()) << r->completed.ToString();
  ASSERT_TRUE(r->next.has_value());
  EXPECT_EQ(r->next->task, kB);
  EXPECT_GT(r->next->token, a.token);
  EXPECT_GE(r->next->expires_ms, now_ms + 29'000);
  EXPECT_LE(r->next->expires_ms, now_ms + 32'000);
  // A is done exactly as Complete leaves it: recorded for the frontier, no lease, not queued.
  EXPECT_EQ(CompletedScore(kA), "100");
  EXPECT_FALSE(HExists(keys().leases(), kA.id()));
  EXPECT_EQ(Processing(), (V{"150-199"}));
  EXPECT_EQ(Pending(), (V{"200-249"}));
  EXPECT_EQ(*q().Push({kA}), 0);
  EXPECT_NE(HGet(keys().leases(), kB.id()).find("\"worker\":\"w1\""), std::string::npos);
  // The new lease is an ordinary one: renewable and completable by its owner only.
  EXPECT_TRUE(q().Renew(kB, "w1", r->next->token, 60'000).ok());
  EXPECT_EQ(q().Complete(kB, "w2", r->next->token).code(), Code::kAborted);

  // Re-sending the same call (what a retry after a lost answer would do) is refused for A, whose
  // lease is gone, and still claims.
  auto again = q().CompleteAndClaim(kA, "w1", a.token, 30'000);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->completed.code(), Code::kAborted);
  EXPECT_NE(again->completed.message().find("no lease"), std::string::npos)
      << again->completed.ToString();
  ASSERT_TRUE(again->next.has_value());
  EXPECT_EQ(again->next->task, kC);
}

TEST_F(QueueItest, CompleteAndClaimRefusedForANonOwnerStillClaims) {
  ASSERT_TRUE(q().Push({kA, kB}).ok());
  Lease a = MustClaim("w1");
  auto r = q().CompleteAndClaim(kA, "w2", a.token, 60'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->completed.code(), Code::kAborted);
  EXPECT_NE(r->completed.message().find("w1"), std::string::npos) << r->completed.ToString();
  ASSERT_TRUE(r->next.has_value());
  EXPECT_EQ(r->next->task, kB);
  // A is untouched: still w1's, not recorded as completed.
  EXPECT_EQ(Processing(), (V{"100-149", "150-199"}));
  EXPECT_EQ(CompletedScore(kA), "");
  EXPECT_TRUE(q().Complete(kA, "w1", a.token).ok());
  EXPECT_TRUE(q().Complete(kB, "w2", r->next->token).ok());
}

TEST_F(QueueItest, CompleteAndClaimRefusedAfterTheLeaseWasRequeuedStillClaims) {
  ASSERT_TRUE(q().Push({kA, kB}).ok());
  Lease stale = MustClaim("w1", 50);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  ASSERT_EQ(Tasks(*q().Janitor()), (std::vector<TaskRange>{kA}));
  Lease fresh = MustClaim("w2");  // A again, with a higher token
  ASSERT_EQ(fresh.task, kA);

  auto r = q().CompleteAndClaim(kA, "w1", stale.token, 60'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->completed.code(), Code::kAborted);
  EXPECT_NE(r->completed.message().find("w2"), std::string::npos) << r->completed.ToString();
  ASSERT_TRUE(r->next.has_value());
  EXPECT_EQ(r->next->task, kB);
  EXPECT_GT(r->next->token, fresh.token);
  EXPECT_EQ(CompletedScore(kA), "");  // the stale completion did not count
  EXPECT_TRUE(q().Complete(kA, "w2", fresh.token).ok());
  EXPECT_EQ(CompletedScore(kA), "100");
}

TEST_F(QueueItest, CompleteAndClaimOnAnEmptyQueueStillCompletes) {
  ASSERT_TRUE(q().Push({kA}).ok());
  Lease a = MustClaim("w1");
  auto r = q().CompleteAndClaim(kA, "w1", a.token, 60'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->completed.ok()) << r->completed.ToString();
  EXPECT_FALSE(r->next.has_value());
  EXPECT_EQ(CompletedScore(kA), "100");
  auto depths = q().Depths();
  ASSERT_TRUE(depths.ok());
  EXPECT_EQ(depths->pending, 0);
  EXPECT_EQ(depths->processing, 0);
  EXPECT_FALSE(HExists(keys().leases(), kA.id()));
}

TEST_F(QueueItest, CompleteAndClaimTokensStrictlyIncrease) {
  ASSERT_TRUE(q().Push(SplitRange(0, 599, 50)).ok());  // 12 tasks
  Lease mine = MustClaim("w1");
  int64_t last = mine.token;
  std::vector<int64_t> completed_from;
  for (int i = 0; i < 5; ++i) {
    // Another worker's plain Claim in between draws from the same counter.
    Lease other = MustClaim("w2");
    EXPECT_GT(other.token, last);
    last = other.token;
    auto r = q().CompleteAndClaim(mine.task, "w1", mine.token, 60'000);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->completed.ok()) << r->completed.ToString();
    ASSERT_TRUE(r->next.has_value());
    EXPECT_GT(r->next->token, last);
    last = r->next->token;
    completed_from.push_back(mine.task.from);
    mine = *r->next;
  }
  for (int64_t from : completed_from) {
    EXPECT_EQ(CompletedScore({from, from + 49}), std::to_string(from));
  }
}

TEST_F(QueueItest, CompleteAndClaimRejectsBadArgumentsBeforeWriting) {
  ASSERT_TRUE(q().Push({kA, kB}).ok());
  Lease a = MustClaim("w1");
  EXPECT_EQ(q().CompleteAndClaim(kA, "w1", a.token, 0).status().code(), Code::kInternal);
  EXPECT_EQ(q().CompleteAndClaim(kA, "", a.token, 1000).status().code(), Code::kInternal);
  ASSERT_TRUE(conn().Command({"HSET", keys().leases(), kA.id(), "not json"}).ok());
  EXPECT_EQ(q().CompleteAndClaim(kA, "w1", a.token, 1000).status().code(), Code::kInternal);
  // Neither the completion nor the claim happened.
  EXPECT_EQ(CompletedScore(kA), "");
  EXPECT_EQ(Processing(), (V{"100-149"}));
  EXPECT_EQ(Pending(), (V{"150-199"}));
}

}  // namespace
}  // namespace gapless
