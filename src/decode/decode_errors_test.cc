// Malformed and inconsistent answers: each case asserts the status code (the retry policy) and
// that the message names the block, the transaction or log, and the field. The inputs are the
// execution-apis head block 0x36 (4 transactions, 11 logs) with one targeted edit.

#include <gtest/gtest.h>

#include "decode/decode.h"
#include "decode/decode_test_util.h"

namespace gapless {
namespace {

using testing::Fixture;
using testing::IoResult;
using testing::ReplaceNth;

constexpr uint64_t kHiveChainId = 0xc72dd9d5e883e;
const std::string kBlockHash = "0xd226371d0b1551adb03fb52b71f08e3e11247fe9b1af994768af8cdaa8e7dcd7";
const std::string kTx0 = "0x0d1cf59d345d07f13d0981dd7ca1313bb2fbac151848aba3b7a57a26713fba42";
const std::string kTx1 = "0x492784ac4d441388c6f8415f41e1441f007ab20dc960a2e5edd80012d657d986";
const std::string kTx2 = "0x02a69bc31a30a32aa5bf7a21cce19aa740068681d40c19c72252f67f888c7885";
const std::string kOtherHash = "0x1111111111111111111111111111111111111111111111111111111111111111";

class DecodeErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    block_ = IoResult(Fixture("execution-apis/tests/eth_getBlockByNumber/get-latest.io"));
    receipts_ =
        IoResult(Fixture("execution-apis/tests/eth_getBlockReceipts/get-block-receipts-latest.io"));
    options_.expected_number = 0x36;
    options_.expected_chain_id = kHiveChainId;
    // The unmodified input decodes: every failure below comes from its edit.
    Result<BlockData> ok = DecodeBlock(block_, receipts_, options_);
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  }

  Status Decode() { return DecodeBlock(block_, receipts_, options_).status(); }

  // Expects `code` and every fragment in the message.
  static void ExpectError(const Status& st, Code code, std::initializer_list<std::string> parts) {
    EXPECT_EQ(st.code(), code) << st.ToString();
    for (const std::string& part : parts) {
      EXPECT_NE(st.message().find(part), std::string::npos)
          << "message lacks \"" << part << "\": " << st.message();
    }
  }

  std::string block_, receipts_;
  DecodeOptions options_;
};

TEST_F(DecodeErrors, WrongBlockNumber) {
  options_.expected_number = 0x37;
  ExpectError(Decode(), Code::kInvalidData,
              {"block 55", "field \"number\"", "54", "requested block number 55"});
}

TEST_F(DecodeErrors, NullBlockIsNotFound) {
  block_ = "null";
  Status st = Decode();
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_EQ(st.message(), "block 54 not found");
  EXPECT_TRUE(st.retriable() == false);
}

TEST_F(DecodeErrors, NullReceiptsAreNotFound) {
  receipts_ = "null";
  ExpectError(Decode(), Code::kNotFound, {"block 54", "receipts"});
}

TEST_F(DecodeErrors, ReceiptCountMismatch) {
  // Drop the last receipt: cut the array before the 4th receipt object.
  size_t fourth = receipts_.find("{\"blockHash\"");
  for (int i = 0; i < 3; ++i) fourth = receipts_.find("{\"blockHash\"", fourth + 1);
  ASSERT_NE(fourth, std::string::npos);
  receipts_ = receipts_.substr(0, fourth - 1) + "]";
  ExpectError(Decode(), Code::kInvalidData, {"block 54", "receipt count 3", "transaction count 4"});
}

TEST_F(DecodeErrors, ReceiptBlockHashMismatch) {
  // Receipt objects start with their blockHash; the 3rd is receipt 2.
  ReplaceNth(&receipts_, "{\"blockHash\":\"" + kBlockHash, "{\"blockHash\":\"" + kOtherHash, 2);
  ExpectError(Decode(), Code::kInvalidData,
              {"block 54: receipt 2 (tx " + kTx2 + "): field \"blockHash\"", kOtherHash,
               "does not match the block's hash " + kBlockHash});
}

