// JsonRpcClient::GetLogs (json_rpc.h) against fake nodes on real local HTTP servers
// (HttpTestServer + CurlTransport, SimEnv time): 20,000 blocks of known logs of uneven density,
// refused the way providers refuse eth_getLogs (a block cap, Alchemy's and Infura's suggested
// ranges, reth's including the very range refused, an unknown "too large"). For each: the logs are
// exactly an unlimited node's, every block is answered once, and no endpoint is asked a range
// twice. A pool of two endpoints learns each one's cap apart; a one-block refusal fails naming the
// block; other errors follow the client's retry policy; the filter goes into the request.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/env.h"
#include "rpc/curl_transport.h"
#include "rpc/endpoint_pool.h"
#include "rpc/get_logs_limits.h"
#include "rpc/json_rpc.h"
#include "testing/http_test_server.h"
#include "testing/replay_transport.h"

namespace gapless {
namespace {

using Request = HttpTestServer::Request;
using Response = HttpTestServer::Response;

// Blocks kFirst..kLast, at mainnet heights (the numbers' length matters: Alchemy's message with
// a 6-digit hex range is 304 characters).
constexpr uint64_t kBlocks = 20'000;
constexpr uint64_t kFirst = 16'000'000;
constexpr uint64_t kLast = kFirst + kBlocks - 1;
const std::vector<std::string> kAddresses = {"0x00000000000000000000000000000000000000a1",
                                             "0x00000000000000000000000000000000000000b2",
                                             "0x00000000000000000000000000000000000000c3"};
const std::vector<std::string> kTopics = {
    "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",
    "0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925"};

// Logs of block b: a dense stretch (12 a block), one hot block (60), else 0..4 scattered.
uint64_t LogsOfBlock(uint64_t b) {
  if (b >= kFirst + 12'000 && b < kFirst + 12'400) return 12;
  if (b == kFirst + 15'000) return 60;
  const uint64_t h = (b * 2654435761u) % 1000;
  return h < 140 ? 1 + h % 4 : 0;
}

struct Log {
  uint64_t block = 0;
  size_t address = 0;
  size_t topic = 0;
  std::string json;
};

// The chain's logs, in (block, log index) order, and what an unlimited node answers.
class Chain {
 public:
  Chain() {
    for (uint64_t b = kFirst; b <= kLast; ++b) {
      first_.push_back(logs_.size());
      for (uint64_t i = 0; i < LogsOfBlock(b); ++i) {
        Log log{b, (b + i) % kAddresses.size(), (3 * b + i) % kTopics.size(), ""};
        log.json = fmt::format(
            R"({{"address":"{}","topics":["{}","0x{:064x}"],"data":"0x{:064x}",)"
            R"("blockNumber":"0x{:x}","transactionHash":"0x{:064x}","transactionIndex":"0x{:x}",)"
            R"("blockHash":"0x{:064x}","logIndex":"0x{:x}","removed":false}})",
            kAddresses[log.address], kTopics[log.topic], b, i, b, b * 1000 + i, i / 2, b + 1, i);
        logs_.push_back(std::move(log));
      }
    }
    first_.push_back(logs_.size());
  }
  // The matching logs' JSON objects of blocks [from, to], joined by commas (an array's inside).
  std::string Inside(uint64_t from, uint64_t to, const std::set<std::string>& addresses = {},
                     const std::set<std::string>& topics = {}, uint64_t* count = nullptr) const {
    std::string out;
    uint64_t n = 0;
    for (size_t k = first_[from - kFirst]; k < first_[std::min(to, kLast) - kFirst + 1]; ++k) {
      const Log& log = logs_[k];
      if (!addresses.empty() && !addresses.count(kAddresses[log.address])) continue;
      if (!topics.empty() && !topics.count(kTopics[log.topic])) continue;
      out += (n++ > 0 ? "," : "") + log.json;
    }
    if (count != nullptr) *count = n;
    return out;
  }
  uint64_t Count(uint64_t from, uint64_t to) const {
    return first_[std::min(to, kLast) - kFirst + 1] - first_[from - kFirst];
  }
  // The widest range from `from` (at most to) with at most max logs; one block at least.
  uint64_t FitsTo(uint64_t from, uint64_t to, uint64_t max) const {
    uint64_t end = from;
    while (end < to && Count(from, end + 1) <= max) ++end;
    return end;
  }

 private:
  std::vector<Log> logs_;
  // first_[b - kFirst]: block b's first log; first_[kBlocks]: all of them.
  std::vector<size_t> first_;
};

const Chain& TheChain() {
  static const Chain chain;
  return chain;
}

// How a fake node refuses a request, as providers word it (shared/fixtures/getlogs/errors.json).
enum class Style { kUnlimited, kBlockCap, kAlchemy, kInfura, kReth, kUnknownTooLarge };

struct Refusal {
  int64_t code = 0;
  std::string message;
  uint64_t suggested_to = 0;  // the range suggested, [from, suggested_to]; 0: none usable
};

// An eth_getLogs request as the node read it.
struct Asked {
  uint64_t from = 0;
  uint64_t to = 0;
  bool refused = false;
  uint64_t suggested_to = 0;  // Refusal::suggested_to
  std::string params;
};

// One fake node on its own HTTP server: answers eth_getLogs over TheChain() (applying the filter),
// refuses per `style` with `limit` (a block cap, or the most results), and records every request.
// `fault` (optional) may answer the n-th request (from 0, its id's JSON `id`) itself: an ordinary
// failure.
class FakeNode {
 public:
  FakeNode(Style style, uint64_t limit) : style_(style), limit_(limit) {}

  std::function<std::optional<Response>(int n, const std::string& id)> fault;

  std::string url() const { return server_.url(); }
  std::vector<Asked> asked() {
    std::lock_guard<std::mutex> lock(mu_);
    return asked_;
  }
  int refusals() {
    std::lock_guard<std::mutex> lock(mu_);
    return refusals_;
  }
  int echoes() {
    std::lock_guard<std::mutex> lock(mu_);
    return echoes_;
  }

 private:
  std::optional<Refusal> Refuse(uint64_t from, uint64_t to, uint64_t logs) {
    const uint64_t size = to - from + 1;
    const uint64_t fits = TheChain().FitsTo(from, to, limit_);
    switch (style_) {
      case Style::kUnlimited:
        return std::nullopt;
      case Style::kBlockCap:
        if (size <= limit_) return std::nullopt;
        return Refusal{-32000, fmt::format("eth_getLogs is limited to a {} block range", limit_)};
      case Style::kAlchemy:
        // Up to 2K blocks whatever the answer's size, or any range of at most `limit_` logs.
        if (size <= 2000 || logs <= limit_) return std::nullopt;
        return Refusal{-32602,
                       fmt::format("Log response size exceeded. You can make eth_getLogs requests "
                                   "with up to a 2K block range and no limit on the response "
                                   "size, or you can request any block range with a cap of 10K "
                                   "logs in the response. Based on your parameters and the "
                                   "response size limit, this block range should work: [0x{:x}, "
                                   "0x{:x}]",
                                   from, fits),
                       fits};
      case Style::kInfura:
        if (logs <= limit_) return std::nullopt;
        return Refusal{-32005,
                       fmt::format("query returned more than {} results. Try with this "
                                   "block range [0x{:X}, 0x{:X}].",
                                   limit_, from, fits),
                       fits};
      case Style::kReth: {
        if (logs <= limit_) return std::nullopt;
        // Every other refusal suggests the very range refused.
        const bool echo = refusals_ % 2 == 1;
        echoes_ += echo ? 1 : 0;
        return Refusal{-32602,
                       fmt::format("query exceeds max results {}, retry with the range {}-{}",
                                   limit_, from, echo ? to : fits),
                       echo ? 0 : fits};
      }
      case Style::kUnknownTooLarge:
        if (size <= limit_) return std::nullopt;
        return Refusal{-32000, "eth_getLogs: block range too large"};
    }
    return std::nullopt;
  }

  Response Handle(const Request& req) {
    bool batch = false;
    auto calls = ParseJsonRpcRequests(req.body, &batch);
    if (!calls.ok() || batch || calls->size() != 1 || (*calls)[0].method != "eth_getLogs") {
      return Response::Json("unexpected request: " + req.body, 400);
    }
    const JsonRpcCall& call = (*calls)[0];
    simdjson::dom::parser parser;
    simdjson::dom::element filter = parser.parse(simdjson::padded_string(call.params_json)).at(0);
    Asked a;
    a.from = *ParseHexQuantity(std::string_view(filter["fromBlock"].get_string()));
    a.to = *ParseHexQuantity(std::string_view(filter["toBlock"].get_string()));
    a.params = call.params_json;
    std::set<std::string> addresses, topics;
    simdjson::dom::array list;
    if (filter["address"].get_array().get(list) == simdjson::SUCCESS) {
      for (auto v : list) addresses.emplace(std::string_view(v.get_string()));
    }
    if (filter["topics"].at(0).get_array().get(list) == simdjson::SUCCESS) {
      for (auto v : list) topics.emplace(std::string_view(v.get_string()));
    }
    std::lock_guard<std::mutex> lock(mu_);
    const int n = static_cast<int>(asked_.size());
    if (fault) {
      if (std::optional<Response> r = fault(n, call.id_json)) {
        asked_.push_back(a);
        return *r;
      }
    }
    uint64_t count = 0;
    std::string inside = TheChain().Inside(a.from, a.to, addresses, topics, &count);
    std::optional<Refusal> refusal = Refuse(a.from, a.to, count);
    a.refused = refusal.has_value();
    if (refusal) a.suggested_to = refusal->suggested_to;
    asked_.push_back(a);
    if (refusal) {
      ++refusals_;
      return Response::Json(fmt::format(R"({{"jsonrpc":"2.0","id":{},"error":{{"code":{},)"
                                        R"("message":"{}"}}}})",
                                        call.id_json, refusal->code, refusal->message));
    }
    return Response::Json(
        fmt::format(R"({{"jsonrpc":"2.0","id":{},"result":[{}]}})", call.id_json, inside));
  }

  Style style_;
  uint64_t limit_;
  std::mutex mu_;
  std::vector<Asked> asked_;
  int refusals_ = 0;
  int echoes_ = 0;
  HttpTestServer server_{[this](const Request& r) { return Handle(r); }};  // last: stops first
};

std::unique_ptr<CurlTransport> TransportTo(const FakeNode& node) {
  CurlTransportOptions options;
  options.connect_timeout_ms = 2000;
  options.request_timeout_ms = 10'000;
  return std::make_unique<CurlTransport>(node.url(), options);
}

// A client over one fake node.
struct OneNode {
  explicit OneNode(Style style, uint64_t limit = 0, int max_attempts = 4) : node(style, limit) {
    JsonRpcClientOptions options;
    options.env = &env;
    options.max_attempts = max_attempts;
    transport = TransportTo(node);
    client = std::make_unique<JsonRpcClient>(transport.get(), options);
  }
  SimEnv env;
  FakeNode node;
  std::unique_ptr<CurlTransport> transport;
  std::unique_ptr<JsonRpcClient> client;
};

// The chunks' logs joined as Chain::Inside joins them; checks the chunks cover [from, to] once,
// in order, each with the count of logs it holds.
std::string Joined(const std::vector<LogsChunk>& chunks, uint64_t from, uint64_t to) {
  std::string out;
  uint64_t next = from;
  for (const LogsChunk& c : chunks) {
    EXPECT_EQ(c.from, next) << "a gap or an overlap before block " << c.from;
    EXPECT_LE(c.from, c.to);
    next = c.to + 1;
    EXPECT_GE(c.logs_json.size(), 2u);
    std::string_view inside(c.logs_json);
    inside = inside.substr(1, inside.size() - 2);
    EXPECT_EQ(c.logs, inside.empty() ? 0 : TheChain().Count(c.from, c.to));
    if (!inside.empty()) out += (out.empty() ? "" : ",") + std::string(inside);
  }
  EXPECT_EQ(next, to + 1) << "the chunks end before the range does";
  return out;
}

// No range was asked of the node twice.
void ExpectNoRepeat(FakeNode& node) {
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (const Asked& a : node.asked()) {
    EXPECT_TRUE(seen.insert({a.from, a.to}).second)
        << "blocks " << a.from << ".." << a.to << " were asked twice";
  }
}

// No range was asked of the node twice, and what it answered (not refused) is the chunks: each
// block answered once, in order.
void ExpectEachBlockOnceAndNoRepeat(FakeNode& node, const std::vector<LogsChunk>& chunks) {
  ExpectNoRepeat(node);
  std::vector<std::pair<uint64_t, uint64_t>> answered;
  for (const Asked& a : node.asked()) {
    if (!a.refused) answered.push_back({a.from, a.to});
  }
  ASSERT_EQ(answered.size(), chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(answered[i], std::make_pair(chunks[i].from, chunks[i].to));
  }
}

// GetLogs over all the blocks of a node refusing per `style`: the unlimited answer, each block
// answered once, no range asked twice, and at least one refusal read.
void ExpectSameLogsAsUnlimited(Style style, uint64_t limit) {
  OneNode f(style, limit);
  auto chunks = f.client->GetLogs({}, kFirst, kLast);
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  EXPECT_EQ(Joined(*chunks, kFirst, kLast), TheChain().Inside(kFirst, kLast));
  ExpectEachBlockOnceAndNoRepeat(f.node, *chunks);
  EXPECT_GE(f.node.refusals(), 1) << "the test's node never refused: it tests nothing";
  // A range the node suggested is the one asked next (read, not guessed at by halving).
  const std::vector<Asked> asked = f.node.asked();
  for (size_t i = 0; i + 1 < asked.size(); ++i) {
    if (asked[i].suggested_to == 0) continue;
    EXPECT_EQ(asked[i + 1].from, asked[i].from);
    EXPECT_EQ(asked[i + 1].to, asked[i].suggested_to)
        << "the suggestion after blocks " << asked[i].from << ".." << asked[i].to;
  }
  // Refusals are not failures: no sleep, no retry.
  EXPECT_EQ(f.env.slept_micros(), 0);
  EXPECT_EQ(f.client->stats().retries, 0u);
}

TEST(GetLogsTest, AnUnlimitedNodeIsAskedInGrowingRanges) {
  OneNode f(Style::kUnlimited);
  auto chunks = f.client->GetLogs({}, kFirst, kLast);
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  EXPECT_EQ(Joined(*chunks, kFirst, kLast), TheChain().Inside(kFirst, kLast));
  ExpectEachBlockOnceAndNoRepeat(f.node, *chunks);
  EXPECT_EQ(f.node.asked().front().to, kFirst + 999);  // the first width: initial_blocks
  EXPECT_LT(chunks->size(), 40u) << "the width never grew";
}

TEST(GetLogsTest, ABlockCapIsLearntOnceAndKept) {
  ExpectSameLogsAsUnlimited(Style::kBlockCap, 1024);
  OneNode f(Style::kBlockCap, 1024);
  auto first = f.client->GetLogs({}, kFirst, kFirst + 9999);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(f.node.refusals(), 1);
  for (const LogsChunk& c : *first) EXPECT_LE(c.to - c.from + 1, 1024u);
  EXPECT_NE(f.client->DescribeLogSizing().at(0).find("cap 1024 (stated"), std::string::npos)
      << f.client->DescribeLogSizing().at(0);
  // The client keeps its endpoint's cap: the next range is asked within it at once.
  auto second = f.client->GetLogs({}, kFirst + 10'000, kLast);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(f.node.refusals(), 1);
  EXPECT_EQ(Joined(*second, kFirst + 10'000, kLast), TheChain().Inside(kFirst + 10'000, kLast));
}

TEST(GetLogsTest, AlchemysSuggestedRangeInHex) { ExpectSameLogsAsUnlimited(Style::kAlchemy, 1000); }

TEST(GetLogsTest, InfurasTooManyResultsWithARange) {
  ExpectSameLogsAsUnlimited(Style::kInfura, 1000);
}

TEST(GetLogsTest, RethsRetryRangeEvenWhenItIsTheRangeRefused) {
  ExpectSameLogsAsUnlimited(Style::kReth, 500);
  OneNode f(Style::kReth, 500);
  ASSERT_TRUE(f.client->GetLogs({}, kFirst, kLast).ok());
  EXPECT_GE(f.node.echoes(), 1) << "the node never suggested the range it refused";
}

TEST(GetLogsTest, AnUnknownTooLargeIsHalved) {
  ExpectSameLogsAsUnlimited(Style::kUnknownTooLarge, 3000);
}

TEST(GetLogsTest, APoolLearnsEachEndpointsCapForItAlone) {
  SimEnv env(3);
  FakeNode capped(Style::kBlockCap, 500);
  FakeNode open(Style::kUnlimited, 0);
  PoolOptions pool_options;
  pool_options.env = &env;
  pool_options.check_chain = false;
  pool_options.hedge = false;
  pool_options.get_logs.target_logs = 300;  // many requests, to both endpoints
  std::vector<std::unique_ptr<HttpTransport>> transports;
  transports.push_back(TransportTo(capped));
  transports.push_back(TransportTo(open));
  auto pool = std::make_shared<EndpointPool>(
      std::vector<EndpointSpec>{{capped.url(), 1, 0}, {open.url(), 1, 0}}, pool_options);
  PoolTransport transport(pool, std::move(transports));
  JsonRpcClientOptions options;
  options.env = &env;
  JsonRpcClient client(&transport, options);

  auto chunks = client.GetLogs({}, kFirst, kLast);
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  EXPECT_EQ(Joined(*chunks, kFirst, kLast), TheChain().Inside(kFirst, kLast));
  // Each chunk was answered by the endpoint it names, in the range that endpoint was asked.
  std::set<std::pair<uint64_t, uint64_t>> answered[2];
  for (const Asked& a : capped.asked()) {
    if (!a.refused) answered[0].insert({a.from, a.to});
  }
  for (const Asked& a : open.asked()) answered[1].insert({a.from, a.to});
  for (const LogsChunk& c : *chunks) {
    ASSERT_TRUE(c.served_by == 1 || c.served_by == 2) << c.served_by;
    EXPECT_TRUE(answered[c.served_by - 1].count({c.from, c.to})) << c.from << ".." << c.to;
  }
  EXPECT_EQ(answered[0].size() + answered[1].size(), chunks->size());

  // The capped endpoint refused once, its first request, and was then asked within its cap; the
  // other never refused and was asked wider than that cap.
  EXPECT_EQ(capped.refusals(), 1);
  auto capped_asked = capped.asked();
  ASSERT_GE(capped_asked.size(), 2u);
  EXPECT_TRUE(capped_asked.front().refused);
  for (size_t i = 1; i < capped_asked.size(); ++i) {
    EXPECT_LE(capped_asked[i].to - capped_asked[i].from + 1, 500u);
  }
  uint64_t widest_open = 0;
  for (const Asked& a : open.asked()) widest_open = std::max(widest_open, a.to - a.from + 1);
  EXPECT_GT(widest_open, 500u);
  EXPECT_EQ(pool->log_sizers().cap(0), std::optional<uint64_t>(500));
  EXPECT_EQ(pool->log_sizers().cap(1), std::nullopt);
  const std::vector<std::string> sizing = pool->DescribeLogSizing();
  ASSERT_EQ(sizing.size(), 2u);
  EXPECT_NE(sizing[0].find("cap 500 (stated"), std::string::npos) << sizing[0];
  EXPECT_NE(sizing[1].find("no cap"), std::string::npos) << sizing[1];
  EXPECT_EQ(client.DescribeLogSizing(), sizing);  // the client shows the pool's
}

TEST(GetLogsTest, AOneBlockRefusalFailsNamingTheBlockAndTheEndpoint) {
  OneNode f(Style::kInfura, 50);  // block 15000 alone has 60 logs
  auto chunks = f.client->GetLogs({}, kFirst + 14'990, kFirst + 15'010);
  ASSERT_FALSE(chunks.ok());
  EXPECT_EQ(chunks.status().code(), Code::kFailedPrecondition) << chunks.status().ToString();
  const std::string& m = chunks.status().message();
  EXPECT_NE(m.find(fmt::format("block {} alone", kFirst + 15'000)), std::string::npos) << m;
  EXPECT_NE(m.find(f.node.url()), std::string::npos) << m;
  EXPECT_NE(m.find("more than 50 results"), std::string::npos) << m;
  ExpectNoRepeat(f.node);
}

Response HeaderNotFound(const std::string& id) {
  return Response::Json(fmt::format(
      R"({{"jsonrpc":"2.0","id":{},"error":{{"code":-32000,"message":"header not found"}}}})", id));
}

TEST(GetLogsTest, OrdinaryErrorsFollowTheRetryPolicy) {
  // A 429 with Retry-After, then "header not found" twice: each the same request again after a
  // wait; then the answers go on.
  OneNode f(Style::kBlockCap, 1024, /*max_attempts=*/4);
  f.node.fault = [](int n, const std::string& id) -> std::optional<Response> {
    if (n == 2) {
      Response r = Response::Json(R"({"error":"rate limited"})", 429);
      r.headers.push_back({"Retry-After", "2"});
      return r;
    }
    if (n == 5 || n == 6) return HeaderNotFound(id);
    return std::nullopt;
  };
  auto chunks = f.client->GetLogs({}, kFirst, kLast);
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  EXPECT_EQ(Joined(*chunks, kFirst, kLast), TheChain().Inside(kFirst, kLast));
  auto asked = f.node.asked();
  ASSERT_GT(asked.size(), 8u);
  EXPECT_EQ(asked[3].from, asked[2].from);  // the same request after the 429
  EXPECT_EQ(asked[3].to, asked[2].to);
  EXPECT_EQ(asked[6].to, asked[5].to);  // and after each "header not found"
  EXPECT_EQ(asked[7].to, asked[6].to);
  EXPECT_EQ(f.client->stats().retries, 3u);
  EXPECT_GE(f.env.slept_micros(), 2'000'000);  // the server's Retry-After, then backoff

  // Failing every time: Unavailable after max_attempts, naming the blocks.
  OneNode down(Style::kUnlimited, 0, /*max_attempts=*/3);
  down.node.fault = [](int, const std::string& id) -> std::optional<Response> {
    return HeaderNotFound(id);
  };
  auto failed = down.client->GetLogs({}, kFirst + 100, kFirst + 200);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Code::kUnavailable);
  EXPECT_NE(failed.status().message().find("gave up after 3 attempts"), std::string::npos);
  // The same range asked each time (a failure that is not a limit keeps the request as it is).
  const std::vector<Asked> tries = down.node.asked();
  ASSERT_EQ(tries.size(), 3u);
  for (const Asked& a : tries) {
    EXPECT_EQ(a.from, kFirst + 100);
    EXPECT_EQ(a.to, kFirst + 200);
  }

  // -32602 that is no limit (a bad parameter): FailedPrecondition at once, as for Call.
  OneNode bad(Style::kUnlimited, 0);
  bad.node.fault = [](int, const std::string& id) -> std::optional<Response> {
    return Response::Json(fmt::format(
        R"({{"jsonrpc":"2.0","id":{},"error":{{"code":-32602,"message":"invalid argument 0: hex)"
        R"( string has length 3, want 40 for common.Address"}}}})",
        id));
  };
  auto refused = bad.client->GetLogs({}, kFirst, kFirst + 10);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(bad.node.asked().size(), 1u);
}

