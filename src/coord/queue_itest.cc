// The leased work queue against the real test redis-server: a task's life through Push, Claim,
// Renew, Complete and Fail, the dead-letter queue and the listing of live leases, each script's
// edge cases. The janitor, the fence counter and CompleteAndClaim have files of their own
// (queue_janitor_itest.cc, queue_fence_itest.cc, queue_complete_claim_itest.cc).
#include "coord/queue_itest.h"

#include <chrono>
#include <thread>

namespace gapless {
namespace {

TEST(TaskRangeTest, ParseAndSplit) {
  auto t = ParseTask("100-149");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, (TaskRange{100, 149}));
  for (const char* bad : {"", "100", "100-", "-5", "5-4", "a-b", "1-2-3", "1- 2"}) {
    EXPECT_EQ(ParseTask(bad).status().code(), Code::kInvalidData) << bad;
  }
  auto s = SplitRange(0, 104, 50);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2], (TaskRange{100, 104}));
  EXPECT_TRUE(SplitRange(5, 4, 10).empty());
}

TEST_F(QueueItest, ClaimOnEmptyQueueReturnsNothing) {
  auto l = q().Claim("w1", 1000);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_FALSE(l->has_value());
  EXPECT_TRUE(Processing().empty());
}

TEST_F(QueueItest, PushIsIdempotent) {
  auto n = q().Push({kA, kB});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2);
  n = q().Push({kA, kB, kC});  // pending ones are skipped
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(Pending(), (V{"100-149", "150-199", "200-249"}));

  Lease a = MustClaim("w1");  // processing: skipped
  EXPECT_EQ(*q().Push({kA}), 0);
  ASSERT_TRUE(q().Complete(a.task, "w1", a.token).ok());  // done: skipped
  EXPECT_EQ(*q().Push({kA}), 0);
  // Below the frontier (next block not known complete): skipped even when trimmed from the set.
  ASSERT_TRUE(conn().Command({"DEL", keys().completed()}).ok());
  ASSERT_TRUE(conn().Command({"SET", keys().frontier(), "150"}).ok());
  EXPECT_EQ(*q().Push({kA}), 0);
  ASSERT_TRUE(conn().Command({"SET", keys().frontier(), "149"}).ok());  // 149 not done yet
  EXPECT_EQ(*q().Push({kA}), 1);
}

