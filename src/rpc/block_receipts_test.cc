// JsonRpcClient::FetchBlockReceipts (the events mode's --verify-complete): the receipts of any
// blocks, in one batch of eth_getBlockReceipts, or on a node without it from the blocks'
// transaction hashes and eth_getTransactionReceipt, over a real local HTTP server.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "testing/http_test_server.h"
#include "testing/replay_transport.h"

namespace gapless {
namespace {

std::string BlockHash(uint64_t n) { return fmt::format("0x{:064x}", 0xb10c000000ULL + n); }
std::string TxHash(uint64_t n, int i) { return fmt::format("0x{:064x}", (n << 16) + i + 1); }
int TxCount(uint64_t n) { return static_cast<int>(n % 3); }  // 0, 1 or 2 transactions

// The block as eth_getBlockByNumber(n, false) answers it: transaction hashes only.
std::string HeaderJson(uint64_t n) {
  std::vector<std::string> txs;
  for (int i = 0; i < TxCount(n); ++i) txs.push_back("\"" + TxHash(n, i) + "\"");
  return fmt::format(R"({{"number":"0x{:x}","hash":"{}","transactions":[{}]}})", n, BlockHash(n),
                     fmt::join(txs, ","));
}

std::string ReceiptJson(uint64_t n, int i) {
  return fmt::format(R"({{"transactionHash":"{}","blockHash":"{}","status":"0x1","logs":[]}})",
                     TxHash(n, i), BlockHash(n));
}

std::string ReceiptsJson(uint64_t n) {
  std::vector<std::string> r;
  for (int i = 0; i < TxCount(n); ++i) r.push_back(ReceiptJson(n, i));
  return fmt::format("[{}]", fmt::join(r, ","));
}

void AddBlocks(ReplayTransport& node, std::vector<uint64_t> numbers, bool block_receipts) {
  for (uint64_t n : numbers) {
    ASSERT_TRUE(
        node.Add("eth_getBlockByNumber", fmt::format(R"(["0x{:x}",false])", n), HeaderJson(n))
            .ok());
    if (block_receipts) {
      ASSERT_TRUE(
          node.Add("eth_getBlockReceipts", fmt::format(R"(["0x{:x}"])", n), ReceiptsJson(n)).ok());
    }
    for (int i = 0; i < TxCount(n); ++i) {
      ASSERT_TRUE(node.Add("eth_getTransactionReceipt", fmt::format(R"(["{}"])", TxHash(n, i)),
                           ReceiptJson(n, i))
                      .ok());
    }
  }
}

struct Fixture {
  explicit Fixture(HttpTestServer::Handler handler) : server(std::move(handler)) {
    transport = std::make_unique<CurlTransport>(server.url());
    JsonRpcClientOptions options;
    options.env = &env;
    client = std::make_unique<JsonRpcClient>(transport.get(), options);
  }
  SimEnv env;
  HttpTestServer server;
  std::unique_ptr<CurlTransport> transport;
  std::unique_ptr<JsonRpcClient> client;
};

TEST(FetchBlockReceiptsTest, AnyBlocksInOneBatch) {
  ReplayTransport node;
  AddBlocks(node, {7, 30, 11}, /*block_receipts=*/true);
  Fixture f(HttpTestServer::ForwardTo(&node));
  const std::vector<uint64_t> numbers = {30, 7, 11};  // not contiguous, not in order
  std::vector<uint64_t> served_by;
  Result<std::vector<std::string>> receipts = f.client->FetchBlockReceipts(numbers, &served_by);
  ASSERT_TRUE(receipts.ok()) << receipts.status().ToString();
  ASSERT_EQ(receipts->size(), 3u);
  ASSERT_EQ(served_by.size(), 3u);
  for (size_t i = 0; i < numbers.size(); ++i) {
    EXPECT_EQ((*receipts)[i], ReceiptsJson(numbers[i]));
    EXPECT_GE((*receipts)[i].capacity(), (*receipts)[i].size() + 64);  // padded for simdjson
  }
  EXPECT_EQ(f.server.requests_received(), 1);
  EXPECT_EQ(node.calls("eth_getTransactionReceipt"), 0);
}

TEST(FetchBlockReceiptsTest, WithoutBlockReceiptsAsksPerTransactionAndRemembers) {
  ReplayTransport node;  // answers eth_getBlockReceipts with -32601
  AddBlocks(node, {4, 5, 8}, /*block_receipts=*/false);
  Fixture f(HttpTestServer::ForwardTo(&node));
  const std::vector<uint64_t> numbers = {5, 4, 8};
  Result<std::vector<std::string>> receipts = f.client->FetchBlockReceipts(numbers);
  ASSERT_TRUE(receipts.ok()) << receipts.status().ToString();
  for (size_t i = 0; i < numbers.size(); ++i) {
    EXPECT_EQ((*receipts)[i], ReceiptsJson(numbers[i]));
    EXPECT_GE((*receipts)[i].capacity(), (*receipts)[i].size() + 64);
  }
  EXPECT_FALSE(f.client->block_receipts_supported());
  EXPECT_EQ(f.server.requests_received(), 3);  // receipts refused, hashes, receipts by hash
  EXPECT_EQ(node.calls("eth_getTransactionReceipt"), 2 + 1 + 2);
  // The next call goes straight to the fallback.
  receipts = f.client->FetchBlockReceipts(std::vector<uint64_t>{8});
  ASSERT_TRUE(receipts.ok()) << receipts.status().ToString();
  EXPECT_EQ((*receipts)[0], ReceiptsJson(8));
  EXPECT_EQ(node.calls("eth_getBlockReceipts"), 3);
  EXPECT_EQ(f.server.requests_received(), 5);
}

TEST(FetchBlockReceiptsTest, NullReceiptsAreNotFoundNamingTheBlock) {
  ReplayTransport node;
  AddBlocks(node, {3}, /*block_receipts=*/true);
  ASSERT_TRUE(node.Add("eth_getBlockReceipts", R"(["0x9"])", "null").ok());
  Fixture f(HttpTestServer::ForwardTo(&node));
  Result<std::vector<std::string>> receipts =
      f.client->FetchBlockReceipts(std::vector<uint64_t>{3, 9});
  ASSERT_FALSE(receipts.ok());
  EXPECT_EQ(receipts.status().code(), Code::kNotFound);
  EXPECT_NE(receipts.status().message().find("block 9"), std::string::npos)
      << receipts.status().ToString();
}

}  // namespace
}  // namespace gapless
