// ExportDecodedCsv against a real PostgreSQL: `export --table schema.table` of the contracts
// mode's tables, made by ApplyContractTables from a config, with every kind of value, the row
// order and the interval, and the error for a name the registry does not hold.
#include <gtest/gtest.h>

#include <sstream>

#include "abi/config.h"
#include "store/decoded.h"
#include "store/export.h"
#include "store/partitions.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

const char* kVaultAbi = R"([
  {"type":"event","name":"Note","anonymous":false,"inputs":[
    {"indexed":true,"name":"who","type":"address"},
    {"indexed":false,"name":"amount","type":"int256"},
    {"indexed":false,"name":"small","type":"uint8"},
    {"indexed":false,"name":"flag","type":"bool"},
    {"indexed":false,"name":"memo","type":"string"},
    {"indexed":false,"name":"blob","type":"bytes"},
    {"indexed":false,"name":"pair","type":"tuple","components":[
      {"name":"id","type":"uint256"},{"name":"tag","type":"string"},
      {"name":"list","type":"uint8[]"}]}]}
])";

const char* kPoolsAbi = R"([
  {"type":"event","name":"Swap","anonymous":false,"inputs":[
    {"indexed":false,"name":"amount","type":"int256"}]},
  {"type":"event","name":"PoolCreated","anonymous":false,"inputs":[
    {"indexed":false,"name":"pool","type":"address"}]}
])";

const char* kConfig = R"(name: dex
contracts:
  - name: vault
    abi: vault.json
    address: "0x1111111111111111111111111111111111111111"
  - name: pools
    abi: pools.json
    factory:
      address: "0x2222222222222222222222222222222222222222"
      event: PoolCreated
      parameter: pool
    events: [Swap]
)";

// 0x + `byte` (two hex digits) n times.
std::string Hex(const std::string& byte, int n) {
  std::string out = "0x";
  for (int i = 0; i < n; ++i) out += byte;
  return out;
}

class ExportDecodedTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto config = abi::ParseContractsConfig(kConfig, "conf/dex.yaml",
                                            [](const std::string& path) -> Result<std::string> {
                                              if (path.ends_with("vault.json"))
                                                return std::string(kVaultAbi);
                                              if (path.ends_with("pools.json"))
                                                return std::string(kPoolsAbi);
                                              return FailedPrecondition("no file " + path);
                                            });
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    auto tables = ContractTables::Make(*config);
    ASSERT_TRUE(tables.ok()) << tables.status().ToString();
    Status st = ApplyContractTables(conn(), *tables);
    ASSERT_TRUE(st.ok()) << st.ToString();
    st = EnsurePartitions(conn(), 0, 100);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  void Exec(const std::string& sql) {
    Status st = conn().Exec(sql);
    ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << sql;
  }

  std::string Export(const std::string& name, uint64_t from, uint64_t to) {
    auto table = FindDecodedTable(conn(), name);
    EXPECT_TRUE(table.ok()) << table.status().ToString();
    if (!table.ok()) return "";
    std::ostringstream out;
    Status st = ExportDecodedCsv(conn(), *table, from, to, out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out.str();
  }
};

// A row of dex.vault_note: the log's columns from its block and index, then the inputs as SQL.
std::string NoteRow(int block, int log_index, const std::string& inputs) {
  return "(" + std::to_string(block) + ", decode(repeat('ab', 32), 'hex'), " +
         std::to_string(1700000000 + block) + ", decode(repeat('cd', 32), 'hex'), 2, " +
         std::to_string(log_index) + ", decode(repeat('11', 20), 'hex'), " + inputs + ")";
}

TEST_F(ExportDecodedTest, WritesEveryKindOfValueInBlockAndLogOrder) {
  const std::string int256_min =
      "-57896044618658097711785492504343953926634992332820282019728792003956564819968";
  // Inserted out of order, with rows below and above the interval.
  Exec("INSERT INTO dex.vault_note VALUES " +
       NoteRow(12, 0,
               "decode(repeat('ee', 20), 'hex'), 1, 0, false, E'line one\\nline two', "
               "'\\xdeadbeef'::bytea, '[]'") +
       ", " +
       NoteRow(10, 3,
               "decode(repeat('ee', 20), 'hex'), " + int256_min +
                   ", 255, true, 'he said \"hi\", then left', ''::bytea, "
                   "'{\"tag\": \"a b, \\\"c\\\"\", \"list\": [1, 2], \"id\": \"5\"}'") +
       ", " + NoteRow(10, 1, "decode(repeat('ee', 20), 'hex'), 0, NULL, NULL, NULL, NULL, NULL") +
       ", " + NoteRow(9, 0, "NULL, 9, NULL, NULL, NULL, NULL, NULL") + ", " +
       NoteRow(13, 0, "NULL, 13, NULL, NULL, NULL, NULL, NULL"));

  const std::string log = "," + Hex("ab", 32) + ",";   // after block_number: block_hash
  const std::string tx = "," + Hex("cd", 32) + ",2,";  // transaction_hash, transaction_index
  const std::string who = Hex("11", 20) + "," + Hex("ee", 20) + ",";  // address, who
  EXPECT_EQ(
      Export("dex.vault_note", 10, 12),
      "block_number,block_hash,block_timestamp,transaction_hash,transaction_index,"
      "log_index,address,who,amount,small,flag,memo,blob,pair\n"
      // NULLs are empty cells.
      "10" +
          log + "1700000010" + tx + "1," + who + "0,,,,,\n" +
          // Negative NUMERIC exact; "0x" for empty bytes; a quote and a comma quoted; JSONB
          // compact in jsonb's key order, its string's space and escaped quotes kept.
          "10" + log + "1700000010" + tx + "3," + who + int256_min +
          ",255,true,\"he said \"\"hi\"\", then left\",0x,"
          "\"{\"\"id\"\":\"\"5\"\",\"\"tag\"\":\"\"a b, \\\"\"c\\\"\"\"\",\"\"list\"\":[1,2]}\"\n"
          // A line break quoted; bytes as lower-case hex; false.
          "12" +
          log + "1700000012" + tx + "0," + who +
          "1,0,false,\"line one\nline two\",0xdeadbeef,[]\n");

  EXPECT_EQ(Export("dex.vault_note", 14, 100), "") << "no rows: a 0-byte output";
  EXPECT_EQ(Export("dex.vault_note", 12, 10), "");
}

