// ExtractTokenTransfers: ethereum-etl's extract case (MANIFEST 3.6), every token standard, and
// logs that must yield nothing (wrong shapes, malformed ERC-1155 batch payloads).

#include <gtest/gtest.h>

#include <sstream>

#include "decode/decode.h"
#include "decode/decode_test_util.h"

namespace gapless {
namespace {

using testing::Fixture;

// One ABI word (64 hex digits) for a small value.
std::string Word(uint64_t v) {
  std::ostringstream ss;
  ss << std::hex << v;
  std::string digits = ss.str();
  return std::string(64 - digits.size(), '0') + digits;
}

std::string AddressTopic(const std::string& address) {  // address: 40 hex digits
  return "0x" + std::string(24, '0') + address;
}

const std::string kFrom = "9f73bc871764c879fd9e0f524278373fa7875068";
const std::string kTo = "f51bc4633f5924465c8c6317169faf3e4312e82f";
const std::string kOperator = "1111111111111111111111111111111111111111";
const std::string kToken = "0xC66EA802717BFB9833400264DD12C2BCEAA34A6D";

Log MakeLog(std::vector<std::string> topics, std::string data) {
  Log log;
  log.block_number = 1452581;
  log.log_index = 7;
  log.transaction_hash = "0x5cb4fc2e3d217f3c286358d6bc042259c8befb0dabe450567a987f5770043157";
  log.address = kToken;
  log.topics = std::move(topics);
  log.data = std::move(data);
  return log;
}

TEST(ExtractTokenTransfers, EthereumEtlLogsCsv) {  // 3.6
  std::string dir = "ethereum-etl/tests/resources/test_extract_token_transfers_job/logs/";
  testing::Csv logs = testing::ReadCsv(Fixture(dir + "logs.csv"));
  testing::Csv expected = testing::ReadCsv(Fixture(dir + "expected_token_transfers.csv"));
  ASSERT_EQ(logs.rows.size(), 3u);
  ASSERT_EQ(expected.rows.size(), 2u);
  std::vector<TokenTransfer> transfers;
  for (const auto& row : logs.rows) {
    Log log;
    log.log_index = static_cast<uint32_t>(std::stoul(row.at("log_index")));
    log.transaction_hash = row.at("transaction_hash");
    log.transaction_index = static_cast<uint32_t>(std::stoul(row.at("transaction_index")));
    log.block_hash = row.at("block_hash");
    log.block_number = std::stoull(row.at("block_number"));
    log.address = row.at("address");
    log.data = row.at("data");
    std::istringstream topics(row.at("topics"));
    for (std::string topic; std::getline(topics, topic, ',');) log.topics.push_back(topic);
    for (TokenTransfer& t : ExtractTokenTransfers(log)) transfers.push_back(std::move(t));
  }
  // Log 4 (a single-topic event) yields nothing.
  ASSERT_EQ(transfers.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    testing::ExpectCells(expected.rows[i], testing::TransferCells(transfers[i]));
    EXPECT_EQ(transfers[i].standard, TokenStandard::kErc20);
  }
  EXPECT_EQ(transfers[0].value.ToDecimal(), "109000000000000000000");
}

TEST(ExtractTokenTransfers, Erc20) {
  Log log = MakeLog({std::string(kTransferTopic), AddressTopic(kFrom), AddressTopic(kTo)},
                    "0x" + std::string(64, 'f'));
  std::vector<TokenTransfer> t = ExtractTokenTransfers(log);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].standard, TokenStandard::kErc20);
  EXPECT_EQ(t[0].token_address, testing::Lower(kToken));
  EXPECT_EQ(t[0].from_address, "0x" + kFrom);
  EXPECT_EQ(t[0].to_address, "0x" + kTo);
  EXPECT_EQ(t[0].value.ToDecimal(),  // 2^256-1, never negative
            "115792089237316195423570985008687907853269984665640564039457584007913129639935");
  EXPECT_FALSE(t[0].token_id.has_value());
  EXPECT_FALSE(t[0].operator_address.has_value());
  EXPECT_EQ(t[0].block_number, 1452581u);
  EXPECT_EQ(t[0].log_index, 7u);
  EXPECT_EQ(t[0].batch_index, 0u);
  EXPECT_EQ(t[0].transaction_hash, log.transaction_hash);
}

TEST(ExtractTokenTransfers, TopicComparisonIsCaseInsensitive) {
  std::string upper = "0xDDF252AD1BE2C89B69C2B068FC378DAA952BA7F163C4A11628F55A4DF523B3EF";
  Log log =
      MakeLog({upper, AddressTopic("AB" + kFrom.substr(2)), AddressTopic(kTo)}, "0x" + Word(5));
  std::vector<TokenTransfer> t = ExtractTokenTransfers(log);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].from_address, "0xab" + kFrom.substr(2));  // lower-cased
  EXPECT_EQ(t[0].value, U256(5));
}

