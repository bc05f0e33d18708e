// IsRateLimited decides on the typed reason the JSON-RPC client attaches, never on message text:
// a 429 answer is a rate limit, so the fleet slows down; a 503, or any failure whose message
// merely contains "429" (block numbers do: "blocks 14290..14299"), is not, and must not halve the
// fleet's rate. The answers come from a real local HTTP server through CurlTransport.
// The typed "interrupted" reason likewise: a stopped fetch is recognised by its reason, not its
// message.
#include "node/range_job.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "rpc/curl_transport.h"
#include "rpc/endpoint_pool.h"
#include "rpc/http_transport.h"
#include "testing/http_test_server.h"
#include "testing/replay_transport.h"

namespace gapless {
namespace {

using Response = HttpTestServer::Response;

// The failure of fetching blocks 14290..14299 from a node that answers every POST with `answer`.
Status FetchFailure(Response answer) {
  HttpTestServer server([answer](const HttpTestServer::Request&) { return answer; });
  CurlTransport transport(server.url());
  SimEnv env;  // retry sleeps are virtual
  JsonRpcClientOptions options;
  options.env = &env;
  options.max_attempts = 2;
  JsonRpcClient client(&transport, options);
  auto blocks = client.FetchBlocks(14290, 10);
  return blocks.ok() ? Internal("the fetch succeeded") : blocks.status();
}

TEST(IsRateLimitedTest, Http429IsRateLimited) {
  Status st = FetchFailure(Response::Json("slow down", 429));
  ASSERT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_TRUE(IsRateLimited(st)) << st.ToString();
}

TEST(IsRateLimitedTest, Http503ForBlocksWhoseNumbersContain429IsNot) {
  Status st = FetchFailure(Response::Json("upstream down", 503));
  ASSERT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  ASSERT_NE(st.message().find("blocks 14290..14299"), std::string::npos) << st.ToString();
  EXPECT_FALSE(IsRateLimited(st)) << st.ToString();
}

TEST(IsRateLimitedTest, JsonRpcRateLimitErrorIsRateLimited) {
  // Some providers reject a whole batch with one error object when over their limit.
  Status st = FetchFailure(Response::Json(
      R"({"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"limit exceeded"}})"));
  ASSERT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_TRUE(IsRateLimited(st)) << st.ToString();
}

TEST(IsRateLimitedTest, MessageTextDecidesNothing) {
  EXPECT_FALSE(IsRateLimited(Unavailable("blocks 14290..14299: connect to 127.0.0.1:8545 failed")));
  EXPECT_FALSE(IsRateLimited(Unavailable("HTTP 429 Too Many Requests")));
  EXPECT_TRUE(IsRateLimited(Unavailable("slow down").WithReason(HttpStatusReason(429))));
  EXPECT_FALSE(IsRateLimited(Aborted("stale").WithReason(HttpStatusReason(429))))
      << "only an Unavailable (a failure to retry) is a rate limit";
}

// Counts requests and answers none: FetchAndDecodeRange must not send one once stopped.
class CountingTransport : public HttpTransport {
 public:
  explicit CountingTransport(int* posts) : posts_(posts) {}
  Result<HttpResponse> Post(std::string_view) override {
    ++*posts_;
    return Unavailable("no network in this test");
  }
  std::string Describe() const override { return "counting"; }

