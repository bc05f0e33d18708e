// Block-range partitions against a real PostgreSQL: created on demand across boundaries, rows in
// the partition of their block, a database that held rows before migration 011 keeps them in a
// legacy partition, the layout cannot change under rows, concurrent creators create once.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "store/copy_rows.h"
#include "store/migrate.h"
#include "store/partitions.h"
#include "store/queries.h"
#include "store/reader.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

// Every data table's partitions, "table_pN" names, for every table.
int64_t PartitionCount(PgConn& conn) {
  return QueryCount(
      conn,
      "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
      " WHERE i.inhparent::regclass::text IN ('blocks', 'withdrawals', 'transactions',"
      " 'logs', 'token_transfers', 'traces', 'contracts')");
}

class PartitionsTest : public PgTest {};

TEST_F(PartitionsTest, AWriteAcrossBoundariesCreatesEachPartitionInEveryTable) {
  ASSERT_TRUE(SetPartitionBlocks(conn(), 10).ok());
  EXPECT_EQ(PartitionCount(conn()), 0);  // a fresh database has none until a write
  RangeWrite w = SyntheticRange(5, 24, SmallSyntheticOptions());
  Status st = WriteRange(conn(), w);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(PartitionCount(conn()), 3 * 7);  // [0,10) [10,20) [20,30) of seven tables
  auto starts = PartitionStarts(conn());
  ASSERT_TRUE(starts.ok()) << starts.status().ToString();
  EXPECT_EQ(*starts, (std::vector<uint64_t>{0, 10, 20}));
  // Each row in its block's partition.
  EXPECT_EQ(QueryCount(conn(), "SELECT count(*) FROM blocks_p0"), 5);
  EXPECT_EQ(QueryCount(conn(), "SELECT count(*) FROM blocks_p10"), 10);
  EXPECT_EQ(QueryCount(conn(), "SELECT count(*) FROM transactions_p20"), 5 * 4);
  EXPECT_EQ(QueryCount(conn(),
                       "SELECT count(*) FROM traces_p10 WHERE block_number NOT BETWEEN 10 AND 19"),
            0);
  auto back = ReadBlocks(conn(), 5, 24);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), w.blocks.size());
  for (size_t i = 0; i < w.blocks.size(); ++i) {
    EXPECT_EQ(DescribeBlockData((*back)[i]), DescribeBlockData(w.blocks[i])) << "block " << i;
  }
  // A new partition has its primary key alone: its secondary indexes are built when it is due
  // (store/partition_indexes.h; partition_indexes_itest).
  EXPECT_EQ(
      QueryCount(conn(), "SELECT count(*) FROM pg_indexes WHERE tablename = 'transactions_p10'"),
      1);
  EXPECT_EQ(QueryCount(conn(), "SELECT count(*) FROM pg_index WHERE NOT indisvalid"), 0);
  // New partitions compress their wide columns as the parents do (migration 012: lz4 where the
  // server has it).
  EXPECT_EQ(QueryCount(conn(),
                       "SELECT count(*) FROM pg_attribute p, pg_attribute c"
                       " WHERE p.attrelid = 'transactions'::regclass"
                       " AND c.attrelid = 'transactions_p20'::regclass"
                       " AND p.attname = 'input' AND c.attname = 'input'"
                       " AND p.attcompression = c.attcompression"
                       " AND (p.attcompression = 'l' OR NOT EXISTS (SELECT 1 FROM pg_settings"
                       "  WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)))"),
            1);
  // Writing the range again (both modes) and a rollback-style delete work across partitions.
  ASSERT_TRUE(WriteRange(conn(), w, {.mode = WriteMode::kReplaceRange}).ok());
  ASSERT_TRUE(WriteRange(conn(), w, {.direct_copy_when_empty = false}).ok());
  EXPECT_EQ(QueryCount(conn(), "SELECT count(*) FROM blocks"), 20);
  ASSERT_TRUE(conn().Exec("DELETE FROM transactions WHERE block_number > 15").ok());
  EXPECT_EQ(QueryCount(conn(), "SELECT count(*) FROM transactions_p10"), 6 * 4);
  EXPECT_EQ(QueryCount(conn(), "SELECT count(*) FROM transactions_p20"), 0);
}