TEST(ExtractTokenTransfers, AddressWordsUpperBytesAreNotChecked) {  // as ethereum-etl
  std::string dirty = "0x" + std::string(24, 'f') + kFrom;
  Log log = MakeLog({std::string(kTransferTopic), dirty, AddressTopic(kTo)}, "0x" + Word(1));
  std::vector<TokenTransfer> t = ExtractTokenTransfers(log);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].from_address, "0x" + kFrom);
}

TEST(ExtractTokenTransfers, Erc721) {
  Log log = MakeLog(
      {std::string(kTransferTopic), AddressTopic(kFrom), AddressTopic(kTo), "0x" + Word(1234)},
      "0x");
  std::vector<TokenTransfer> t = ExtractTokenTransfers(log);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].standard, TokenStandard::kErc721);
  EXPECT_EQ(t[0].token_id, U256(1234));
  EXPECT_EQ(t[0].value, U256(1));
  EXPECT_EQ(t[0].from_address, "0x" + kFrom);
  EXPECT_EQ(t[0].to_address, "0x" + kTo);
}

TEST(ExtractTokenTransfers, Erc1155Single) {
  Log log = MakeLog({std::string(kTransferSingleTopic), AddressTopic(kOperator),
                     AddressTopic(kFrom), AddressTopic(kTo)},
                    "0x" + Word(42) + Word(1000));
  std::vector<TokenTransfer> t = ExtractTokenTransfers(log);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].standard, TokenStandard::kErc1155);
  EXPECT_EQ(t[0].operator_address, "0x" + kOperator);
  EXPECT_EQ(t[0].from_address, "0x" + kFrom);
  EXPECT_EQ(t[0].to_address, "0x" + kTo);
  EXPECT_EQ(t[0].token_id, U256(42));
  EXPECT_EQ(t[0].value, U256(1000));
  EXPECT_EQ(t[0].batch_index, 0u);
}

std::vector<std::string> BatchTopics() {
  return {std::string(kTransferBatchTopic), AddressTopic(kOperator), AddressTopic(kFrom),
          AddressTopic(kTo)};
}

// abi.encode(uint256[] ids = [7, 8], uint256[] values = [100, 200])
std::string BatchData() {
  return "0x" + Word(0x40) + Word(0xa0) + Word(2) + Word(7) + Word(8) + Word(2) + Word(100) +
         Word(200);
}

TEST(ExtractTokenTransfers, Erc1155BatchTwoIds) {
  std::vector<TokenTransfer> t = ExtractTokenTransfers(MakeLog(BatchTopics(), BatchData()));
  ASSERT_EQ(t.size(), 2u);
  for (uint32_t i = 0; i < 2; ++i) {
    EXPECT_EQ(t[i].standard, TokenStandard::kErc1155);
    EXPECT_EQ(t[i].batch_index, i);
    EXPECT_EQ(t[i].log_index, 7u);
    EXPECT_EQ(t[i].operator_address, "0x" + kOperator);
    EXPECT_EQ(t[i].from_address, "0x" + kFrom);
    EXPECT_EQ(t[i].to_address, "0x" + kTo);
  }
  EXPECT_EQ(t[0].token_id, U256(7));
  EXPECT_EQ(t[0].value, U256(100));
  EXPECT_EQ(t[1].token_id, U256(8));
  EXPECT_EQ(t[1].value, U256(200));
}

TEST(ExtractTokenTransfers, Erc1155BatchValuesBeforeIds) {
  // Offsets may point anywhere in bounds: values first, then ids.
  std::string data = "0x" + Word(0xa0) + Word(0x40) + Word(2) + Word(100) + Word(200) + Word(2) +
                     Word(7) + Word(8);
  std::vector<TokenTransfer> t = ExtractTokenTransfers(MakeLog(BatchTopics(), data));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].token_id, U256(7));
  EXPECT_EQ(t[0].value, U256(100));
  EXPECT_EQ(t[1].token_id, U256(8));
  EXPECT_EQ(t[1].value, U256(200));
}

