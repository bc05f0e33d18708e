// Every fixture block with full transactions and receipts verifies against its own header:
// mainnet block 17000000 and the execution-apis hive chain's blocks (pre-Byzantium receipts with
// a state root, transaction types 0-4, the fork boundaries up to Prague). The oracle is the
// header the node sent; our roots and hashes are computed from the decoded model.
#include <gtest/gtest.h>

#include <set>

#include "decode/decode.h"
#include "verify/encode.h"
#include "verify/keccak.h"
#include "verify/trie.h"
#include "verify/verify.h"
#include "verify/verify_test_util.h"

namespace gapless {
namespace {

using verify_testing::IoResult;
using verify_testing::Mainnet17000000;

constexpr uint64_t kHiveChainId = 0xc72dd9d5e883e;
const std::string kApis = "execution-apis/tests/";

template <typename T>
T ValueOf(Result<T> result) {
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? std::move(result).value() : T{};
}

TEST(VerifyMainnet, Block17000000RootsBloomAndHashMatchTheHeader) {
  const BlockData& data = Mainnet17000000();
  ASSERT_EQ(data.transactions.size(), 102u);
  ASSERT_EQ(data.logs.size(), 237u);
  EXPECT_EQ(ValueOf(ComputeTransactionsRoot(data.transactions)), data.block.transactions_root);
  EXPECT_EQ(ValueOf(ComputeReceiptsRoot(data)), data.block.receipts_root);
  EXPECT_EQ(ValueOf(ComputeLogsBloom(data.logs)), data.block.logs_bloom);
  EXPECT_EQ(ValueOf(ComputeBlockHash(data.block)),
            "0x96cfa0fb5e50b0a3f6cc76f3299cfbf48f17e8b41798d1394474e67ec8a97e9f");
  EXPECT_EQ(data.block.hash, "0x96cfa0fb5e50b0a3f6cc76f3299cfbf48f17e8b41798d1394474e67ec8a97e9f");
  std::set<int> types;
  for (const Transaction& tx : data.transactions) {
    EXPECT_EQ(ValueOf(ComputeTransactionHash(tx)), tx.hash);
    EXPECT_EQ(ValueOf(RecoverSender(tx)), tx.from_address) << tx.hash;
    types.insert(tx.transaction_type.value_or(0));
  }
  EXPECT_EQ(types, (std::set<int>{0, 2}));
  Status st = VerifyBlock(data, VerifyOptions{.recover_senders = true});
  EXPECT_TRUE(st.ok()) << st.ToString();
}

// A block of the execution-apis chain with its receipts, decoded the production way.
BlockData ApisBlock(const std::string& block_io, const std::string& receipts_json,
                    uint64_t number) {
  DecodeOptions options;
  options.expected_number = number;
  options.expected_chain_id = kHiveChainId;
  return ValueOf(DecodeBlock(IoResult(kApis + block_io), receipts_json, options));
}

TEST(VerifyExecutionApis, GenesisVerifies) {
  BlockData data = ApisBlock("eth_getBlockByNumber/get-genesis.io", "[]", 0);
  EXPECT_EQ(ValueOf(ComputeTransactionsRoot(data.transactions)), verify::kEmptyTrieRootHex);
  Status st = VerifyBlock(data);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(VerifyExecutionApis, Block1WithPreByzantiumReceiptsVerifies) {
  // Four legacy contract creations; the receipts carry a post-state root instead of a status.
  BlockData data = ApisBlock("eth_getBlockByHash/get-block-by-hash.io",
                             IoResult(kApis + "eth_getBlockReceipts/get-block-receipts-n.io"), 1);
  ASSERT_EQ(data.transactions.size(), 4u);
  ASSERT_TRUE(data.transactions[0].root.has_value());
  EXPECT_EQ(ValueOf(ComputeReceiptsRoot(data)), data.block.receipts_root);
  Status st = VerifyBlock(data, VerifyOptions{.recover_senders = true});
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(VerifyExecutionApis, HeadBlockVerifies) {
  // Block 0x36 (Osaka-era head): four transactions with status receipts and 11 logs.
  BlockData data =
      ApisBlock("eth_getBlockByNumber/get-latest.io",
                IoResult(kApis + "eth_getBlockReceipts/get-block-receipts-latest.io"), 0x36);
  ASSERT_EQ(data.transactions.size(), 4u);
  ASSERT_EQ(data.logs.size(), 11u);
  ASSERT_TRUE(data.block.requests_hash.has_value());
  Status st = VerifyBlock(data, VerifyOptions{.recover_senders = true});
  EXPECT_TRUE(st.ok()) << st.ToString();
}

// The events mode's --verify-complete proves a block's receipts from eth_getBlockReceipts alone
// (decode/decode.h DecodeBlockReceipts), without the transactions: types 0 and 2 (mainnet),
// pre-Byzantium receipts with a state root (hive block 1), status receipts with logs (hive head).
// A log left out of a receipt changes the root.
TEST(VerifyReceiptsAlone, ProveTheReceiptsRootWithoutTheTransactions) {
  struct Case {
    std::string receipts;
    Block header;
  };
  const Block hive1 = ApisBlock("eth_getBlockByHash/get-block-by-hash.io",
                                IoResult(kApis + "eth_getBlockReceipts/get-block-receipts-n.io"), 1)
                          .block;
  const Block head =
      ApisBlock("eth_getBlockByNumber/get-latest.io",
                IoResult(kApis + "eth_getBlockReceipts/get-block-receipts-latest.io"), 0x36)
          .block;
  for (const Case& c :
       {Case{verify_testing::ReadFixture("mainnet/17000000/receipts.json"),
             Mainnet17000000().block},
        Case{IoResult(kApis + "eth_getBlockReceipts/get-block-receipts-n.io"), hive1},
        Case{IoResult(kApis + "eth_getBlockReceipts/get-block-receipts-latest.io"), head}}) {
    SCOPED_TRACE(c.header.number);
    BlockData receipts = ValueOf(DecodeBlockReceipts(c.receipts, c.header.hash, c.header.number));
    ASSERT_FALSE(receipts.transactions.empty());
    EXPECT_EQ(ValueOf(ComputeReceiptsRoot(receipts)), c.header.receipts_root);
    if (!receipts.logs.empty()) {
      receipts.logs.pop_back();
      EXPECT_NE(ValueOf(ComputeReceiptsRoot(receipts)), c.header.receipts_root);
    }
  }
  // Receipts of another block are refused, naming the block.
  Result<BlockData> other = DecodeBlockReceipts(
      verify_testing::ReadFixture("mainnet/17000000/receipts.json"), head.hash, 17000000);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), Code::kInvalidData);
  EXPECT_NE(other.status().message().find("block 17000000"), std::string::npos)
      << other.status().ToString();
}

// A block's logsBloom holds each of its logs' addresses and topics (ComputeValueBloom,
// BloomContains: what --verify-complete tests a header with); an empty bloom holds nothing.
TEST(VerifyBloom, EveryLogsAddressAndTopicIsInItsBlocksBloom) {
  const BlockData& data = Mainnet17000000();
  const std::string empty = "0x" + std::string(512, '0');
  for (const Log& log : data.logs) {
    const std::string address = ValueOf(ComputeValueBloom(log.address));
    EXPECT_TRUE(BloomContains(data.block.logs_bloom, address)) << log.address;
    EXPECT_FALSE(BloomContains(empty, address));
    for (const std::string& topic : log.topics) {
      EXPECT_TRUE(BloomContains(data.block.logs_bloom, ValueOf(ComputeValueBloom(topic))));
    }
  }
  EXPECT_FALSE(BloomContains(data.block.logs_bloom, "0x00"));
  EXPECT_FALSE(ComputeValueBloom("0x1234").ok());  // neither an address nor a topic
}

// The fork-boundary blocks come with transaction hashes only: their header hash (every fork's
// fields) and withdrawals root are checked.
TEST(VerifyExecutionApis, ForkBoundaryHeadersHashAndWithdrawalsRoots) {
  struct Case {
    std::string file;
    uint64_t number;
    bool shanghai;
  };
  for (const Case& c :
       {Case{"get-block-london-fork.io", 0x1b, false}, Case{"get-block-merge-fork.io", 0x24, false},
        Case{"get-block-shanghai-fork.io", 0x27, true},
        Case{"get-block-cancun-fork.io", 0x2a, true},
        Case{"get-block-prague-fork.io", 0x2d, true}}) {
    SCOPED_TRACE(c.file);
    Block block =
        ValueOf(DecodeBlockHeader(IoResult(kApis + "eth_getBlockByNumber/" + c.file), c.number));
    EXPECT_EQ(ValueOf(ComputeBlockHash(block)), block.hash);
    ASSERT_EQ(block.withdrawals_root.has_value(), c.shanghai);
    if (c.shanghai) {
      EXPECT_EQ(ValueOf(ComputeWithdrawalsRoot(block.withdrawals)), *block.withdrawals_root);
    }
  }
}

TEST(VerifyExecutionApis, ShanghaiWithdrawalsRootIsOfItsWithdrawal) {
  Block block = ValueOf(
      DecodeBlockHeader(IoResult(kApis + "eth_getBlockByNumber/get-block-shanghai-fork.io"), 0x27));
  ASSERT_EQ(block.withdrawals.size(), 1u);
  EXPECT_NE(*block.withdrawals_root, verify::kEmptyTrieRootHex);
  block.withdrawals[0].amount_gwei += 1;
  EXPECT_NE(ValueOf(ComputeWithdrawalsRoot(block.withdrawals)), *block.withdrawals_root);
}

// Each transaction type's hash is keccak of its envelope, and its sender recovers from the
// signature: legacy (EIP-155 and contract creation), 0x01 access list, 0x02 dynamic fee, 0x03
// blob, 0x04 set-code with an authorization list.
TEST(VerifyExecutionApis, EveryTransactionTypeHashesAndRecoversItsSender) {
  struct Case {
    std::string tx_file;
    std::string receipt_file;
    int type;
  };
  std::set<int> seen;
  for (const Case& c : {Case{"get-legacy-tx.io", "get-legacy-receipt.io", 0},
                        Case{"get-legacy-create.io", "get-legacy-contract.io", 0},
                        Case{"get-legacy-input.io", "get-legacy-input.io", 0},
                        Case{"get-access-list.io", "get-access-list.io", 1},
                        Case{"get-dynamic-fee.io", "get-dynamic-fee.io", 2},
                        Case{"get-blob-tx.io", "get-blob-tx.io", 3},
                        Case{"get-setcode-tx.io", "get-setcode-tx.io", 4}}) {
    SCOPED_TRACE(c.tx_file);
    auto decoded = DecodeTransactionWithReceipt(
        IoResult(kApis + "eth_getTransactionByHash/" + c.tx_file),
        IoResult(kApis + "eth_getTransactionReceipt/" + c.receipt_file), kHiveChainId);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    const Transaction& tx = decoded->transaction;
    EXPECT_EQ(tx.transaction_type.value_or(0), c.type);
    seen.insert(tx.transaction_type.value_or(0));
    EXPECT_EQ(ValueOf(ComputeTransactionHash(tx)), tx.hash);
    EXPECT_EQ(ValueOf(RecoverSender(tx)), tx.from_address);
  }
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2, 3, 4}));
}

TEST(VerifyExecutionApis, LegacyEncodingEqualsTheNodesRawTransaction) {
  auto decoded = DecodeTransactionWithReceipt(
      IoResult(kApis + "eth_getTransactionByHash/get-legacy-create.io"),
      IoResult(kApis + "eth_getTransactionReceipt/get-legacy-contract.io"), kHiveChainId);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  std::string encoded;
  ASSERT_TRUE(verify::EncodeTransaction(decoded->transaction, &encoded).ok());
  // debug_getRawTransaction's result is a JSON string: the hex of the node's own encoding.
  std::string raw = IoResult(kApis + "debug_getRawTransaction/get-tx.io");
  EXPECT_EQ("\"" + verify::ToHex(encoded) + "\"", raw);
}

}  // namespace
}  // namespace gapless
