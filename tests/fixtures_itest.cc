// End-to-end over real mainnet answers: recorded JSON-RPC responses (ethereum-etl's and mainnet
// block 17000000) are replayed through the real JSON-RPC client into the indexer, written to a real
// PostgreSQL, exported as CSV and compared with ethereum-etl's expected files line for line.
#include <gtest/gtest.h>
#include <simdjson.h>

#include "e2e_util.h"
#include "testing/pg_test_db.h"
#include "testing/replay_transport.h"

namespace gapless::e2e {
namespace {

const std::string kEtl = std::string(GAPLESS_FIXTURES_DIR) + "/ethereum-etl/tests/resources/";

class FixtureExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = std::make_unique<PgTestDb>();
    if (db_->skipped()) {
      GTEST_SKIP() << "GAPLESS_TEST_PG_URL not set";
    }
    ASSERT_FALSE(db_->failed()) << db_->error().ToString();
    pool_ = OpenPool(db_->url());
    ASSERT_NE(pool_, nullptr);
    replay_.SetChainId(1);
  }

  void ExpectExportEquals(std::string_view table, uint64_t from, uint64_t to,
                          const std::string& expected_path) {
    std::string expected = ReadFile(expected_path);
    std::string actual = Export(pool_.get(), table, from, to);
    EXPECT_EQ(SortedLines(actual), SortedLines(expected)) << table << " vs " << expected_path;
    if (expected.empty()) {
      EXPECT_EQ(actual, "") << "an empty export must be a 0-byte file";
    }
  }

  std::unique_ptr<PgTestDb> db_;
  std::unique_ptr<PgPool> pool_;
  ReplayTransport replay_;
};

TEST_F(FixtureExportTest, GenesisBlockWithoutTransactions) {
  ASSERT_TRUE(
      replay_.AddEthereumEtlDirectory(kEtl + "test_export_blocks_job/block_without_transactions")
          .ok());
  ASSERT_TRUE(IndexWith(&replay_, pool_.get(), 0, 0, 1).ok());
  std::string dir = kEtl + "test_export_blocks_job/block_without_transactions/";
  ExpectExportEquals("blocks", 0, 0, dir + "expected_blocks.csv");
  ExpectExportEquals("transactions", 0, 0, dir + "expected_transactions.csv");
}

// Blocks 47218-47219 come with no recorded receipts (ethereum-etl's block export does not need
// them), and gapless always indexes receipts. The four transactions are plain ETH transfers, whose
// receipts are fully determined (21000 gas each, no logs, pre-Byzantium so no status): we answer
// eth_getTransactionReceipt with exactly that, derived from each transaction of the recorded block.
// The blocks and transactions CSVs compared below contain no receipt field.
void AddPlainTransferReceipts(ReplayTransport& replay, const std::string& block_file) {
  simdjson::dom::parser parser;
  simdjson::dom::element block = parser.load(block_file)["result"];
  uint64_t cumulative = 0;
  for (simdjson::dom::element tx : block["transactions"].get_array()) {
    ASSERT_EQ(Str(tx["input"]), "0x") << "not a plain transfer";
    cumulative += 21000;
    std::string hash = Str(tx["hash"]);
    std::string receipt =
        R"({"transactionHash":")" + hash + R"(","transactionIndex":")" +
        Str(tx["transactionIndex"]) + R"(","blockHash":")" + Str(block["hash"]) +
        R"(","blockNumber":")" + Str(block["number"]) + R"(","cumulativeGasUsed":")" +
        U256(cumulative).ToHexQuantity() + R"(","gasUsed":"0x5208","contractAddress":null,)" +
        R"("logs":[],"logsBloom":"0x)" + std::string(512, '0') + R"(","status":null})";
    ASSERT_TRUE(replay.Add("eth_getTransactionReceipt", "[\"" + hash + "\"]", receipt).ok());
  }
}

TEST_F(FixtureExportTest, FrontierBlocksWithTransactions) {
  std::string dir = kEtl + "test_export_blocks_job/blocks_with_transactions/";
  ASSERT_TRUE(replay_.AddEthereumEtlDirectory(dir).ok());
  AddPlainTransferReceipts(replay_, dir + "web3_response.eth_getBlockByNumber_0xb872_true.json");
  AddPlainTransferReceipts(replay_, dir + "web3_response.eth_getBlockByNumber_0xb873_true.json");
  Status st = IndexWith(&replay_, pool_.get(), 47218, 47219, 1);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ExpectExportEquals("blocks", 47218, 47219, dir + "expected_blocks.csv");
  ExpectExportEquals("transactions", 47218, 47219, dir + "expected_transactions.csv");
}

