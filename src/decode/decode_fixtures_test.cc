// DecodeBlock, DecodeBlockHeader and DecodeTransactionWithReceipt against the shared fixtures
// (MANIFEST.md): ethereum-etl's expected CSVs, mainnet block 17000000 and the execution-apis
// responses. The oracle is either the peer's CSV or the JSON itself, re-read independently.

#include <gtest/gtest.h>
#include <simdjson.h>
#include <time.h>

#include <cstdio>
#include <map>

#include "decode/decode.h"
#include "decode/decode_test_util.h"

#ifndef GAPLESS_BENCH_ROUNDS
#define GAPLESS_BENCH_ROUNDS 50
#endif

namespace gapless {
namespace {

namespace dom = simdjson::dom;
using testing::BlockCells;
using testing::ExpectBlockDataMatchesJson;
using testing::ExpectBlockMatchesJson;
using testing::ExpectCells;
using testing::ExpectLogMatchesJson;
using testing::ExpectReceiptMatchesJson;
using testing::ExpectTransactionMatchesJson;
using testing::Fixture;
using testing::IoResult;
using testing::LogCells;
using testing::ReadCsv;
using testing::ReadFile;
using testing::ReceiptCells;
using testing::ResultOf;
using testing::TransactionCells;
using testing::TransferCells;

constexpr uint64_t kHiveChainId = 0xc72dd9d5e883e;  // execution-apis test chain

const std::string kEtl = "ethereum-etl/tests/resources/";

DecodeOptions Expect(uint64_t number, std::optional<uint64_t> chain_id = std::nullopt) {
  DecodeOptions options;
  options.expected_number = number;
  options.expected_chain_id = chain_id;
  return options;
}
const std::string kApis = "execution-apis/tests/";

std::string EtlResult(const std::string& relative) {
  return ResultOf(ReadFile(Fixture(kEtl + relative)));
}

// Synthetic receipts for a block whose fixture has none (3.2): one minimal receipt per
// transaction, consistent with the block, so the block and transaction rows can be checked
// through the production path. Only the transaction columns are compared afterwards.
std::string SyntheticReceipts(const std::string& block_json) {
  dom::parser parser;
  dom::object block = parser.parse(block_json);
  std::string out = "[";
  std::string bloom = "0x" + std::string(512, '0');
  for (dom::object tx : dom::array(block["transactions"])) {
    if (out.size() > 1) out += ",";
    out += "{\"transactionHash\":\"" + std::string(std::string_view(tx["hash"])) +
           "\",\"transactionIndex\":\"" + std::string(std::string_view(tx["transactionIndex"])) +
           "\",\"blockHash\":\"" + std::string(std::string_view(block["hash"])) +
           "\",\"blockNumber\":\"" + std::string(std::string_view(block["number"])) +
           "\",\"cumulativeGasUsed\":\"0x0\",\"gasUsed\":\"0x0\",\"logs\":[],\"logsBloom\":\"" +
           bloom + "\",\"status\":null,\"root\":null}";
  }
  return out + "]";
}

// --------------------------------------------------------------------------------------------
// ethereum-etl (MANIFEST §3)

TEST(EthereumEtlFixtures, GenesisBlockWithoutTransactions) {  // 3.1
  std::string dir = "test_export_blocks_job/block_without_transactions/";
  std::string block_json = EtlResult(dir + "web3_response.eth_getBlockByNumber_0x0_true.json");
  DecodeOptions options;
  options.expected_number = 0;
  Result<BlockData> data = DecodeBlock(block_json, "[]", options);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  testing::Csv blocks = ReadCsv(Fixture(kEtl + dir + "expected_blocks.csv"));
  ASSERT_EQ(blocks.rows.size(), 1u);
  ExpectCells(blocks.rows[0], BlockCells(data->block));
  // expected_transactions.csv is empty (0 bytes): no transaction rows.
  EXPECT_TRUE(ReadCsv(Fixture(kEtl + dir + "expected_transactions.csv")).rows.empty());
  EXPECT_TRUE(data->transactions.empty());
  EXPECT_EQ(data->block.transaction_count, 0u);
  EXPECT_EQ(data->block.total_difficulty->ToDecimal(), "17179869184");
  dom::parser parser, receipts_parser;
  ExpectBlockDataMatchesJson(*data, parser.parse(block_json),
                             receipts_parser.parse(std::string("[]")));
}

TEST(EthereumEtlFixtures, FrontierBlocksWithTransactions) {  // 3.2
  std::string dir = "test_export_blocks_job/blocks_with_transactions/";
  testing::Csv blocks = ReadCsv(Fixture(kEtl + dir + "expected_blocks.csv"));
  testing::Csv txs = ReadCsv(Fixture(kEtl + dir + "expected_transactions.csv"));
  ASSERT_EQ(blocks.rows.size(), 2u);
  ASSERT_EQ(txs.rows.size(), 4u);
  size_t tx_row = 0;
  for (auto [number, hex] :
       {std::pair<uint64_t, std::string>{47218, "0xb872"}, {47219, "0xb873"}}) {
    SCOPED_TRACE(hex);
    std::string block_json =
        EtlResult(dir + "web3_response.eth_getBlockByNumber_" + hex + "_true.json");
    DecodeOptions options;
    options.expected_number = number;
    Result<BlockData> data = DecodeBlock(block_json, SyntheticReceipts(block_json), options);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    const std::map<std::string, std::string>* block_row = nullptr;
    for (const auto& row : blocks.rows) {
      if (row.at("number") == std::to_string(number)) block_row = &row;
    }
    ASSERT_NE(block_row, nullptr);
    ExpectCells(*block_row, BlockCells(data->block));
    ASSERT_EQ(data->transactions.size(), 2u);
    for (const Transaction& tx : data->transactions) {
      ExpectCells(txs.rows.at(tx_row++), TransactionCells(tx, data->block));
      EXPECT_FALSE(tx.chain_id.has_value());  // Parity "chainId": null
      EXPECT_EQ(tx.transaction_type, 0);
    }
    dom::parser parser;
    dom::object block = parser.parse(block_json);
    ExpectBlockMatchesJson(data->block, block);
    size_t i = 0;
    for (dom::object tx : dom::array(block["transactions"])) {
      ExpectTransactionMatchesJson(data->transactions[i++], tx, &data->block);
    }
  }
  // A value above 2^64 wei, exact.
  EXPECT_EQ(txs.rows[0].at("value"), "110000000000000000000");
}

// Block 483920 with its four receipts (3.3 + 3.4 + 3.5): block, transaction, receipt, log and
// token transfer rows.
class Block483920 : public ::testing::Test {
 protected:
  void SetUp() override {
    block_json_ = EtlResult(
        "test_export_blocks_job/block_with_logs/"
        "web3_response.eth_getBlockByNumber_0x76250_true.json");
    receipts_json_ = "[";
    for (const char* hash :
         {"0x04cbcb236043d8fb7839e07bbc7f5eed692fb2ca55d897f1101eac3e3ad4fab8",
          "0xcea6f89720cc1d2f46cc7a935463ae0b99dd5fad9c91bb7357de5421511cee49",
          "0x463d53f0ad57677a3b430a007c1c31d15d62c37fab5eee598551697c297c235c",
          "0x05287a561f218418892ab053adfb3d919860988b19458c570c5c30f51c146f02"}) {
      if (receipts_json_.size() > 1) receipts_json_ += ",";
      receipts_json_ += EtlResult(
          "test_export_receipts_job/receipts_with_logs/web3_response.eth_getTransactionReceipt_" +
          std::string(hash) + ".json");
    }
    receipts_json_ += "]";
    DecodeOptions options;
    options.expected_number = 483920;
    options.expected_chain_id = 1;  // Parity sends chainId null: never a mismatch
    Result<BlockData> data = DecodeBlock(block_json_, receipts_json_, options);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    data_ = std::move(data).value();
  }

