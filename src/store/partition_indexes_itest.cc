// Partition secondary indexes against a real PostgreSQL (store/partition_indexes.h): a partition
// is made with its primary key alone, built when asked, a build cut short is redone, one builder at
// a time per partition, and migration 013 keeps the indexes partitions already had.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "store/copy_rows.h"
#include "store/migrate.h"
#include "store/partition_indexes.h"
#include "store/partitions.h"
#include "store/queries.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

// The non-primary indexes on the partitions of block `start`, valid or not.
int64_t SecondaryIndexCount(PgConn& conn, uint64_t start, bool valid) {
  return QueryCount(conn,
                    "SELECT count(*) FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid"
                    " WHERE NOT x.indisprimary AND c.relname ~ '_p" +
                        std::to_string(start) +
                        "$' AND x.indisvalid = " + (valid ? "true" : "false"));
}

std::vector<uint64_t> MissingStarts(PgConn& conn) {
  auto missing = PartitionsMissingIndexes(conn);
  EXPECT_TRUE(missing.ok()) << missing.status().ToString();
  std::vector<uint64_t> out;
  if (!missing.ok()) return out;
  for (const PartitionIndexState& p : *missing) {
    EXPECT_EQ(p.missing, 7) << "partition " << p.start;
    out.push_back(p.start);
  }
  return out;
}

TEST(PartitionIndexesDue, FinishedOrNearTheTarget) {
  // Partitions of 10 blocks, near_head 5.
  EXPECT_TRUE(PartitionIndexesDue(0, 10, 10, 1000, 5));    // frontier past its last block
  EXPECT_FALSE(PartitionIndexesDue(0, 10, 9, 1000, 5));    // block 9 not committed yet
  EXPECT_FALSE(PartitionIndexesDue(10, 10, 12, 1000, 5));  // being filled, far from the target
  // Within 5 blocks of the target: the partitions up to the target, not those above it.
  EXPECT_TRUE(PartitionIndexesDue(990, 10, 996, 1000, 5));
  EXPECT_TRUE(PartitionIndexesDue(1000, 10, 996, 1000, 5));
  EXPECT_FALSE(PartitionIndexesDue(1010, 10, 996, 1000, 5));
  EXPECT_TRUE(PartitionIndexesDue(1000, 10, 1001, 1000, 0));  // the target passed
  // An unknown target: finished partitions only, whatever near_head says.
  EXPECT_FALSE(PartitionIndexesDue(10, 10, 12, UINT64_MAX, UINT64_MAX));
  EXPECT_TRUE(PartitionIndexesDue(10, 10, 20, UINT64_MAX, 0));
  // "always": every partition up to the target at once.
  EXPECT_TRUE(PartitionIndexesDue(500, 10, 0, 1000, UINT64_MAX));
}

class PartitionIndexesTest : public PgTest {};

TEST_F(PartitionIndexesTest, APartitionHasItsPrimaryKeyAloneUntilItsIndexesAreBuilt) {
  ASSERT_TRUE(SetPartitionBlocks(conn(), 10).ok());
  RangeWrite w = SyntheticRange(5, 24, SmallSyntheticOptions());
  ASSERT_TRUE(WriteRange(conn(), w).ok());
  // Three partitions in every table, each with its primary key and nothing else.
  EXPECT_EQ(MissingStarts(conn()), (std::vector<uint64_t>{0, 10, 20}));
  EXPECT_EQ(SecondaryIndexCount(conn(), 10, true), 0);
  EXPECT_EQ(
      QueryCount(conn(), "SELECT count(*) FROM pg_indexes WHERE tablename = 'transactions_p10'"),
      1);
  // The partitioned tables define no secondary index (migration 013).
  EXPECT_EQ(QueryCount(conn(), "SELECT count(*) FROM pg_indexes WHERE tablename = 'transactions'"),
            1);

  Result<bool> built = BuildPartitionIndexes(conn(), 10);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_TRUE(*built);
  EXPECT_EQ(MissingStarts(conn()), (std::vector<uint64_t>{0, 20}));
  EXPECT_EQ(SecondaryIndexCount(conn(), 10, true), 7);
  EXPECT_EQ(QueryCount(conn(),
                       "SELECT count(*) FROM pg_indexes WHERE tablename = 'transactions_p10'"
                       " AND indexdef LIKE '%(hash)'"),
            1);
  // Built again: nothing to do.
  built = BuildPartitionIndexes(conn(), 10);
  ASSERT_TRUE(built.ok() && *built);
  EXPECT_EQ(SecondaryIndexCount(conn(), 10, true), 7);
  // A lookup by hash finds the same row in an indexed partition and in one that is not.
  for (uint64_t block : {12u, 22u}) {
    const std::string hash = w.blocks[block - 5].transactions[1].hash;
    EXPECT_EQ(QueryCount(conn(), "SELECT count(*) FROM transactions WHERE hash = decode('" +
                                     hash.substr(2) +
                                     "', 'hex') AND block_number = " + std::to_string(block)),
              1)
        << block;
  }
  // Writes and rollbacks go on in an indexed partition, and the indexes follow them.
  ASSERT_TRUE(WriteRange(conn(), w, {.mode = WriteMode::kReplaceRange}).ok());
  ASSERT_TRUE(conn().Exec("DELETE FROM transactions WHERE block_number > 15").ok());
  ASSERT_TRUE(conn().Exec("SET enable_seqscan = off").ok());
  EXPECT_EQ(QueryCount(conn(), "SELECT count(*) FROM transactions_p10 WHERE hash IS NOT NULL"),
            6 * 4);
  ASSERT_TRUE(conn().Exec("RESET enable_seqscan").ok());
}