TEST_F(ExportDecodedTest, WritesUndecodedAndChildrenInKeyOrder) {
  Exec(
      "INSERT INTO dex.undecoded VALUES"
      " (11, 4, 'vault_note', '\\x01', '\\x02', decode(repeat('11', 20), 'hex'),"
      "  'data is 3 bytes, the event needs 224'),"
      " (11, 4, 'other_table', '\\x01', '\\x02', decode(repeat('11', 20), 'hex'), 'x'),"
      " (10, 7, 'vault_note', '\\x01', '\\x02', decode(repeat('11', 20), 'hex'), 'y')");
  EXPECT_EQ(Export("dex.undecoded", 0, 100),
            "block_number,log_index,table_name,block_hash,transaction_hash,address,reason\n"
            "10,7,vault_note,0x01,0x02," +
                Hex("11", 20) + ",y\n11,4,other_table,0x01,0x02," + Hex("11", 20) +
                ",x\n11,4,vault_note,0x01,0x02," + Hex("11", 20) +
                ",\"data is 3 bytes, the event needs 224\"\n");

  Exec(
      "INSERT INTO dex.children VALUES"
      " (11, 0, 'pools', decode(repeat('33', 20), 'hex'), decode(repeat('22', 20), 'hex')),"
      " (11, 0, 'amm', decode(repeat('44', 20), 'hex'), decode(repeat('22', 20), 'hex'))");
  EXPECT_EQ(Export("dex.children", 11, 11),
            "block_number,log_index,contract,address,factory\n11,0,amm," + Hex("44", 20) + "," +
                Hex("22", 20) + "\n11,0,pools," + Hex("33", 20) + "," + Hex("22", 20) + "\n");
}

TEST_F(ExportDecodedTest, AnUnregisteredNameIsRefusedNamingTheRegisteredTables) {
  auto missing = FindDecodedTable(conn(), "dex.vault_nope");
  ASSERT_EQ(missing.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(missing.status().message(),
            "unknown export table dex.vault_nope: the decoded tables registered in schema dex are "
            "dex.children, dex.pools_swap, dex.undecoded, dex.vault_note");

  auto other_schema = FindDecodedTable(conn(), "nft.transfers");
  ASSERT_EQ(other_schema.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(other_schema.status().message(),
            "unknown export table nft.transfers: no decoded table is registered in schema nft "
            "(schemas with decoded tables: dex)");

  // The name is only ever a query parameter: SQL in it is a name like any other.
  auto injected = FindDecodedTable(conn(), "dex.vault_note\" WHERE false; DROP TABLE blocks; --");
  ASSERT_EQ(injected.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(QueryCount(conn(), "SELECT count(*) FROM blocks"), 0);
  // A table of the data schema is not a decoded table, whatever the schema's name.
  EXPECT_EQ(FindDecodedTable(conn(), "public.blocks").status().code(), Code::kFailedPrecondition);
}

class ExportDecodedNoneTest : public PgTest {};

TEST_F(ExportDecodedNoneTest, ADatabaseWithoutDecodedTablesSaysSo) {
  auto missing = FindDecodedTable(conn(), "dex.vault_note");
  ASSERT_EQ(missing.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(missing.status().message(),
            "unknown export table dex.vault_note: no decoded table is registered in schema dex "
            "(nor in any: the contracts mode never wrote here)");
}

TEST(ExportDecodedNames, ANameWithADotIsADecodedTable) {
  EXPECT_TRUE(IsDecodedTableName("dex.vault_note"));
  EXPECT_TRUE(IsDecodedTableName("dex.undecoded"));
  EXPECT_FALSE(IsDecodedTableName("blocks"));
  EXPECT_FALSE(IsDecodedTableName("token_transfers"));
}

}  // namespace
}  // namespace gapless