TEST_F(QueueItest, PushRejectsMalformedTasksBeforeWriting) {
  auto r = conn().Eval(LoadScript("queue_push.lua"),
                       {keys().pending(), keys().queued(), keys().completed(), keys().frontier(),
                        keys().dlq(), keys().leader_epoch()},
                       {"0", "1-2", "9-3"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
  EXPECT_NE(r.status().message().find("9-3"), std::string::npos);
  EXPECT_TRUE(Pending().empty());  // "1-2" was not written either
}

// A deposed leader (paused past its lease while another was elected) cannot seed or run the
// janitor once its successor has acted: the scripts refuse an epoch below the highest seen,
// before writing anything.
TEST_F(QueueItest, LeaderOnlyScriptsRefuseADeposedLeadersEpoch) {
  ASSERT_EQ(*q().Push({kA}, /*leader_epoch=*/7), 1);  // the new leader (epoch 7) acted
  auto stale = q().Push({kB}, /*leader_epoch=*/6);
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(IsStaleLeaderEpoch(stale.status())) << stale.status().ToString();
  EXPECT_EQ(Pending(), std::vector<std::string>{kA.id()});  // kB was not pushed
  auto janitor = q().Janitor(100, kDefaultMaxLeaseExpiries, /*leader_epoch=*/6);
  ASSERT_FALSE(janitor.ok());
  EXPECT_TRUE(IsStaleLeaderEpoch(janitor.status()));
  // The current and later epochs act; epoch 0 (operator tools) is not fenced.
  EXPECT_TRUE(q().Janitor(100, kDefaultMaxLeaseExpiries, 7).ok());
  EXPECT_EQ(*q().Push({kB}, 8), 1);
  EXPECT_FALSE(q().Push({kC}, 7).ok());
  EXPECT_EQ(*q().Push({kC}, 0), 1);
  auto stored = conn().Command({"GET", keys().leader_epoch()});
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->str, "8");
}

TEST_F(QueueItest, ClaimMovesToProcessingWithIncreasingTokens) {
  ASSERT_TRUE(q().Push({kA, kB, kC}).ok());
  auto now = conn().Command({"TIME"});
  ASSERT_TRUE(now.ok());
  int64_t now_ms = std::stoll(now->elements[0].str) * 1000;
  Lease a = MustClaim("w1", 30'000);
  Lease b = MustClaim("w2", 30'000);
  Lease c = MustClaim("w1", 30'000);
  EXPECT_EQ(a.task, kA);  // FIFO
  EXPECT_EQ(b.task, kB);
  EXPECT_EQ(c.task, kC);
  EXPECT_LT(a.token, b.token);
  EXPECT_LT(b.token, c.token);
  EXPECT_GE(a.expires_ms, now_ms + 29'000);
  EXPECT_LE(a.expires_ms, now_ms + 32'000);
  EXPECT_TRUE(Pending().empty());
  EXPECT_EQ(Processing(), (V{"100-149", "150-199", "200-249"}));
  auto lease = conn().Command({"HGET", keys().leases(), "150-199"});
  ASSERT_TRUE(lease.ok());
  EXPECT_NE(lease->str.find("\"worker\":\"w2\""), std::string::npos) << lease->str;
}

TEST_F(QueueItest, ClaimRejectsBadArgumentsBeforeWriting) {
  ASSERT_TRUE(q().Push({kA}).ok());
  EXPECT_EQ(q().Claim("", 1000).status().code(), Code::kInternal);
  EXPECT_EQ(q().Claim("w1", 0).status().code(), Code::kInternal);
  EXPECT_EQ(Pending(), (V{"100-149"}));
  auto fence = conn().Command({"GET", keys().fence_counter()});
  ASSERT_TRUE(fence.ok());
  EXPECT_TRUE(fence->is_nil());
}

TEST_F(QueueItest, RenewOnlyByTheOwner) {
  ASSERT_TRUE(q().Push({kA}).ok());
  Lease a = MustClaim("w1", 1000);
  auto renewed = q().Renew(kA, "w1", a.token, 60'000);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_GT(*renewed, a.expires_ms + 50'000);
  EXPECT_EQ(q().Renew(kA, "w2", a.token, 60'000).status().code(), Code::kAborted);
  EXPECT_EQ(q().Renew(kA, "w1", a.token + 1, 60'000).status().code(), Code::kAborted);
  EXPECT_EQ(q().Renew(kB, "w1", a.token, 60'000).status().code(), Code::kAborted);  // no lease
}

TEST_F(QueueItest, CompleteOnlyByTheOwnerAndRecordsTheRange) {
  ASSERT_TRUE(q().Push({kA}).ok());
  Lease a = MustClaim("w1");
  Status st = q().Complete(kA, "w2", a.token);
  EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
  EXPECT_NE(st.message().find("w1"), std::string::npos) << st.ToString();
  EXPECT_EQ(q().Complete(kA, "w1", a.token - 1).code(), Code::kAborted);
  EXPECT_EQ(Processing(), (V{"100-149"}));  // the refusals changed nothing

  ASSERT_TRUE(q().Complete(kA, "w1", a.token).ok());
  EXPECT_TRUE(Processing().empty());
  auto score = conn().Command({"ZSCORE", keys().completed(), "100-149"});
  ASSERT_TRUE(score.ok());
  EXPECT_EQ(score->str, "100");
  auto lease = conn().Command({"HEXISTS", keys().leases(), "100-149"});
  EXPECT_EQ(lease->integer, 0);
  // Completing twice (e.g. a retry after a lost answer) is refused: the lease is gone.
  EXPECT_EQ(q().Complete(kA, "w1", a.token).code(), Code::kAborted);
}

TEST_F(QueueItest, AnOldTokenIsRefusedAfterTheTaskWasReclaimed) {
  ASSERT_TRUE(q().Push({kA}).ok());
  Lease first = MustClaim("w1", 50);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  auto requeued = q().Janitor();
  ASSERT_TRUE(requeued.ok()) << requeued.status().ToString();
  ASSERT_EQ(Tasks(*requeued), (std::vector<TaskRange>{kA}));
  // The same worker claims it again (a new token); its old token is stale.
  Lease second = MustClaim("w1");
  ASSERT_EQ(second.task, kA);
  EXPECT_GT(second.token, first.token);
  EXPECT_EQ(q().Renew(kA, "w1", first.token, 1000).status().code(), Code::kAborted);
  EXPECT_EQ(q().Complete(kA, "w1", first.token).code(), Code::kAborted);
  EXPECT_EQ(q().Fail(kA, "w1", first.token, "x", 3).status().code(), Code::kAborted);
  EXPECT_TRUE(q().Complete(kA, "w1", second.token).ok());
}

TEST_F(QueueItest, FailBelowMaxRequeuesAtTheBackAndAtMaxDeadLetters) {
  ASSERT_TRUE(q().Push({kA, kB}).ok());
  Lease a1 = MustClaim("w1");
  EXPECT_EQ(q().Fail(kA, "w2", a1.token, "nope", 2).status().code(), Code::kAborted);
  auto f = q().Fail(kA, "w1", a1.token, "rpc timeout", 2);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->outcome, FailOutcome::kRequeued);
  EXPECT_EQ(f->attempts, 1);
  EXPECT_EQ(Pending(), (V{"150-199", "100-149"}));  // back of the queue
  EXPECT_TRUE(Processing().empty());

  Lease b = MustClaim("w1");
  ASSERT_EQ(b.task, kB);
  Lease a2 = MustClaim("w3");
  ASSERT_EQ(a2.task, kA);
  f = q().Fail(kA, "w3", a2.token, "block 120: bad receipt root", 2);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->outcome, FailOutcome::kDeadLettered);
  EXPECT_EQ(f->attempts, 2);
  EXPECT_EQ(Processing(), (V{"150-199"}));
  EXPECT_TRUE(Pending().empty());

  auto dlq = q().DlqList();
  ASSERT_TRUE(dlq.ok()) << dlq.status().ToString();
  ASSERT_EQ(dlq->size(), 1u);
  EXPECT_EQ((*dlq)[0].task, kA);
  EXPECT_EQ((*dlq)[0].error, "block 120: bad receipt root");
  EXPECT_EQ((*dlq)[0].attempts, 2);
  EXPECT_EQ((*dlq)[0].worker, "w3");
  EXPECT_GT((*dlq)[0].failed_at_ms, 0);
  // A dead task is not re-queued by the seeder pushing the same range again.
  EXPECT_EQ(*q().Push({kA}), 0);
  auto depths = q().Depths();
  ASSERT_TRUE(depths.ok());
  EXPECT_EQ(depths->pending, 0);
  EXPECT_EQ(depths->processing, 1);
  EXPECT_EQ(depths->dlq, 1);
}

TEST_F(QueueItest, DlqRetryRequeuesWithAFreshAttemptCount) {
  ASSERT_TRUE(q().Push({kA, kB, kC}).ok());
  for (int i = 0; i < 3; ++i) {
    Lease l = MustClaim("w1");
    ASSERT_EQ(q().Fail(l.task, "w1", l.token, "boom", 1)->outcome, FailOutcome::kDeadLettered);
  }
  EXPECT_EQ(q().DlqList()->size(), 3u);

  auto one = q().DlqRetry(kB);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_TRUE(*one);
  EXPECT_FALSE(*q().DlqRetry(kB));  // not in the DLQ any more
  EXPECT_EQ(Pending(), (V{"150-199"}));
  Lease b = MustClaim("w2");
  auto f = q().Fail(b.task, "w2", b.token, "again", 2);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->attempts, 1);  // counting restarted
  EXPECT_EQ(f->outcome, FailOutcome::kRequeued);

  auto all = q().DlqRetryAll();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, 2);
  EXPECT_TRUE(q().DlqList()->empty());
  EXPECT_EQ(Pending(), (V{"150-199", "100-149", "200-249"}));
}

TEST_F(QueueItest, LeasesListsLiveLeasesWithTheServerClock) {
  ASSERT_TRUE(q().Push({{1, 1}, {2, 2}}).ok());
  Lease a = MustClaim("w1", 60'000);
  Lease b = MustClaim("w2", 30'000);
  int64_t now = 0;
  auto leases = q().Leases(&now);
  ASSERT_TRUE(leases.ok()) << leases.status().ToString();
  ASSERT_EQ(leases->size(), 2u);
  EXPECT_EQ((*leases)[0].task, a.task);
  EXPECT_EQ((*leases)[0].worker, "w1");
  EXPECT_EQ((*leases)[0].token, a.token);
  EXPECT_EQ((*leases)[1].worker, "w2");
  EXPECT_EQ((*leases)[1].token, b.token);
  EXPECT_GT(now, 0);
  EXPECT_NEAR(static_cast<double>((*leases)[0].expires_ms - now), 60'000, 2'000);
  ASSERT_TRUE(q().Complete(a.task, "w1", a.token).ok());
  EXPECT_EQ(q().Leases(&now)->size(), 1u);
}

}  // namespace
}  // namespace gapless