// A build cut short (here: cancelled while it waits for a writer's transaction) leaves an invalid
// index behind; while it runs another builder skips the partition; the next build drops the
// leftover and builds every index.
TEST_F(PartitionIndexesTest, ABuildCutShortIsRedoneAndBuildersTakeTurns) {
  ASSERT_TRUE(SetPartitionBlocks(conn(), 10).ok());
  ASSERT_TRUE(WriteRange(conn(), SyntheticRange(0, 9, SmallSyntheticOptions())).ok());
  auto writer = db().Connect();
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Exec("BEGIN; LOCK TABLE transactions_p0 IN ROW EXCLUSIVE MODE").ok());

  auto builder = db().Connect();
  ASSERT_TRUE(builder.ok());
  std::unique_ptr<PgCanceller> cancel = (*builder)->MakeCanceller();
  ASSERT_NE(cancel, nullptr);
  Result<bool> cut = false;
  std::thread thread([&] { cut = BuildPartitionIndexes(**builder, 0); });
  // The build waits for the writer with its index already in the catalog, invalid.
  for (int i = 0; i < 200 && SecondaryIndexCount(conn(), 0, false) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(SecondaryIndexCount(conn(), 0, false), 1);
  // Meanwhile another builder leaves the partition alone.
  auto other = db().Connect();
  ASSERT_TRUE(other.ok());
  Result<bool> skipped = BuildPartitionIndexes(**other, 0);
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  EXPECT_FALSE(*skipped);
  EXPECT_TRUE(cancel->Cancel());
  thread.join();
  EXPECT_FALSE(cut.ok());
  ASSERT_TRUE((*writer)->Exec("ROLLBACK").ok());
  EXPECT_EQ(SecondaryIndexCount(conn(), 0, false), 1);  // the leftover
  EXPECT_EQ(MissingStarts(conn()), (std::vector<uint64_t>{0}));

  Result<bool> built = BuildPartitionIndexes(**other, 0);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_TRUE(*built);
  EXPECT_EQ(SecondaryIndexCount(conn(), 0, false), 0);
  EXPECT_EQ(SecondaryIndexCount(conn(), 0, true), 7);
  EXPECT_TRUE(MissingStarts(conn()).empty());
}

// A database partitioned by 011/012, whose partitions got the partitioned tables' indexes: after
// 013 they still have them (no rebuild), the rows are unchanged, and a new partition has its
// primary key alone.
TEST(PartitionIndexesMigration, PartitionsKeepTheIndexesTheyHad) {
  PgTestDb db;
  if (db.skipped()) GTEST_SKIP() << "GAPLESS_TEST_PG_URL is not set";
  ASSERT_FALSE(db.failed()) << db.error().ToString();
  auto conn_or = db.Connect();
  ASSERT_TRUE(conn_or.ok());
  PgConn& conn = **conn_or;
  ASSERT_TRUE(Migrate(conn, 12).ok());
  ASSERT_TRUE(SetPartitionBlocks(conn, 10).ok());
  // Today's writer records the range's datasets (migration 014) and marks live blocks (016): the
  // columns for the write only.
  ASSERT_TRUE(conn.Exec("ALTER TABLE indexed_ranges ADD COLUMN datasets TEXT[];"
                        " ALTER TABLE blocks ADD COLUMN live BOOLEAN")
                  .ok());
  ASSERT_TRUE(WriteRange(conn, SyntheticRange(0, 19, SmallSyntheticOptions())).ok());
  ASSERT_TRUE(conn.Exec("ALTER TABLE indexed_ranges DROP COLUMN datasets;"
                        " ALTER TABLE blocks DROP COLUMN live")
                  .ok());
  EXPECT_EQ(SecondaryIndexCount(conn, 10, true), 7);  // made by ATTACH from the parents' indexes
  const int64_t oid_before =
      QueryCount(conn, "SELECT 'transactions_p10_hash_idx'::regclass::oid::bigint");
  auto before = TableChecksum(conn, "transactions", 0, 100);
  ASSERT_TRUE(before.ok()) << before.status().ToString();

  Status migrated = Migrate(conn);
  ASSERT_TRUE(migrated.ok()) << migrated.ToString();
  EXPECT_TRUE(MissingStarts(conn).empty());
  EXPECT_EQ(SecondaryIndexCount(conn, 10, true), 7);
  EXPECT_EQ(QueryCount(conn, "SELECT 'transactions_p10_hash_idx'::regclass::oid::bigint"),
            oid_before);
  EXPECT_EQ(QueryCount(conn,
                       "SELECT count(*) FROM pg_indexes WHERE tablename IN ('transactions',"
                       " 'logs', 'token_transfers', 'traces', 'contracts')"),
            5);  // the primary keys
  EXPECT_EQ(QueryCount(conn, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'logs'::regclass"),
            2);
  auto after = TableChecksum(conn, "transactions", 0, 100);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(*after, *before);
  ASSERT_TRUE(WriteRange(conn, SyntheticRange(20, 24, SmallSyntheticOptions())).ok());
  EXPECT_EQ(MissingStarts(conn), (std::vector<uint64_t>{20}));
}

}  // namespace
}  // namespace gapless