TEST_F(DecodeErrors, ReceiptTransactionHashMismatch) {
  ReplaceNth(&receipts_, "\"transactionHash\":\"" + kTx0, "\"transactionHash\":\"" + kTx1);
  ExpectError(Decode(), Code::kInvalidData,
              {"receipt 0 (tx " + kTx0 + ")", "field \"transactionHash\"", kTx1});
}

TEST_F(DecodeErrors, ReceiptTransactionIndexMismatch) {
  ReplaceNth(&receipts_, "\"transactionIndex\":\"0x2\",\"type\"",
             "\"transactionIndex\":\"0x3\",\"type\"");
  ExpectError(Decode(), Code::kInvalidData,
              {"receipt 2 (tx " + kTx2 + ")", "field \"transactionIndex\"", "3"});
}

TEST_F(DecodeErrors, LogBlockHashMismatch) {
  // In a log, blockHash is followed by blockTimestamp; the first log is receipt 1's log 0.
  ReplaceNth(&receipts_, "\"blockHash\":\"" + kBlockHash + "\",\"blockTimestamp\"",
             "\"blockHash\":\"" + kOtherHash + "\",\"blockTimestamp\"");
  ExpectError(Decode(), Code::kInvalidData,
              {"block 54: receipt 1 (tx " + kTx1 + "): log 0: field \"blockHash\"", kOtherHash,
               kBlockHash});
}

TEST_F(DecodeErrors, LogTransactionHashMismatch) {
  ReplaceNth(&receipts_, "\"transactionHash\":\"" + kTx1, "\"transactionHash\":\"" + kTx2, 0);
  ExpectError(Decode(), Code::kInvalidData,
              {"receipt 1 (tx " + kTx1 + "): log 0: field \"transactionHash\"", kTx2});
}

TEST_F(DecodeErrors, LogIndexNotIncreasing) {
  ReplaceNth(&receipts_, "\"logIndex\":\"0x1\"", "\"logIndex\":\"0x0\"");
  ExpectError(Decode(), Code::kInvalidData,
              {"receipt 1", "log 1: field \"logIndex\"", "strictly increase"});
}

TEST_F(DecodeErrors, TransactionBlockHashMismatch) {
  ReplaceNth(&block_, "\"blockHash\":\"" + kBlockHash, "\"blockHash\":\"" + kOtherHash, 1);
  ExpectError(Decode(), Code::kInvalidData,
              {"block 54: transaction 1 (tx " + kTx1 + "): field \"blockHash\"", kOtherHash});
}

TEST_F(DecodeErrors, TransactionBlockNumberMismatch) {
  ReplaceNth(&block_, "\"blockNumber\":\"0x36\"", "\"blockNumber\":\"0x35\"", 3);
  ExpectError(Decode(), Code::kInvalidData, {"transaction 3", "field \"blockNumber\"", "53"});
}

TEST_F(DecodeErrors, ChainIdMismatchIsFailedPrecondition) {
  options_.expected_chain_id = 1;
  Status st = Decode();
  ExpectError(st, Code::kFailedPrecondition,
              {"block 54: transaction 0 (tx " + kTx0 + "): field \"chainId\"", "3503995874084926",
               "chain id 1"});
  EXPECT_FALSE(st.retriable());
}

TEST_F(DecodeErrors, NonHexQuantity) {
  ReplaceNth(&block_, "\"gasUsed\":\"0x52f71\"", "\"gasUsed\":\"0x52g71\"");
  ExpectError(Decode(), Code::kInvalidData,
              {"block 54: field \"gasUsed\"", "0x52g71", "not a hex digit"});
}

TEST_F(DecodeErrors, NonHexQuantityBeforeTheHashStillNamesTheTransaction) {
  // geth writes "gas" before "hash": the message still names the transaction.
  ReplaceNth(&block_, "\"gas\":\"0x1bc1c\"", "\"gas\":\"1bc1c\"");
  ExpectError(Decode(), Code::kInvalidData,
              {"block 54: transaction 0 (tx " + kTx0 + "): field \"gas\"", "0x-prefixed"});
}