TEST_F(PartitionsTest, TheLayoutCannotChangeUnderPartitions) {
  ASSERT_TRUE(SetPartitionBlocks(conn(), 100).ok());
  ASSERT_TRUE(SetPartitionBlocks(conn(), 50).ok());  // nothing written yet
  ASSERT_TRUE(WriteRange(conn(), SyntheticRange(1, 3, SmallSyntheticOptions())).ok());
  Status st = SetPartitionBlocks(conn(), 10);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("already partitioned by 50 blocks"), std::string::npos)
      << st.ToString();
  EXPECT_TRUE(SetPartitionBlocks(conn(), 50).ok());  // the same layout is fine
  EXPECT_EQ(SetPartitionBlocks(conn(), 0).code(), Code::kFailedPrecondition);
}

// A creator that has made a partition but not committed yet: the layout cannot change under it
// (SetPartitionBlocks waits for the creators' lock, then sees the partition).
TEST_F(PartitionsTest, TheLayoutWaitsForACreatorInFlight) {
  ASSERT_TRUE(SetPartitionBlocks(conn(), 10).ok());
  auto creator = db().Connect();
  ASSERT_TRUE(creator.ok());
  ASSERT_TRUE(
      (*creator)
          ->Exec("BEGIN; SELECT pg_advisory_xact_lock(7350693551146172770);"
                 " CREATE TABLE blocks_p0 (LIKE blocks INCLUDING DEFAULTS);"
                 " ALTER TABLE blocks ATTACH PARTITION blocks_p0 FOR VALUES FROM (0) TO (10)")
          .ok());
  Status set;
  std::thread thread([&] {
    auto c = db().Connect();
    set = c.ok() ? SetPartitionBlocks(**c, 50) : c.status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE((*creator)->Exec("COMMIT").ok());
  thread.join();
  EXPECT_EQ(set.code(), Code::kFailedPrecondition) << set.ToString();
  auto layout = LoadPartitionLayout(conn());
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->blocks, 10u);
}

// The size a creator uses is the one committed when it holds the creators' lock (issue 35): a
// creator that read it before waiting made blocks_p0 of the old size (1,000,000 blocks) while the
// new one (40) committed, and every partition after it then overlapped p0 (SQLSTATE 42P17).
TEST_F(PartitionsTest, ACreatorUsesTheSizeCommittedUnderTheLock) {
  auto setter = db().Connect();
  ASSERT_TRUE(setter.ok());
  ASSERT_TRUE((*setter)
                  ->Exec("BEGIN; SELECT pg_advisory_xact_lock(7350693551146172770);"
                         " UPDATE indexer_state SET value = '40' WHERE key = 'partition_blocks'")
                  .ok());
  Status created;
  std::thread thread([&] {
    auto c = db().Connect();
    created = c.ok() ? EnsurePartitions(**c, 0, 9) : c.status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE((*setter)->Exec("COMMIT").ok());
  thread.join();
  ASSERT_TRUE(created.ok()) << created.ToString();
  auto bound = conn().Query(
      "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = 'blocks_p0'");
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  ASSERT_EQ(bound->rows(), 1);
  EXPECT_EQ(bound->Get(0, 0), "FOR VALUES FROM ('0') TO ('40')");
  // The next partitions fit beside it, and rows go where they belong.
  Status st = WriteRange(conn(), SyntheticRange(30, 89, SmallSyntheticOptions()));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(QueryCount(conn(), "SELECT count(*) FROM blocks_p40"), 40);
}

// A partition of another size already there (made by a gapless before the fix above, or by
// hand): creating an overlapping one is redone (Aborted), not dead-lettered as internal.
TEST_F(PartitionsTest, AnOverlappingPartitionIsAbortedNotInternal) {
  ASSERT_TRUE(SetPartitionBlocks(conn(), 40).ok());
  ASSERT_TRUE(conn()
                  .Exec("CREATE TABLE blocks_p0 (LIKE blocks INCLUDING DEFAULTS);"
                        " ALTER TABLE blocks ATTACH PARTITION blocks_p0"
                        " FOR VALUES FROM (0) TO (1000000)")
                  .ok());
  Status st = EnsurePartitions(conn(), 40, 79);
  EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
  EXPECT_EQ(st.reason(), "sqlstate:42P17") << st.ToString();
  EXPECT_NE(st.message().find("blocks_p40 of 40 blocks"), std::string::npos) << st.ToString();
}

TEST_F(PartitionsTest, ConcurrentCreatorsCreateEachPartitionOnce) {
  ASSERT_TRUE(SetPartitionBlocks(conn(), 10).ok());
  std::vector<Status> results(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      auto c = db().Connect();
      results[i] = c.ok() ? EnsurePartitions(**c, 0, 99) : c.status();
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& st : results) EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(PartitionCount(conn()), 10 * 7);
  EXPECT_EQ(EnsurePartitions(conn(), 0, 99).code(), Code::kOk);
  ASSERT_TRUE(conn().Exec("BEGIN").ok());
  EXPECT_EQ(EnsurePartitions(conn(), 100, 100).code(), Code::kInternal);  // not in a transaction
  ASSERT_TRUE(conn().Exec("ROLLBACK").ok());
}

// A database that held rows before migration 011: they stay where they are, in the legacy
// partitions below partition_floor, readable and equal; new blocks above go to new partitions,
// and a gap below the floor is still writable (into the legacy partition).
TEST(PartitionsMigration, RowsStoredBeforeTheMigrationStayInALegacyPartition) {
  PgTestDb db;
  if (db.skipped()) GTEST_SKIP() << "GAPLESS_TEST_PG_URL is not set";
  ASSERT_FALSE(db.failed()) << db.error().ToString();
  auto conn_or = db.Connect();
  ASSERT_TRUE(conn_or.ok());
  PgConn& conn = **conn_or;
  ASSERT_TRUE(Migrate(conn, 10).ok());
  // Rows written by the schema before 011 (by raw COPY: the writer of this build partitions).
  RangeWrite old = SyntheticRange(1000, 1019, SmallSyntheticOptions());
  std::string buffer;
  ASSERT_TRUE(conn.Exec("BEGIN").ok());
  for (DataTable t : kDataTables) {
    Status st =
        CopyBlocks(conn, t, TableInfo(t).name, old.blocks, CopyFormat::kBinary, 1 << 20, &buffer);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  ASSERT_TRUE(conn.Exec("COMMIT").ok());
  auto before = TableChecksum(conn, "transactions", 0, 5000);
  ASSERT_TRUE(before.ok()) << before.status().ToString();

  Status migrated = Migrate(conn);
  ASSERT_TRUE(migrated.ok()) << migrated.ToString();
  auto layout = LoadPartitionLayout(conn);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->blocks, 1'000'000u);
  EXPECT_EQ(layout->floor, 1'000'000u);  // the first multiple above block 1019
  EXPECT_EQ(QueryCount(conn, "SELECT count(*) FROM blocks_legacy"), 20);
  EXPECT_EQ(QueryCount(conn, "SELECT count(*) FROM blocks"), 20);
  auto after = TableChecksum(conn, "transactions", 0, 5000);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(*after, *before);
  EXPECT_EQ(QueryCount(conn, "SELECT count(*) FROM pg_index WHERE NOT indisvalid"), 0);
  // Blocks above the floor: a new partition; blocks below it (a gap): the legacy one.
  ASSERT_TRUE(WriteRange(conn, SyntheticRange(1'000'005, 1'000'009, SmallSyntheticOptions())).ok());
  EXPECT_EQ(QueryCount(conn, "SELECT count(*) FROM blocks_p1000000"), 5);
  Status below = WriteRange(conn, SyntheticRange(500, 504, SmallSyntheticOptions()));
  ASSERT_TRUE(below.ok()) << below.ToString();
  EXPECT_EQ(QueryCount(conn, "SELECT count(*) FROM blocks_legacy"), 25);
  // The rows written before read back as they were written.
  auto back = ReadBlocks(conn, 1000, 1019);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), old.blocks.size());
  for (size_t i = 0; i < old.blocks.size(); ++i) {
    EXPECT_EQ(DescribeBlockData((*back)[i]), DescribeBlockData(old.blocks[i])) << "block " << i;
  }
}

TEST(PartitionsMigration, AnEmptyDatabaseHasNoLegacyPartition) {
  PgTestDb db;
  if (db.skipped()) GTEST_SKIP() << "GAPLESS_TEST_PG_URL is not set";
  ASSERT_FALSE(db.failed()) << db.error().ToString();
  auto conn = db.ConnectMigrated();
  ASSERT_TRUE(conn.ok());
  EXPECT_EQ(QueryCount(**conn, "SELECT count(*) FROM pg_class WHERE relname LIKE '%\\_legacy'"), 0);
  auto layout = LoadPartitionLayout(**conn);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->floor, 0u);
}

}  // namespace
}  // namespace gapless
