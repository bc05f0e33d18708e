// The range writer against a real PostgreSQL: every column round-trips, both modes are
// idempotent, a failing range commits nothing, fencing, input checks, the chain id.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "store/datasets.h"
#include "store/partitions.h"
#include "store/queries.h"
#include "store/reader.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

constexpr const char* kTables[] = {"blocks", "withdrawals",     "transactions",
                                   "logs",   "token_transfers", "traces"};

SyntheticOptions Small() {
  return {.transactions_per_block = 12,
          .logs_per_block = 25,
          .token_transfers_per_block = 12,
          .withdrawals_per_block = 3};
}

class WriterTest : public PgTest {
 protected:
  std::string Checksums(uint64_t from, uint64_t to) {
    std::string out;
    for (const char* t : kTables) {
      auto sum = TableChecksum(conn(), t, from, to);
      EXPECT_TRUE(sum.ok()) << sum.status().ToString();
      out += std::string(t) + "=" + (sum.ok() ? *sum : "?") + "\n";
    }
    return out;
  }
  int64_t Count(const std::string& sql) {
    auto res = conn().Query(sql);
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    return res.ok() ? *res->GetInt64(0, 0) : -1;
  }
  int64_t RowsInAllTables() {
    int64_t n = 0;
    for (const char* t : kTables) n += Count(std::string("SELECT count(*) FROM ") + t);
    return n;
  }
};

TEST_F(WriterTest, ReadBlocksCanLeaveOutLogsAndWithdrawals) {
  RangeWrite w = SyntheticRange(10, 12, Small());
  ASSERT_TRUE(WriteRange(conn(), w).ok());
  auto lean = ReadBlocks(conn(), 10, 12, {.logs = false, .withdrawals = false});
  ASSERT_TRUE(lean.ok()) << lean.status().ToString();
  ASSERT_EQ(lean->size(), 3u);
  for (size_t i = 0; i < lean->size(); ++i) {
    BlockData want = w.blocks[i];
    ASSERT_FALSE(want.logs.empty());
    want.logs.clear();
    want.block.withdrawals.clear();
    EXPECT_EQ(DescribeBlockData((*lean)[i]), DescribeBlockData(want)) << "block " << i;
  }
}

TEST_F(WriterTest, EveryColumnRoundTrips) {
  SyntheticOptions traced;
  traced.traces_per_block = 60;  // 20 traced transactions: 61 traces per block
  // mainnet-shaped: 150 txs, 300 logs, ~60 transfers per block
  RangeWrite w = SyntheticRange(100, 104, traced);
  Status st = WriteRange(conn(), w);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto back = ReadBlocks(conn(), 100, 104);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), w.blocks.size());
  for (size_t i = 0; i < w.blocks.size(); ++i) {
    EXPECT_EQ(DescribeBlockData((*back)[i]), DescribeBlockData(w.blocks[i])) << "block " << i;
  }
  EXPECT_EQ(Count("SELECT count(*) FROM transactions"), 5 * 150);
  EXPECT_EQ(Count("SELECT count(*) FROM logs"), 5 * 300);
  EXPECT_EQ(Count("SELECT count(*) FROM traces"), 5 * 61);
  // Values above 2^64 and at 2^256-1 are exact.
  EXPECT_GT(Count("SELECT count(*) FROM transactions WHERE value > 18446744073709551615"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM token_transfers WHERE value = 2::numeric ^ 256 - 1"),
            Count("SELECT count(*) FROM token_transfers WHERE value > 2::numeric ^ 255"));
}