TEST_F(DecodeErrors, U256Overflow) {
  std::string huge = "0x1" + std::string(64, '0');  // 65 hex digits: 2^256
  ReplaceNth(&block_, "\"value\":\"0x0\"", "\"value\":\"" + huge + "\"");
  ExpectError(Decode(), Code::kInvalidData,
              {"transaction 0 (tx " + kTx0 + "): field \"value\"", "u256 overflow"});
}

TEST_F(DecodeErrors, QuantityAboveBigint) {
  ReplaceNth(&block_, "\"gasLimit\":\"0xbebc200\"", "\"gasLimit\":\"0x8000000000000000\"");
  ExpectError(Decode(), Code::kInvalidData, {"block 54: field \"gasLimit\"", "2^63-1"});
  // 2^63-1 itself is accepted.
  SetUp();
  ReplaceNth(&block_, "\"gasLimit\":\"0xbebc200\"", "\"gasLimit\":\"0x7fffffffffffffff\"");
  Result<BlockData> data = DecodeBlock(block_, receipts_, options_);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->block.gas_limit, 0x7fffffffffffffffu);
}

TEST_F(DecodeErrors, TruncatedBlockJson) {
  for (size_t cut : {block_.size() / 2, block_.size() - 1, size_t{1}, size_t{0}}) {
    SCOPED_TRACE(cut);
    std::string full = block_;
    block_ = full.substr(0, cut);
    ExpectError(Decode(), Code::kInvalidData, {"block 54", "JSON"});
    block_ = full;
  }
}

TEST_F(DecodeErrors, TruncatedReceiptsJson) {
  receipts_ = receipts_.substr(0, receipts_.size() * 2 / 3);
  ExpectError(Decode(), Code::kInvalidData, {"block 54", "JSON"});
}

TEST_F(DecodeErrors, TrailingGarbage) {
  block_ += " {}";
  ExpectError(Decode(), Code::kInvalidData, {"block 54", "block JSON", "invalid JSON"});
}

TEST_F(DecodeErrors, WrongTypeNumberInsteadOfString) {
  ReplaceNth(&block_, "\"gasUsed\":\"0x52f71\"", "\"gasUsed\":339825");
  ExpectError(Decode(), Code::kInvalidData,
              {"block 54: field \"gasUsed\"", "expected a JSON string, got a number"});
}

TEST_F(DecodeErrors, WrongRootType) {
  receipts_ = "{}";
  ExpectError(Decode(), Code::kInvalidData, {"block 54", "receipts JSON", "array"});
  SetUp();
  block_ = "[]";
  ExpectError(Decode(), Code::kInvalidData, {"block 54", "block JSON"});
}

TEST_F(DecodeErrors, MissingBlockField) {
  ReplaceNth(&block_, "\"hash\":\"" + kBlockHash + "\",", "");
  ExpectError(Decode(), Code::kInvalidData, {"block 54: field \"hash\": is missing"});
}

TEST_F(DecodeErrors, MissingReceiptField) {
  ReplaceNth(&receipts_, "\"cumulativeGasUsed\":\"0x2999b\",", "");
  ExpectError(Decode(), Code::kInvalidData,
              {"receipt 1 (tx " + kTx1 + "): field \"cumulativeGasUsed\": is missing"});
}

TEST_F(DecodeErrors, RepeatedField) {
  // A second "logs" list would be appended to the first: rejected.
  ReplaceNth(&receipts_, "\"logs\":[]", "\"logs\":[],\"logs\":[]");
  ExpectError(Decode(), Code::kInvalidData,
              {"receipt 0 (tx " + kTx0 + "): field \"logs\": appears more than once"});
}

TEST_F(DecodeErrors, NullRequiredField) {
  ReplaceNth(&block_, "\"gasLimit\":\"0xbebc200\"", "\"gasLimit\":null");
  ExpectError(Decode(), Code::kInvalidData, {"block 54: field \"gasLimit\": is null"});
}

TEST_F(DecodeErrors, BadAddressLength) {
  const std::string from = "\"from\":\"0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f\"";
  ReplaceNth(&block_, from, "\"from\":\"0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865\"");
  ExpectError(Decode(), Code::kInvalidData,
              {"transaction 0 (tx " + kTx0 + "): field \"from\"", "39 hex digits, expected 40"});
}

