// The Kafka worker (node/kafka_worker.h) against a real PostgreSQL and redis-server, fed by a
// scripted subscriber (events/consumer_test_util.h FakeSubscriber) carrying the anvil devnet's
// blocks in the block-message format, so each case is exact:
//  - a rebalance in the middle of a window: the worker that lost the partition drops the half it
//    held, never acknowledges it and never writes it; the new owner, receiving the whole window
//    again from the committed offset, writes it once;
//  - the same blocks delivered twice (a producer that re-published) and a message that is not a
//    block: the window is written once and every duplicate acknowledged; the bad message is
//    dead-lettered with an error naming it, then acknowledged, never silently skipped;
//  - a window already committed (a redelivery after a crash): skipped, with no new write;
//  - two members holding one window at once: one writes it, the other skips it;
//  - a re-org (issue 16, defect 1): a window committed from the old fork, rolled back, and the new
//    fork's messages for it: they are written (committed means "stored with this hash", not "the
//    range was covered once"), and a completion of the old fork cannot be recorded after the
//    rollback was followed;
//  - with a head log: a block whose hash differs from the log's is never written, and one above
//    the log's committed height waits until the log has it;
//  - under a memory budget (issue 19): a window larger than the worker's share is written in
//    parts as it arrives, never held whole; while nothing can be written (another holder's
//    locks) the worker holds at most its share and hands back what comes (it comes again), and
//    writes everything once the locks are gone.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "coord/frontier.h"
#include "coord/range_lock.h"
#include "core/metrics.h"
#include "events/consumer_test_util.h"
#include "node/kafka_worker.h"
#include "node/reconcile.h"
#include "rpc/curl_transport.h"
#include "source/block_message.h"
#include "store/migrate.h"
#include "store/queries.h"
#include "store/rollback.h"
#include "store/state.h"
#include "testing/devnet_manifest.h"
#include "testing/pg_test_db.h"
#include "testing/redis_test_db.h"
#include "testing/tcp_proxy.h"

namespace gapless {
namespace {

using testing_util::FakeSubscriber;

const std::string kAnvilUrl = GAPLESS_TEST_ANVIL_URL;
constexpr char kTopic[] = "test.event.1";  // the FakeSubscriber's default assignment

uint64_t DevnetChainId() {
  auto m = LoadDevnetManifest(GAPLESS_TEST_DEVNET_MANIFEST);
  return m.ok() ? (*m)->chain_id : 0;
}

// The devnet's blocks from..to as block messages.
std::vector<std::string> Messages(uint64_t from, uint64_t to) {
  RpcBlockSource rpc(std::make_unique<JsonRpcClient>(std::make_unique<CurlTransport>(kAnvilUrl)));
  auto raw = rpc.Fetch(from, to - from + 1);
  EXPECT_TRUE(raw.ok()) << raw.status().ToString();
  std::vector<std::string> out;
  if (!raw.ok()) return out;
  for (const RawBlock& b : *raw) out.push_back(*EncodeBlockMessage(b));
  return out;
}

template <typename Pred>
bool WaitUntil(Pred pred, int64_t timeout_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

class KafkaWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (db_.skipped()) GTEST_SKIP() << "GAPLESS_TEST_PG_URL not set";
    ASSERT_FALSE(db_.failed()) << db_.error().ToString();
    if (redis_.skipped()) GTEST_SKIP() << "GAPLESS_TEST_REDIS_URL not set";
    ASSERT_FALSE(redis_.failed()) << redis_.error().ToString();
    auto pool = PgPool::Open(db_.url(), 4);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = std::move(pool).value();
    auto conn = pool_->Acquire();
    ASSERT_TRUE(Migrate(*conn).ok());
    ASSERT_TRUE(EnsureChainId(*conn, DevnetChainId()).ok());
  }

  // A worker on `subscriber` (owned by the test, borrowed by the worker through a forwarding
  // subscriber), running on a thread until Stop.
  struct Running {
    std::unique_ptr<KafkaWorker> worker;
    std::atomic<bool> stop{false};
    std::thread thread;
    Status result;
    void Stop() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
    ~Running() { Stop(); }
  };