TEST(ExtractTokenTransfers, MalformedBatchesYieldNothing) {
  const std::string huge(64, 'f');
  std::vector<std::pair<std::string, std::string>> cases = {
      {"ids offset past the end", "0x" + Word(0x1000) + Word(0xa0) + BatchData().substr(2 + 128)},
      {"values offset past the end",
       "0x" + Word(0x40) + Word(0x1000) + BatchData().substr(2 + 128)},
      {"offset above 2^64", "0x" + huge + Word(0xa0) + BatchData().substr(2 + 128)},
      {"length above 2^64",
       "0x" + Word(0x40) + Word(0xa0) + huge + Word(7) + Word(8) + Word(2) + Word(100) + Word(200)},
      {"length longer than the data", "0x" + Word(0x40) + Word(0xa0) + Word(2) + Word(7) + Word(8) +
                                          Word(3) + Word(100) + Word(200)},
      {"unequal lengths",
       "0x" + Word(0x40) + Word(0xa0) + Word(2) + Word(7) + Word(8) + Word(1) + Word(100)},
      {"truncated", BatchData().substr(0, BatchData().size() - 64)},
      {"truncated mid-word", BatchData().substr(0, BatchData().size() - 10)},
      {"head only", "0x" + Word(0x40)},
      {"empty", "0x"},
      {"odd hex", BatchData() + "0"},
      {"non-hex word", "0x" + Word(0x40) + Word(0xa0) + Word(2) + "zz" + Word(7).substr(2) +
                           Word(8) + Word(2) + Word(100) + Word(200)},
      {"no prefix", BatchData().substr(2)},
      {"empty arrays", "0x" + Word(0x40) + Word(0x60) + Word(0) + Word(0)},
  };
  for (const auto& [name, data] : cases) {
    EXPECT_TRUE(ExtractTokenTransfers(MakeLog(BatchTopics(), data)).empty()) << name;
  }
  // A batch needs 4 topics.
  std::vector<std::string> three = BatchTopics();
  three.pop_back();
  EXPECT_TRUE(ExtractTokenTransfers(MakeLog(three, BatchData())).empty());
}

TEST(ExtractTokenTransfers, OtherShapesYieldNothing) {
  std::string t0(kTransferTopic);
  std::vector<std::pair<std::string, Log>> cases = {
      {"no topics (anonymous event)", MakeLog({}, "0x" + Word(1))},
      {"Transfer with 2 data words",
       MakeLog({t0, AddressTopic(kFrom), AddressTopic(kTo)}, "0x" + Word(1) + Word(2))},
      {"Transfer with 3 topics and no data",
       MakeLog({t0, AddressTopic(kFrom), AddressTopic(kTo)}, "0x")},
      {"Transfer with 4 topics and data",
       MakeLog({t0, AddressTopic(kFrom), AddressTopic(kTo), "0x" + Word(1)}, "0x" + Word(1))},
      {"Transfer with all values in data (1 topic + 3 words)",
       MakeLog({t0}, "0x" + Word(1) + Word(2) + Word(3))},
      {"Transfer with a short data word",
       MakeLog({t0, AddressTopic(kFrom), AddressTopic(kTo)}, "0x" + Word(1).substr(2))},
      {"Transfer with a bad topic",
       MakeLog({t0, "0x" + std::string(63, '0') + "g", AddressTopic(kTo)}, "0x" + Word(1))},
      {"Transfer with a short topic", MakeLog({t0, "0x1234", AddressTopic(kTo)}, "0x" + Word(1))},
      {"Transfer with non-hex data",
       MakeLog({t0, AddressTopic(kFrom), AddressTopic(kTo)}, "0x" + std::string(64, 'x'))},
      {"another event",
       MakeLog({"0x" + Word(99), AddressTopic(kFrom), AddressTopic(kTo)}, "0x" + Word(1))},
      {"TransferSingle with 1 data word",
       MakeLog({std::string(kTransferSingleTopic), AddressTopic(kOperator), AddressTopic(kFrom),
                AddressTopic(kTo)},
               "0x" + Word(1))},
      {"TransferSingle with 3 topics",
       MakeLog({std::string(kTransferSingleTopic), AddressTopic(kFrom), AddressTopic(kTo)},
               "0x" + Word(1) + Word(2))},
      {"topic0 of the wrong length",
       MakeLog({t0 + "00", AddressTopic(kFrom), AddressTopic(kTo)}, "0x" + Word(1))},
  };
  for (const auto& [name, log] : cases) {
    EXPECT_TRUE(ExtractTokenTransfers(log).empty()) << name;
  }
}

TEST(ExtractTokenTransfers, AppendKeepsEarlierRows) {
  std::vector<TokenTransfer> out;
  AppendTokenTransfers(MakeLog(BatchTopics(), BatchData()), &out);
  AppendTokenTransfers(
      MakeLog({std::string(kTransferTopic), AddressTopic(kFrom), AddressTopic(kTo)},
              "0x" + Word(9)),
      &out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].standard, TokenStandard::kErc20);
}

}  // namespace
}  // namespace gapless
