// Contracts and tokens from ethereum-etl's recorded answers, completed by EnrichRange, stored and
// exported: the rows equal its expected outputs (../shared/fixtures/ethereum-etl, TRACES.md
// "Contracts and tokens"). Then what the node's answers decide: a token stored below the range is
// not read again and one stored within it is; a call the node cannot answer at the block is asked
// at "latest"; an error there too fails the range naming the token and the block.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "decode/contracts.h"
#include "decode/decode_test_util.h"
#include "decode/traces.h"
#include "node/enrich.h"
#include "store/export.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/pg_test_db.h"
#include "testing/replay_transport.h"

namespace gapless {
namespace {

const std::string kEtl = "ethereum-etl/tests/resources/";

constexpr std::string_view kSelectors[] = {
    kSelectorName,     kSelectorNameUpper,     kSelectorSymbol,     kSelectorSymbolUpper,
    kSelectorDecimals, kSelectorDecimalsUpper, kSelectorTotalSupply};

std::string CallParams(const std::string& token, std::string_view selector,
                       const std::string& block) {
  return R"([{"to":")" + token + R"(","data":")" + std::string(selector) + R"("},")" + block +
         R"("])";
}

// The token's recorded eth_call answers (ethereum-etl asked at "latest"), registered at `block`;
// a selector without a recording reverts, as ethereum-etl's mock treats it.
void RegisterToken(ReplayTransport* node, const std::string& dir, const std::string& token,
                   uint64_t block) {
  for (std::string_view selector : kSelectors) {
    const std::string file = dir + "/web3_response.eth_call_data_" + std::string(selector) +
                             "_to_" + token + "_latest.json";
    const std::string params = CallParams(token, selector, HexQuantity(block));
    if (std::filesystem::exists(file)) {
      ASSERT_TRUE(node->Add("eth_call", params, testing::ResultOf(testing::ReadFile(file))).ok());
    } else {
      ASSERT_TRUE(node->AddError("eth_call", params, 3, "execution reverted").ok());
    }
  }
}

std::vector<std::string> SortedLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