  std::unique_ptr<Running> Start(
      const std::string& id, FakeSubscriber* subscriber, int64_t flush_after_ms = 60'000,
      std::function<Result<KafkaWorkerOptions::HeadLogView>(uint64_t, uint64_t)> head_log = nullptr,
      const std::string& redis_url = "", MemoryBudget* budget = nullptr) {
    KafkaWorkerOptions options;
    options.worker_id = id;
    options.topic = kTopic;
    options.range_size = 50;
    options.from = 0;
    options.flush_after_ms = flush_after_ms;
    options.lock_ttl_ms = 5'000;
    options.heartbeat_interval_ms = 200;
    options.chain_id = DevnetChainId();
    options.stop_when_done = false;
    options.head_log = std::move(head_log);
    options.memory_budget = budget;
    options.open_subscriber = [subscriber]() -> Result<std::unique_ptr<Subscriber>> {
      return std::unique_ptr<Subscriber>(std::make_unique<Forward>(subscriber));
    };
    auto run = std::make_unique<Running>();
    run->worker = std::make_unique<KafkaWorker>(
        options, redis_url.empty() ? redis_.url() : redis_url, redis_.keys(), pool_.get());
    run->thread = std::thread([r = run.get()] { r->result = r->worker->Run(r->stop); });
    return run;
  }

  // indexed_ranges as "from-to" strings, in order.
  std::vector<std::string> Ranges() {
    auto conn = pool_->Acquire();
    auto rows =
        conn->Query("SELECT from_block || '-' || to_block FROM indexed_ranges ORDER BY from_block");
    EXPECT_TRUE(rows.ok());
    std::vector<std::string> out;
    for (int i = 0; rows.ok() && i < rows->rows(); ++i) out.emplace_back(rows->Get(i, 0));
    return out;
  }
  std::string StoredHash(uint64_t n) {
    auto conn = pool_->Acquire();
    auto r = conn->Query("SELECT '0x' || encode(hash, 'hex') FROM blocks WHERE number = " +
                         std::to_string(n));
    return r.ok() && r->rows() == 1 ? std::string(r->Get(0, 0)) : std::string();
  }
  int64_t BlockRows(uint64_t from, uint64_t to) {
    auto conn = pool_->Acquire();
    auto n = conn->Query("SELECT count(*) FROM blocks WHERE number BETWEEN " +
                         std::to_string(from) + " AND " + std::to_string(to));
    return n.ok() ? *n->GetInt64(0, 0) : -1;
  }

  // Hands every call to a FakeSubscriber the test keeps (the worker owns its subscriber).
  struct Forward : Subscriber {
    explicit Forward(FakeSubscriber* s) : s(s) {}
    FakeSubscriber* s;
    std::string name() const override { return s->name(); }
    Result<std::vector<Delivery>> Poll(size_t max, int64_t timeout_ms) override {
      return s->Poll(max, std::min<int64_t>(timeout_ms, 20));
    }
    Status Ack(const Delivery& d) override { return s->Ack(d); }
    Status DeadLetter(const Delivery& d, std::string_view e) override {
      return s->DeadLetter(d, e);
    }
    Status HandBack(const Delivery& d) override { return s->HandBack(d); }
    Status Pause(const std::string& t, int32_t p) override { return s->Pause(t, p); }
    Status Resume(const std::string& t, int32_t p) override { return s->Resume(t, p); }
    Result<int64_t> Lag() override { return s->Lag(); }
    std::vector<std::string> Assignment() const override { return s->Assignment(); }
  };