// Block 483920 is complete in the fixtures: the block, its four receipts, two ERC-20 transfers.
TEST_F(FixtureExportTest, BlockWithLogsReceiptsAndTokenTransfers) {
  std::string blocks_dir = kEtl + "test_export_blocks_job/block_with_logs/";
  std::string receipts_dir = kEtl + "test_export_receipts_job/receipts_with_logs/";
  ASSERT_TRUE(replay_.AddEthereumEtlDirectory(blocks_dir).ok());
  ASSERT_TRUE(replay_.AddEthereumEtlDirectory(receipts_dir).ok());
  Status st = IndexWith(&replay_, pool_.get(), 483920, 483920, 1);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ExpectExportEquals("blocks", 483920, 483920, blocks_dir + "expected_blocks.csv");
  ExpectExportEquals("transactions", 483920, 483920, blocks_dir + "expected_transactions.csv");
  ExpectExportEquals("receipts", 483920, 483920, receipts_dir + "expected_receipts.csv");
  ExpectExportEquals("logs", 483920, 483920, receipts_dir + "expected_logs.csv");
  ExpectExportEquals(
      "token_transfers", 483920, 483920,
      kEtl + "test_export_token_transfers_job/block_with_transfers/expected_token_transfers.csv");
  // The receipts fell back to eth_getTransactionReceipt (the recording has no
  // eth_getBlockReceipts), one call per transaction.
  EXPECT_EQ(replay_.calls("eth_getTransactionReceipt"), 4);
}

size_t DataLines(const std::string& csv) {
  size_t lines = SortedLines(csv).size();
  return lines == 0 ? 0 : lines - 1;  // minus the header
}

// Mainnet block 17000000 has no expected files: check the export against the answer itself.
TEST_F(FixtureExportTest, MainnetBlock17000000) {
  std::string dir = std::string(GAPLESS_FIXTURES_DIR) + "/mainnet/17000000/";
  ASSERT_TRUE(
      replay_.AddFile("eth_getBlockByNumber", R"(["0x1036640",true])", dir + "block.json").ok());
  ASSERT_TRUE(
      replay_.AddFile("eth_getBlockReceipts", R"(["0x1036640"])", dir + "receipts.json").ok());
  Status st = IndexWith(&replay_, pool_.get(), 17000000, 17000000, 1);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(replay_.calls("eth_getTransactionReceipt"), 0);

  EXPECT_EQ(DataLines(Export(pool_.get(), "blocks", 17000000, 17000000)), 1u);
  std::string txs = Export(pool_.get(), "transactions", 17000000, 17000000);
  std::string receipts = Export(pool_.get(), "receipts", 17000000, 17000000);
  std::string logs = Export(pool_.get(), "logs", 17000000, 17000000);
  EXPECT_EQ(DataLines(txs), 102u);
  EXPECT_EQ(DataLines(receipts), 102u);
  EXPECT_EQ(DataLines(logs), 237u);
  // 93 ERC-20 and 19 ERC-721 Transfer logs; the 3 ERC-1155 TransferSingle logs only on request.
  EXPECT_EQ(DataLines(Export(pool_.get(), "token_transfers", 17000000, 17000000)), 112u);
  EXPECT_EQ(
      DataLines(Export(pool_.get(), "token_transfers", 17000000, 17000000, "erc20,erc721,erc1155")),
      115u);

  // Every transaction hash of the answer is exported, in a row that carries its block number
  // and its index.
  simdjson::dom::parser parser;
  simdjson::dom::element block = parser.load(dir + "block.json");
  for (simdjson::dom::element tx : block["transactions"].get_array()) {
    std::string hash = Str(tx["hash"]);
    uint64_t index = std::stoull(Str(tx["transactionIndex"]), nullptr, 16);
    std::string prefix = hash + ",";
    size_t at = txs.find("\n" + prefix);
    ASSERT_NE(at, std::string::npos) << hash;
    std::string row = txs.substr(at + 1, txs.find('\n', at + 1) - at - 1);
    EXPECT_NE(row.find(",17000000," + std::to_string(index) + ","), std::string::npos) << row;
  }
}

}  // namespace
}  // namespace gapless::e2e