TEST(GetLogsTest, TheFilterGoesIntoTheRequest) {
  OneNode f(Style::kUnlimited);
  LogFilter filter;
  filter.addresses = {"0x00000000000000000000000000000000000000A1", kAddresses[2]};
  filter.topic0s = {kTopics[1]};
  auto chunks = f.client->GetLogs(filter, kFirst + 11'000, kFirst + 13'000);
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  auto asked = f.node.asked();
  ASSERT_FALSE(asked.empty());
  for (const Asked& a : asked) {
    EXPECT_NE(a.params.find(fmt::format(R"("address":["{}","{}"])", kAddresses[0], kAddresses[2])),
              std::string::npos)
        << a.params;
    EXPECT_NE(a.params.find(fmt::format(R"("topics":[["{}"]])", kTopics[1])), std::string::npos)
        << a.params;
  }
  std::string joined;
  for (const LogsChunk& c : *chunks) {
    std::string_view inside(c.logs_json);
    inside = inside.substr(1, inside.size() - 2);
    if (!inside.empty()) joined += (joined.empty() ? "" : ",") + std::string(inside);
  }
  uint64_t count = 0;
  EXPECT_EQ(joined, TheChain().Inside(kFirst + 11'000, kFirst + 13'000,
                                      {kAddresses[0], kAddresses[2]}, {kTopics[1]}, &count));
  EXPECT_GT(count, 100u);
  EXPECT_LT(count, TheChain().Count(kFirst + 11'000, kFirst + 13'000));

  // No filter: neither field. A bad entry: FailedPrecondition, nothing sent.
  ASSERT_TRUE(f.client->GetLogs({}, kFirst, kFirst + 10).ok());
  EXPECT_EQ(f.node.asked().back().params.find("address"), std::string::npos);
  EXPECT_EQ(f.node.asked().back().params.find("topics"), std::string::npos);
  const size_t sent = f.node.asked().size();
  auto bad = f.client->GetLogs({{"0x1234"}, {}}, kFirst, kFirst + 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(bad.status().message().find("0x1234"), std::string::npos);
  EXPECT_EQ(f.node.asked().size(), sent);
}

TEST(GetLogsTest, ALogOutsideTheRangeAskedIsInvalidData) {
  OneNode f(Style::kUnlimited);
  f.node.fault = [](int, const std::string& id) -> std::optional<Response> {
    return Response::Json(fmt::format(R"({{"jsonrpc":"2.0","id":{},"result":[{}]}})", id,
                                      TheChain().Inside(kFirst + 12'000, kFirst + 12'000)));
  };
  auto chunks = f.client->GetLogs({}, kFirst, kFirst + 10);
  ASSERT_FALSE(chunks.ok());
  EXPECT_EQ(chunks.status().code(), Code::kInvalidData);
  EXPECT_NE(chunks.status().message().find("outside the range asked"), std::string::npos)
      << chunks.status().message();
}

}  // namespace
}  // namespace gapless