  PgTestDb db_;
  RedisTestDb redis_;
  std::unique_ptr<PgPool> pool_;
};

TEST_F(KafkaWorkerTest, ARebalanceMidWindowDropsTheHalfHeldAndTheNewOwnerWritesItOnce) {
  std::vector<std::string> blocks = Messages(0, 49);
  ASSERT_EQ(blocks.size(), 50u);
  FakeSubscriber first(Env::Default());
  std::vector<uint64_t> first_half;
  for (size_t i = 0; i < 25; ++i) first_half.push_back(first.Add(blocks[i], kTopic, 0));
  // A short flush: had it kept the half window, `a` would write it after 500 ms.
  auto a = Start("host:1:k0", &first, /*flush_after_ms=*/500);
  ASSERT_TRUE(WaitUntil([&] { return first.delivered_count() == 25; }, 10'000));
  // The rebalance: partition 0 goes to another member.
  first.set_assignment({std::string(kTopic) + "[1]"});
  std::this_thread::sleep_for(std::chrono::milliseconds(1'000));  // past the flush

  FakeSubscriber second(Env::Default());
  for (const std::string& b : blocks) second.Add(b, kTopic, 0);  // from the committed offset
  auto b = Start("host:2:k0", &second);
  ASSERT_TRUE(WaitUntil([&] { return second.acked_count() == 50; }, 30'000))
      << second.acked_count() << " of 50 acknowledged by the new owner";
  a->Stop();
  b->Stop();
  EXPECT_TRUE(a->result.ok()) << a->result.ToString();
  EXPECT_TRUE(b->result.ok()) << b->result.ToString();
  for (uint64_t h : first_half) EXPECT_FALSE(first.acked(h)) << "a revoked message was acked";
  EXPECT_EQ(a->worker->counters().blocks.load(), 0u) << "the old owner wrote a partial window";
  EXPECT_EQ(b->worker->counters().tasks.load(), 1u);
  EXPECT_EQ(Ranges(), std::vector<std::string>{"0-49"});
  EXPECT_EQ(BlockRows(0, 49), 50);
}

TEST_F(KafkaWorkerTest, DuplicatesAreWrittenOnceAndABadMessageIsDeadLetteredNotSkipped) {
  std::vector<std::string> blocks = Messages(50, 99);
  ASSERT_EQ(blocks.size(), 50u);
  FakeSubscriber subscriber(Env::Default());
  for (const std::string& b : blocks) subscriber.Add(b, kTopic, 0);
  uint64_t bad = subscriber.Add("{\"number\":\"0x10\"", kTopic, 1);
  for (const std::string& b : blocks) subscriber.Add(b, kTopic, 1);  // re-published, elsewhere
  auto w = Start("host:1:k0", &subscriber, /*flush_after_ms=*/200);
  ASSERT_TRUE(WaitUntil([&] { return subscriber.acked_count() == 101; }, 30'000))
      << subscriber.acked_count() << " of 101 acknowledged";
  w->Stop();
  EXPECT_TRUE(w->result.ok()) << w->result.ToString();
  std::vector<FakeSubscriber::Op> dlq = subscriber.ops("dlq");
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(dlq[0].handle, bad);
  EXPECT_NE(dlq[0].text.find("test.event.1[1]@"), std::string::npos) << dlq[0].text;
  EXPECT_TRUE(subscriber.acked(bad)) << "dead-lettered, then acknowledged";
  EXPECT_EQ(Ranges(), std::vector<std::string>{"50-99"});
  EXPECT_EQ(BlockRows(50, 99), 50);
  EXPECT_EQ(w->worker->counters().blocks.load(), 50u) << "a duplicate was written again";
}

TEST_F(KafkaWorkerTest, AWindowAlreadyCommittedIsSkippedWithoutAWrite) {
  std::vector<std::string> blocks = Messages(100, 149);
  ASSERT_EQ(blocks.size(), 50u);
  FakeSubscriber first(Env::Default());
  for (const std::string& b : blocks) first.Add(b, kTopic, 0);
  auto a = Start("host:1:k0", &first);
  ASSERT_TRUE(WaitUntil([&] { return first.acked_count() == 50; }, 30'000));
  a->Stop();
  // Delivered again (a crash before the offset commit, in another process): skipped.
  FakeSubscriber again(Env::Default());
  for (const std::string& b : blocks) again.Add(b, kTopic, 0);
  auto b = Start("host:2:k0", &again);
  ASSERT_TRUE(WaitUntil([&] { return again.acked_count() == 50; }, 30'000));
  b->Stop();
  EXPECT_EQ(b->worker->counters().blocks.load(), 0u);
  EXPECT_EQ(b->worker->skipped(), 1u);
  EXPECT_EQ(Ranges(), std::vector<std::string>{"100-149"});
}

// Two members holding the same window at once (a rebalance that has not settled): the lock and
// the check under it let exactly one write it; the other acknowledges its copy as a duplicate.
TEST_F(KafkaWorkerTest, TwoHoldersOfOneWindowWriteItOnce) {
  std::vector<std::string> blocks = Messages(0, 49);
  ASSERT_EQ(blocks.size(), 50u);
  FakeSubscriber one(Env::Default()), two(Env::Default());
  for (const std::string& b : blocks) {
    one.Add(b, kTopic, 0);
    two.Add(b, kTopic, 0);
  }
  auto a = Start("host:1:k0", &one);
  auto b = Start("host:2:k0", &two);
  ASSERT_TRUE(
      WaitUntil([&] { return one.acked_count() == 50 && two.acked_count() == 50; }, 30'000));
  a->Stop();
  b->Stop();
  EXPECT_EQ(a->worker->counters().blocks.load() + b->worker->counters().blocks.load(), 50u);
  EXPECT_EQ(a->worker->skipped() + b->worker->skipped(), 1u);
  EXPECT_EQ(Ranges(), std::vector<std::string>{"0-49"});
}

// The hash of a block message, and the message with every occurrence of one hash replaced by
// another (the block's hash, its receipts' blockHash: a block of another fork, which the decoder
// cannot tell from the truth without --verify).
std::string HashOf(const std::string& message) {
  auto raw = ParseBlockMessage(message, "", "test");
  EXPECT_TRUE(raw.ok());
  return raw.ok() ? raw->hash : std::string();
}
std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size()) {
    text.replace(at, from.size(), to);
  }
  return text;
}

TEST_F(KafkaWorkerTest, AfterAReorgTheNewForksMessagesForACommittedWindowAreWritten) {
  std::vector<std::string> blocks = Messages(0, 49);
  ASSERT_EQ(blocks.size(), 50u);
  FakeSubscriber subscriber(Env::Default());
  for (const std::string& b : blocks) subscriber.Add(b, kTopic, 0);
  auto w = Start("host:1:k0", &subscriber, /*flush_after_ms=*/200);
  ASSERT_TRUE(WaitUntil([&] { return subscriber.acked_count() == 50; }, 30'000));
  ASSERT_EQ(BlockRows(0, 49), 50);

  // The re-org: fork point 44, rolled back in PostgreSQL and followed in Redis (the leader's
  // steps), while the worker runs.
  {
    auto counter = redis_.conn()->Command({"GET", redis_.keys().fence_counter()});
    ASSERT_TRUE(counter.ok());
    auto conn = pool_->Acquire();
    RollbackRequest request{.fork_point = 44,
                            .new_hashes = {},
                            .leader_epoch = 1,
                            .fence_floor = counter->str.empty() ? 0 : std::stoull(counter->str)};
    auto rolled = RollBack(*conn, request);
    ASSERT_TRUE(rolled.ok()) << rolled.status().ToString();
    ASSERT_EQ(rolled->depth, 5u);
    ASSERT_TRUE(FollowRollbacks(*redis_.conn(), redis_.keys(), *conn, 0, 1).ok());
  }
  // A completion of the old fork that arrives now (a worker that read the generation before the
  // rollback) is refused.
  Frontier frontier(redis_.conn(), redis_.keys().completed(), redis_.keys().frontier(), 0,
                    redis_.keys().leader_epoch());
  auto late = frontier.RecordFenced(0, 49, redis_.keys().reorg_generation(), 0);
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_FALSE(*late) << "a completion from before the rollback was recorded after it";

  // The new fork: block 45 with another hash (and 46's parent with it).
  const std::string old45 = HashOf(blocks[45]);
  const std::string new45 = "0x" + std::string(64, 'b');
  for (size_t i = 45; i < 50; ++i) subscriber.Add(Replace(blocks[i], old45, new45), kTopic, 0);
  ASSERT_TRUE(WaitUntil([&] { return subscriber.acked_count() == 55; }, 30'000))
      << subscriber.acked_count() << " of 55 acknowledged";
  w->Stop();
  EXPECT_TRUE(w->result.ok()) << w->result.ToString();
  EXPECT_EQ(BlockRows(0, 49), 50) << "the new fork's blocks were acknowledged unwritten";
  EXPECT_EQ(StoredHash(45), new45);
  EXPECT_EQ(StoredHash(44), HashOf(blocks[44]));
}

// A fence counter behind a re-org's floor (a failover to a lagging replica, before the leader's
// next term floors it): every token the worker takes is refused above the fork point. The first
// refusal raises the counter to PostgreSQL's highest token (node/reconcile.h), so the stream is
// written instead of retried until the leader comes round.
TEST_F(KafkaWorkerTest, AReorgFenceRefusalRaisesALaggingCounter) {
  {
    auto conn = pool_->Acquire();
    RollbackRequest request{
        .fork_point = 4, .new_hashes = {}, .leader_epoch = 1, .fence_floor = 500};
    ASSERT_TRUE(RollBack(*conn, request).ok());
  }
  ASSERT_TRUE(redis_.conn()->Command({"SET", redis_.keys().fence_counter(), "3"}).ok());
  std::vector<std::string> blocks = Messages(0, 19);
  ASSERT_EQ(blocks.size(), 20u);
  FakeSubscriber subscriber(Env::Default());
  for (const std::string& b : blocks) subscriber.Add(b, kTopic, 0);
  auto w = Start("host:1:k0", &subscriber, /*flush_after_ms=*/200);
  EXPECT_TRUE(WaitUntil([&] { return subscriber.acked_count() == 20; }, 20'000))
      << subscriber.acked_count() << " of 20 acknowledged";
  w->Stop();
  EXPECT_TRUE(w->result.ok()) << w->result.ToString();
  EXPECT_EQ(BlockRows(0, 19), 20);
  auto counter = redis_.conn()->Command({"GET", redis_.keys().fence_counter()});
  ASSERT_TRUE(counter.ok());
  EXPECT_GT(std::stoll(counter->str), 500) << "the counter was not raised above the floor";
}

// Started while the coordination Redis is down (restarting, failing over): the worker waits for
// it instead of exiting, then writes the stream.
TEST_F(KafkaWorkerTest, StartedWhileTheCoordinationRedisIsDownItWaitsForIt) {
  auto parsed = ParseRedisUrl(redis_.url());
  ASSERT_TRUE(parsed.ok());
  TcpProxy link("127.0.0.1", 1);  // nothing listens there: Redis is away
  std::vector<std::string> blocks = Messages(0, 19);
  FakeSubscriber subscriber(Env::Default());
  for (const std::string& b : blocks) subscriber.Add(b, kTopic, 0);
  auto w = Start("host:1:k0", &subscriber, /*flush_after_ms=*/200, nullptr,
                 fmt::format("redis://127.0.0.1:{}/{}", link.port(), parsed->db));
  std::this_thread::sleep_for(std::chrono::milliseconds(1'000));
  link.SetTarget("127.0.0.1", parsed->hosts[0].port);
  EXPECT_TRUE(WaitUntil([&] { return subscriber.acked_count() == 20; }, 30'000))
      << subscriber.acked_count() << " of 20 acknowledged; the worker returned "
      << w->result.ToString();
  w->Stop();
  EXPECT_TRUE(w->result.ok()) << w->result.ToString();
  EXPECT_EQ(BlockRows(0, 19), 20);
}

TEST_F(KafkaWorkerTest, WithAHeadLogAnotherForksBlockIsNeverWrittenAndOneAboveTheLogWaits) {
  std::vector<std::string> blocks = Messages(0, 49);
  ASSERT_EQ(blocks.size(), 50u);
  // The head log: 0..44 as the stream has them, 45 with another hash, nothing above yet.
  std::mutex mu;
  std::map<uint64_t, std::string> log;
  for (size_t i = 0; i < 45; ++i) log[i] = HashOf(blocks[i]);
  log[45] = "0x" + std::string(64, 'c');
  auto head_log = [&](uint64_t from, uint64_t to) -> Result<KafkaWorkerOptions::HeadLogView> {
    std::lock_guard<std::mutex> lock(mu);
    KafkaWorkerOptions::HeadLogView view;
    for (auto it = log.lower_bound(from); it != log.end() && it->first <= to; ++it) {
      view.hashes.insert(*it);
    }
    view.lowest = 0;
    return view;
  };
  FakeSubscriber subscriber(Env::Default());
  for (const std::string& b : blocks) subscriber.Add(b, kTopic, 0);
  auto w = Start("host:1:k0", &subscriber, /*flush_after_ms=*/200, head_log);
  ASSERT_TRUE(WaitUntil([&] { return BlockRows(0, 49) == 45; }, 30'000));
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // a few more looks
  EXPECT_EQ(BlockRows(45, 49), 0) << "a block of another fork, or above the log, was written";
  EXPECT_LT(subscriber.acked_count(), 50u) << "blocks waiting for the log were acknowledged";

  // The log moves on (back to the stream's fork, as a flip-flop re-org would) and block 45 comes
  // again: the window completes.
  {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 45; i < 50; ++i) log[i] = HashOf(blocks[i]);
  }
  subscriber.Add(blocks[45], kTopic, 0);
  ASSERT_TRUE(WaitUntil([&] { return subscriber.acked_count() == 51; }, 30'000))
      << subscriber.acked_count() << " of 51 acknowledged";
  w->Stop();
  EXPECT_TRUE(w->result.ok()) << w->result.ToString();
  EXPECT_EQ(BlockRows(0, 49), 50);
  EXPECT_EQ(StoredHash(45), HashOf(blocks[45]));
}

// The text a worker holds for these messages (source/block_source.h RawBlockBytes), in all and
// the largest.
std::pair<uint64_t, uint64_t> HeldBytes(const std::vector<std::string>& messages) {
  uint64_t total = 0, largest = 0;
  for (const std::string& m : messages) {
    auto raw = ParseBlockMessage(m, "", "test");
    EXPECT_TRUE(raw.ok());
    if (!raw.ok()) continue;
    total += RawBlockBytes(*raw);
    largest = std::max(largest, RawBlockBytes(*raw));
  }
  return {total, largest};
}

// A budget for one fetching thread whose share for held messages is `held` bytes.
std::unique_ptr<MemoryBudget> BudgetHolding(uint64_t held) {
  return std::make_unique<MemoryBudget>(
      MemoryBudget::kBaseBytes + MemoryBudget::kThreadBytes + held * 4, 1);
}

TEST_F(KafkaWorkerTest, UnderAMemoryBudgetAWindowLargerThanTheShareIsWrittenInPartsAsItComes) {
  std::vector<std::string> blocks = Messages(0, 49);
  ASSERT_EQ(blocks.size(), 50u);
  const auto [total, largest] = HeldBytes(blocks);
  // The worker may hold a few of the window's largest blocks: held whole, the window would be
  // several times its share.
  std::unique_ptr<MemoryBudget> budget = BudgetHolding(3 * largest);
  const uint64_t share = budget->StreamHeldBytes();
  ASSERT_GE(total, 3 * share) << "the devnet's blocks are too uneven for this case";
  FakeSubscriber subscriber(Env::Default());
  for (const std::string& b : blocks) subscriber.Add(b, kTopic, 0);
  // No flush by time: only the budget makes it write before the window is whole.
  auto w = Start("host:1:k0", &subscriber, /*flush_after_ms=*/60'000, nullptr, "", budget.get());
  ASSERT_TRUE(WaitUntil([&] { return subscriber.acked_count() == 50; }, 30'000))
      << subscriber.acked_count() << " of 50 acknowledged";
  w->Stop();
  EXPECT_TRUE(w->result.ok()) << w->result.ToString();
  EXPECT_EQ(BlockRows(0, 49), 50);
  EXPECT_EQ(w->worker->counters().blocks.load(), 50u) << "a block was written twice";
  EXPECT_GT(Ranges().size(), 1u) << "the window was written whole";
  // At most the share, and one poll's overshoot of a block larger than any before it.
  EXPECT_LE(w->worker->held_peak_bytes(), share + largest)
      << "share " << share << ", window " << total << ", largest block " << largest;
  EXPECT_GT(w->worker->held_peak_bytes(), 0u);
}

TEST_F(KafkaWorkerTest, UnderAMemoryBudgetAWorkerThatCannotWriteHandsBackAtItsShareThenCatchesUp) {
  std::vector<std::string> blocks = Messages(0, 99);
  ASSERT_EQ(blocks.size(), 100u);
  const auto [total, largest] = HeldBytes(blocks);
  std::unique_ptr<MemoryBudget> budget = BudgetHolding(3 * largest);
  const uint64_t share = budget->StreamHeldBytes();
  ASSERT_GE(total, 3 * share) << "the devnet's blocks are too uneven for this case";
  // Another holder has both windows' locks (a member of the group that has not let go).
  {
    auto conn = pool_->Acquire();
    ASSERT_TRUE(EnsureFenceFloor(*redis_.conn(), redis_.keys(), *conn, "test").ok());
  }
  RangeLocks locks(redis_.conn(), redis_.keys());
  for (const TaskRange& window : {TaskRange{0, 49}, TaskRange{50, 99}}) {
    auto token = locks.Acquire(window, "host:9:k0", 60'000);
    ASSERT_TRUE(token.ok() && token->has_value()) << token.status().ToString();
  }
  FakeSubscriber subscriber(Env::Default());
  for (const std::string& b : blocks) {
    subscriber.Add(b, kTopic, 0);
    subscriber.Add(b, kTopic, 1);  // re-published elsewhere: twice as much to hold
  }
  auto w = Start("host:1:k0", &subscriber, /*flush_after_ms=*/100, nullptr, "", budget.get());
  ASSERT_TRUE(WaitUntil([&] { return w->worker->handed_back() > 0; }, 10'000));
  const size_t delivered = subscriber.delivered_count();
  std::this_thread::sleep_for(std::chrono::milliseconds(1'000));  // polls go on, stuck
  EXPECT_EQ(subscriber.delivered_count(), delivered) << "it kept taking messages it cannot write";
  EXPECT_LT(delivered, 200u);
  EXPECT_EQ(subscriber.acked_count(), 0u);
  EXPECT_EQ(BlockRows(0, 99), 0);
  EXPECT_LE(w->worker->held_peak_bytes(), share + largest);
  EXPECT_GE(w->worker->handed_back(), 2u) << "one message handed back, then no more polls";
  // What an operator sees (docs/operations.md): the hand-backs, and what is held, per worker.
  const std::string metrics = MetricsRegistry::Default().Render();
  EXPECT_NE(metrics.find("gapless_kafka_handed_back_total{worker=\"host:1:k0\"}"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("gapless_kafka_held_bytes{worker=\"host:1:k0\"}"), std::string::npos);

  for (const TaskRange& window : {TaskRange{0, 49}, TaskRange{50, 99}}) {
    ASSERT_TRUE(locks.Release(window, "host:9:k0").ok());
  }
  ASSERT_TRUE(WaitUntil([&] { return subscriber.acked_count() == 200; }, 60'000))
      << subscriber.acked_count() << " of 200 acknowledged";
  w->Stop();
  EXPECT_TRUE(w->result.ok()) << w->result.ToString();
  EXPECT_EQ(BlockRows(0, 99), 100);
  EXPECT_EQ(w->worker->counters().blocks.load(), 100u) << "a block was written twice";
  EXPECT_TRUE(subscriber.ops("pause").empty()) << "the client's pause is not used";
  EXPECT_LE(w->worker->held_peak_bytes(), share + largest);
}

}  // namespace
}  // namespace gapless
