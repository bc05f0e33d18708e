// Each corruption of mainnet block 17000000 that a node, the wire or a database could introduce
// is caught by VerifyBlock, named (block, transaction, field) and typed: InvalidData with the
// mismatch reason, or FailedPrecondition for a block from a chain that is not Ethereum-shaped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "decode/decode.h"
#include "verify/encode.h"
#include "verify/verify.h"
#include "verify/verify_test_util.h"

namespace gapless {
namespace {

using ::testing::HasSubstr;
using verify_testing::IoResult;
using verify_testing::Mainnet17000000;

// Flips the last hex digit of a 0x-hex text.
void Flip(std::string* hex) {
  char& c = hex->back();
  c = c == '0' ? '1' : '0';
}

// Expects a named mismatch: InvalidData, the mismatch reason, "block 17000000: " and `what`.
void ExpectMismatch(const BlockData& data, const std::string& what,
                    const VerifyOptions& options = {}) {
  Status st = VerifyBlock(data, options);
  ASSERT_FALSE(st.ok()) << "corruption not caught: " << what;
  EXPECT_EQ(st.code(), Code::kInvalidData) << st.ToString();
  EXPECT_EQ(st.reason(), kVerifyMismatchReason) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("block 17000000: "));
  EXPECT_THAT(st.message(), HasSubstr(what));
}

// The index of the first transaction with exactly `n` logs.
size_t TxWithLogs(const BlockData& data, uint32_t n) {
  for (size_t i = 0; i < data.transactions.size(); ++i) {
    if (data.transactions[i].log_count == n) return i;
  }
  ADD_FAILURE() << "no transaction with " << n << " logs";
  return 0;
}

TEST(VerifyCorruption, IntactBlockVerifies) {
  Status st = VerifyBlock(Mainnet17000000());
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(VerifyCorruption, ChangedLogDataByteBreaksTheReceiptsRoot) {
  BlockData data = Mainnet17000000();
  // Log data is not in the bloom: only the receipts root sees it.
  size_t i = 0;
  while (data.logs[i].data == "0x") ++i;
  Flip(&data.logs[i].data);
  ExpectMismatch(data, "receiptsRoot is " + data.block.receipts_root + " but the receipts give 0x");
}

TEST(VerifyCorruption, ChangedLogTopicBreaksTheReceiptBloom) {
  BlockData data = Mainnet17000000();
  Log& log = data.logs[10];
  Flip(&log.topics[0]);
  const Transaction& tx = data.transactions[log.transaction_index];
  ExpectMismatch(data, "transaction " + std::to_string(log.transaction_index) + " (" + tx.hash +
                           "): the receipt's logsBloom does not match its");
}

TEST(VerifyCorruption, DroppedLogIsCaughtByItsReceiptsBloom) {
  BlockData data = Mainnet17000000();
  size_t tx_index = TxWithLogs(data, 1);
  for (auto it = data.logs.begin(); it != data.logs.end(); ++it) {
    if (it->transaction_index == tx_index) {
      data.logs.erase(it);
      break;
    }
  }
  ExpectMismatch(data, "transaction " + std::to_string(tx_index) + " (" +
                           data.transactions[tx_index].hash +
                           "): the receipt's logsBloom does not match its 0 logs");
}

TEST(VerifyCorruption, DroppedLogWithItsBloomAdjustedIsCaughtByTheReceiptsRoot) {
  // A database that lost a log row and whose receipt bloom was rewritten to match still fails.
  BlockData data = Mainnet17000000();
  size_t tx_index = TxWithLogs(data, 1);
  std::erase_if(data.logs, [&](const Log& log) { return log.transaction_index == tx_index; });
  data.transactions[tx_index].receipt_logs_bloom = "0x" + std::string(512, '0');
  ExpectMismatch(data, "receiptsRoot is");
}

TEST(VerifyCorruption, DroppedReceiptIsCaught) {
  // The last transaction and its receipt (with its logs) missing from the block.
  BlockData data = Mainnet17000000();
  uint32_t last = static_cast<uint32_t>(data.transactions.size() - 1);
  data.transactions.pop_back();
  std::erase_if(data.logs, [&](const Log& log) { return log.transaction_index == last; });
  ExpectMismatch(data, "transactionsRoot is " + data.block.transactions_root +
                           " but the transactions give 0x");
}

TEST(VerifyCorruption, ReceiptFieldChangedIsCaughtByTheReceiptsRoot) {
  BlockData data = Mainnet17000000();
  data.transactions[40].cumulative_gas_used += 1;
  ExpectMismatch(data, "receiptsRoot is");
  data = Mainnet17000000();
  data.transactions[41].status = data.transactions[41].status == 1 ? 0 : 1;
  ExpectMismatch(data, "receiptsRoot is");
}

TEST(VerifyCorruption, SwappedTransactionsBreakTheTransactionsRoot) {
  BlockData data = Mainnet17000000();
  std::swap(data.transactions[5], data.transactions[6]);
  std::swap(data.transactions[5].transaction_index, data.transactions[6].transaction_index);
  ExpectMismatch(data, "transactionsRoot is " + data.block.transactions_root);
}

TEST(VerifyCorruption, AnvilQuirkOptionDoesNotSkipTheRootOfABlockWithoutBlobs) {
  BlockData data = Mainnet17000000();
  std::swap(data.transactions[5], data.transactions[6]);
  ExpectMismatch(data, "transactionsRoot is", VerifyOptions{.anvil_blob_sidecar_quirk = true});
}

TEST(VerifyCorruption, ChangedTransactionFieldIsNamedByItsHash) {
  BlockData data = Mainnet17000000();
  data.transactions[7].value = U256(12345);
  ExpectMismatch(data, "transaction 7 (" + data.transactions[7].hash + "): hash is " +
                           data.transactions[7].hash + " but its fields give 0x");
}

TEST(VerifyCorruption, WrongBlockBloomIsCaught) {
  BlockData data = Mainnet17000000();
  Flip(&data.block.logs_bloom);
  ExpectMismatch(data, "logsBloom does not match the block's 237 logs");
}

TEST(VerifyCorruption, WrongReceiptBloomIsCaught) {
  BlockData data = Mainnet17000000();
  Flip(&data.transactions[3].receipt_logs_bloom);
  ExpectMismatch(data, "transaction 3 (" + data.transactions[3].hash +
                           "): the receipt's logsBloom does not match");
}

TEST(VerifyCorruption, ChangedHeaderFieldsBreakTheBlockHash) {
  const std::string hash = Mainnet17000000().block.hash;
  const std::string what = "hash is " + hash + " but the header gives 0x";
  BlockData data = Mainnet17000000();
  data.block.gas_used += 1;
  ExpectMismatch(data, what);
  data = Mainnet17000000();
  Flip(&data.block.state_root);
  ExpectMismatch(data, what);
  data = Mainnet17000000();
  Flip(&data.block.parent_hash);
  ExpectMismatch(data, what);
  data = Mainnet17000000();
  data.block.base_fee_per_gas = U256(1);
  ExpectMismatch(data, what);
  data = Mainnet17000000();
  data.block.timestamp += 1;
  ExpectMismatch(data, what);
  data = Mainnet17000000();
  data.block.extra_data = "0x";
  ExpectMismatch(data, what);
}

TEST(VerifyCorruption, WrongSenderIsCaughtOnlyWithRecoverSenders) {
  BlockData data = Mainnet17000000();
  std::string original = data.transactions[9].from_address;
  Flip(&data.transactions[9].from_address);
  EXPECT_TRUE(VerifyBlock(data).ok());  // `from` is not under any root or hash
  ExpectMismatch(data,
                 "transaction 9 (" + data.transactions[9].hash + "): from is " +
                     data.transactions[9].from_address + " but the signature gives " + original,
                 VerifyOptions{.recover_senders = true});
}

TEST(VerifyCorruption, WrongSignatureIsCaughtByTheTransactionHash) {
  BlockData data = Mainnet17000000();
  Flip(&*data.transactions[11].s);
  ExpectMismatch(data, "transaction 11 (" + data.transactions[11].hash + "): hash is");
}

TEST(VerifyCorruption, UnknownTransactionTypeIsUnsupportedNotAMismatch) {
  // An OP deposit transaction (0x7e) in an otherwise Ethereum-shaped block.
  BlockData data = Mainnet17000000();
  data.transactions[0].transaction_type = 0x7e;
  Status st = VerifyBlock(data);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_EQ(st.reason(), verify::kUnsupportedTxTypeReason);
  EXPECT_THAT(st.message(), HasSubstr("block 17000000: transaction 0 ("));
  EXPECT_THAT(st.message(), HasSubstr("transaction type 0x7e"));
  // Arbitrum's internal transaction type.
  data.transactions[0].transaction_type = 0x6a;
  st = VerifyBlock(data);
  EXPECT_EQ(st.reason(), verify::kUnsupportedTxTypeReason);
  EXPECT_THAT(st.message(), HasSubstr("0x6a"));
}

TEST(VerifyCorruption, HeaderWithoutMixHashIsUnsupported) {
  BlockData data = Mainnet17000000();
  data.block.mix_hash.reset();
  Status st = VerifyBlock(data);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_EQ(st.reason(), verify::kUnsupportedHeaderReason);
}

TEST(VerifyCorruption, ForkFieldsOutOfOrderAreMalformed) {
  // A Prague header that lost blobGasUsed but kept the later fields.
  auto block = DecodeBlockHeader(
      IoResult("execution-apis/tests/eth_getBlockByNumber/get-block-prague-fork.io"), 0x2d);
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  ASSERT_TRUE(ComputeBlockHash(*block).ok());
  block->blob_gas_used.reset();
  auto hash = ComputeBlockHash(*block);
  ASSERT_FALSE(hash.ok());
  EXPECT_EQ(hash.status().code(), Code::kInvalidData);
  EXPECT_THAT(hash.status().message(), HasSubstr("\"excessBlobGas\" but not \"blobGasUsed\""));
}

TEST(VerifyCorruption, WithdrawalsWithoutARootAreCaught) {
  BlockData data = Mainnet17000000();  // pre-Shanghai: no withdrawalsRoot
  data.block.withdrawals.push_back(Withdrawal{1, 2, "0x" + std::string(40, '1'), 3});
  ExpectMismatch(data, "1 withdrawals but no withdrawalsRoot");
}

TEST(VerifyCorruption, MalformedFieldIsNamed) {
  BlockData data = Mainnet17000000();
  data.transactions[2].input = "0x123";  // odd length
  Status st = VerifyBlock(data);
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_THAT(st.message(), HasSubstr("block 17000000: transaction 2 ("));
  EXPECT_THAT(st.message(), HasSubstr("field \"input\""));
}

}  // namespace
}  // namespace gapless