 private:
  int* posts_;
};

TEST(InterruptedTest, RecognisedByReasonEvenWithContext) {
  EXPECT_TRUE(IsInterrupted(Interrupted()));
  EXPECT_TRUE(IsInterrupted(Interrupted().WithContext("blocks 0-49")));
}

TEST(InterruptedTest, OtherAbortedIsNotInterrupted) {
  // The same words without the reason (e.g. a server's message) are not a stop.
  EXPECT_FALSE(IsInterrupted(Aborted("interrupted")));
  EXPECT_FALSE(IsInterrupted(Aborted("lease lost").WithReason("stale-fence-token")));
  EXPECT_FALSE(
      IsInterrupted(Unavailable("interrupted").WithReason(std::string(kInterruptedReason))));
  EXPECT_FALSE(IsInterrupted(Status::Ok()));
}

TEST(InterruptedTest, StoppedFetchReturnsInterruptedWithoutARequest) {
  int posts = 0;
  RpcBlockSource rpc(std::make_unique<JsonRpcClient>(std::make_unique<CountingTransport>(&posts)));
  std::atomic<bool> stop{true};
  std::vector<BlockData> blocks;
  Status st = FetchAndDecodeRange(rpc, 0, 9, 5, BlockChecks(), /*limiter=*/nullptr, &stop, &blocks);
  EXPECT_TRUE(IsInterrupted(st)) << st.ToString();
  EXPECT_EQ(posts, 0);
  EXPECT_TRUE(blocks.empty());
}

// The hash of block n on the chain the head log holds, and on another fork.
std::string RealHash(uint64_t n) { return fmt::format("0x{:064x}", n + 1); }
std::string ForkHash(uint64_t n) { return fmt::format("0x{:f>60}{:04x}", "", n); }

// eth_getBlockByNumber(n, true) of an empty block with this hash.
std::string EmptyBlock(uint64_t n, const std::string& hash) {
  const std::string zero32 = "0x" + std::string(64, '0');
  return fmt::format(
      R"({{"number":"0x{:x}","hash":"{}","parentHash":"{}","nonce":"0x0000000000000000",)"
      R"("sha3Uncles":"{}","logsBloom":"0x{}","transactionsRoot":"{}","stateRoot":"{}",)"
      R"("receiptsRoot":"{}","miner":"0x{}","difficulty":"0x0","size":"0x200","extraData":"0x",)"
      R"("gasLimit":"0x1c9c380","gasUsed":"0x0","timestamp":"0x{:x}","transactions":[]}})",
      n, hash, n == 0 ? zero32 : RealHash(n - 1), zero32, std::string(512, '0'), zero32, zero32,
      zero32, std::string(40, '0'), 1'700'000'000 + n);
}

// The head log's view: every block must have its real hash.
RangeCheck RealHashesCheck() {
  return [](std::span<const BlockData> blocks, size_t* wrong) -> Status {
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (blocks[i].block.hash != RealHash(blocks[i].block.number)) {
        *wrong = i;
        return InvalidData(fmt::format("block {}: not the head log's", blocks[i].block.number));
      }
    }
    return Status::Ok();
  };
}

// A block source over a pool of two endpoints, hedging off, on `env`: the first weighted far
// above the second, so it is asked whenever it may be. Each endpoint's URL is its Describe().
struct PoolOfTwo {
  PoolOfTwo(SimEnv* env, std::unique_ptr<HttpTransport> first,
            std::unique_ptr<HttpTransport> second, bool traces) {
    PoolOptions pool_options;
    pool_options.hedge = false;
    pool_options.env = env;
    pool = std::make_shared<EndpointPool>(
        std::vector<EndpointSpec>{{"http://" + first->Describe() + ":8545/", 1000, 0},
                                  {"http://" + second->Describe() + ":8545/", 0.001, 0}},
        pool_options);
    std::vector<std::unique_ptr<HttpTransport>> transports;
    transports.push_back(std::move(first));
    transports.push_back(std::move(second));
    JsonRpcClientOptions client_options;
    client_options.env = env;
    client_options.traces = traces;
    source = std::make_unique<RpcBlockSource>(std::make_unique<JsonRpcClient>(
        std::make_unique<PoolTransport>(pool, std::move(transports)), client_options));
  }
  std::shared_ptr<EndpointPool> pool;
  std::unique_ptr<RpcBlockSource> source;
};

// A node of a pool (chain 1) serving empty blocks: block `forked_at` from another fork when
// `forked`, and (forked) no answer to a request for full blocks without that block (the pool's
// chain check, which asks block 0's header, is answered). Records the full blocks it served.
class BlockEndpoint : public HttpTransport {
 public:
  BlockEndpoint(std::string name, bool forked, uint64_t forked_at)
      : name_(std::move(name)), forked_(forked), forked_at_(forked_at) {}
  Result<HttpResponse> Post(std::string_view body) override {
    bool batch = false;
    auto calls = ParseJsonRpcRequests(body, &batch);
    if (!calls.ok()) return calls.status();
    const std::string wanted = fmt::format(R"(["0x{:x}")", forked_at_);
    if (forked_ && body.find(",true]") != std::string_view::npos &&
        body.find(wanted) == std::string_view::npos) {
      return Unavailable(name_ + ": connection refused");
    }
    std::string out;
    for (const JsonRpcCall& c : *calls) {
      std::string result = "null";
      if (c.method == "eth_chainId") result = "\"0x1\"";
      if (c.method == "eth_getBlockByNumber" || c.method == "eth_getBlockReceipts") {
        auto n = ParseHexQuantity(c.params_json.substr(2, c.params_json.find('"', 2) - 2));
        if (!n.ok()) return n.status();
        if (c.method == "eth_getBlockReceipts") {
          result = "[]";
        } else {
          if (c.params_json.find("true") != std::string::npos) served_.insert(*n);
          result = EmptyBlock(*n, forked_ && *n == forked_at_ ? ForkHash(*n) : RealHash(*n));
        }
      }
      if (!out.empty()) out += ",";
      out += fmt::format(R"({{"jsonrpc":"2.0","id":{},"result":{}}})", c.id_json, result);
    }
    return HttpResponse{200, batch ? "[" + out + "]" : out, std::nullopt};
  }
  std::string Describe() const override { return name_; }
  std::set<uint64_t> served_;

