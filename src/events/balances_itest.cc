// balances_itest: the balances service against real PostgreSQL (its own database per test) and
// the shared test Redis. Transfers are stored in the indexer's token_transfers table (migrated
// schema) and published as token.transfer events; the events reach two consumers with
// duplicates, in shuffled order; afterwards token_balances must equal the SQL aggregate of
// token_transfers. Re-orgs: blocks whose transfers are deleted from token_transfers are retracted
// by block.reverted events, delivered twice, before or after their transfers; the balances still
// end equal to the aggregate. A service started beside a running one starts (its schema step
// neither deadlocks with the running one's transactions nor waits for them).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/model.h"
#include "core/u256.h"
#include "events/balances.h"
#include "events/consumer_test_util.h"
#include "events/event.h"
#include "store/partitions.h"
#include "store/pg.h"
#include "testing/pg_test_db.h"
#include "testing/redis_test_db.h"
#include "testing/wait_for.h"

namespace gapless {
namespace {

using testing_util::FakeSubscriber;
using testing_util::WaitFor;

constexpr char kZero[] = "0x0000000000000000000000000000000000000000";
constexpr uint64_t kChain = 1;

std::string Address(int n) {
  char buf[43];
  snprintf(buf, sizeof buf, "0x%040x", n);
  return buf;
}

// Blocks of random transfers among a few holders (and the zero address: mints and burns) of an
// ERC-20 (two of them), an ERC-721 and an ERC-1155, so that holders meet again and again.
std::vector<BlockData> RandomTransfers(int blocks, int per_block, uint32_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return static_cast<uint64_t>(rng() % n); };
  std::vector<std::string> holders = {kZero};
  for (int i = 1; i <= 5; ++i) holders.push_back(Address(0x1000 + i));
  std::vector<BlockData> out;
  for (int b = 0; b < blocks; ++b) {
    BlockData d;
    d.block.number = 100 + b;
    d.block.hash = "0x" + std::string(62, '0') + fmt::format("{:02x}", b);
    d.block.timestamp = 1'700'000'000 + 12 * b;
    for (int i = 0; i < per_block; ++i) {
      TokenTransfer t;
      t.block_number = d.block.number;
      t.log_index = i;
      t.transaction_hash = "0x" + std::string(60, 'a') + fmt::format("{:04x}", i);
      t.from_address = holders[pick(holders.size())];
      t.to_address = holders[pick(holders.size())];
      switch (pick(4)) {
        case 0:
        case 1:
          t.standard = TokenStandard::kErc20;
          t.token_address = Address(pick(2) == 0 ? 0xe20a : 0xe20b);
          // Up to ~10^38: far beyond 64 bits, far below NUMERIC(78,0)'s limit even summed.
          t.value = *U256::FromDecimal(std::to_string(rng() % 1'000'000'000'000'000'000ULL) +
                                       std::to_string(rng() % 1'000'000'000'000'000'000ULL));
          break;
        case 2:
          t.standard = TokenStandard::kErc721;
          t.token_address = Address(0xe721);
          t.token_id = U256(1 + pick(5));
          t.value = U256(1);
          break;
        default:
          t.standard = TokenStandard::kErc1155;
          t.token_address = Address(0xe1155);
          t.operator_address = Address(0x0b);
          t.token_id = U256(pick(3));
          t.value = U256(1 + pick(1000));
          break;
      }
      d.token_transfers.push_back(std::move(t));
    }
    out.push_back(std::move(d));
  }
  return out;
}

Status StoreTransfers(PgConn& conn, const std::vector<BlockData>& blocks) {
  for (const BlockData& d : blocks) {
    GAPLESS_RETURN_IF_ERROR(EnsurePartitions(conn, d.block.number, d.block.number));
  }
  for (const BlockData& d : blocks) {
    for (const TokenTransfer& t : d.token_transfers) {
      auto hex = [](const std::string& s) { return s.substr(2); };
      GAPLESS_ASSIGN_OR_RETURN(
          PgResult r,
          conn.Query(
              "INSERT INTO token_transfers (block_number, log_index, batch_index, "
              "transaction_hash, token_address, from_address, to_address, operator_address, "
              "token_id, value, token_standard) VALUES ($1, $2, $3, decode($4, 'hex'), "
              "decode($5, 'hex'), decode($6, 'hex'), decode($7, 'hex'), decode($8, 'hex'), $9, "
              "$10, $11)",
              {std::to_string(t.block_number), std::to_string(t.log_index),
               std::to_string(t.batch_index), hex(t.transaction_hash), hex(t.token_address),
               hex(t.from_address), hex(t.to_address),
               t.operator_address ? PgParam(hex(*t.operator_address)) : std::nullopt,
               t.token_id ? PgParam(t.token_id->ToDecimal()) : std::nullopt, t.value.ToDecimal(),
               std::to_string(static_cast<int>(t.standard))}));
      (void)r;
    }
  }
  return Status::Ok();
}

class BalancesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (pg_.skipped()) GTEST_SKIP() << "GAPLESS_TEST_PG_URL is not set";
    ASSERT_FALSE(pg_.failed()) << pg_.error().ToString();
    auto conn = pg_.ConnectMigrated();
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(*conn);
    ASSERT_TRUE(EnsureBalancesSchema(*conn_).ok());
    auto pool = PgPool::Open(pg_.url(), 4);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = std::move(*pool);
  }
  // (differing rows, expected rows)
  std::pair<int64_t, int64_t> Difference() {
    auto r = CheckBalancesAgainstTransfers(*conn_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return {-1, -1};
    return {r->differing, r->expected};
  }
  int64_t Count(const std::string& sql) {
    auto r = conn_->Query(sql);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r->GetInt64(0, 0) : -1;
  }
  // Spreads `deliveries` over two balances consumers (alternately, in the order given) and runs
  // them until every delivery is acked; none may fail or be dead-lettered. With
  // `second_after_acks` > 0 the second consumer starts only once the first has acked that many
  // (a service started beside a running one). A consumer whose Run returns (it can only fail:
  // nobody asked it to stop) ends the wait at once, and its Status is the failure.
  void ConsumeWithTwo(const std::vector<const OutgoingEvent*>& deliveries, const RedisTestDb& redis,
                      size_t second_after_acks = 0) {
    Env* env = Env::Default();
    FakeSubscriber sub_a(env), sub_b(env);
    for (size_t i = 0; i < deliveries.size(); ++i) {
      (i % 2 == 0 ? sub_a : sub_b).Add(deliveries[i]->body, deliveries[i]->topic, 0);
    }
    BalancesOptions o;
    o.pg_url = pg_.url();
    o.redis_url = redis.url();
    o.redis_key_prefix = redis.keys().prefix() + "consumer:balances";
    o.consumer.poll_timeout_ms = 20;
    o.consumer.held_recheck_ms = 20;
    o.consumer.retry_base_ms = 20;
    o.consumer.recovery = {100, 100, 100, 20};
    std::atomic<bool> stop{false};
    std::atomic<bool> a_returned{false}, b_returned{false};
    Status ra, rb;
    std::thread ta([&] {
      ra = RunBalancesConsumer(o, &sub_a, stop);
      a_returned = true;
    });
    if (second_after_acks > 0) {
      WaitFor([&] { return a_returned || sub_a.acked_count() >= second_after_acks; }, 60'000);
    }
    std::thread tb([&] {
      rb = RunBalancesConsumer(o, &sub_b, stop);
      b_returned = true;
    });
    bool done = WaitFor(
        [&] {
          return a_returned || b_returned ||
                 sub_a.acked_count() + sub_b.acked_count() == deliveries.size();
        },
        120'000);
    stop = true;
    ta.join();
    tb.join();
    ASSERT_TRUE(ra.ok()) << "consumer A: " << ra.ToString();
    ASSERT_TRUE(rb.ok()) << "consumer B: " << rb.ToString();
    ASSERT_TRUE(done) << sub_a.acked_count() + sub_b.acked_count() << " of " << deliveries.size();
    ASSERT_EQ(sub_a.acked_count() + sub_b.acked_count(), deliveries.size());
    EXPECT_TRUE(sub_a.ops("dlq").empty());
    EXPECT_TRUE(sub_b.ops("dlq").empty());
  }

  // Backends of this test's database waiting for a heavyweight lock.
  int64_t LockWaiters(PgConn& watcher) {
    auto r = watcher.Query(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
        "wait_event_type = 'Lock'");
    return r.ok() ? *r->GetInt64(0, 0) : -1;
  }

  // A second service's start (EnsureBalancesSchema on a connection of its own) while a running
  // service's transaction is half way through ApplyTransfer: its applied_events row inserted, its
  // balance row not yet. Once the start has finished or waits for a lock, the transaction goes on
  // to token_balances and commits. Both must succeed; returns whether the start finished while
  // the transaction was still open.
  bool StartBesideAnOpenApply() {
    auto x = pg_.Connect();
    EXPECT_TRUE(x.ok()) << x.status().ToString();
    auto watcher = pg_.Connect();
    EXPECT_TRUE(watcher.ok()) << watcher.status().ToString();
    if (!x.ok() || !watcher.ok()) return false;
    EXPECT_TRUE((*x)->Exec("BEGIN").ok());
    EXPECT_TRUE(
        (*x)->Exec("INSERT INTO applied_events (event_id) VALUES (gen_random_uuid())").ok());
    std::atomic<bool> started{false};
    Status start;
    std::thread ty([&] {
      auto y = pg_.Connect();
      start = y.ok() ? EnsureBalancesSchema(**y) : y.status();
      started = true;
    });
    EXPECT_TRUE(WaitFor([&] { return started || LockWaiters(**watcher) > 0; }, 30'000));
    const bool finished_first = started.load();
    Status apply = (*x)->Exec(
        "INSERT INTO token_balances (holder, token, token_id, balance) "
        "VALUES ('\\x01', '\\x02', -1, 5)");
    Status commit = (*x)->Exec("COMMIT");
    ty.join();
    EXPECT_TRUE(start.ok()) << "the start: " << start.ToString();
    EXPECT_TRUE(apply.ok()) << "the running service: " << apply.ToString();
    EXPECT_TRUE(commit.ok()) << commit.ToString();
    return finished_first;
  }

  PgTestDb pg_;
  std::unique_ptr<PgConn> conn_;
  std::unique_ptr<PgPool> pool_;
};

std::vector<OutgoingEvent> EventsOf(const std::vector<BlockData>& blocks) {
  std::vector<OutgoingEvent> out;
  for (const BlockData& d : blocks) {
    for (OutgoingEvent& e : BlockEvents(kChain, d)) out.push_back(std::move(e));
  }
  return out;
}

// The block.reverted event of each block (as the relay builds it after a rollback).
std::vector<OutgoingEvent> RetractionsOf(const std::vector<BlockData>& blocks) {
  std::vector<OutgoingEvent> out;
  for (const BlockData& d : blocks) out.push_back(BlockRevertedEvent(kChain, d, 1, 1'700'000'000));
  return out;
}

std::vector<BlockData> Slice(const std::vector<BlockData>& blocks, size_t from) {
  return std::vector<BlockData>(blocks.begin() + static_cast<std::ptrdiff_t>(from), blocks.end());
}

TEST_F(BalancesTest, ApplyingAnEventTwiceCountsOnceAndIsCompletedAfterwards) {
  auto blocks = RandomTransfers(1, 1, 3);
  blocks[0].token_transfers[0].from_address = Address(0x1001);
  blocks[0].token_transfers[0].to_address = Address(0x1002);
  ASSERT_TRUE(StoreTransfers(*conn_, blocks).ok());
  auto events = EventsOf(blocks);
  ASSERT_EQ(events.size(), 2u);  // block.new, token.transfer
  const OutgoingEvent& transfer = events[1];
  auto env = ParseEnvelope(transfer.body);
  ASSERT_TRUE(env.ok());
  BalancesService svc(pool_.get());
  auto done = svc.IsCompleted(transfer.event_id);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_FALSE(*done);
  ASSERT_TRUE(svc.ApplyTransfer(transfer.event_id, env->payload_json).ok());
  ASSERT_TRUE(svc.ApplyTransfer(transfer.event_id, env->payload_json).ok());
  EXPECT_TRUE(*svc.IsCompleted(transfer.event_id));
  EXPECT_EQ(Difference(), std::make_pair(int64_t{0}, int64_t{2}));
  EXPECT_EQ(Count("SELECT count(*) FROM applied_events"), 1);
  // block.new is acked without effect.
  auto block_env = ParseEnvelope(events[0].body);
  ASSERT_TRUE(block_env.ok());
  Delivery d;
  ASSERT_TRUE(svc.Process(ConsumedEvent{d, *block_env, 0}).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM applied_events"), 1);
}

TEST_F(BalancesTest, MintsAndBurnsTouchNoZeroAddressRow) {
  auto blocks = RandomTransfers(1, 2, 5);
  auto& ts = blocks[0].token_transfers;
  ts[0].from_address = kZero;
  ts[0].to_address = Address(0x1001);
  ts[1].from_address = Address(0x1001);
  ts[1].to_address = kZero;
  ASSERT_TRUE(StoreTransfers(*conn_, blocks).ok());
  BalancesService svc(pool_.get());
  for (const OutgoingEvent& e : EventsOf(blocks)) {
    if (e.event_type != kTokenTransfer) continue;
    ASSERT_TRUE(svc.ApplyTransfer(e.event_id, ParseEnvelope(e.body)->payload_json).ok());
  }
  EXPECT_EQ(
      Count("SELECT count(*) FROM token_balances WHERE holder = '\\x" + std::string(40, '0') + "'"),
      0);
  EXPECT_EQ(Difference().first, 0);
}

TEST_F(BalancesTest, ConcurrentDuplicatesOfOneEventCountOnceWithoutRedis) {
  auto blocks = RandomTransfers(1, 1, 9);
  blocks[0].token_transfers[0].from_address = Address(0x1001);
  blocks[0].token_transfers[0].to_address = Address(0x1002);
  ASSERT_TRUE(StoreTransfers(*conn_, blocks).ok());
  const OutgoingEvent transfer = EventsOf(blocks)[1];
  const std::string payload = ParseEnvelope(transfer.body)->payload_json;
  BalancesService svc(pool_.get());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      if (!svc.ApplyTransfer(transfer.event_id, payload).ok()) failures++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(Difference(), std::make_pair(int64_t{0}, int64_t{2}));
}

TEST_F(BalancesTest, RedeliveredShuffledEventsToTwoConsumersEqualTheTransfersAggregate) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(redis);
  auto blocks = RandomTransfers(20, 15, 11);
  ASSERT_TRUE(StoreTransfers(*conn_, blocks).ok());
  std::vector<OutgoingEvent> events = EventsOf(blocks);
  // Every event once, a third of them twice more, another third once more; shuffled; spread
  // over two consumers (copies of one event often reach both).
  std::vector<const OutgoingEvent*> deliveries;
  for (size_t i = 0; i < events.size(); ++i) {
    int copies = i % 3 == 0 ? 3 : (i % 3 == 1 ? 2 : 1);
    for (int c = 0; c < copies; ++c) deliveries.push_back(&events[i]);
  }
  std::mt19937 rng(42);
  std::shuffle(deliveries.begin(), deliveries.end(), rng);
  ConsumeWithTwo(deliveries, redis);
  if (HasFatalFailure()) return;

  auto [differing, expected] = Difference();
  EXPECT_EQ(differing, 0);
  EXPECT_GT(expected, 20) << "the data must give a non-trivial set of balances";
  EXPECT_EQ(Count("SELECT count(*) FROM applied_events"), 20 * 15);
  EXPECT_GT(Count("SELECT count(*) FROM token_balances WHERE balance < 0"), 0)
      << "random transfers out of order give negative balances: the test data is not trivial";
}

TEST_F(BalancesTest, ARetractionReversesWhatWasAppliedOnceHoweverOftenDelivered) {
  auto blocks = RandomTransfers(10, 12, 21);
  ASSERT_TRUE(StoreTransfers(*conn_, blocks).ok());
  BalancesService svc(pool_.get());
  for (const OutgoingEvent& e : EventsOf(blocks)) {
    if (e.event_type != kTokenTransfer) continue;
    ASSERT_TRUE(svc.ApplyTransfer(e.event_id, ParseEnvelope(e.body)->payload_json).ok());
  }
  ASSERT_EQ(Difference().first, 0);
  // A re-org orphans blocks 106..109: their rows go, their retractions come.
  ASSERT_TRUE(conn_->Exec("DELETE FROM token_transfers WHERE block_number >= 106").ok());
  EXPECT_GT(Difference().first, 0) << "the test needs the orphaned transfers to matter";
  std::vector<OutgoingEvent> retractions = RetractionsOf(Slice(blocks, 6));
  for (const OutgoingEvent& r : retractions) {
    ASSERT_TRUE(svc.RevertBlock(r.event_id, ParseEnvelope(r.body)->payload_json).ok());
  }
  auto [differing, expected] = Difference();
  EXPECT_EQ(differing, 0);
  EXPECT_GT(expected, 5);
  EXPECT_EQ(Count("SELECT count(*) FROM applied_events WHERE reverted_at IS NOT NULL"), 4 * 12);
  EXPECT_TRUE(*svc.IsCompleted(retractions[0].event_id));
  // Delivered again (the bus's at-least-once), through Process as the consumer would: nothing
  // changes.
  const std::string before = *conn_
                                  ->Query(
                                      "SELECT string_agg(encode(holder, 'hex') || encode(token, "
                                      "'hex') || token_id || ':' || balance, ',' ORDER BY 1) "
                                      "FROM token_balances")
                                  ->GetOptional(0, 0);
  for (const OutgoingEvent& r : retractions) {
    Delivery d;
    ASSERT_TRUE(svc.Process(ConsumedEvent{d, *ParseEnvelope(r.body), 0}).ok());
    ASSERT_TRUE(svc.RevertBlock(r.event_id, ParseEnvelope(r.body)->payload_json).ok());
  }
  EXPECT_EQ(*conn_
                 ->Query("SELECT string_agg(encode(holder, 'hex') || encode(token, 'hex') || "
                         "token_id || ':' || balance, ',' ORDER BY 1) FROM token_balances")
                 ->GetOptional(0, 0),
            before);
  EXPECT_EQ(Difference().first, 0);
}

TEST_F(BalancesTest, AnOriginalArrivingAfterItsRetractionIsNeverApplied) {
  auto blocks = RandomTransfers(4, 10, 23);
  ASSERT_TRUE(StoreTransfers(*conn_, blocks).ok());
  ASSERT_TRUE(conn_->Exec("DELETE FROM token_transfers WHERE block_number >= 102").ok());
  BalancesService svc(pool_.get());
  std::vector<OutgoingEvent> events = EventsOf(blocks);
  // Half of the orphaned blocks' transfers arrive before the retraction, the rest after it.
  size_t applied_before = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].event_type != kTokenTransfer || i % 2 == 0) continue;
    ASSERT_TRUE(
        svc.ApplyTransfer(events[i].event_id, ParseEnvelope(events[i].body)->payload_json).ok());
    ++applied_before;
  }
  ASSERT_GT(applied_before, 0u);
  for (const OutgoingEvent& r : RetractionsOf(Slice(blocks, 2))) {
    ASSERT_TRUE(svc.RevertBlock(r.event_id, ParseEnvelope(r.body)->payload_json).ok());
  }
  for (const OutgoingEvent& e : events) {
    if (e.event_type != kTokenTransfer) continue;
    auto done = svc.IsCompleted(e.event_id);
    ASSERT_TRUE(done.ok());
    if (ParseTransferPayload(ParseEnvelope(e.body)->payload_json)->block_number >= 102) {
      EXPECT_TRUE(*done) << "a retracted transfer must count as done";
    }
    ASSERT_TRUE(svc.ApplyTransfer(e.event_id, ParseEnvelope(e.body)->payload_json).ok());
  }
  EXPECT_EQ(Difference().first, 0);
  // Rows of holders whose every transfer was orphaned are gone, not left at 0.
  EXPECT_EQ(Count("SELECT count(*) FROM token_balances WHERE transfer_count = 0"), 0);
}

// Transfers and the retractions of the orphaned blocks, with duplicates, shuffled over two
// consumers: whatever the order, the balances end equal to the aggregate of what is left.
TEST_F(BalancesTest, ShuffledTransfersAndRetractionsToTwoConsumersEqualTheAggregate) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(redis);
  auto blocks = RandomTransfers(16, 12, 29);
  ASSERT_TRUE(StoreTransfers(*conn_, blocks).ok());
  ASSERT_TRUE(conn_->Exec("DELETE FROM token_transfers WHERE block_number >= 110").ok());
  std::vector<OutgoingEvent> events = EventsOf(blocks);
  for (OutgoingEvent& r : RetractionsOf(Slice(blocks, 10))) events.push_back(std::move(r));
  std::vector<const OutgoingEvent*> deliveries;
  for (size_t i = 0; i < events.size(); ++i) {
    for (size_t c = 0; c < 1 + i % 2; ++c) deliveries.push_back(&events[i]);
  }
  std::mt19937 rng(7);
  std::shuffle(deliveries.begin(), deliveries.end(), rng);
  ConsumeWithTwo(deliveries, redis);
  if (HasFatalFailure()) return;
  auto [differing, expected] = Difference();
  EXPECT_EQ(differing, 0);
  EXPECT_GT(expected, 10);
}

// Issue 16: a balances service started beside a running one ran ALTER TABLE ... ADD COLUMN IF NOT
// EXISTS, which takes ACCESS EXCLUSIVE locks even when the columns exist, on token_balances first:
// with a running transaction holding applied_events and wanting token_balances, PostgreSQL found
// a deadlock and aborted the start ("only one of its two consumers ever started").
TEST_F(BalancesTest, StartingBesideARunningServiceNeitherWaitsNorDeadlocks) {
  EXPECT_TRUE(StartBesideAnOpenApply()) << "a complete schema needs no lock on the tables";
}

// Tables made before the retraction columns: the start must add them, so it waits for the running
// transaction, but takes the tables in the service's order and so cannot deadlock with it.
TEST_F(BalancesTest, AddingMissingColumnsBesideARunningServiceWaitsWithoutDeadlock) {
  ASSERT_TRUE(conn_->Exec("ALTER TABLE token_balances DROP COLUMN transfer_count").ok());
  ASSERT_TRUE(conn_->Exec("ALTER TABLE applied_events DROP COLUMN reverted_at").ok());
  EXPECT_FALSE(StartBesideAnOpenApply()) << "adding a column must wait for the transaction";
  EXPECT_EQ(Count("SELECT count(*) FROM information_schema.columns WHERE "
                  "(table_name = 'token_balances' AND column_name = 'transfer_count') OR "
                  "(table_name = 'applied_events' AND column_name = 'reverted_at')"),
            2);
}

// The same through the consumers: the second starts while the first is applying events.
TEST_F(BalancesTest, ASecondConsumerStartedWhileTheFirstIsApplyingStartsAndTheyEqualTheAggregate) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(redis);
  auto blocks = RandomTransfers(16, 12, 31);
  ASSERT_TRUE(StoreTransfers(*conn_, blocks).ok());
  ASSERT_TRUE(conn_->Exec("DELETE FROM token_transfers WHERE block_number >= 112").ok());
  std::vector<OutgoingEvent> events = EventsOf(blocks);
  for (OutgoingEvent& r : RetractionsOf(Slice(blocks, 12))) events.push_back(std::move(r));
  std::vector<const OutgoingEvent*> deliveries;
  for (const OutgoingEvent& e : events) deliveries.push_back(&e);
  std::mt19937 rng(13);
  std::shuffle(deliveries.begin(), deliveries.end(), rng);
  ConsumeWithTwo(deliveries, redis, /*second_after_acks=*/20);
  if (HasFatalFailure()) return;
  EXPECT_EQ(Difference().first, 0);
}

}  // namespace
}  // namespace gapless
