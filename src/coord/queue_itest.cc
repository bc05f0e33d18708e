// The leased work queue against the real test redis-server: every script's edge cases.
#include <chrono>
#include <thread>

#include "coord/queue.h"
#include "coord/range_lock.h"
#include "testing/redis_server.h"
#include "testing/redis_test_db.h"

namespace gapless {
namespace {

class QueueItest : public RedisTest {
 protected:
  void SetUp() override {
    RedisTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    queue_ = std::make_unique<Queue>(&conn(), keys());
  }
  Queue& q() { return *queue_; }

  std::vector<std::string> List(const std::string& key) {
    auto r = conn().Command({"LRANGE", key, "0", "-1"});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::string> out;
    if (r.ok()) {
      for (auto& e : r->elements) out.push_back(e.str);
    }
    return out;
  }
  std::vector<std::string> Pending() { return List(keys().pending()); }
  std::vector<std::string> Processing() { return List(keys().processing()); }
  // A hash field, "" when missing.
  std::string HGet(const std::string& key, const std::string& field) {
    auto r = conn().Command({"HGET", key, field});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->str : "";
  }
  bool HExists(const std::string& key, const std::string& field) {
    auto r = conn().Command({"HEXISTS", key, field});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && r->integer == 1;
  }
  // The completed set's score of a task ("" when it is not there).
  std::string CompletedScore(const TaskRange& t) {
    auto r = conn().Command({"ZSCORE", keys().completed(), t.id()});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->str : "";
  }
  static std::vector<TaskRange> Tasks(const std::vector<ExpiredTask>& expired) {
    std::vector<TaskRange> out;
    for (const ExpiredTask& e : expired) out.push_back(e.task);
    return out;
  }
  // Claims the head with a 50 ms lease and lets it expire; returns the janitor's answer.
  std::vector<ExpiredTask> ClaimAndExpire(const std::string& worker, int64_t max_expiries,
                                          TaskRange* claimed = nullptr) {
    Lease l = MustClaim(worker, 50);
    if (claimed != nullptr) *claimed = l.task;
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    auto expired = q().Janitor(100, max_expiries);
    EXPECT_TRUE(expired.ok()) << expired.status().ToString();
    return expired.ok() ? *expired : std::vector<ExpiredTask>{};
  }

  Lease MustClaim(const std::string& worker, int64_t ttl_ms = 60'000) {
    auto l = q().Claim(worker, ttl_ms);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_TRUE(l.ok() && l->has_value()) << "queue empty";
    return l.ok() && l->has_value() ? **l : Lease{};
  }

  std::unique_ptr<Queue> queue_;
};

using V = std::vector<std::string>;
const TaskRange kA{100, 149}, kB{150, 199}, kC{200, 249};

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

namespace gapless {
namespace {

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

// --- CompleteAndClaim: one round trip per task --------------------------------------------------

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