  std::string block_json_, receipts_json_;
  BlockData data_;
};

TEST_F(Block483920, BlockAndTransactionRows) {
  std::string dir = "test_export_blocks_job/block_with_logs/";
  testing::Csv blocks = ReadCsv(Fixture(kEtl + dir + "expected_blocks.csv"));
  ASSERT_EQ(blocks.rows.size(), 1u);
  ExpectCells(blocks.rows[0], BlockCells(data_.block));
  testing::Csv txs = ReadCsv(Fixture(kEtl + dir + "expected_transactions.csv"));
  ASSERT_EQ(txs.rows.size(), 4u);
  ASSERT_EQ(data_.transactions.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    ExpectCells(txs.rows[i], TransactionCells(data_.transactions[i], data_.block));
  }
}

TEST_F(Block483920, ReceiptRows) {
  testing::Csv receipts =
      ReadCsv(Fixture(kEtl + "test_export_receipts_job/receipts_with_logs/expected_receipts.csv"));
  ASSERT_EQ(receipts.rows.size(), 4u);
  for (const auto& row : receipts.rows) {  // the CSV is not in transaction order
    size_t index = std::stoul(row.at("transaction_index"));
    ASSERT_LT(index, data_.transactions.size());
    ExpectCells(row, ReceiptCells(data_.transactions[index]));
    // Pre-Byzantium: root set, status null (not a failure).
    EXPECT_TRUE(data_.transactions[index].root.has_value());
    EXPECT_FALSE(data_.transactions[index].status.has_value());
  }
  EXPECT_EQ(data_.transactions[0].log_count, 1u);
  EXPECT_EQ(data_.transactions[1].log_count, 1u);
  EXPECT_EQ(data_.transactions[2].log_count, 0u);
  EXPECT_EQ(data_.transactions[3].log_count, 0u);
}

TEST_F(Block483920, LogRows) {
  testing::Csv logs =
      ReadCsv(Fixture(kEtl + "test_export_receipts_job/receipts_with_logs/expected_logs.csv"));
  ASSERT_EQ(logs.rows.size(), 2u);
  ASSERT_EQ(data_.logs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) ExpectCells(logs.rows[i], LogCells(data_.logs[i]));
}

TEST_F(Block483920, TokenTransferRows) {
  testing::Csv transfers = ReadCsv(Fixture(
      kEtl + "test_export_token_transfers_job/block_with_transfers/expected_token_transfers.csv"));
  ASSERT_EQ(transfers.rows.size(), 2u);
  ASSERT_EQ(data_.token_transfers.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ExpectCells(transfers.rows[i], TransferCells(data_.token_transfers[i]));
    EXPECT_EQ(data_.token_transfers[i].standard, TokenStandard::kErc20);
  }
}

TEST_F(Block483920, EveryFieldMatchesTheJson) {
  dom::parser block_parser, receipts_parser;
  ExpectBlockDataMatchesJson(data_, block_parser.parse(block_json_),
                             receipts_parser.parse(receipts_json_));
  // The filter API (3.5) returns the same two logs.
  dom::parser filter_parser;
  dom::array filter_logs =
      filter_parser.parse(EtlResult("test_export_token_transfers_job/block_with_transfers/"
                                    "web3_response.eth_getFilterLogs_0x0.json"));
  ASSERT_EQ(filter_logs.size(), 2u);
  size_t i = 0;
  for (dom::object log : filter_logs) ExpectLogMatchesJson(data_.logs[i++], log);
}

// --------------------------------------------------------------------------------------------
// Mainnet block 17000000

class Mainnet17000000 : public ::testing::Test {
 protected:
  void SetUp() override {
    block_json_ = ReadFile(Fixture("mainnet/17000000/block.json"));
    receipts_json_ = ReadFile(Fixture("mainnet/17000000/receipts.json"));
    DecodeOptions options;
    options.expected_number = 17000000;
    options.expected_chain_id = 1;
    Result<BlockData> data = DecodeBlock(block_json_, receipts_json_, options);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    data_ = std::move(data).value();
  }