TEST_F(WriterTest, TextAndBinaryCopyStoreTheSameRowsInEitherMode) {
  SyntheticOptions traced;
  traced.traces_per_block = 30;
  RangeWrite w = SyntheticRange(200, 203, traced);
  std::string binary;
  for (WriteMode mode : {WriteMode::kStagingUpsert, WriteMode::kReplaceRange}) {
    for (CopyFormat format : {CopyFormat::kBinary, CopyFormat::kText}) {
      for (bool direct : {true, false}) {
        ASSERT_TRUE(conn()
                        .Exec("TRUNCATE blocks, withdrawals, transactions, logs, token_transfers,"
                              " traces, contracts, indexed_ranges")
                        .ok());
        WriteOptions options;
        options.mode = mode;
        options.copy_format = format;
        options.direct_copy_when_empty = direct;
        Status st = WriteRange(conn(), w, options);
        ASSERT_TRUE(st.ok()) << CopyFormatName(format) << ": " << st.ToString();
        std::string sums = Checksums(0, 1000);
        if (binary.empty()) binary = sums;
        EXPECT_EQ(sums, binary) << CopyFormatName(format) << (direct ? " direct" : " staged");
        auto back = ReadBlocks(conn(), 200, 203);
        ASSERT_TRUE(back.ok()) << back.status().ToString();
        ASSERT_EQ(back->size(), w.blocks.size());
        for (size_t i = 0; i < w.blocks.size(); ++i) {
          EXPECT_EQ(DescribeBlockData((*back)[i]), DescribeBlockData(w.blocks[i]))
              << CopyFormatName(format) << " block " << i;
        }
      }
    }
  }
}

TEST_F(WriterTest, ReplaceModeRoundTripsToo) {
  RangeWrite w = SyntheticRange(7, 9);
  Status st = WriteRange(conn(), w, {.mode = WriteMode::kReplaceRange});
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto back = ReadBlocks(conn(), 7, 9);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(DescribeBlockData((*back)[i]), DescribeBlockData(w.blocks[i]));
  }
}

TEST_F(WriterTest, TheStagingPathRoundTripsToo) {
  RangeWrite w = SyntheticRange(7, 9);
  Status st = WriteRange(conn(), w, {.direct_copy_when_empty = false});
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto back = ReadBlocks(conn(), 7, 9);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(DescribeBlockData((*back)[i]), DescribeBlockData(w.blocks[i]));
  }
}

TEST_F(WriterTest, WritingARangeTwiceChangesNothingInEitherMode) {
  RangeWrite w = SyntheticRange(50, 59, Small());
  ASSERT_TRUE(WriteRange(conn(), w).ok());
  std::string once = Checksums(0, 1000);
  int64_t rows = RowsInAllTables();
  for (WriteMode mode : {WriteMode::kStagingUpsert, WriteMode::kReplaceRange,
                         WriteMode::kStagingUpsert, WriteMode::kReplaceRange}) {
    Status st = WriteRange(conn(), w, {.mode = mode});
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(Checksums(0, 1000), once);
    EXPECT_EQ(RowsInAllTables(), rows);
  }
  EXPECT_EQ(Count("SELECT count(*) FROM indexed_ranges"), 1);
}

TEST_F(WriterTest, StagingKeepsStoredRowsAndReplaceRewritesThem) {
  RangeWrite w = SyntheticRange(1, 2, Small());
  ASSERT_TRUE(WriteRange(conn(), w).ok());
  w.blocks[1].transactions[0].value = U256(424242);
  w.blocks[1].logs.pop_back();  // a row that no longer exists in the new data
  ASSERT_TRUE(WriteRange(conn(), w).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM transactions WHERE value = 424242"), 0);
  ASSERT_TRUE(WriteRange(conn(), w, {.mode = WriteMode::kReplaceRange}).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM transactions WHERE value = 424242"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM logs WHERE block_number = 2"),
            static_cast<int64_t>(w.blocks[1].logs.size()));
}

TEST_F(WriterTest, AFailingBlockCommitsNothingInEitherMode) {
  std::vector<WriteOptions> configs = {
      {.mode = WriteMode::kStagingUpsert},
      {.mode = WriteMode::kStagingUpsert, .direct_copy_when_empty = false},
      {.mode = WriteMode::kReplaceRange}};
  for (const WriteOptions& options : configs) {
    WriteMode mode = options.mode;
    SCOPED_TRACE(mode == WriteMode::kReplaceRange ? "replace"
                 : options.direct_copy_when_empty ? "staging, direct when empty"
                                                  : "staging");
    // Rejected by the server (invalid JSON) after blocks 10..14 of the range were sent.
    RangeWrite w = SyntheticRange(10, 19, Small());
    w.blocks[5].transactions[3].access_list_json = "[{\"address\":";
    Status st = WriteRange(conn(), w, options);
    EXPECT_EQ(st.code(), Code::kInvalidData) << st.ToString();
    EXPECT_NE(st.message().find("blocks 10-19"), std::string::npos) << st.ToString();
    EXPECT_EQ(RowsInAllTables(), 0);
    EXPECT_EQ(Count("SELECT count(*) FROM indexed_ranges"), 0);

    // Rejected while serialising (a non-hex character), also after earlier tables were sent.
    w = SyntheticRange(10, 19, Small());
    w.blocks[7].logs[2].data = "0xzz";
    st = WriteRange(conn(), w, options);
    EXPECT_EQ(st.code(), Code::kInvalidData) << st.ToString();
    EXPECT_NE(st.message().find("block 17 log 2"), std::string::npos) << st.ToString();
    EXPECT_EQ(RowsInAllTables(), 0);
    EXPECT_EQ(Count("SELECT count(*) FROM indexed_ranges"), 0);

    // The connection is fine afterwards.
    ASSERT_TRUE(WriteRange(conn(), SyntheticRange(10, 19, Small()), options).ok());
    ASSERT_TRUE(conn()
                    .Exec("TRUNCATE blocks, withdrawals, transactions, logs, token_transfers,"
                          " indexed_ranges")
                    .ok());
  }
}

