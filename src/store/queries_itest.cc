// Queries against a real PostgreSQL: committed ranges, max block, Verify with anomalies inserted
// by SQL, checksums.
#include <gtest/gtest.h>

#include "store/queries.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

class QueriesTest : public PgTest {
 protected:
  void Write(uint64_t from, uint64_t to) {
    Status st = WriteRange(conn(), SyntheticRange(from, to,
                                                  {.transactions_per_block = 4,
                                                   .logs_per_block = 8,
                                                   .token_transfers_per_block = 3,
                                                   .withdrawals_per_block = 2}));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void Sql(const std::string& sql) {
    Status st = conn().Exec(sql);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
};

TEST_F(QueriesTest, CommittedRangesAreMergedAndClipped) {
  auto none = CommittedRanges(conn(), 0, 100);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
  Write(0, 9);
  Write(10, 19);
  Write(30, 39);
  Write(35, 36);  // a re-cut range inside another
  auto r = CommittedRanges(conn(), 5, 35);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (Ranges{{5, 19}, {30, 35}}));
  EXPECT_EQ(*CommittedRanges(conn(), 0, 1000), (Ranges{{0, 19}, {30, 39}}));
  EXPECT_EQ(*CommittedRanges(conn(), 20, 29), Ranges{});
  EXPECT_EQ(*CommittedRanges(conn(), 39, 39), (Ranges{{39, 39}}));
}

TEST_F(QueriesTest, MaxBlock) {
  auto empty = MaxBlock(conn());
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_FALSE(empty->has_value());
  Write(3, 7);
  auto max = MaxBlock(conn());
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(max->value(), 7u);
}

TEST_F(QueriesTest, VerifyPassesOnACleanRange) {
  Write(0, 39);
  auto report = Verify(conn(), 0, 39);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok()) << report->Render();
  EXPECT_EQ(report->blocks_found, 40u);
  EXPECT_NE(report->Render().find("OK"), std::string::npos);
  // A sub-interval checks its first block's parent link against the block before it.
  auto inner = Verify(conn(), 10, 20);
  ASSERT_TRUE(inner.ok());
  EXPECT_TRUE(inner->ok()) << inner->Render();
}

TEST_F(QueriesTest, VerifyReportsMissingBlocksAsCompactGaps) {
  Write(10, 29);
  Sql("DELETE FROM blocks WHERE number IN (15, 16, 17, 22)");
  auto report = Verify(conn(), 5, 32);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->ok());
  EXPECT_EQ(report->missing, (Ranges{{5, 9}, {15, 17}, {22, 22}, {30, 32}}));
  EXPECT_EQ(report->missing_count(), 12u);
  EXPECT_EQ(report->blocks_found, 16u);
  EXPECT_TRUE(report->parent_breaks.empty()) << report->Render();  // gaps are not breaks
  std::string text = report->Render();
  EXPECT_NE(text.find("missing blocks: 5-9 15-17 22 30-32"), std::string::npos) << text;
  // The deleted blocks' transactions are still there: reported as rows without their block.
  EXPECT_NE(text.find("block 15: 4 transactions stored but the block is not"), std::string::npos)
      << text;
  EXPECT_NE(text.find("FAILED"), std::string::npos);

  auto empty = Verify(conn(), 100, 110);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->missing, (Ranges{{100, 110}}));
}

TEST_F(QueriesTest, VerifyFindsParentHashBreaks) {
  Write(0, 20);
  Sql("UPDATE blocks SET parent_hash = '\\x00' WHERE number = 12");
  Sql("UPDATE blocks SET hash = '\\x01' WHERE number = 4");  // breaks the link 4 -> 5
  auto report = Verify(conn(), 0, 20);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->parent_breaks, (std::vector<uint64_t>{5, 12}));
  EXPECT_TRUE(report->missing.empty());
  EXPECT_NE(report->Render().find("block 12's parent_hash is not the hash of block 11"),
            std::string::npos)
      << report->Render();
  // The link into the interval's first block is checked too.
  auto from5 = Verify(conn(), 5, 6);
  ASSERT_TRUE(from5.ok());
  EXPECT_EQ(from5->parent_breaks, (std::vector<uint64_t>{5}));
}