 private:
  std::string name_;
  bool forked_;
  uint64_t forked_at_;
};

// Issue 35 item 1: a part fetched in two batches, the first (with the forked block 1) from a
// forked endpoint, the last from a healthy one. The head-log check blames the forked endpoint,
// not the one that answered last, and the refetch gets the block from the healthy one.
TEST(DistrustTest, TheEndpointThatServedTheWrongBlockIsDistrustedNotTheLastToAnswer) {
  SimEnv env(7);
  auto forked = std::make_unique<BlockEndpoint>("forked", /*forked=*/true, /*forked_at=*/1);
  auto healthy = std::make_unique<BlockEndpoint>("healthy", /*forked=*/false, 1);
  BlockEndpoint* forked_ep = forked.get();
  BlockEndpoint* healthy_ep = healthy.get();
  // The forked endpoint is the first choice whenever it may be asked.
  PoolOfTwo two(&env, std::move(forked), std::move(healthy), /*traces=*/false);
  auto& pool = two.pool;
  RpcBlockSource& source = *two.source;
  RangeCheck check = RealHashesCheck();

  // Blocks 0..3 in batches of 2: 0..1 from the forked endpoint, 2..3 (it refuses) the healthy one.
  std::vector<BlockData> blocks;
  Status st = FetchAndDecodeRange(source, 0, 3, 2, BlockChecks(), nullptr, nullptr, &blocks,
                                  nullptr, nullptr, &check);
  ASSERT_EQ(st.code(), Code::kInvalidData) << st.ToString();
  EXPECT_NE(st.message().find("served by forked"), std::string::npos) << st.ToString();
  ASSERT_EQ(forked_ep->served_, (std::set<uint64_t>{0, 1}));
  ASSERT_EQ(healthy_ep->served_, (std::set<uint64_t>{2, 3}));
  auto stats = pool->Stats();
  EXPECT_EQ(stats[0].distrusted, 1u) << "the forked endpoint was not distrusted";
  EXPECT_EQ(stats[1].distrusted, 0u) << "the healthy endpoint, which answered last, was blamed";

  // The refetch: every block from the healthy endpoint, with the head log's hashes.
  forked_ep->served_.clear();
  healthy_ep->served_.clear();
  blocks.clear();
  st = FetchAndDecodeRange(source, 0, 3, 2, BlockChecks(), nullptr, nullptr, &blocks, nullptr,
                           nullptr, &check);
  EXPECT_TRUE(st.ok()) << "the refetch was served by the forked endpoint again: " << st.ToString();
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_TRUE(forked_ep->served_.empty());
  EXPECT_EQ(healthy_ep->served_, (std::set<uint64_t>{0, 1, 2, 3}));
  stats = pool->Stats();
  EXPECT_EQ(stats[1].distrusted, 0u);
}

// A node of a pool (chain 1) serving empty blocks with their real hashes and, to trace_block, a
// block reward naming the block's hash, or another fork's (`forked_traces`). Without `blocks` it
// refuses requests for full blocks (the pool asks another endpoint for them). Records the blocks
// it traced.
class TraceEndpoint : public HttpTransport {
 public:
  TraceEndpoint(std::string name, bool blocks, bool forked_traces)
      : name_(std::move(name)), blocks_(blocks), forked_traces_(forked_traces) {}
  Result<HttpResponse> Post(std::string_view body) override {
    bool batch = false;
    auto calls = ParseJsonRpcRequests(body, &batch);
    if (!calls.ok()) return calls.status();
    if (!blocks_ && body.find(",true]") != std::string_view::npos) {
      return Unavailable(name_ + ": connection refused");
    }
    std::string out;
    for (const JsonRpcCall& c : *calls) {
      std::string result = "null";
      if (c.method == "eth_chainId") result = "\"0x1\"";
      if (c.method == "eth_getBlockByNumber" || c.method == "eth_getBlockReceipts" ||
          c.method == "trace_block") {
        auto n = ParseHexQuantity(c.params_json.substr(2, c.params_json.find('"', 2) - 2));
        if (!n.ok()) return n.status();
        if (c.method == "eth_getBlockReceipts") {
          result = "[]";
        } else if (c.method == "trace_block") {
          traced_.insert(*n);
          result = fmt::format(
              R"([{{"action":{{"author":"0x{:040x}","rewardType":"block","value":"0x1"}},)"
              R"("blockHash":"{}","blockNumber":{},"result":null,"subtraces":0,)"
              R"("traceAddress":[],"type":"reward"}}])",
              1, forked_traces_ ? ForkHash(*n) : RealHash(*n), *n);
        } else {
          result = EmptyBlock(*n, RealHash(*n));
        }
      }
      if (!out.empty()) out += ",";
      out += fmt::format(R"({{"jsonrpc":"2.0","id":{},"result":{}}})", c.id_json, result);
    }
    return HttpResponse{200, batch ? "[" + out + "]" : out, std::nullopt};
  }
  std::string Describe() const override { return name_; }
  std::set<uint64_t> traced_;