TEST_F(WriterTest, AFailedReplaceKeepsTheOldRows) {
  ASSERT_TRUE(WriteRange(conn(), SyntheticRange(10, 19, Small())).ok());
  std::string before = Checksums(0, 100);
  RangeWrite w = SyntheticRange(10, 19, Small());
  w.blocks[9].block.extra_data = "0x1";  // odd length: refused
  Status st = WriteRange(conn(), w, {.mode = WriteMode::kReplaceRange});
  EXPECT_EQ(st.code(), Code::kInvalidData) << st.ToString();
  EXPECT_EQ(Checksums(0, 100), before);
}

TEST_F(WriterTest, StaleFenceTokensAreAborted) {
  RangeWrite w = SyntheticRange(100, 109, Small());
  w.fence_token = 5;
  ASSERT_TRUE(WriteRange(conn(), w).ok());

  w.fence_token = 3;
  Status st = WriteRange(conn(), w);
  EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
  EXPECT_EQ(st.reason(), kStaleFenceReason) << st.ToString();
  EXPECT_NE(st.message().find("token 5"), std::string::npos) << st.ToString();
  st = WriteRange(conn(), w, {.mode = WriteMode::kReplaceRange});
  EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
  EXPECT_EQ(st.reason(), kStaleFenceReason) << st.ToString();

  w.fence_token = 7;
  ASSERT_TRUE(WriteRange(conn(), w).ok());
  ASSERT_TRUE(WriteRange(conn(), w).ok());  // the same lease retrying
  EXPECT_EQ(Count("SELECT fence_token FROM indexed_ranges WHERE from_block = 100"), 7);

  // A differently cut range overlapping 100..109 with an older token is stale too.
  RangeWrite overlap = SyntheticRange(105, 114, Small());
  overlap.fence_token = 6;
  st = WriteRange(conn(), overlap);
  EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
  EXPECT_EQ(st.reason(), kStaleFenceReason) << st.ToString();
  EXPECT_EQ(Count("SELECT count(*) FROM blocks WHERE number > 109"), 0);
  overlap.fence_token = 8;
  ASSERT_TRUE(WriteRange(conn(), overlap).ok());

  // An unfenced write is not checked and keeps the highest token.
  w.fence_token.reset();
  ASSERT_TRUE(WriteRange(conn(), w).ok());
  EXPECT_EQ(Count("SELECT fence_token FROM indexed_ranges WHERE from_block = 100"), 7);
}

// Issue 16: after a coordination-Redis failover to a lagging replica the fence counter is rolled
// back, so a token can be granted twice. The second holder of an equal token must not write over
// the first; the first holder retrying (a lost commit reply) still may.
TEST_F(WriterTest, AnEqualTokenFromAnotherLeaseHolderIsRefused) {
  RangeWrite w = SyntheticRange(200, 209, Small());
  w.fence_token = 9;
  w.fence_owner = "host:1:0";
  ASSERT_TRUE(WriteRange(conn(), w).ok());
  ASSERT_TRUE(WriteRange(conn(), w).ok()) << "the same lease retrying was refused";

  RangeWrite other = w;
  other.fence_owner = "host:2:0";
  for (WriteMode mode : {WriteMode::kStagingUpsert, WriteMode::kReplaceRange}) {
    Status st = WriteRange(conn(), other, {.mode = mode});
    EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
    EXPECT_EQ(st.reason(), kStaleFenceReason) << st.ToString();
  }
  // Also through a differently cut range that overlaps it.
  RangeWrite overlap = SyntheticRange(205, 214, Small());
  overlap.fence_token = 9;
  overlap.fence_owner = "host:2:0";
  Status st = WriteRange(conn(), overlap);
  EXPECT_EQ(st.reason(), kStaleFenceReason) << st.ToString();
  EXPECT_EQ(Count("SELECT count(*) FROM blocks WHERE number > 209"), 0);
  // A higher token from anyone passes, and becomes the range's owner.
  other.fence_token = 10;
  ASSERT_TRUE(WriteRange(conn(), other).ok());
  w.fence_token = 10;
  EXPECT_EQ(WriteRange(conn(), w).reason(), kStaleFenceReason);
}