TEST_F(QueriesTest, VerifyFindsCountAndHashMismatches) {
  Write(0, 9);
  Sql("UPDATE blocks SET transaction_count = 5 WHERE number = 3");
  Sql("DELETE FROM logs WHERE block_number = 6 AND log_index = 1");
  Sql("UPDATE transactions SET block_hash = '\\x02' WHERE block_number = 7 AND"
      " transaction_index = 1");
  Sql("UPDATE logs SET block_hash = '\\x03' WHERE block_number = 8 AND log_index = 2");
  Sql("UPDATE logs SET transaction_hash = '\\x04' WHERE block_number = 9 AND log_index = 3");
  auto report = Verify(conn(), 0, 9);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->ok());
  EXPECT_TRUE(report->missing.empty());
  EXPECT_TRUE(report->parent_breaks.empty());
  std::string text = report->Render();
  EXPECT_NE(text.find("block 3: transaction_count is 5 but 4 transactions are stored"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("block 6: transaction 0: log_count is 2 but 1 logs are stored"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("block 7: transaction 1: block_hash is not the block's hash"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("block 8: log 2: block_hash is not the block's hash"), std::string::npos)
      << text;
  EXPECT_NE(text.find("block 9: log 3: transaction_hash differs"), std::string::npos) << text;
  // Each anomaly is reported once.
  EXPECT_EQ(report->inconsistencies.size(), 5u) << text;
}

TEST_F(QueriesTest, TableChecksumOrdersRowsAndRefusesUnknownTables) {
  Write(0, 3);
  auto a = TableChecksum(conn(), "logs", 0, 3);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size(), 32u);
  auto part = TableChecksum(conn(), "logs", 0, 2);
  ASSERT_TRUE(part.ok());
  EXPECT_NE(*a, *part);
  Sql("UPDATE logs SET removed = NOT removed WHERE block_number = 1 AND log_index = 1");
  EXPECT_NE(*TableChecksum(conn(), "logs", 0, 3), *a);
  EXPECT_EQ(TableChecksum(conn(), "schema_migrations", 0, 3).status().code(),
            Code::kFailedPrecondition);
  EXPECT_EQ(TableChecksum(conn(), "logs; DROP TABLE blocks", 0, 3).status().code(),
            Code::kFailedPrecondition);
}

// The checksum is computed per chunk of blocks (no one string of every row: PostgreSQL refuses
// strings over 1 GB, which a whole table of mainnet blocks passes). Across chunks: stable for the
// same rows, changed by a row of any chunk, and the same rows in another order of writes give the
// same value.
TEST_F(QueriesTest, TableChecksumOverChunksSeesEveryChunk) {
  Write(0, 7);
  for (const char* table : {"blocks", "transactions", "logs"}) {
    SCOPED_TRACE(table);
    auto a = TableChecksum(conn(), table, 0, 7, /*chunk_blocks=*/3);  // [0,2] [3,5] [6,7]
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(*TableChecksum(conn(), table, 0, 7, 3), *a);
    EXPECT_NE(*TableChecksum(conn(), table, 0, 6, 3), *a) << "the last chunk's rows did not count";
  }
  auto before = TableChecksum(conn(), "logs", 0, 7, 3);
  ASSERT_TRUE(before.ok());
  Sql("UPDATE logs SET removed = NOT removed WHERE block_number = 7 AND log_index = 0");
  EXPECT_NE(*TableChecksum(conn(), "logs", 0, 7, 3), *before) << "a change in the last chunk";
  Sql("UPDATE logs SET removed = NOT removed WHERE block_number = 7 AND log_index = 0");
  EXPECT_EQ(*TableChecksum(conn(), "logs", 0, 7, 3), *before);
  Sql("UPDATE logs SET removed = NOT removed WHERE block_number = 4 AND log_index = 0");
  EXPECT_NE(*TableChecksum(conn(), "logs", 0, 7, 3), *before) << "a change in a middle chunk";
  EXPECT_EQ(TableChecksum(conn(), "logs", 0, 7, 0).status().code(), Code::kFailedPrecondition);
}

}  // namespace
}  // namespace gapless