// A stream fixture's JSON lines as our CSV rows (the columns `gapless export` writes).
std::vector<std::string> ExpectedContractRows(const std::string& path) {
  std::vector<std::string> rows = {
      "address,bytecode,function_sighashes,is_erc20,is_erc721,block_number"};
  simdjson::dom::parser parser;
  for (const std::string& line : SortedLines(testing::ReadFile(path))) {
    simdjson::dom::element e = parser.parse(line).value();
    std::string sighashes;
    simdjson::dom::array list = e["function_sighashes"].get_array().value();
    for (simdjson::dom::element s : list) {
      if (!sighashes.empty()) sighashes += ',';
      sighashes += std::string(s.get_string().value());
    }
    if (sighashes.find(',') != std::string::npos) sighashes = "\"" + sighashes + "\"";
    rows.push_back(std::string(e["address"].get_string().value()) + "," +
                   std::string(e["bytecode"].get_string().value()) + "," + sighashes + "," +
                   (e["is_erc20"].get_bool().value() ? "True" : "False") + "," +
                   (e["is_erc721"].get_bool().value() ? "True" : "False") + "," +
                   std::to_string(e["block_number"].get_uint64().value()));
  }
  if (rows.size() == 1) rows.clear();  // no rows: a 0-byte export, not even a header
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<std::string> ExpectedTokenRows(const std::string& path) {
  std::vector<std::string> rows = {"address,symbol,name,decimals,total_supply,block_number"};
  simdjson::dom::parser parser;
  for (const std::string& line : SortedLines(testing::ReadFile(path))) {
    simdjson::dom::element e = parser.parse(line).value();
    rows.push_back(std::string(e["address"].get_string().value()) + "," +
                   std::string(e["symbol"].get_string().value()) + "," +
                   std::string(e["name"].get_string().value()) + "," +
                   std::to_string(e["decimals"].get_uint64().value()) + "," +
                   std::to_string(e["total_supply"].get_uint64().value()) + "," +
                   std::to_string(e["block_number"].get_uint64().value()));
  }
  if (rows.size() == 1) rows.clear();  // no rows: a 0-byte export, not even a header
  std::sort(rows.begin(), rows.end());
  return rows;
}

BlockData EmptyBlock(uint64_t number) {
  return SyntheticBlock(number, {.transactions_per_block = 0,
                                 .logs_per_block = 0,
                                 .token_transfers_per_block = 0,
                                 .withdrawals_per_block = 0});
}

// A block whose one token transfer moves `token` (the transfer's other fields are synthetic).
BlockData BlockWithTransferOf(uint64_t number, const std::string& token) {
  BlockData d = EmptyBlock(number);
  TokenTransfer t;
  t.block_number = number;
  t.transaction_hash = "0x" + std::string(64, 'a');
  t.token_address = token;
  t.from_address = "0x" + std::string(40, '1');
  t.to_address = "0x" + std::string(40, '2');
  t.value = U256(1);
  d.token_transfers.push_back(t);
  return d;
}

class EnrichTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto pool = PgPool::Open(db().url(), 1);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = std::move(pool).value();
  }
  void Write(std::vector<BlockData> blocks, WriteMode mode = WriteMode::kStagingUpsert) {
    RangeWrite w;
    w.from_block = blocks.front().block.number;
    w.to_block = blocks.back().block.number;
    w.blocks = std::move(blocks);
    WriteOptions options;
    options.mode = mode;
    Status st = WriteRange(conn(), w, options);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  std::vector<std::string> Export(ExportTable table, uint64_t from, uint64_t to) {
    std::ostringstream out;
    Status st = ExportCsv(conn(), table, from, to, out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return SortedLines(out.str());
  }
  Status Enrich(ReplayTransport* node, std::vector<BlockData>* blocks) {
    JsonRpcClient rpc(node);
    return EnrichRange(rpc, EnrichWithStore(true, pool_.get()), blocks);
  }
  std::unique_ptr<PgPool> pool_;
};

// The stream cases: contracts from trace_block (create traces), the ERC-20 one's metadata read at
// its block; stored and exported equal to the expected contracts and tokens.
TEST_F(EnrichTest, StreamCasesEqualEthereumEtls) {
  for (uint64_t block : {508110u, 2112234u}) {
    SCOPED_TRACE(block);
    const std::string dir = testing::Fixture(kEtl + "test_stream/blocks_" + std::to_string(block) +
                                             "_" + std::to_string(block));
    auto traces =
        DecodeParityTraces(testing::ResultOf(testing::ReadFile(dir + "/web3_response.trace_block_" +
                                                               HexQuantity(block) + ".json")),
                           block);
    ASSERT_TRUE(traces.ok()) << traces.status().ToString();
    BlockData d = EmptyBlock(block);
    d.traces = std::move(traces).value();
    d.contracts = DeriveContracts(d);
    ASSERT_FALSE(d.contracts.empty());
    ReplayTransport node;
    for (const Contract& c : d.contracts) {
      if (c.is_erc20 || c.is_erc721) RegisterToken(&node, dir, c.address, block);
    }
    std::vector<BlockData> blocks = {d};
    Status st = Enrich(&node, &blocks);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(node.calls("eth_getCode"), 0) << "the traces gave the code";
    Write(blocks);
    EXPECT_EQ(Export(ExportTable::kContracts, block, block),
              ExpectedContractRows(dir + "/expected_contracts.json"));
    EXPECT_EQ(Export(ExportTable::kTokens, block, block),
              ExpectedTokenRows(dir + "/expected_tokens.json"));
  }
}

// export_tokens' cases (bytes32 symbol, NULs in a string): a token seen in a transfer, read at
// that block. Their block_number is empty (ethereum-etl's export_tokens reads at latest); ours is
// the block where the token appeared.
TEST_F(EnrichTest, ExportTokensCasesEqualEthereumEtls) {
  struct Case {
    std::string folder, token;
    uint64_t block;
  };
  for (const Case& c :
       {Case{"token_with_invalid_data", "0xf763be8b3263c268e9789abfb3934564a7b80054", 100},
        Case{"token_with_alternative_return_type", "0x86fa049857e0209aa7d9e616f7eb3b3b78ecfdb0",
             200}}) {
    SCOPED_TRACE(c.folder);
    const std::string dir = testing::Fixture(kEtl + "test_export_tokens_job/" + c.folder);
    ReplayTransport node;
    RegisterToken(&node, dir, c.token, c.block);
    std::vector<BlockData> blocks = {BlockWithTransferOf(c.block, c.token)};
    Status st = Enrich(&node, &blocks);
    ASSERT_TRUE(st.ok()) << st.ToString();
    Write(blocks);
    std::vector<std::string> expected =
        SortedLines(testing::ReadFile(dir + "/expected_tokens.csv"));
    for (std::string& row : expected) {
      if (row.starts_with("0x")) row += std::to_string(c.block);
    }
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(Export(ExportTable::kTokens, c.block, c.block), expected);
  }
}

// Without traces a deployment's code is asked of the node at its block.
TEST_F(EnrichTest, AContractWithoutTracesGetsItsCodeFromTheNode) {
  const std::string dir = testing::Fixture(kEtl + "test_export_contracts_job/erc721_contract");
  const std::string address = "0x06012c8cf97bead5deae237070f9587f8e7a266d";
  BlockData d = SyntheticBlock(300, {.transactions_per_block = 1,
                                     .logs_per_block = 0,
                                     .token_transfers_per_block = 0,
                                     .withdrawals_per_block = 0});
  d.transactions[0].to_address.reset();
  d.transactions[0].contract_address = address;
  d.transactions[0].status = 1;
  d.contracts = DeriveContracts(d);
  ASSERT_EQ(d.contracts.size(), 1u);
  EXPECT_FALSE(d.contracts[0].bytecode.has_value());
  ReplayTransport node;
  ASSERT_TRUE(node.Add("eth_getCode", R"([")" + address + R"(","0x12c"])",
                       testing::ResultOf(testing::ReadFile(dir + "/web3_response.eth_getCode_" +
                                                           address + "_latest.json")))
                  .ok());
  for (std::string_view selector : kSelectors) {
    ASSERT_TRUE(
        node.AddError("eth_call", CallParams(address, selector, "0x12c"), 3, "execution reverted")
            .ok());
  }
  std::vector<BlockData> blocks = {d};
  Status st = Enrich(&node, &blocks);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const Contract& c = blocks[0].contracts[0];
  ASSERT_TRUE(c.bytecode.has_value());
  EXPECT_TRUE(c.is_erc721) << "CryptoKitties' code is ERC-721 by ethereum-etl's rule";
  // Its creation made it a token: read (every method reverts here, so NULLs, not a failure).
  ASSERT_EQ(blocks[0].tokens.size(), 1u);
  EXPECT_EQ(blocks[0].tokens[0].standard, "erc721");
  EXPECT_FALSE(blocks[0].tokens[0].symbol.has_value());
  EXPECT_FALSE(blocks[0].tokens[0].decimals.has_value());
}

// A token is read once it is stored below a range: not again for later ranges (its row keeps
// the lowest block), but again for a range written anew that holds its first block.
TEST_F(EnrichTest, ATokenStoredBelowTheRangeIsNotReadAgain) {
  const std::string token = "0x" + std::string(40, 'c');
  ReplayTransport node;
  for (uint64_t block : {400u, 401u}) {
    for (std::string_view selector : kSelectors) {
      ASSERT_TRUE(node.AddError("eth_call", CallParams(token, selector, HexQuantity(block)), 3,
                                "execution reverted")
                      .ok());
    }
  }
  std::vector<BlockData> first = {BlockWithTransferOf(400, token)};
  ASSERT_TRUE(Enrich(&node, &first).ok());
  ASSERT_EQ(first[0].tokens.size(), 1u);
  Write(first);
  const int64_t asked = node.calls("eth_call");

  std::vector<BlockData> later = {BlockWithTransferOf(401, token)};
  ASSERT_TRUE(Enrich(&node, &later).ok());
  EXPECT_TRUE(later[0].tokens.empty());
  EXPECT_EQ(node.calls("eth_call"), asked) << "a token stored below the range was read again";

  std::vector<BlockData> again = {BlockWithTransferOf(400, token)};
  ASSERT_TRUE(Enrich(&node, &again).ok());
  EXPECT_EQ(again[0].tokens.size(), 1u) << "the range holding its first block must carry it";
  Write(again, WriteMode::kReplaceRange);
  auto rows = conn().Query("SELECT block_number, standard FROM tokens");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->rows(), 1);
  EXPECT_EQ(std::string(rows->Get(0, 0)), "400");
}