// Two ranges that both show tokens A and B for the first time, in opposite block order, written
// at once: each upserts the tokens it carries, and a transaction that took A's row lock and waits
// for B's while the other holds B and waits for A is a deadlock (PostgreSQL aborts one). Found by
// bench/traces_bench.sh. Forced here: a third transaction holds A until both writers wait.
TEST_F(WriterTest, TwoRangesUpsertingTheSameNewTokensDoNotDeadlock) {
  const std::string a = "0x" + std::string(40, 'a'), b = "0x" + std::string(40, 'b');
  auto with_tokens = [](RangeWrite w, const std::string& first, const std::string& second) {
    for (size_t i = 0; i < 2; ++i) {
      Token t;
      t.address = i == 0 ? first : second;
      t.block_number = w.blocks[i].block.number;
      t.standard = "erc20";
      w.blocks[i].tokens.push_back(t);
    }
    return w;
  };
  SyntheticOptions small{.transactions_per_block = 1,
                         .logs_per_block = 0,
                         .token_transfers_per_block = 0,
                         .withdrawals_per_block = 0};
  const RangeWrite w1 = with_tokens(SyntheticRange(10, 11, small), a, b);
  const RangeWrite w2 = with_tokens(SyntheticRange(20, 21, small), b, a);
  auto holder = db().ConnectMigrated();
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  ASSERT_TRUE((*holder)->Exec("BEGIN").ok());
  ASSERT_TRUE((*holder)
                  ->Exec("INSERT INTO tokens (address, block_number, standard) VALUES (decode('" +
                         a.substr(2) + "', 'hex'), 1000, 'erc20')")
                  .ok());
  Status s1, s2;
  auto write = [&](const RangeWrite& w, Status* out) {
    auto conn = db().ConnectMigrated();
    *out = conn.ok() ? WriteRange(**conn, w) : conn.status();
  };
  // The first writer queues for A first, so it gets A when the holder rolls back; the second
  // has inserted B by then (without the fix: it upserts B before A) and waits behind it for A.
  std::thread t1(write, std::cref(w1), &s1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::thread t2(write, std::cref(w2), &s2);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE((*holder)->Exec("ROLLBACK").ok());
  t1.join();
  t2.join();
  EXPECT_TRUE(s1.ok()) << s1.ToString();
  EXPECT_TRUE(s2.ok()) << s2.ToString();
  auto rows = conn().Query("SELECT block_number FROM tokens ORDER BY address");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->rows(), 2);
  EXPECT_EQ(std::string(rows->Get(0, 0)), "10");  // each at its lowest block
  EXPECT_EQ(std::string(rows->Get(1, 0)), "11");
}

TEST_F(WriterTest, ConcurrentWritersOfOneRangeSerialiseOnTheFence) {
  // Two leases of the same range (the older one's holder paused past its expiry): whatever the
  // interleaving, the older token never commits after the newer one.
  for (int round = 0; round < 5; ++round) {
    auto c1 = db().Connect();
    auto c2 = db().Connect();
    ASSERT_TRUE(c1.ok() && c2.ok());
    RangeWrite older = SyntheticRange(1000 + 100 * round, 1019 + 100 * round, Small());
    RangeWrite newer = older;
    older.fence_token = 10 * round + 1;
    newer.fence_token = 10 * round + 2;
    Status s1, s2;
    std::thread t1([&] { s1 = WriteRange(**c1, older); });
    std::thread t2([&] { s2 = WriteRange(**c2, newer, {.mode = WriteMode::kReplaceRange}); });
    t1.join();
    t2.join();
    EXPECT_TRUE(s2.ok()) << s2.ToString();
    EXPECT_TRUE(s1.ok() || s1.code() == Code::kAborted) << s1.ToString();
    EXPECT_EQ(Count("SELECT fence_token FROM indexed_ranges WHERE from_block = " +
                    std::to_string(older.from_block)),
              *newer.fence_token);
  }
}