TEST_F(DecodeErrors, BadHashLength) {
  ReplaceNth(&block_, "\"parentHash\":\"0x1c40", "\"parentHash\":\"0x1c4");
  ExpectError(Decode(), Code::kInvalidData, {"field \"parentHash\"", "expected 64 (32 bytes)"});
}

TEST_F(DecodeErrors, OddLengthData) {
  ReplaceNth(&block_, "\"input\":\"0x43", "\"input\":\"0x4");
  ExpectError(Decode(), Code::kInvalidData, {"transaction 0", "field \"input\"", "odd number"});
}

TEST_F(DecodeErrors, BadTopic) {
  ReplaceNth(&receipts_, "\"topics\":[\"0x", "\"topics\":[\"0xZ");
  ExpectError(Decode(), Code::kInvalidData, {"receipt 1", "log 0", "field \"topics[0]\""});
}

TEST_F(DecodeErrors, InvalidStatus) {
  ReplaceNth(&receipts_, "\"status\":\"0x1\"", "\"status\":\"0x2\"");
  ExpectError(Decode(), Code::kInvalidData, {"receipt 0", "field \"status\""});
}

TEST_F(DecodeErrors, BadWithdrawal) {
  ReplaceNth(&block_, "\"withdrawals\":[]",
             "\"withdrawals\":[{\"index\":\"0x0\",\"validatorIndex\":\"0x1\",\"address\":"
             "\"0x3ae75c08b4c907eb63a8960c45b86e1e9ab6123c\",\"amount\":\"0x-1\"}]");
  ExpectError(Decode(), Code::kInvalidData, {"block 54: withdrawal 0: field \"amount\""});
}

TEST_F(DecodeErrors, HashListBlockGoesToDecodeBlockHeader) {
  std::string block =
      IoResult(Fixture("execution-apis/tests/eth_getBlockByNumber/get-block-prague-fork.io"));
  Result<BlockData> data = DecodeBlock(block, "[]", DecodeOptions{0x2d, std::nullopt});
  ExpectError(data.status(), Code::kInvalidData,
              {"block 45: field \"transactions[0]\"", "DecodeBlockHeader"});
  ReplaceNth(&block, "\"0x196b6bdd", "\"0x196b6bd");
  Result<Block> header = DecodeBlockHeader(block, 0x2d);
  ExpectError(header.status(), Code::kInvalidData, {"block 45: field \"transactions[0]\""});
}

TEST_F(DecodeErrors, HeaderWithoutExpectedNumberNamesTheBlockOnceKnown) {
  ReplaceNth(&block_, "\"stateRoot\":\"0x", "\"stateRoot\":\"0y");
  Result<Block> header = DecodeBlockHeader(block_);
  ExpectError(header.status(), Code::kInvalidData, {"block 54: field \"stateRoot\""});
}

TEST_F(DecodeErrors, ReceiptOfAnotherTransaction) {
  std::string tx =
      IoResult(Fixture("execution-apis/tests/eth_getTransactionByHash/get-dynamic-fee.io"));
  std::string receipt =
      IoResult(Fixture("execution-apis/tests/eth_getTransactionReceipt/get-blob-tx.io"));
  Result<TransactionData> data = DecodeTransactionWithReceipt(tx, receipt);
  ExpectError(data.status(), Code::kInvalidData,
              {"block 27: receipt 0 (tx "
               "0x205405746564cbcf1dd53fb5ac92c7622d3792d82f03c59d9baddf2443d91864)",
               "field \""});
}

TEST_F(DecodeErrors, SingleTransactionErrorsNameTheTransaction) {
  std::string tx =
      IoResult(Fixture("execution-apis/tests/eth_getTransactionByHash/get-dynamic-fee.io"));
  std::string receipt =
      IoResult(Fixture("execution-apis/tests/eth_getTransactionReceipt/get-dynamic-fee.io"));
  std::string bad = tx;
  ReplaceNth(&bad, "\"maxFeePerGas\":\"0x3b9aca01\"", "\"maxFeePerGas\":7");
  ExpectError(
      DecodeTransactionWithReceipt(bad, receipt).status(), Code::kInvalidData,
      {"transaction (tx 0x205405746564cbcf1dd53fb5ac92c7622d3792d82f03c59d9baddf2443d91864):"
       " field \"maxFeePerGas\""});
  ExpectError(DecodeTransactionWithReceipt(tx, receipt, 1).status(), Code::kFailedPrecondition,
              {"field \"chainId\""});
}