// A node without the block's state answers with an error that is not a revert: the token is read
// at "latest" instead; where that fails too, the range fails naming the token and the block.
TEST_F(EnrichTest, AnUnansweredCallIsAskedAtLatestThenFailsTheRange) {
  const std::string token = "0x" + std::string(40, 'd');
  ReplayTransport node;
  for (std::string_view selector : kSelectors) {
    ASSERT_TRUE(
        node.AddError("eth_call", CallParams(token, selector, "0x1f4"), -32000, "missing trie node")
            .ok());
    if (selector == kSelectorDecimals) {
      ASSERT_TRUE(node.Add("eth_call", CallParams(token, selector, "latest"),
                           "\"0x" + std::string(62, '0') + "12\"")
                      .ok());
    } else {
      ASSERT_TRUE(
          node.AddError("eth_call", CallParams(token, selector, "latest"), 3, "execution reverted")
              .ok());
    }
  }
  std::vector<BlockData> blocks = {BlockWithTransferOf(500, token)};
  Status st = Enrich(&node, &blocks);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(blocks[0].tokens.size(), 1u);
  EXPECT_EQ(blocks[0].tokens[0].decimals, std::optional<uint32_t>(18));
  EXPECT_FALSE(blocks[0].tokens[0].symbol.has_value());

  const std::string other = "0x" + std::string(40, 'e');
  for (std::string_view selector : kSelectors) {
    for (const char* at : {"0x1f5", "latest"}) {
      ASSERT_TRUE(
          node.AddError("eth_call", CallParams(other, selector, at), -32000, "missing trie node")
              .ok());
    }
  }
  blocks = {BlockWithTransferOf(501, other)};
  st = Enrich(&node, &blocks);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find(other), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("block 501"), std::string::npos) << st.ToString();
}