TEST_F(WriterTest, ADirectCopyRacingAnOverlappingWriterIsAbortedAndTheRetrySucceeds) {
  // Another writer (here: by hand) has inserted block 105 but not committed yet, so our range
  // still looks empty and takes the direct COPY, which then waits on that row's key.
  auto other = db().Connect();
  ASSERT_TRUE(other.ok());
  RangeWrite w = SyntheticRange(100, 109, Small());
  ASSERT_TRUE(EnsurePartitions(**other, 100, 109).ok());  // the by-hand writer's share
  ASSERT_TRUE((*other)->Exec("BEGIN").ok());
  Status inserted = (*other)->Exec(
      "INSERT INTO blocks (number, hash, parent_hash, nonce, sha3_uncles, logs_bloom,"
      " transactions_root, state_root, receipts_root, miner, difficulty, size, extra_data,"
      " gas_limit, gas_used, timestamp, transaction_count) VALUES (105, '\\x01', '\\x02', '\\x',"
      " '\\x', '\\x', '\\x', '\\x', '\\x', '\\x', 0, 0, '\\x', 0, 0, 0, 0)");
  ASSERT_TRUE(inserted.ok()) << inserted.ToString();
  Status st;
  std::thread writer([&] { st = WriteRange(conn(), w); });
  // Wait until the writer is blocked on the other transaction's uncommitted key.
  auto watcher = db().Connect();
  ASSERT_TRUE(watcher.ok());
  for (int i = 0; i < 200; ++i) {
    auto res = (*watcher)->Query(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock'");
    ASSERT_TRUE(res.ok());
    if (res->Get(0, 0) == "1") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE((*other)->Exec("COMMIT").ok());
  writer.join();
  EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
  EXPECT_EQ(st.reason(), PgSqlStateReason(kPgUniqueViolation)) << st.ToString();
  EXPECT_EQ(Count("SELECT count(*) FROM blocks"), 1);  // only the other writer's block
  st = WriteRange(conn(), w);                          // the retry takes the staging path
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Count("SELECT count(*) FROM blocks"), 10);
}

TEST_F(WriterTest, RefusesMalformedRanges) {
  RangeWrite w = SyntheticRange(5, 9, Small());
  w.blocks.pop_back();
  EXPECT_EQ(WriteRange(conn(), w).code(), Code::kInvalidData);

  w = SyntheticRange(5, 9, Small());
  std::swap(w.blocks[1], w.blocks[2]);
  Status st = WriteRange(conn(), w);
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_NE(st.message().find("out of place"), std::string::npos) << st.ToString();

  w = SyntheticRange(5, 9, Small());
  w.blocks[0].logs[3].block_number = 6;
  EXPECT_EQ(WriteRange(conn(), w).code(), Code::kInvalidData);

  w = SyntheticRange(5, 9, Small());
  w.blocks[0].transactions[2].transaction_index = 1;  // duplicate key
  st = WriteRange(conn(), w);
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_NE(st.message().find("strictly increasing"), std::string::npos) << st.ToString();

  w = RangeWrite{};
  w.from_block = 9;
  w.to_block = 5;
  EXPECT_EQ(WriteRange(conn(), w).code(), Code::kInvalidData);
  EXPECT_EQ(RowsInAllTables(), 0);
}

TEST_F(WriterTest, EnsureChainIdRecordsTheFirstAndRefusesAnother) {
  ASSERT_TRUE(EnsureChainId(conn(), 1).ok());
  ASSERT_TRUE(EnsureChainId(conn(), 1).ok());
  Status st = EnsureChainId(conn(), 11155111);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("holds chain 1"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("11155111"), std::string::npos) << st.ToString();
}

TEST_F(WriterTest, EnsureGenesisHashRefusesAnotherChainWithTheSameId) {
  const std::string a = "0x" + std::string(64, 'a');
  const std::string b = "0x" + std::string(64, 'b');
  ASSERT_TRUE(EnsureGenesisHash(conn(), a).ok());
  ASSERT_TRUE(EnsureGenesisHash(conn(), a).ok());
  Status st = EnsureGenesisHash(conn(), b);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find(a), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find(b), std::string::npos) << st.ToString();
}

