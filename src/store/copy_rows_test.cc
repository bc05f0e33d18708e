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

// A binary COPY stream's tuples, parsed as the server does (the field count of every tuple, each
// field's length); nullopt for a NULL field. Fails the test on any framing error.
using Tuple = std::vector<std::optional<std::string>>;
std::vector<Tuple> ParseBinary(const std::string& s) {
  std::vector<Tuple> out;
  size_t at = 0;
  auto get = [&](size_t n) -> uint64_t {
    EXPECT_LE(at + n, s.size()) << "truncated at " << at;
    if (at + n > s.size()) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
    at += n;
    return v;
  };
  while (at < s.size()) {
    uint64_t fields = get(2);
    if (fields == 0xffff) break;  // the trailer
    Tuple t;
    for (uint64_t i = 0; i < fields && at < s.size(); ++i) {
      uint64_t len = get(4);
      if (len == 0xffffffff) {
        t.push_back(std::nullopt);
        continue;
      }
      EXPECT_LE(at + len, s.size());
      t.push_back(s.substr(at, len));
      at += len;
    }
    out.push_back(std::move(t));
  }
  EXPECT_EQ(at, s.size()) << "bytes after the trailer";
  return out;
}

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

TEST(CopyRows, EveryRowHasOneValuePerColumn) {
  BlockData d = SyntheticBlock(12);
  for (DataTable t : kDataTables) {
    std::string out;
    ASSERT_TRUE(AppendCopyRows(t, d, CopyFormat::kText, &out).ok()) << TableInfo(t).name;
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

TEST(CopyRows, EveryBinaryTupleHasOneValuePerColumn) {
  SyntheticOptions traced;
  traced.traces_per_block = 30;
  BlockData d = SyntheticBlock(12, traced);
  for (DataTable t : kDataTables) {
    std::string out;
    AppendCopyHeader(CopyFormat::kBinary, &out);
    ASSERT_EQ(out.size(), 19u);
    EXPECT_EQ(out.substr(0, 11), std::string("PGCOPY\n\377\r\n\0", 11));
    ASSERT_TRUE(AppendCopyRows(t, d, CopyFormat::kBinary, &out).ok()) << TableInfo(t).name;
    AppendCopyTrailer(CopyFormat::kBinary, &out);
    auto tuples = ParseBinary(out.substr(19));
    ASSERT_EQ(tuples.size(), RowCount(t, d)) << TableInfo(t).name;
    for (const Tuple& tuple : tuples) EXPECT_EQ(tuple.size(), ColumnCount(t)) << TableInfo(t).name;
  }
}

TEST(CopyRows, BinaryWritesEachValueAtItsColumnsWidth) {
  BlockData d;
  d.block.number = 7;
  d.transactions.resize(1);
  Transaction& t = d.transactions[0];
  t.block_number = 7;
  t.transaction_index = 2;
  t.hash = "0xAB";
  t.block_hash = "0x";
  t.from_address = "0x01";
  t.value = *U256::FromDecimal("110000000000000000000");
  t.gas_price = U256(123456789);
  t.max_fee_per_gas = U256(0);
  t.input = "0x";
  t.transaction_type = 2;
  t.blob_versioned_hashes = {"0x01ff", "0x0102"};
  t.access_list_json = "[{\"a\":\"tab\\there\"}]\t\n";
  t.v = "0x1";
  t.r = "0xabc";
  t.s = "0x0";
  t.receipt_logs_bloom = "0x00";
  t.log_count = 3;
  std::string out;
  ASSERT_TRUE(AppendCopyRows(DataTable::kTransactions, d, CopyFormat::kBinary, &out).ok());
  out += Bytes({0xff, 0xff});
  auto tuples = ParseBinary(out);
  ASSERT_EQ(tuples.size(), 1u);
  const Tuple& f = tuples[0];
  EXPECT_EQ(f[0], Bytes({0, 0, 0, 0, 0, 0, 0, 7}));  // BIGINT
  EXPECT_EQ(f[1], Bytes({0, 0, 0, 2}));              // INTEGER
  EXPECT_EQ(f[2], Bytes({0xab}));                    // BYTEA: the bytes
  EXPECT_EQ(f[3], "");                               // empty data is an empty bytea, not NULL
  EXPECT_EQ(f[6], std::nullopt);                     // to: contract creation
  // NUMERIC 110000000000000000000 = 1 * 10000^5 + 1000 * 10000^4: two digits (the zeros after
  // them left out), weight 5, positive, scale 0.
  EXPECT_EQ(f[7], Bytes({0, 2, 0, 5, 0, 0, 0, 0, 0, 1, 0x03, 0xe8}));
  // 123456789 = 1 2345 6789: three digits, weight 2.
  EXPECT_EQ(f[9], Bytes({0, 3, 0, 2, 0, 0, 0, 0, 0, 1, 0x09, 0x29, 0x1a, 0x85}));
  EXPECT_EQ(f[11], Bytes({0, 2}));                    // SMALLINT
  EXPECT_EQ(f[12], Bytes({0, 0, 0, 0, 0, 0, 0, 0}));  // zero: no digits
  // bytea[]: one dimension, no nulls, element type 17, 2 elements from 1, each length + bytes.
  EXPECT_EQ(f[15], Bytes({0, 0, 0, 1, 0,    0,    0, 0, 0, 0, 0,    17,  0, 0, 0, 2, 0, 0, 0, 1,  //
                          0, 0, 0, 2, 0x01, 0xff, 0, 0, 0, 2, 0x01, 0x02}));
  EXPECT_EQ(f[16], "[{\"a\":\"tab\\there\"}]\t\n");  // JSON: the text as it is
  EXPECT_EQ(f[19], Bytes({0x01}));                   // odd-length quantity padded
  EXPECT_EQ(f[20], Bytes({0x0a, 0xbc}));
  EXPECT_EQ(f[21], Bytes({0x00}));
  EXPECT_EQ(f[32], Bytes({0, 0, 0, 3}));

  // int4[] and text[] (contracts): an empty array has no dimensions.
  d.contracts.resize(1);
  Contract& c = d.contracts[0];
  c.block_number = 7;
  c.transaction_hash = "0x01";
  c.address = "0x02";
  c.creator_address = "0x03";
  c.creation_type = "create";
  c.trace_address = {0, 2};
  c.is_erc20 = true;
  out.clear();
  ASSERT_TRUE(AppendCopyRows(DataTable::kContracts, d, CopyFormat::kBinary, &out).ok());
  out += Bytes({0xff, 0xff});
  tuples = ParseBinary(out);
  ASSERT_EQ(tuples.size(), 1u);
  EXPECT_EQ(tuples[0][4], Bytes({0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0, 2, 0, 0, 0, 1,  //
                                 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 4,  0, 0, 0, 2}));
  EXPECT_EQ(tuples[0][8], std::nullopt);  // no bytecode
  EXPECT_EQ(tuples[0][9], Bytes({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 25}));
  EXPECT_EQ(tuples[0][10], Bytes({1}));
  EXPECT_EQ(tuples[0][11], Bytes({0}));
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
  ASSERT_TRUE(AppendCopyRows(DataTable::kTransactions, d, CopyFormat::kText, &out).ok());
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

class CopyRowsInEachFormat : public ::testing::TestWithParam<CopyFormat> {};

TEST_P(CopyRowsInEachFormat, RefusesValuesThatWouldCorruptTheCopyNamingBlockAndField) {
  BlockData d = SyntheticBlock(3, {.transactions_per_block = 2,
                                   .logs_per_block = 2,
                                   .token_transfers_per_block = 0,
                                   .withdrawals_per_block = 0});
  std::string out;
  d.transactions[1].input = "0x12\t34";
  Status st = AppendCopyRows(DataTable::kTransactions, d, GetParam(), &out);
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_NE(st.message().find("block 3 transaction 1"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("field input"), std::string::npos) << st.ToString();

  d = SyntheticBlock(3, {.transactions_per_block = 2,
                         .logs_per_block = 2,
                         .token_transfers_per_block = 0,
                         .withdrawals_per_block = 0});
  d.transactions[0].access_list_json = std::string("[\0]", 3);
  st = AppendCopyRows(DataTable::kTransactions, d, GetParam(), &out);
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_NE(st.message().find("NUL"), std::string::npos) << st.ToString();

  d.block.number = uint64_t{1} << 63;
  st = AppendCopyRows(DataTable::kBlocks, d, GetParam(), &out);
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_NE(st.message().find("BIGINT"), std::string::npos) << st.ToString();

  d = SyntheticBlock(3, {.transactions_per_block = 2,
                         .logs_per_block = 2,
                         .token_transfers_per_block = 0,
                         .withdrawals_per_block = 0});
  d.logs[0].topics.assign(5, "0x00");
  st = AppendCopyRows(DataTable::kLogs, d, GetParam(), &out);
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_NE(st.message().find("topics"), std::string::npos) << st.ToString();

  // An integer that does not fit its column (binary COPY would store it truncated).
  d = SyntheticBlock(3, {.transactions_per_block = 2,
                         .logs_per_block = 2,
                         .token_transfers_per_block = 0,
                         .withdrawals_per_block = 0});
  d.logs[1].log_index = uint32_t{1} << 31;
  st = AppendCopyRows(DataTable::kLogs, d, GetParam(), &out);
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_NE(st.message().find("block 3 log 2147483648: field logIndex"), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("INTEGER"), std::string::npos) << st.ToString();

  Trace trace;
  trace.block_number = 3;
  trace.trace_type = "call";
  trace.status = -1;
  d.traces = {trace};
  st = AppendCopyRows(DataTable::kTraces, d, GetParam(), &out);
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_NE(st.message().find("field status"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("SMALLINT"), std::string::npos) << st.ToString();
}

INSTANTIATE_TEST_SUITE_P(Formats, CopyRowsInEachFormat,
                         ::testing::Values(CopyFormat::kBinary, CopyFormat::kText),
                         [](const auto& info) { return std::string(CopyFormatName(info.param)); });

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