// A node without eth_getCode or eth_call (-32601) does not lack the block's state: it is not asked
// again at "latest", and the range fails at once saying which option does without the method.
TEST_F(EnrichTest, AMissingMethodIsNotMissingStateAndTheErrorNamesTheOption) {
  BlockData d = SyntheticBlock(600, {.transactions_per_block = 1,
                                     .logs_per_block = 0,
                                     .token_transfers_per_block = 0,
                                     .withdrawals_per_block = 0});
  d.transactions[0].to_address.reset();
  d.transactions[0].contract_address = "0x" + std::string(40, 'f');
  d.transactions[0].status = 1;
  d.contracts = DeriveContracts(d);
  ASSERT_EQ(d.contracts.size(), 1u);
  ReplayTransport no_code;  // unregistered calls are answered -32601 "method not found"
  std::vector<BlockData> blocks = {d};
  Status st = Enrich(&no_code, &blocks);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_EQ(no_code.calls("eth_getCode"), 1) << "asked again at latest";
  EXPECT_EQ(st.message().find("\"latest\""), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("eth_getCode"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("--traces"), std::string::npos) << st.ToString();

  ReplayTransport no_call;
  blocks = {BlockWithTransferOf(601, "0x" + std::string(40, '9'))};
  st = Enrich(&no_call, &blocks);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_EQ(no_call.calls("eth_call"), static_cast<int64_t>(std::size(kSelectors)))
      << "asked again at latest";
  EXPECT_EQ(st.message().find("\"latest\""), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("eth_call"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("--token-metadata off"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace gapless