TEST_F(DecodeErrors, UnknownFieldsAreIgnored) {
  ReplaceNth(&block_, "{\"baseFeePerGas\"",
             "{\"someL2Field\":1234567890123,\"other\":[1.5e300,{\"x\":null},true],"
             "\"l1Fee\":\"0x1\",\"baseFeePerGas\"");
  EXPECT_TRUE(Decode().ok()) << Decode().ToString();
}

TEST_F(DecodeErrors, JsonIntegerAbove64BitsAnywhereIsInvalidData) {
  // A known limit of the DOM parser (see decode.cc): JSON-RPC sends quantities as hex strings,
  // so only a broken node does this, and it gets a clear error rather than a wrong value.
  ReplaceNth(&block_, "{\"baseFeePerGas\"",
             "{\"someL2Field\":123456789012345678901234567890,\"baseFeePerGas\"");
  ExpectError(Decode(), Code::kInvalidData, {"block 54", "block JSON", "invalid JSON"});
}

// eth_getLogs answers (the contracts mode's events data mode): logs in chain order are read; one
// out of order, repeated, marked removed, or of two hashes in one block is refused, naming it.
std::string Hex(uint64_t v) { return U256(v).ToHexQuantity(); }

std::string LogJson(uint64_t block, uint32_t index, char hash = 'a', bool removed = false) {
  return std::string(R"({"address":"0x)") + std::string(40, '1') + R"(","topics":["0x)" +
         std::string(64, 'e') + R"("],"data":"0x00","blockNumber":")" + Hex(block) +
         R"(","blockHash":"0x)" + std::string(64, hash) + R"(","transactionHash":"0x)" +
         std::string(64, 'c') + R"(","transactionIndex":"0x0","logIndex":")" + Hex(index) +
         R"(","removed":)" + (removed ? "true" : "false") + "}";
}

TEST(DecodeLogsResultTest, ReadsLogsInChainOrderAndRefusesAnyOther) {
  auto logs =
      DecodeLogsResult("[" + LogJson(5, 0) + "," + LogJson(5, 3) + "," + LogJson(9, 1) + "]");
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  ASSERT_EQ(logs->size(), 3u);
  EXPECT_EQ((*logs)[2].block_number, 9u);
  EXPECT_EQ((*logs)[1].log_index, 3u);
  EXPECT_EQ((*logs)[0].address, "0x" + std::string(40, '1'));
  ASSERT_TRUE(DecodeLogsResult("[]").ok());

  auto backwards = DecodeLogsResult("[" + LogJson(5, 3) + "," + LogJson(5, 0) + "]");
  EXPECT_EQ(backwards.status().code(), Code::kInvalidData);
  EXPECT_NE(backwards.status().message().find("block 5 log 0 comes after block 5 log 3"),
            std::string::npos)
      << backwards.status().ToString();
  EXPECT_FALSE(DecodeLogsResult("[" + LogJson(5, 1) + "," + LogJson(5, 1) + "]").ok());
  EXPECT_FALSE(DecodeLogsResult("[" + LogJson(6, 0) + "," + LogJson(5, 1) + "]").ok());
  auto removed = DecodeLogsResult("[" + LogJson(5, 0, 'a', true) + "]");
  EXPECT_NE(removed.status().message().find("removed"), std::string::npos);
  auto forks = DecodeLogsResult("[" + LogJson(5, 0, 'a') + "," + LogJson(5, 1, 'b') + "]");
  EXPECT_NE(forks.status().message().find("two different block hashes"), std::string::npos);
  EXPECT_FALSE(DecodeLogsResult("{}").ok());
}

}  // namespace
}  // namespace gapless
