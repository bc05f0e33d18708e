// ReplayTransport: the recorded fixtures (ethereum-etl, execution-apis, mainnet 17000000)
// answered through JsonRpcClient, directly and over HTTP.
#include "testing/replay_transport.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "testing/http_test_server.h"

namespace gapless {
namespace {

const std::string kFixtures = GAPLESS_FIXTURES_DIR;
const std::string kEtl = kFixtures + "/ethereum-etl/tests/resources";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = s.find_first_not_of(" \t\r\n");
  return s.substr(start == std::string::npos ? s.size() : start);
}

// The "hash" of each element of a JSON array (transactions or receipts' transactionHash).
std::vector<std::string> Field(const std::string& json, const char* array_key, const char* field) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::element doc = parser.parse(padded).value();
  simdjson::dom::array arr =
      array_key ? doc[array_key].get_array().value() : doc.get_array().value();
  std::vector<std::string> out;
  for (simdjson::dom::element e : arr)
    out.emplace_back(std::string_view(e[field].get_string().value()));
  return out;
}

JsonRpcClientOptions Options(SimEnv* env) {
  JsonRpcClientOptions o;
  o.env = env;
  return o;
}

TEST(ReplayTransportTest, EthereumEtlFileNames) {
  EXPECT_EQ(*ReplayTransport::EthereumEtlKey("eth_getBlockByNumber", R"(["0x76250", true])"),
            "eth_getblockbynumber_0x76250_true");
  EXPECT_EQ(*ReplayTransport::EthereumEtlKey("eth_getTransactionReceipt", R"(["0xABCD"])"),
            "eth_gettransactionreceipt_0xabcd");
  EXPECT_EQ(
      *ReplayTransport::EthereumEtlKey(
          "eth_newFilter", R"([{"toBlock":"0x76250","fromBlock":"0x76250","topics":["0xDDF2"]}])"),
      "eth_newfilter_fromblock_0x76250_toblock_0x76250_topics_0xddf2");
  EXPECT_EQ(ReplayTransport::CanonicalParams(R"([ "0x1036640",  TRUE ])"), R"(["0x1036640",true])");
}

TEST(ReplayTransportTest, EthereumEtlBlock483920ThroughTheReceiptFallback) {
  ReplayTransport node;
  ASSERT_TRUE(node.AddEthereumEtlDirectory(kEtl + "/test_export_blocks_job/block_with_logs").ok());
  ASSERT_TRUE(
      node.AddEthereumEtlDirectory(kEtl + "/test_export_receipts_job/receipts_with_logs").ok());
  SimEnv env;
  JsonRpcClient client(&node, Options(&env));
  Result<std::vector<RawBlock>> blocks = client.FetchBlocks(483920, 1);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  ASSERT_EQ(blocks->size(), 1u);
  const RawBlock& b = (*blocks)[0];
  EXPECT_EQ(b.number, 483920u);
  EXPECT_FALSE(client.block_receipts_supported());
  EXPECT_EQ(node.calls("eth_getBlockReceipts"), 1);
  EXPECT_EQ(node.calls("eth_getTransactionReceipt"), 4);
  EXPECT_EQ(node.posts(), 2);

  const std::vector<std::string> expected = {
      "0x04cbcb236043d8fb7839e07bbc7f5eed692fb2ca55d897f1101eac3e3ad4fab8",
      "0xcea6f89720cc1d2f46cc7a935463ae0b99dd5fad9c91bb7357de5421511cee49",
      "0x463d53f0ad57677a3b430a007c1c31d15d62c37fab5eee598551697c297c235c",
      "0x05287a561f218418892ab053adfb3d919860988b19458c570c5c30f51c146f02",
  };
  EXPECT_EQ(Field(b.block_json, "transactions", "hash"), expected);
  EXPECT_EQ(Field(b.receipts_json, nullptr, "transactionHash"), expected);
  // Each receipt is the recorded answer, byte for byte.
  simdjson::dom::parser parser;
  simdjson::padded_string padded(b.receipts_json);
  simdjson::dom::array receipts = parser.parse(padded).get_array().value();
  EXPECT_EQ(receipts.size(), 4u);
}

TEST(ReplayTransportTest, EthereumEtlOverHttp) {
  ReplayTransport node;
  node.SetChainId(0x1234);
  ASSERT_TRUE(node.AddEthereumEtlDirectory(kEtl + "/test_export_blocks_job/block_with_logs").ok());
  ASSERT_TRUE(
      node.AddEthereumEtlDirectory(kEtl + "/test_export_receipts_job/receipts_with_logs").ok());
  HttpTestServer server(HttpTestServer::ForwardTo(&node));
  SimEnv env;
  JsonRpcClient client(std::make_unique<CurlTransport>(server.url()), Options(&env));
  EXPECT_EQ(*client.ChainId(), 0x1234u);
  Result<std::vector<RawBlock>> blocks = client.FetchBlocks(483920, 1);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ(Field((*blocks)[0].receipts_json, nullptr, "transactionHash").size(), 4u);
  EXPECT_EQ(server.requests_received(), 3);
  EXPECT_EQ(server.connections_accepted(), 1);
}