TEST_F(WriterTest, StagingTablesAreRecreatedAfterAReconnect) {
  ASSERT_TRUE(WriteRange(conn(), SyntheticRange(1, 1, Small())).ok());
  const uint64_t session = conn().session_id();
  ASSERT_TRUE(db().EndSession(conn()).ok());
  // The connection is reconnected before the write (the server ended it while idle); the new
  // session has no staging tables.
  Status st = WriteRange(conn(), SyntheticRange(2, 2, Small()));
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_NE(conn().session_id(), session);
  EXPECT_EQ(Count("SELECT count(*) FROM blocks"), 2);
}

// Issue 35: a range committed without traces, written again with them (a backfill). Staging
// would keep the old contracts, numbered without the factory's; the write replaces the range's
// rows instead, so every table equals a write that held traces from the start, and the record
// says the range holds traces.
TEST_F(WriterTest, AWriteHoldingADatasetTheRangeLacksReplacesItsRows) {
  SyntheticOptions options = Small();
  options.traces_per_block = 4;
  RangeWrite traced = SyntheticRange(10, 19, options);
  traced.datasets.Add(kTracesDataset);
  Contract deployed;
  deployed.block_number = 10;
  deployed.transaction_hash = traced.blocks[0].transactions[0].hash;
  deployed.address = "0x" + std::string(40, 'a');
  deployed.creator_address = "0x" + std::string(40, 'b');
  deployed.creation_type = "create";
  Contract factory_made = deployed;
  factory_made.address = "0x" + std::string(40, 'c');
  factory_made.trace_address = {0};
  factory_made.creation_type = "create2";
  // With traces the factory's creation comes first in the block; without, only the deployment.
  traced.blocks[0].contracts = {factory_made, deployed};
  RangeWrite plain = traced;
  plain.datasets = Datasets();
  for (BlockData& b : plain.blocks) b.traces.clear();
  plain.blocks[0].contracts = {deployed};

  auto contracts = [&] {
    auto sum = TableChecksum(conn(), "contracts", 0, 100);
    EXPECT_TRUE(sum.ok()) << sum.status().ToString();
    return sum.ok() ? *sum : "?";
  };
  ASSERT_TRUE(WriteRange(conn(), traced).ok());
  const std::string fresh = Checksums(0, 100) + contracts();
  ASSERT_TRUE(conn()
                  .Exec("TRUNCATE blocks, withdrawals, transactions, logs, token_transfers,"
                        " traces, contracts, indexed_ranges")
                  .ok());
  ASSERT_TRUE(WriteRange(conn(), plain).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM traces"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM indexed_ranges WHERE datasets = '{blocks}'"), 1);
  Status st = WriteRange(conn(), traced);  // the default mode: a staging upsert
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Checksums(0, 100) + contracts(), fresh);
  EXPECT_EQ(Count("SELECT count(*) FROM indexed_ranges WHERE datasets = '{blocks,traces}'"), 1);
  // Written again, nothing changes.
  ASSERT_TRUE(WriteRange(conn(), traced).ok());
  EXPECT_EQ(Checksums(0, 100) + contracts(), fresh);
}

// A backfill replaces the range's rows, so one that would delete a dataset the range holds and
// it does not (traces, when it fills in token metadata) is refused, naming the option that keeps
// it; asked for both, it goes through.
TEST_F(WriterTest, ABackfillThatWouldDeleteADatasetTheRangeHoldsIsRefused) {
  SyntheticOptions options = Small();
  options.traces_per_block = 4;
  RangeWrite traced = SyntheticRange(10, 19, options);
  traced.datasets.Add(kTracesDataset);
  ASSERT_TRUE(WriteRange(conn(), traced).ok());
  const int64_t traces = Count("SELECT count(*) FROM traces");
  ASSERT_GT(traces, 0);
  RangeWrite metadata = traced;
  metadata.datasets = Datasets().Add(kTokenMetadataDataset);
  for (BlockData& b : metadata.blocks) b.traces.clear();
  Status st = WriteRange(conn(), metadata);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("blocks 10-19 hold traces"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("--traces"), std::string::npos) << st.ToString();
  EXPECT_EQ(Count("SELECT count(*) FROM traces"), traces);
  EXPECT_EQ(Count("SELECT count(*) FROM indexed_ranges WHERE datasets = '{blocks,traces}'"), 1);

  RangeWrite both = traced;
  both.datasets.Add(kTokenMetadataDataset);
  st = WriteRange(conn(), both);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Count("SELECT count(*) FROM traces"), traces);
  EXPECT_EQ(Count("SELECT count(*) FROM indexed_ranges"
                  " WHERE datasets = '{blocks,token_metadata,traces}'"),
            1);
}