 private:
  std::string name_;
  bool blocks_;
  bool forked_traces_;
};

// Review of issue 35 items 1 and 3: the blocks come from a healthy endpoint, their traces from
// one answering for another fork. The decoder refuses the traces; the block agrees with the head
// log, so only the traces' endpoint is distrusted (not both), and the refetch traces from the
// healthy one.
TEST(DistrustTest, TracesOfAnotherForkAreBlamedOnTheirEndpointNotTheBlocks) {
  SimEnv env(7);
  auto forked = std::make_unique<TraceEndpoint>("forked-traces", /*blocks=*/false, true);
  auto healthy = std::make_unique<TraceEndpoint>("healthy", /*blocks=*/true, false);
  TraceEndpoint* forked_ep = forked.get();
  TraceEndpoint* healthy_ep = healthy.get();
  PoolOfTwo two(&env, std::move(forked), std::move(healthy), /*traces=*/true);
  auto& pool = two.pool;
  RpcBlockSource& source = *two.source;
  RangeCheck check = RealHashesCheck();

  std::vector<BlockData> blocks;
  Status st = FetchAndDecodeRange(source, 0, 1, 2, BlockChecks(), nullptr, nullptr, &blocks,
                                  nullptr, nullptr, &check);
  ASSERT_EQ(st.code(), Code::kInvalidData) << st.ToString();
  ASSERT_EQ(forked_ep->traced_, (std::set<uint64_t>{0, 1})) << st.ToString();
  auto stats = pool->Stats();
  EXPECT_EQ(stats[0].distrusted, 1u) << "the endpoint of the other fork's traces was not blamed";
  EXPECT_EQ(stats[1].distrusted, 0u) << "the healthy endpoint, which served the blocks, was blamed";

  blocks.clear();
  st = FetchAndDecodeRange(source, 0, 1, 2, BlockChecks(), nullptr, nullptr, &blocks, nullptr,
                           nullptr, &check);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(healthy_ep->traced_, (std::set<uint64_t>{0, 1}));
  EXPECT_EQ(blocks[0].traces.size(), 1u);
}

// Events mode: a node whose head is below the range (lagging, or gone back to a shorter fork)
// refuses eth_getLogs in its own words (anvil: -32602 "BlockOutOfRangeError"); FetchEventsRange
// asks the head and returns NotFound, retried as a missing header is, not the refusal's
// FailedPrecondition, which would stop the worker. A node past the range keeps the refusal.
Status EventsFetchFailure(const std::string& head, int refusals = 1000) {
  auto asked = std::make_shared<std::atomic<int>>(0);
  HttpTestServer server([head, refusals, asked](const HttpTestServer::Request& request) {
    // The request's id, echoed.
    const size_t at = request.body.find("\"id\":");
    std::string id = "0";
    if (at != std::string::npos) {
      const size_t start = at + 5;
      id = request.body.substr(start, request.body.find_first_of(",}", start) - start);
    }
    if (request.body.find("eth_blockNumber") != std::string::npos) {
      return Response::Json(R"({"jsonrpc":"2.0","id":)" + id + R"(,"result":")" + head + R"("})");
    }
    if (request.body.find("eth_getBlockByNumber") != std::string::npos) {
      // A batch of one header, which this node does not have.
      return Response::Json(R"([{"jsonrpc":"2.0","id":)" + id + R"(,"result":null}])");
    }
    if (asked->fetch_add(1) >= refusals) {
      return Response::Json(R"({"jsonrpc":"2.0","id":)" + id + R"(,"result":[]})");
    }
    return Response::Json(
        R"({"jsonrpc":"2.0","id":)" + id +
        R"(,"error":{"code":-32602,"message":"BlockOutOfRangeError: block height is 31 but )"
        R"(requested was 35"}})");
  });
  SimEnv env;
  JsonRpcClientOptions options;
  options.env = &env;
  options.max_attempts = 1;
  RpcBlockSource source(
      std::make_unique<JsonRpcClient>(std::make_unique<CurlTransport>(server.url()), options));
  EventsFetch fetch;
  fetch.filter.topic0s = {"0x" + std::string(64, 'a')};
  std::vector<BlockData> out;
  return FetchEventsRange(source, fetch, 35, 35, 10, BlockChecks{}, nullptr, nullptr, &out);
}

TEST(FetchEventsRangeTest, ARangeAboveTheNodesHeadIsNotFoundNotARefusal) {
  Status st = EventsFetchFailure("0x1f");
  EXPECT_EQ(st.code(), Code::kNotFound) << st.ToString();
  EXPECT_NE(st.message().find("the node is at block 31"), std::string::npos) << st.ToString();
}

TEST(FetchEventsRangeTest, ARefusalOfARangeTheNodeHasIsKept) {
  Status st = EventsFetchFailure("0x30");
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
}

TEST(FetchEventsRangeTest, ARangeTheNodeReachedSinceItsRefusalIsAskedOnceMore) {
  // Refused while the chain was below it, answered once the node has it again: the fetch goes
  // on (here to the range's last header, which this node does not have: NotFound, retried).
  Status st = EventsFetchFailure("0x30", /*refusals=*/1);
  EXPECT_EQ(st.code(), Code::kNotFound) << st.ToString();
  EXPECT_EQ(st.message().find("BlockOutOfRange"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace gapless