TEST(ReplayTransportTest, Mainnet17000000ByRegistration) {
  const std::string dir = kFixtures + "/mainnet/17000000";
  ReplayTransport node;
  ASSERT_TRUE(
      node.AddFile("eth_getBlockByNumber", R"(["0x1036640", true])", dir + "/block.json").ok());
  ASSERT_TRUE(
      node.AddFile("eth_getBlockReceipts", R"(["0x1036640"])", dir + "/receipts.json").ok());
  SimEnv env;
  JsonRpcClient client(&node, Options(&env));
  Result<std::vector<RawBlock>> blocks = client.FetchBlocks(17000000, 1);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  const RawBlock& b = (*blocks)[0];
  EXPECT_EQ(b.number, 17000000u);
  EXPECT_EQ(b.block_json, Trimmed(ReadFile(dir + "/block.json")));
  EXPECT_EQ(b.receipts_json, Trimmed(ReadFile(dir + "/receipts.json")));
  EXPECT_EQ(Field(b.receipts_json, nullptr, "transactionHash").size(), 102u);
  EXPECT_EQ(node.posts(), 1);
  EXPECT_TRUE(client.block_receipts_supported());
}

TEST(ReplayTransportTest, ExecutionApisPairs) {
  ReplayTransport node;
  ASSERT_TRUE(node.AddExecutionApisDirectory(kFixtures + "/execution-apis/tests").ok());
  SimEnv env;
  JsonRpcClient client(&node, Options(&env));
  EXPECT_EQ(*client.ChainId(), 3503995874084926u);
  EXPECT_EQ(*client.BlockNumber(), 0x36u);

  Result<std::string> latest = client.Call("eth_getBlockByNumber", R"(["latest",true])");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_NE(latest->find("0xd226371d0b1551adb03fb52b71f08e3e11247fe9b1af994768af8cdaa8e7dcd7"),
            std::string::npos);
  Result<std::string> missing = client.Call("eth_getBlockByNumber", R"(["0x3e8",true])");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, "null");

  // Genesis through FetchBlocks: eth_getBlockByNumber ["0x0",true] and eth_getBlockReceipts
  // ["0x0"] are both recorded.
  Result<std::vector<RawBlock>> genesis = client.FetchBlocks(0, 1);
  ASSERT_TRUE(genesis.ok()) << genesis.status().ToString();
  EXPECT_EQ((*genesis)[0].receipts_json, "[]");
}

TEST(ReplayTransportTest, ExecutionApisRecordedErrorKeepsItsCode) {
  ReplayTransport node;
  const std::string file =
      kFixtures + "/execution-apis/tests/eth_getLogs/filter-error-reversed-block-range.io";
  ASSERT_TRUE(node.AddExecutionApisFile(file).ok());
  std::string content = ReadFile(file);
  size_t start = content.find(">> ");
  std::string request = content.substr(start + 3, content.find('\n', start) - start - 3);
  bool is_batch = false;
  Result<std::vector<JsonRpcCall>> parsed = ParseJsonRpcRequests(request, &is_batch);
  ASSERT_TRUE(parsed.ok());
  SimEnv env;
  JsonRpcClient client(&node, Options(&env));
  Result<std::string> r = client.Call((*parsed)[0].method, (*parsed)[0].params_json);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(RpcErrorCode(r.status()), -32602);
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
}

TEST(ReplayTransportTest, UnknownRequestsAreMethodNotFound) {
  ReplayTransport node;
  Result<HttpResponse> r =
      node.Post(R"({"jsonrpc":"2.0","id":"x7","method":"eth_foo","params":["a\"b"]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  simdjson::dom::parser parser;
  simdjson::padded_string padded(r->body);
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(padded).get(doc), simdjson::SUCCESS) << r->body;
  EXPECT_EQ(doc["id"].get_string().value(), "x7");
  EXPECT_EQ(doc["error"]["code"].get_int64().value(), -32601);

  Result<HttpResponse> bad = node.Post("not json");
  ASSERT_TRUE(bad.ok());
  EXPECT_NE(bad->body.find("-32700"), std::string::npos);
}

TEST(ReplayTransportTest, AddRejectsInvalidJsonAndAddErrorAnswers) {
  ReplayTransport node;
  EXPECT_FALSE(node.Add("m", "[]", "{not json").ok());
  ASSERT_TRUE(node.AddError("m", "[]", -32005, "limit \"exceeded\"").ok());
  SimEnv env;
  JsonRpcClientOptions o = Options(&env);
  o.max_attempts = 2;
  JsonRpcClient client(&node, o);
  Result<std::string> r = client.Call("m", "[]");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(RpcErrorCode(r.status()), -32005);
  EXPECT_EQ(node.calls("m"), 2);
}

TEST(ReplayTransportTest, SharedAcrossThreads) {
  ReplayTransport node;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(node.Add("eth_getBalance", fmt::format(R"(["0x{:x}"])", i),
                         fmt::format("\"0x{:x}\"", i * 7))
                    .ok());
  }
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      SimEnv env;
      JsonRpcClient client(&node, Options(&env));
      for (int i = 0; i < 50; ++i) {
        Result<std::string> r = client.Call("eth_getBalance", fmt::format(R"(["0x{:x}"])", i));
        if (r.ok() && *r == fmt::format("\"0x{:x}\"", i * 7)) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 200);
  EXPECT_EQ(node.calls("eth_getBalance"), 200);
}

}  // namespace
}  // namespace gapless