// A backfill of part of a longer recorded range (cut larger before, or compacted) cuts it: the
// rest keeps its datasets and fence token, so the record never claims traces it lacks; a run
// asking for traces plans the rest, and verify reports it when a run asked for traces there.
TEST_F(WriterTest, ABackfillOfPartOfALongerRangeCutsItsRecord) {
  SyntheticOptions options = Small();
  options.traces_per_block = 4;
  RangeWrite plain = SyntheticRange(0, 19, options, /*fence_token=*/5);
  for (BlockData& b : plain.blocks) b.traces.clear();
  ASSERT_TRUE(WriteRange(conn(), plain).ok());
  RangeWrite traced = SyntheticRange(0, 9, options, /*fence_token=*/7);
  traced.datasets.Add(kTracesDataset);
  Status st = WriteRange(conn(), traced);
  ASSERT_TRUE(st.ok()) << st.ToString();

  auto rows = conn().Query(
      "SELECT string_agg(from_block || '-' || to_block || ' ' || fence_token || ' ' ||"
      " datasets::text, ', ' ORDER BY from_block) FROM indexed_ranges");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->Get(0, 0), "0-9 7 {blocks,traces}, 10-19 5 {blocks}");
  Datasets asked = Datasets::Blocks();
  asked.Add(kTracesDataset);
  auto done = CommittedRanges(conn(), 0, 19, asked);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(*done, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 9}}));
  auto lacking = RangesLacking(conn(), asked, 0, 19);
  ASSERT_TRUE(lacking.ok()) << lacking.status().ToString();
  EXPECT_EQ(*lacking, (std::vector<DatasetGap>{{"traces", 10, 19}}));

  // Nobody asked for traces over 10..19 yet: verify is content. Once a run did, it is not.
  auto report = Verify(conn(), 0, 19);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->missing_datasets.empty());
  ASSERT_TRUE(RecordDatasetRequest(conn(), asked, 0, 19).ok());
  report = Verify(conn(), 0, 19);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->ok());
  EXPECT_EQ(report->missing_datasets, (std::vector<DatasetGap>{{"traces", 10, 19}}));
  EXPECT_NE(report->Render().find("blocks 10-19 are committed without traces"), std::string::npos)
      << report->Render();

  // A stale token still cannot write the rest: the cut kept its token.
  RangeWrite stale = SyntheticRange(10, 19, options, /*fence_token=*/4);
  stale.datasets.Add(kTracesDataset);
  EXPECT_EQ(WriteRange(conn(), stale).reason(), kStaleFenceReason);
}

// A replacing write without a dataset takes it off the other records over its blocks: the record
// may then claim less than the rows hold (more work later), never more.
TEST_F(WriterTest, AReplacingWriteWithoutADatasetNeverLeavesItClaimed) {
  SyntheticOptions options = Small();
  options.traces_per_block = 4;
  RangeWrite traced = SyntheticRange(0, 19, options);
  traced.datasets.Add(kTracesDataset);
  ASSERT_TRUE(WriteRange(conn(), traced).ok());
  RangeWrite plain = SyntheticRange(5, 9, options);
  for (BlockData& b : plain.blocks) b.traces.clear();
  WriteOptions replace;
  replace.mode = WriteMode::kReplaceRange;
  ASSERT_TRUE(WriteRange(conn(), plain, replace).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM traces WHERE block_number BETWEEN 5 AND 9"), 0);
  Datasets asked = Datasets::Blocks();
  asked.Add(kTracesDataset);
  auto lacking = RangesLacking(conn(), asked, 0, 19);
  ASSERT_TRUE(lacking.ok()) << lacking.status().ToString();
  EXPECT_EQ(*lacking, (std::vector<DatasetGap>{{"traces", 0, 19}}));
}

}  // namespace
}  // namespace gapless