  std::string block_json_, receipts_json_;
  BlockData data_;
};

TEST_F(Mainnet17000000, Counts) {
  EXPECT_EQ(data_.block.number, 17000000u);
  EXPECT_EQ(data_.block.hash, "0x96cfa0fb5e50b0a3f6cc76f3299cfbf48f17e8b41798d1394474e67ec8a97e9f");
  EXPECT_EQ(data_.block.transaction_count, 102u);
  EXPECT_EQ(data_.transactions.size(), 102u);
  EXPECT_EQ(data_.logs.size(), 237u);
  size_t type2 = 0, type0 = 0;
  for (const Transaction& tx : data_.transactions) {
    type2 += tx.transaction_type == 2;
    type0 += tx.transaction_type == 0;
  }
  EXPECT_EQ(type2, 94u);
  EXPECT_EQ(type0, 8u);
  for (size_t i = 0; i < data_.logs.size(); ++i) EXPECT_EQ(data_.logs[i].log_index, i);
}

TEST_F(Mainnet17000000, EveryTransactionReceiptAndLogFieldMatchesTheJson) {
  dom::parser block_parser, receipts_parser;
  ExpectBlockDataMatchesJson(data_, block_parser.parse(block_json_),
                             receipts_parser.parse(receipts_json_));
}

TEST_F(Mainnet17000000, TokenTransfersMatchTheirLogs) {
  size_t erc20 = 0, erc721 = 0, erc1155 = 0;
  std::map<uint32_t, const Log*> logs;
  for (const Log& log : data_.logs) logs[log.log_index] = &log;
  for (const TokenTransfer& t : data_.token_transfers) {
    SCOPED_TRACE("log " + std::to_string(t.log_index));
    ASSERT_EQ(logs.count(t.log_index), 1u);
    const Log& log = *logs[t.log_index];
    EXPECT_EQ(t.block_number, 17000000u);
    EXPECT_EQ(t.transaction_hash, log.transaction_hash);
    EXPECT_EQ(t.token_address, log.address);
    EXPECT_EQ(t.batch_index, 0u);
    auto address = [](const std::string& topic) { return "0x" + topic.substr(26); };
    auto word = [](std::string_view hex) { return *U256::FromHexDigits(hex); };
    std::string_view data = std::string_view(log.data).substr(2);
    switch (t.standard) {
      case TokenStandard::kErc20:
        ++erc20;
        ASSERT_EQ(log.topics.size(), 3u);
        EXPECT_EQ(log.topics[0], kTransferTopic);
        EXPECT_EQ(t.from_address, address(log.topics[1]));
        EXPECT_EQ(t.to_address, address(log.topics[2]));
        EXPECT_EQ(t.value, word(data));
        EXPECT_FALSE(t.token_id.has_value());
        EXPECT_FALSE(t.operator_address.has_value());
        break;
      case TokenStandard::kErc721:
        ++erc721;
        ASSERT_EQ(log.topics.size(), 4u);
        EXPECT_EQ(log.data, "0x");
        EXPECT_EQ(t.from_address, address(log.topics[1]));
        EXPECT_EQ(t.to_address, address(log.topics[2]));
        EXPECT_EQ(t.token_id, word(std::string_view(log.topics[3]).substr(2)));
        EXPECT_EQ(t.value, U256(1));
        break;
      case TokenStandard::kErc1155:
        ++erc1155;
        ASSERT_EQ(log.topics.size(), 4u);
        EXPECT_EQ(log.topics[0], kTransferSingleTopic);
        EXPECT_EQ(t.operator_address, address(log.topics[1]));
        EXPECT_EQ(t.from_address, address(log.topics[2]));
        EXPECT_EQ(t.to_address, address(log.topics[3]));
        ASSERT_EQ(data.size(), 128u);
        EXPECT_EQ(t.token_id, word(data.substr(0, 64)));
        EXPECT_EQ(t.value, word(data.substr(64)));
        break;
    }
  }
  EXPECT_EQ(erc20, 93u);
  EXPECT_EQ(erc721, 19u);
  EXPECT_EQ(erc1155, 3u);
  EXPECT_EQ(data_.token_transfers.size(), 115u);
}

// Not a pass/fail check: prints the decode throughput on this machine.
TEST_F(Mainnet17000000, Throughput) {
  DecodeOptions options;
  options.expected_number = 17000000;
  // Give the inputs simdjson's padding so no copy is made (what the RPC layer should do).
  std::string block = block_json_, receipts = receipts_json_;
  block.reserve(block.size() + 64);
  receipts.reserve(receipts.size() + 64);
  constexpr int kRounds = GAPLESS_BENCH_ROUNDS;
  // Thread CPU time: the machine is shared, wall time would measure the neighbours.
  auto cpu_seconds = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  double start = cpu_seconds();
  size_t logs = 0;
  for (int i = 0; i < kRounds; ++i) {
    Result<BlockData> data = DecodeBlock(block, receipts, options);
    ASSERT_TRUE(data.ok());
    logs += data->logs.size();
  }
  double seconds = cpu_seconds() - start;
  EXPECT_EQ(logs, 237u * kRounds);
  std::printf("decode 17000000 (%zu KB JSON, 102 txs, 237 logs): %.3f ms CPU/block, %.0f MB/s\n",
              (block.size() + receipts.size()) / 1024, seconds / kRounds * 1e3,
              (block.size() + receipts.size()) * kRounds / seconds / 1e6);
}

// --------------------------------------------------------------------------------------------
// execution-apis (MANIFEST §4)

TEST(ExecutionApis, LatestBlockWithReceipts) {
  std::string block_json = IoResult(Fixture(kApis + "eth_getBlockByNumber/get-latest.io"));
  std::string receipts_json =
      IoResult(Fixture(kApis + "eth_getBlockReceipts/get-block-receipts-latest.io"));
  DecodeOptions options;
  options.expected_number = 0x36;
  options.expected_chain_id = kHiveChainId;
  Result<BlockData> data = DecodeBlock(block_json, receipts_json, options);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->block.hash, "0xd226371d0b1551adb03fb52b71f08e3e11247fe9b1af994768af8cdaa8e7dcd7");
  EXPECT_EQ(data->transactions.size(), 4u);
  EXPECT_EQ(data->logs.size(), 11u);
  EXPECT_FALSE(data->block.total_difficulty.has_value());  // geth dropped it
  EXPECT_TRUE(data->block.parent_beacon_block_root.has_value());
  EXPECT_TRUE(data->block.requests_hash.has_value());
  EXPECT_EQ(data->block.blob_gas_used, 0u);
  EXPECT_EQ(data->block.excess_blob_gas, 0u);
  for (const Transaction& tx : data->transactions) {
    EXPECT_EQ(tx.status, 1);
    EXPECT_EQ(tx.chain_id, kHiveChainId);
  }
  EXPECT_TRUE(data->token_transfers.empty());  // no ERC-20 logs on this chain
  dom::parser block_parser, receipts_parser;
  ExpectBlockDataMatchesJson(*data, block_parser.parse(block_json),
                             receipts_parser.parse(receipts_json));
}

TEST(ExecutionApis, SafeAndFinalizedAreTheHead) {
  for (const char* file : {"get-safe.io", "get-finalized.io"}) {
    SCOPED_TRACE(file);
    std::string block_json = IoResult(Fixture(kApis + "eth_getBlockByNumber/" + file));
    Result<Block> block = DecodeBlockHeader(block_json, 0x36);
    ASSERT_TRUE(block.ok()) << block.status().ToString();
    EXPECT_EQ(block->transaction_count, 4u);
    dom::parser parser;
    ExpectBlockMatchesJson(*block, parser.parse(block_json));
  }
}

TEST(ExecutionApis, Block1LegacyCreationsWithRootReceipts) {
  std::string block_json = IoResult(Fixture(kApis + "eth_getBlockByHash/get-block-by-hash.io"));
  for (const char* file : {"get-block-receipts-n.io", "get-block-receipts-by-hash.io"}) {
    SCOPED_TRACE(file);
    std::string receipts_json = IoResult(Fixture(kApis + "eth_getBlockReceipts/" + file));
    DecodeOptions options;
    options.expected_number = 1;
    options.expected_chain_id = kHiveChainId;
    Result<BlockData> data = DecodeBlock(block_json, receipts_json, options);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    ASSERT_EQ(data->transactions.size(), 4u);
    for (const Transaction& tx : data->transactions) {
      EXPECT_FALSE(tx.to_address.has_value());  // contract creation
      EXPECT_TRUE(tx.contract_address.has_value());
      EXPECT_TRUE(tx.root.has_value());
      EXPECT_FALSE(tx.status.has_value());  // absent, not a failure
    }
    dom::parser block_parser, receipts_parser;
    ExpectBlockDataMatchesJson(*data, block_parser.parse(block_json),
                               receipts_parser.parse(receipts_json));
  }
}

TEST(ExecutionApis, GenesisWithEmptyReceipts) {
  std::string block_json = IoResult(Fixture(kApis + "eth_getBlockByNumber/get-genesis.io"));
  for (const char* file : {"get-block-receipts-0.io", "get-block-receipts-earliest.io"}) {
    std::string receipts_json = IoResult(Fixture(kApis + "eth_getBlockReceipts/" + file));
    EXPECT_EQ(receipts_json, "[]");
    Result<BlockData> data = DecodeBlock(block_json, receipts_json, DecodeOptions{});
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    EXPECT_EQ(data->block.number, 0u);
    EXPECT_TRUE(data->transactions.empty());
    dom::parser parser;
    ExpectBlockMatchesJson(data->block, parser.parse(block_json));
  }
  // Unknown or future blocks have null receipts: NotFound.
  for (const char* file : {"get-block-receipts-future.io", "get-block-receipts-not-found.io"}) {
    std::string receipts_json = IoResult(Fixture(kApis + "eth_getBlockReceipts/" + file));
    EXPECT_EQ(receipts_json, "null");
    Result<BlockData> data = DecodeBlock(block_json, receipts_json, DecodeOptions{});
    EXPECT_EQ(data.status().code(), Code::kNotFound) << data.status().ToString();
  }
}

TEST(ExecutionApis, NotFoundBlocks) {
  Result<BlockData> data = DecodeBlock(
      IoResult(Fixture(kApis + "eth_getBlockByNumber/get-block-notfound.io")), "[]", Expect(1000));
  EXPECT_EQ(data.status().code(), Code::kNotFound);
  EXPECT_EQ(data.status().message(), "block 1000 not found");
  for (const char* file : {"get-block-by-empty-hash.io", "get-block-by-notfound-hash.io"}) {
    Result<Block> block =
        DecodeBlockHeader(IoResult(Fixture(kApis + "eth_getBlockByHash/" + file)));
    EXPECT_EQ(block.status().code(), Code::kNotFound) << file;
  }
}

// The fork blocks are full=false (transaction hashes): header only.
TEST(ExecutionApis, ForkBlockHeaders) {
  struct Case {
    const char* file;
    uint64_t number;
    size_t txs;
  };
  std::map<std::string, Block> blocks;
  for (Case c :
       {Case{"get-block-london-fork.io", 0x1b, 0}, Case{"get-block-merge-fork.io", 0x24, 0},
        Case{"get-block-shanghai-fork.io", 0x27, 3}, Case{"get-block-cancun-fork.io", 0x2a, 0},
        Case{"get-block-prague-fork.io", 0x2d, 6}}) {
    SCOPED_TRACE(c.file);
    std::string block_json = IoResult(Fixture(kApis + "eth_getBlockByNumber/" + c.file));
    Result<Block> block = DecodeBlockHeader(block_json, c.number);
    ASSERT_TRUE(block.ok()) << block.status().ToString();
    dom::parser parser;
    dom::object json = parser.parse(block_json);
    ExpectBlockMatchesJson(*block, json);
    EXPECT_EQ(block->transaction_count, dom::array(json["transactions"]).size());
    if (c.txs != 0) {
      EXPECT_EQ(block->transaction_count, c.txs);
    }
    blocks[c.file] = *block;
    // DecodeBlock needs full transaction objects: a hash list is an error naming the field.
    if (block->transaction_count > 0) {
      Result<BlockData> data = DecodeBlock(block_json, "[]", Expect(c.number));
      EXPECT_EQ(data.status().code(), Code::kInvalidData);
      EXPECT_NE(data.status().message().find("transactions[0]"), std::string::npos)
          << data.status().message();
    }
  }
  const Block& london = blocks["get-block-london-fork.io"];
  EXPECT_TRUE(london.base_fee_per_gas.has_value());
  EXPECT_FALSE(london.difficulty.is_zero());
  EXPECT_TRUE(blocks["get-block-merge-fork.io"].difficulty.is_zero());
  const Block& shanghai = blocks["get-block-shanghai-fork.io"];
  ASSERT_EQ(shanghai.withdrawals.size(), 1u);
  EXPECT_EQ(shanghai.withdrawals[0].index, 0u);
  EXPECT_EQ(shanghai.withdrawals[0].validator_index, 5u);
  EXPECT_EQ(shanghai.withdrawals[0].address, "0x3ae75c08b4c907eb63a8960c45b86e1e9ab6123c");
  EXPECT_EQ(shanghai.withdrawals[0].amount_gwei, 100u);
  EXPECT_TRUE(shanghai.withdrawals_root.has_value());
  EXPECT_FALSE(shanghai.blob_gas_used.has_value());
  const Block& cancun = blocks["get-block-cancun-fork.io"];
  EXPECT_TRUE(cancun.blob_gas_used.has_value());
  EXPECT_TRUE(cancun.excess_blob_gas.has_value());
  EXPECT_TRUE(cancun.parent_beacon_block_root.has_value());
  EXPECT_FALSE(cancun.requests_hash.has_value());
  const Block& prague = blocks["get-block-prague-fork.io"];
  EXPECT_EQ(prague.requests_hash,
            "0x57cac3e52cdcd73e52bd9e54956e0eae370f00ed41f68edc78266bdb46c3a543");
  EXPECT_EQ(prague.blob_gas_used, 0x20000u);
}

// One transaction of each type with its receipt.
TEST(ExecutionApis, TransactionsOfEveryTypeWithReceipts) {
  struct Case {
    const char* tx_file;
    const char* receipt_file;
    uint8_t type;
  };
  for (Case c : {Case{"get-legacy-tx.io", "get-legacy-receipt.io", 0},
                 Case{"get-legacy-create.io", "get-legacy-contract.io", 0},
                 Case{"get-legacy-input.io", "get-legacy-input.io", 0},
                 Case{"get-access-list.io", "get-access-list.io", 1},
                 Case{"get-dynamic-fee.io", "get-dynamic-fee.io", 2},
                 Case{"get-blob-tx.io", "get-blob-tx.io", 3},
                 Case{"get-setcode-tx.io", "get-setcode-tx.io", 4}}) {
    SCOPED_TRACE(c.tx_file);
    std::string tx_json = IoResult(Fixture(kApis + "eth_getTransactionByHash/" + c.tx_file));
    std::string receipt_json =
        IoResult(Fixture(kApis + "eth_getTransactionReceipt/" + c.receipt_file));
    Result<TransactionData> data =
        DecodeTransactionWithReceipt(tx_json, receipt_json, kHiveChainId);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    const Transaction& tx = data->transaction;
    EXPECT_EQ(tx.transaction_type, c.type);
    dom::parser tx_parser, receipt_parser;
    ExpectTransactionMatchesJson(tx, tx_parser.parse(tx_json), nullptr);
    ExpectReceiptMatchesJson(tx, data->logs, receipt_parser.parse(receipt_json));
    switch (c.type) {
      case 0:
        EXPECT_FALSE(tx.max_fee_per_gas.has_value());
        EXPECT_FALSE(tx.access_list_json.has_value());
        EXPECT_TRUE(tx.root.has_value());  // pre-Byzantium blocks on this chain
        break;
      case 1:
        EXPECT_EQ(tx.access_list_json,
                  "[{\"address\":\"0x7dcd17433742f4c0ca53122ab541d0ba67fc27df\",\"storageKeys\":["
                  "\"0x0000000000000000000000000000000000000000000000000000000000000000\","
                  "\"0x95104e47e1982aba633477f377b1511396c3fe83600224bcb0c78949be705b33\"]}]");
        EXPECT_FALSE(tx.max_fee_per_gas.has_value());
        break;
      case 2:
        EXPECT_TRUE(tx.max_fee_per_gas.has_value());
        EXPECT_TRUE(tx.max_priority_fee_per_gas.has_value());
        EXPECT_EQ(tx.effective_gas_price, tx.gas_price);
        break;
      case 3:
        EXPECT_EQ(tx.max_fee_per_blob_gas, U256(0x20000));
        ASSERT_EQ(tx.blob_versioned_hashes.size(), 1u);
        EXPECT_EQ(tx.blob_versioned_hashes[0],
                  "0x015a4cab4911426699ed34483de6640cf55a568afc5c5edffdcbd8bcd4452f68");
        EXPECT_EQ(tx.blob_gas_used, 0x20000u);
        EXPECT_EQ(tx.blob_gas_price, U256(1));
        EXPECT_EQ(data->logs.size(), 1u);
        break;
      case 4:
        EXPECT_EQ(
            tx.authorization_list_json,
            "[{\"chainId\":\"0xc72dd9d5e883e\",\"address\":"
            "\"0x8c2319620d7c348bb4e2b2a0b230c81f310e9561\",\"nonce\":\"0x0\",\"yParity\":"
            "\"0x0\",\"r\":\"0xf17d59102e9ebed035d1bd77bc668b170eb1d38edef6e7d971857d85781d68f"
            "e\",\"s\":\"0x193dbdc8dea2fc194da75febbd4de9689b625eecd1e4ca30e27b45339af22572\"}"
            "]");
        EXPECT_EQ(tx.access_list_json, "[]");
        EXPECT_EQ(tx.status, 1);
        break;
    }
  }
  for (const char* file : {"get-notfound-tx.io", "get-empty-tx.io"}) {
    std::string tx_json = IoResult(Fixture(kApis + "eth_getTransactionByHash/" + file));
    Result<TransactionData> data = DecodeTransactionWithReceipt(tx_json, "null");
    EXPECT_EQ(data.status().code(), Code::kNotFound) << file;
  }
}

TEST(ExecutionApis, TransactionByBlockAndIndexMatchesBlock1) {
  std::string block_json = IoResult(Fixture(kApis + "eth_getBlockByHash/get-block-by-hash.io"));
  std::string receipts_json =
      IoResult(Fixture(kApis + "eth_getBlockReceipts/get-block-receipts-n.io"));
  Result<BlockData> block = DecodeBlock(block_json, receipts_json, Expect(1));
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  for (const char* file : {"eth_getTransactionByBlockHashAndIndex/get-block-n.io",
                           "eth_getTransactionByBlockNumberAndIndex/get-block-n.io"}) {
    SCOPED_TRACE(file);
    std::string tx_json = IoResult(Fixture(kApis + file));
    dom::parser parser;
    dom::object tx = parser.parse(tx_json);
    uint64_t index =
        std::stoull(std::string(std::string_view(tx["transactionIndex"])), nullptr, 16);
    ASSERT_LT(index, block->transactions.size());
    ExpectTransactionMatchesJson(block->transactions[index], tx, &block->block);
  }
}

TEST(ExecutionApis, BlockNumberAndChainId) {
  Result<uint64_t> number = DecodeQuantityResult(
      IoResult(Fixture(kApis + "eth_blockNumber/simple-test.io")), "eth_blockNumber");
  ASSERT_TRUE(number.ok()) << number.status().ToString();
  EXPECT_EQ(*number, 0x36u);
  Result<uint64_t> chain =
      DecodeQuantityResult(IoResult(Fixture(kApis + "eth_chainId/get-chain-id.io")), "eth_chainId");
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ(*chain, kHiveChainId);
  EXPECT_EQ(*chain, 3503995874084926u);
}

}  // namespace
}  // namespace gapless
