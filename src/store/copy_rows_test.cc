#include "store/copy_rows.h"

#include <gtest/gtest.h>

#include "store/testdata.h"

namespace gapless {
namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t next = s.find(sep, pos);
    out.push_back(s.substr(pos, next - pos));
    if (next == std::string::npos) return out;
    pos = next + 1;
  }
}

size_t ColumnCount(DataTable t) { return Split(TableInfo(t).columns, ',').size(); }

TEST(CopyRows, EveryRowHasOneValuePerColumn) {
  BlockData d = SyntheticBlock(12);
  for (DataTable t : kDataTables) {
    std::string out;
    ASSERT_TRUE(AppendCopyRows(t, d, &out).ok()) << TableInfo(t).name;
    ASSERT_FALSE(out.empty() && RowCount(t, d) > 0);
    auto lines = Split(out, '\n');
    ASSERT_EQ(lines.back(), "");  // newline-terminated
    lines.pop_back();
    ASSERT_EQ(lines.size(), RowCount(t, d)) << TableInfo(t).name;
    for (const auto& line : lines) {
      EXPECT_EQ(Split(line, '\t').size(), ColumnCount(t)) << TableInfo(t).name << ": " << line;
    }
  }
}

TEST(CopyRows, FormatsHexNullsBigNumbersAndArrays) {
  BlockData d;
  d.block.number = 7;
  d.transactions.resize(1);
  Transaction& t = d.transactions[0];
  t.block_number = 7;
  t.hash = "0xAB";
  t.block_hash = "0x";
  t.from_address = "0x01";
  t.value = *U256::FromDecimal("110000000000000000000");
  t.input = "0x";
  t.blob_versioned_hashes = {"0x01ff", "0x0102"};
  t.access_list_json = "[{\"a\":\"tab\\there\"}]\t\n";
  t.v = "0x1";
  t.r = "0xabc";
  t.s = "0x0";
  t.receipt_logs_bloom = "0x00";
  std::string out;
  ASSERT_TRUE(AppendCopyRows(DataTable::kTransactions, d, &out).ok());
  auto f = Split(out.substr(0, out.size() - 1), '\t');
  EXPECT_EQ(f[0], "7");
  EXPECT_EQ(f[2], "\\\\xAB");
  EXPECT_EQ(f[3], "\\\\x");  // empty data is an empty bytea, not NULL
  EXPECT_EQ(f[6], "\\N");    // to: contract creation
  EXPECT_EQ(f[7], "110000000000000000000");
  EXPECT_EQ(f[9], "\\N");
  EXPECT_EQ(f[15], "{\\\\\\\\x01ff,\\\\\\\\x0102}");
  EXPECT_EQ(f[16], "[{\"a\":\"tab\\\\there\"}]\\t\\n");
  EXPECT_EQ(f[19], "\\\\x01");  // odd-length quantity padded
  EXPECT_EQ(f[20], "\\\\x0abc");
  EXPECT_EQ(f[21], "\\\\x00");
}

TEST(CopyRows, RefusesValuesThatWouldCorruptTheCopyNamingBlockAndField) {
  BlockData d = SyntheticBlock(3, {.transactions_per_block = 2,
                                   .logs_per_block = 2,
                                   .token_transfers_per_block = 0,
                                   .withdrawals_per_block = 0});
  std::string out;
  d.transactions[1].input = "0x12\t34";
  Status st = AppendCopyRows(DataTable::kTransactions, d, &out);
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_NE(st.message().find("block 3 transaction 1"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("field input"), std::string::npos) << st.ToString();

  d = SyntheticBlock(3, {.transactions_per_block = 2,
                         .logs_per_block = 2,
                         .token_transfers_per_block = 0,
                         .withdrawals_per_block = 0});
  d.transactions[0].access_list_json = std::string("[\0]", 3);
  st = AppendCopyRows(DataTable::kTransactions, d, &out);
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_NE(st.message().find("NUL"), std::string::npos) << st.ToString();

  d.block.number = uint64_t{1} << 63;
  st = AppendCopyRows(DataTable::kBlocks, d, &out);
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_NE(st.message().find("BIGINT"), std::string::npos) << st.ToString();

  d = SyntheticBlock(3, {.transactions_per_block = 2,
                         .logs_per_block = 2,
                         .token_transfers_per_block = 0,
                         .withdrawals_per_block = 0});
  d.logs[0].topics.assign(5, "0x00");
  st = AppendCopyRows(DataTable::kLogs, d, &out);
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_NE(st.message().find("topics"), std::string::npos) << st.ToString();
}

TEST(SyntheticBlock, IsMainnetShapedAndDeterministic) {
  BlockData a = SyntheticBlock(1001);
  EXPECT_EQ(DescribeBlockData(a), DescribeBlockData(SyntheticBlock(1001)));
  EXPECT_EQ(a.transactions.size(), 150u);
  EXPECT_EQ(a.logs.size(), 300u);
  EXPECT_GE(a.token_transfers.size(), 55u);
  EXPECT_LE(a.token_transfers.size(), 65u);
  EXPECT_EQ(a.block.parent_hash, SyntheticBlock(1000).block.hash);
  uint32_t logs = 0;
  for (const auto& t : a.transactions) logs += t.log_count;
  EXPECT_EQ(logs, 300u);
  bool big = false, creation = false, untyped = false;
  for (const auto& t : a.transactions) {
    big |= !t.value.fits_u64();
    creation |= !t.to_address.has_value();
    untyped |= !t.transaction_type.has_value();
  }
  EXPECT_TRUE(big && creation && untyped);
}

}  // namespace
}  // namespace gapless
