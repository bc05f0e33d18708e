// The RPC endpoint pool (rpc/endpoint_pool.h) over scripted endpoints: parsing of the --rpc list,
// how answers are classified, routing by weight and speed, failover, taking out and probing back
// (SimEnv time), per-endpoint 429 cooling, learned batch limits and missing methods, distrusted
// answers, hedging (real threads and time), and the client's own batch splitting.
#include "rpc/endpoint_pool.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <thread>

#include "rpc/json_rpc.h"
#include "testing/replay_transport.h"

namespace gapless {
namespace {

// An endpoint whose answers a function decides; it may advance a SimEnv to take "latency".
class ScriptedEndpoint : public HttpTransport {
 public:
  using Handler = std::function<Result<HttpResponse>(const std::vector<JsonRpcCall>&, bool batch)>;
  ScriptedEndpoint(std::string name, Handler handler)
      : name_(std::move(name)), handler_(std::move(handler)) {}
  Result<HttpResponse> Post(std::string_view body) override {
    bool batch = false;
    auto calls = ParseJsonRpcRequests(body, &batch);
    if (!calls.ok()) return calls.status();
    posts_ += 1;
    return handler_(*calls, batch);
  }
  std::string Describe() const override { return name_; }
  std::atomic<int> posts_{0};

 private:
  std::string name_;
  Handler handler_;
};

// Every call answered with "0x1".
Result<HttpResponse> AnswerAll(const std::vector<JsonRpcCall>& calls, bool batch) {
  std::string body;
  for (const auto& c : calls) {
    if (!body.empty()) body += ",";
    body += fmt::format(R"({{"jsonrpc":"2.0","id":{},"result":"0x1"}})", c.id_json);
  }
  return HttpResponse{200, batch ? "[" + body + "]" : body, std::nullopt};
}

ScriptedEndpoint::Handler Healthy() { return AnswerAll; }
ScriptedEndpoint::Handler Down() {
  return [](const std::vector<JsonRpcCall>&, bool) -> Result<HttpResponse> {
    return Unavailable("connection refused");
  };
}

PoolOptions Options(bool hedge, int take_out_after = 3) {
  PoolOptions o;
  o.hedge = hedge;
  o.take_out_after = take_out_after;
  return o;
}

struct Fixture {
  // The chain check is off unless asked: the scripted endpoints answer every call "0x1".
  explicit Fixture(std::vector<ScriptedEndpoint::Handler> handlers, PoolOptions options = {},
                   std::vector<double> weights = {}, bool check_chain = false) {
    if (options.env == nullptr) options.env = &env;
    options.check_chain = check_chain;
    std::vector<EndpointSpec> specs;
    std::vector<std::unique_ptr<HttpTransport>> transports;
    for (size_t i = 0; i < handlers.size(); ++i) {
      specs.push_back({fmt::format("http://e{}:8545/", i), weights.empty() ? 1.0 : weights[i], 0});
      auto t = std::make_unique<ScriptedEndpoint>(fmt::format("e{}", i), handlers[i]);
      endpoints.push_back(t.get());
      transports.push_back(std::move(t));
    }
    pool = std::make_shared<EndpointPool>(specs, options);
    transport = std::make_unique<PoolTransport>(pool, std::move(transports));
  }
  // Each request its own unit of answers (Answered() names its endpoint).
  Result<HttpResponse> Call(std::string_view method = "eth_blockNumber") {
    transport->MarkAnswers();
    return transport->Post(
        fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"{}","params":[]}})", method));
  }
  Result<HttpResponse> Batch(size_t n, std::string_view method = "eth_getBlockByNumber") {
    transport->MarkAnswers();
    std::string body = "[";
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) body += ",";
      body +=
          fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":"{}","params":[]}})", i + 1, method);
    }
    return transport->Post(body + "]");
  }
  // The endpoint (index) that answered the last good request.
  int Answered() const {
    for (size_t i = 0; i < 64; ++i) {
      if (transport->answered() == (uint64_t{1} << i)) return static_cast<int>(i);
    }
    return -1;
  }

  SimEnv env{7};
  std::vector<ScriptedEndpoint*> endpoints;
  std::shared_ptr<EndpointPool> pool;
  std::unique_ptr<PoolTransport> transport;
};

TEST(EndpointListTest, ParsesUrlsWithWeightsAndRateLimits) {
  auto one = ParseEndpointList("http://127.0.0.1:8545");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].url, "http://127.0.0.1:8545");
  EXPECT_EQ((*one)[0].weight, 1.0);

  auto many = ParseEndpointList(
      "https://a.example/v2/KEY1 weight=3 rate-limit=50, https://b.example/KEY2,http://c:8545 "
      "rate-limit=0.5");
  ASSERT_TRUE(many.ok()) << many.status().ToString();
  ASSERT_EQ(many->size(), 3u);
  EXPECT_EQ((*many)[0].url, "https://a.example/v2/KEY1");
  EXPECT_EQ((*many)[0].weight, 3.0);
  EXPECT_EQ((*many)[0].rate_limit, 50.0);
  EXPECT_EQ((*many)[1].url, "https://b.example/KEY2");
  EXPECT_EQ((*many)[2].rate_limit, 0.5);
}

TEST(EndpointListTest, ABadItemIsNamedWithoutItsSecret) {
  auto bad = ParseEndpointList("https://a.example/v2/SECRETKEY123 weight=0, http://b");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("endpoint 1"), std::string::npos);
  EXPECT_NE(bad.status().message().find("weight=0"), std::string::npos);
  EXPECT_EQ(bad.status().message().find("SECRETKEY123"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(ParseEndpointList("http://a, , http://b").ok());
  EXPECT_FALSE(ParseEndpointList("http://a speed=3").ok());
}

TEST(EndpointPoolTest, AnswersAreClassifiedForThePool) {
  EXPECT_EQ(ClassifyAnswer(Unavailable("reset"), 1), EndpointOutcome::kTransport);
  EXPECT_EQ(ClassifyAnswer(HttpResponse{429, "", 2'000'000}, 1), EndpointOutcome::kRateLimited);
  EXPECT_EQ(ClassifyAnswer(HttpResponse{503, "", std::nullopt}, 1), EndpointOutcome::kServerError);
  EXPECT_EQ(ClassifyAnswer(HttpResponse{401, "", std::nullopt}, 1), EndpointOutcome::kClientError);
  EXPECT_EQ(ClassifyAnswer(HttpResponse{413, "", std::nullopt}, 20),
            EndpointOutcome::kBatchRejected);
  EXPECT_EQ(ClassifyAnswer(HttpResponse{200,
                                        R"({"jsonrpc":"2.0","id":null,"error":{"code":-32600,)"
                                        R"("message":"Batch size too large"}})",
                                        std::nullopt},
                           20),
            EndpointOutcome::kBatchRejected);
  EXPECT_EQ(ClassifyAnswer(HttpResponse{200,
                                        R"([{"jsonrpc":"2.0","id":1,"error":{"code":-32601,)"
                                        R"("message":"the method does not exist"}}])",
                                        std::nullopt},
                           1),
            EndpointOutcome::kMissingMethod);
  EXPECT_EQ(ClassifyAnswer(
                HttpResponse{200, R"({"jsonrpc":"2.0","id":1,"result":"0x1"})", std::nullopt}, 1),
            EndpointOutcome::kGood);
  // Which methods a -32601 names: matched by id; without one, only a one-method request's.
  EXPECT_EQ(MethodsAnsweredMissing(
                R"([{"id":1,"method":"a","params":[]},{"id":"x","method":"b","params":[]}])",
                R"([{"id":1,"result":"0x1"},{"id":"x","error":{"code":-32601,"message":"no"}}])"),
            std::vector<std::string>{"b"});
  EXPECT_TRUE(MethodsAnsweredMissing(R"([{"id":1,"method":"a"},{"id":2,"method":"b"}])",
                                     R"({"id":null,"error":{"code":-32601,"message":"no"}})")
                  .empty());
  EXPECT_EQ(MethodsAnsweredMissing(R"({"id":1,"method":"a"})",
                                   R"({"id":null,"error":{"code":-32601,"message":"no"}})"),
            std::vector<std::string>{"a"});
  // A repeated id names neither of its methods; an id echoed as a string of its digits is the id.
  EXPECT_TRUE(MethodsAnsweredMissing(R"([{"id":1,"method":"a"},{"id":1,"method":"b"}])",
                                     R"([{"id":1,"error":{"code":-32601,"message":"no"}}])")
                  .empty());
  EXPECT_EQ(MethodsAnsweredMissing(R"([{"id":1,"method":"a"},{"id":2,"method":"b"}])",
                                   R"([{"id":"2","error":{"code":-32601,"message":"no"}}])"),
            std::vector<std::string>{"b"});
}

TEST(EndpointPoolTest, AFailingEndpointFailsOverWithinOneRequest) {
  Fixture f({Down(), Healthy()});
  for (int i = 0; i < 20; ++i) {
    auto r = f.Call();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(f.Answered(), 1);
  }
  auto stats = f.pool->Stats();
  EXPECT_FALSE(stats[0].in) << "three failures in a row take an endpoint out";
  EXPECT_EQ(stats[0].failures, 3u) << "once out, it is not asked until its probe is due";
  EXPECT_EQ(stats[1].good, 20u);
}

TEST(EndpointPoolTest, AnEndpointTakenOutIsProbedBackInWithBackoff) {
  bool up = false;
  Fixture f({[&](const std::vector<JsonRpcCall>& c, bool b) -> Result<HttpResponse> {
               if (!up) return Unavailable("refused");
               return AnswerAll(c, b);
             },
             Healthy()},
            Options(/*hedge=*/false, /*take_out_after=*/1));
  ASSERT_TRUE(f.Call().ok());
  // Whichever endpoint the draws chose first, e0 is out after its first failure.
  for (int i = 0; i < 10 && f.pool->Stats()[0].in; ++i) ASSERT_TRUE(f.Call().ok());
  ASSERT_FALSE(f.pool->Stats()[0].in);
  const int posts = f.endpoints[0]->posts_;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(f.Call().ok());
  EXPECT_EQ(f.endpoints[0]->posts_, posts) << "asked while out, before its probe was due";
  f.env.Advance(1'000'000);
  ASSERT_TRUE(f.Call().ok());  // the probe fails, the request fails over
  EXPECT_EQ(f.endpoints[0]->posts_, posts + 1);
  EXPECT_FALSE(f.pool->Stats()[0].in);
  f.env.Advance(1'000'000);  // the interval doubled: not yet
  ASSERT_TRUE(f.Call().ok());
  EXPECT_EQ(f.endpoints[0]->posts_, posts + 1);
  up = true;
  f.env.Advance(1'000'000);
  ASSERT_TRUE(f.Call().ok());
  EXPECT_EQ(f.Answered(), 0) << "the due probe goes first";
  EXPECT_TRUE(f.pool->Stats()[0].in);
}

TEST(EndpointPoolTest, A429CoolsThatEndpointAloneForItsRetryAfter) {
  bool limited = true;
  Fixture f({[&](const std::vector<JsonRpcCall>& c, bool b) -> Result<HttpResponse> {
               if (limited) return HttpResponse{429, "slow down", 3'000'000};
               return AnswerAll(c, b);
             },
             Healthy()});
  for (int i = 0; i < 50 && f.endpoints[0]->posts_ == 0; ++i) ASSERT_TRUE(f.Call().ok());
  ASSERT_EQ(f.endpoints[0]->posts_, 1);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(f.Call().ok());
  EXPECT_EQ(f.endpoints[0]->posts_, 1) << "asked again while cooling down";
  auto stats = f.pool->Stats();
  EXPECT_TRUE(stats[0].cooling);
  EXPECT_TRUE(stats[0].in) << "a 429 is not a failure of the endpoint";
  EXPECT_EQ(stats[0].rate_limited, 1u);
  limited = false;
  f.env.Advance(3'000'000);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(f.Call().ok());
  EXPECT_GT(f.endpoints[0]->posts_, 1) << "not asked again after its Retry-After";
}

TEST(EndpointPoolTest, EveryEndpointCoolingIsARateLimitForTheClient) {
  auto limited = [](const std::vector<JsonRpcCall>&, bool) -> Result<HttpResponse> {
    return HttpResponse{429, "slow down", 5'000'000};
  };
  Fixture f({limited, limited});
  auto first = f.Call();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->status, 429) << "the last endpoint's answer is what the client sees";
  auto then = f.Call();
  ASSERT_FALSE(then.ok());
  EXPECT_EQ(then.status().reason(), "http:429") << then.status().ToString();
}

TEST(EndpointPoolTest, RequestsFollowTheWeights) {
  Fixture f({Healthy(), Healthy()}, Options(/*hedge=*/false), {3.0, 1.0});
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(f.Call().ok());
  const double share = f.endpoints[0]->posts_ / 2000.0;
  EXPECT_NEAR(share, 0.75, 0.05);
}

TEST(EndpointPoolTest, ASlowerEndpointGetsLessInProportion) {
  Fixture* self = nullptr;
  auto slow = [&](const std::vector<JsonRpcCall>& c, bool b) {
    self->env.Advance(100'000);
    return AnswerAll(c, b);
  };
  auto fast = [&](const std::vector<JsonRpcCall>& c, bool b) {
    self->env.Advance(10'000);
    return AnswerAll(c, b);
  };
  Fixture f({slow, fast}, Options(/*hedge=*/false));
  self = &f;
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(f.Call().ok());
  // 10x slower: a tenth of the fast one's share, 1/11 of all.
  EXPECT_NEAR(f.endpoints[0]->posts_ / 2000.0, 1.0 / 11, 0.03);
}

TEST(EndpointPoolTest, ABatchAnEndpointRefusesGoesElsewhereAndItsLimitIsLearned) {
  auto small_batches = [](const std::vector<JsonRpcCall>& c, bool b) -> Result<HttpResponse> {
    if (c.size() > 10) {
      return HttpResponse{200,
                          R"x({"jsonrpc":"2.0","id":null,"error":{"code":-32600,)x"
                          R"x("message":"batch size too large (max 10)"}})x",
                          std::nullopt};
    }
    return AnswerAll(c, b);
  };
  Fixture f({small_batches, Healthy()}, Options(/*hedge=*/false));
  for (int i = 0; i < 30; ++i) {
    auto r = f.Batch(20);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->body.front(), '[');
    EXPECT_EQ(f.Answered(), 1);
  }
  EXPECT_EQ(f.pool->Stats()[0].batch_limit, 10u);
  EXPECT_LE(f.endpoints[0]->posts_, 1) << "a batch above the learned limit was sent there again";
  EXPECT_TRUE(f.pool->Stats()[0].in) << "refusing a batch is not a failure";
  int small_to_0 = 0;
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(f.Batch(5).ok());
    small_to_0 += f.Answered() == 0;
  }
  EXPECT_GT(small_to_0, 5) << "batches within its limit still go there";
}

TEST(EndpointPoolTest, AMethodAnEndpointLacksIsRoutedToTheOthers) {
  auto no_receipts = [](const std::vector<JsonRpcCall>& c, bool b) -> Result<HttpResponse> {
    if (c[0].method == "eth_getBlockReceipts") {
      return HttpResponse{200,
                          fmt::format(R"({{"jsonrpc":"2.0","id":{},"error":{{"code":-32601,)"
                                      R"("message":"the method does not exist"}}}})",
                                      c[0].id_json),
                          std::nullopt};
    }
    return AnswerAll(c, b);
  };
  Fixture f({no_receipts, Healthy()}, Options(/*hedge=*/false));
  for (int i = 0; i < 20; ++i) {
    auto r = f.Call("eth_getBlockReceipts");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->body.find("-32601"), std::string::npos) << r->body;
  }
  EXPECT_LE(f.endpoints[0]->posts_, 1);
  EXPECT_EQ(f.pool->Stats()[0].missing_methods, std::vector<std::string>{"eth_getBlockReceipts"});
  // Other methods still go there.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(f.Call("eth_blockNumber").ok());
  EXPECT_GT(f.endpoints[0]->posts_, 3);

  // When no endpoint has it, the answer reaches the client (which has its fallback).
  Fixture none({no_receipts, no_receipts}, Options(/*hedge=*/false));
  auto r = none.Call("eth_getBlockReceipts");
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->body.find("-32601"), std::string::npos);
}

// A node without eth_getBlockReceipts answers a block+receipts batch with -32601 for the receipts
// calls only: that method alone is missing there (the blocks still go to it), and after a while
// it is asked again, so a provider that adds the method (or a misreading) heals.
TEST(EndpointPoolTest, AMixedBatchMarksOnlyTheMethodAnsweredMissingAndAsksAgainLater) {
  bool has_receipts = false;
  auto per_call = [&](const std::vector<JsonRpcCall>& calls, bool) -> Result<HttpResponse> {
    std::string body;
    for (const auto& c : calls) {
      if (!body.empty()) body += ",";
      if (c.method == "eth_getBlockReceipts" && !has_receipts) {
        body += fmt::format(R"({{"jsonrpc":"2.0","id":{},"error":{{"code":-32601,)"
                            R"("message":"the method eth_getBlockReceipts does not exist"}}}})",
                            c.id_json);
      } else {
        body += fmt::format(R"({{"jsonrpc":"2.0","id":{},"result":"0x1"}})", c.id_json);
      }
    }
    return HttpResponse{200, "[" + body + "]", std::nullopt};
  };
  Fixture f({per_call, Healthy()}, Options(/*hedge=*/false), {1000.0, 0.001});  // e0 first
  auto blocks_and_receipts = [&] {
    f.transport->MarkAnswers();
    return f.transport->Post(
        R"([{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1",true]},)"
        R"({"jsonrpc":"2.0","id":2,"method":"eth_getBlockReceipts","params":["0x1"]}])");
  };
  auto r = blocks_and_receipts();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body.find("-32601"), std::string::npos) << "the other endpoint answers it whole";
  EXPECT_EQ(f.Answered(), 1);
  EXPECT_EQ(f.endpoints[0]->posts_, 1);
  EXPECT_EQ(f.pool->Stats()[0].missing_methods, std::vector<std::string>{"eth_getBlockReceipts"})
      << "only the method answered -32601 is missing";
  ASSERT_TRUE(f.Call("eth_getBlockByNumber").ok());
  EXPECT_EQ(f.Answered(), 0) << "the blocks still go to the endpoint without receipts";
  const int posts = f.endpoints[0]->posts_;
  ASSERT_TRUE(blocks_and_receipts().ok());
  EXPECT_EQ(f.endpoints[0]->posts_, posts) << "asked for receipts while known to lack them";

  // After the retry interval it is asked again: still missing, the request fails over...
  f.env.Advance(PoolOptions{}.missing_method_retry_micros);
  ASSERT_TRUE(blocks_and_receipts().ok());
  EXPECT_EQ(f.endpoints[0]->posts_, posts + 1) << "a missing method was never asked again";
  EXPECT_EQ(f.Answered(), 1);
  ASSERT_TRUE(blocks_and_receipts().ok());
  EXPECT_EQ(f.endpoints[0]->posts_, posts + 1) << "asked again before the next interval";
  // ...and once the provider serves it, it is served there and no longer listed as missing.
  has_receipts = true;
  f.env.Advance(PoolOptions{}.missing_method_retry_micros);
  ASSERT_TRUE(blocks_and_receipts().ok());
  EXPECT_EQ(f.Answered(), 0);
  EXPECT_TRUE(f.pool->Stats()[0].missing_methods.empty());
}

// An endpoint of chain `chain_id` whose block 0 is *genesis (read at each request: a devnet
// restarted behind the same URL has another), every other call answered "0x1"; down while *down.
ScriptedEndpoint::Handler OnChain(uint64_t chain_id, const std::string* genesis,
                                  const bool* down = nullptr) {
  return [=](const std::vector<JsonRpcCall>& calls, bool batch) -> Result<HttpResponse> {
    if (down != nullptr && *down) return Unavailable("connection refused");
    std::string body;
    for (const auto& c : calls) {
      if (!body.empty()) body += ",";
      std::string result = R"("0x1")";
      if (c.method == "eth_chainId") result = "\"" + HexQuantity(chain_id) + "\"";
      if (c.method == "eth_getBlockByNumber" &&
          c.params_json.find("\"0x0\"") != std::string::npos) {
        result = R"({"number":"0x0","hash":")" + *genesis + R"("})";
      }
      body += fmt::format(R"({{"jsonrpc":"2.0","id":{},"result":{}}})", c.id_json, result);
    }
    return HttpResponse{200, batch ? "[" + body + "]" : body, std::nullopt};
  };
}

// A pool whose endpoints serve different chains (issue 35 item 9): the first endpoint of the list
// that answers sets the pool's chain; one on another chain is taken out as it joins, named, and
// never serves a request, though it is asked again; one that comes back on another chain (a
// restarted devnet: another block 0) is taken out too.
TEST(EndpointPoolTest, AnEndpointOnAnotherChainIsTakenOutNamedAndNeverServes) {
  const std::string g1 = "0x" + std::string(64, '1'), g2 = "0x" + std::string(64, '2'),
                    g3 = "0x" + std::string(64, '3');
  std::string a_genesis = g1;
  bool a_down = false;
  Fixture f({OnChain(31337, &a_genesis, &a_down), OnChain(999, &g2), OnChain(31337, &g1)},
            Options(/*hedge=*/false), {}, /*check_chain=*/true);
  int answered_by_b = 0;
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(f.Call("eth_getBlockByNumber").ok());
    answered_by_b += f.Answered() == 1;
  }
  EXPECT_EQ(answered_by_b, 0) << "the endpoint on another chain served a request";
  ASSERT_TRUE(f.pool->chain().has_value());
  EXPECT_EQ(*f.pool->chain(), (ChainIdentity{31337, g1}));
  EXPECT_EQ(f.endpoints[1]->posts_, 1) << "asked more than its chain";
  auto stats = f.pool->Stats();
  EXPECT_FALSE(stats[1].in);
  EXPECT_EQ(stats[1].other_chain, DescribeChain({999, g2}));
  EXPECT_NE(DescribeStats(stats[1]).find("ON ANOTHER CHAIN: serves chain 999"), std::string::npos)
      << DescribeStats(stats[1]);
  auto back = ParseStatsJson(StatsJson(stats));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)[1].other_chain, stats[1].other_chain) << "status would not name it";
  EXPECT_TRUE(stats[0].other_chain.empty());
  EXPECT_TRUE(stats[2].other_chain.empty());

  // Asked again after a while, it still serves nothing while on another chain.
  f.env.Advance(PoolOptions{}.probe_cap_micros);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(f.Call("eth_getBlockByNumber").ok());
    EXPECT_NE(f.Answered(), 1);
  }
  EXPECT_EQ(f.endpoints[1]->posts_, 2);

  // A goes away and comes back as another chain (same id, another block 0): out, named.
  a_down = true;
  for (int i = 0; i < 20 && f.pool->Stats()[0].in; ++i) ASSERT_TRUE(f.Call().ok());
  ASSERT_FALSE(f.pool->Stats()[0].in);
  a_down = false;
  a_genesis = g3;
  f.env.Advance(PoolOptions{}.probe_cap_micros);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(f.Call("eth_getBlockByNumber").ok());
    EXPECT_EQ(f.Answered(), 2) << "only the endpoint on the pool's chain may answer";
  }
  EXPECT_EQ(f.pool->Stats()[0].other_chain, DescribeChain({31337, g3}));
}

// A helper pool of the process (the leader's head tracker, the readiness probe) is held to the
// chain the serving pool settled: when its first endpoint is away at its start, the next one, on
// another chain, does not bind it (the list rule alone would) and is taken out as in the serving
// pool. Nothing is asked before that chain is known.
TEST(EndpointPoolTest, AHelperPoolTakesTheServingPoolsChainRatherThanSettlingItsOwn) {
  const std::string g1 = "0x" + std::string(64, '1'), g2 = "0x" + std::string(64, '2');
  bool a_down = true;
  std::optional<ChainIdentity> serving;
  PoolOptions options = Options(/*hedge=*/false);
  options.chain_from = [&] { return serving; };
  Fixture f({OnChain(31337, &g1, &a_down), OnChain(999, &g2)}, options, {}, /*check_chain=*/true);
  auto early = f.Call("eth_getBlockByNumber");
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), Code::kUnavailable) << early.status().ToString();
  EXPECT_EQ(f.endpoints[0]->posts_ + f.endpoints[1]->posts_, 0)
      << "asked before the chain was known";

  serving = ChainIdentity{31337, g1};
  for (int i = 0; i < 5; ++i) {
    auto r = f.Call("eth_getBlockByNumber");
    EXPECT_FALSE(r.ok() && f.Answered() == 1) << "the endpoint on another chain served a request";
  }
  ASSERT_TRUE(f.pool->chain().has_value());
  EXPECT_EQ(*f.pool->chain(), *serving) << "the helper pool settled a chain of its own";
  EXPECT_EQ(f.pool->Stats()[1].other_chain, DescribeChain({999, g2}));

  a_down = false;
  f.env.Advance(PoolOptions{}.probe_cap_micros);
  auto back = f.Call("eth_getBlockByNumber");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(f.Answered(), 0);
}

// An endpoint that refuses every batch as a whole (HTTP 200, one error object naming the batch),
// answering single calls as `inner` does.
ScriptedEndpoint::Handler NoBatches(ScriptedEndpoint::Handler inner) {
  return [inner](const std::vector<JsonRpcCall>& calls, bool batch) -> Result<HttpResponse> {
    if (batch) {
      return HttpResponse{200,
                          R"({"jsonrpc":"2.0","id":null,"error":{"code":-32600,)"
                          R"("message":"batch requests are not supported"}})",
                          std::nullopt};
    }
    return inner(calls, batch);
  };
}

// An endpoint that refuses batches is asked its chain call by call: it serves once on the pool's
// chain (it is not asked again before each request), also when it comes back after failures,
// and a pool of such endpoints starts.
TEST(EndpointPoolTest, AnEndpointThatRefusesBatchesIsAskedItsChainCallByCall) {
  const std::string g1 = "0x" + std::string(64, 'a');
  bool a_down = false;
  Fixture f({NoBatches(OnChain(31337, &g1, &a_down)), OnChain(31337, &g1)},
            Options(/*hedge=*/false), {1000.0, 0.001}, /*check_chain=*/true);
  int answered_by_0 = 0;
  for (int i = 0; i < 20; ++i) {
    auto r = f.Call("eth_getBlockByNumber");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    answered_by_0 += f.Answered() == 0;
  }
  EXPECT_GE(answered_by_0, 15) << "the endpoint that refuses batches never served";
  EXPECT_EQ(f.endpoints[0]->posts_, 3 + answered_by_0)
      << "asked its chain more than once (a batch and its two calls)";
  ASSERT_TRUE(f.pool->chain().has_value());
  EXPECT_EQ(*f.pool->chain(), (ChainIdentity{31337, g1}));

  // Out after failures and back: asked its chain again, call by call at once (its limit known).
  a_down = true;
  for (int i = 0; i < 20 && f.pool->Stats()[0].in; ++i) ASSERT_TRUE(f.Call().ok());
  ASSERT_FALSE(f.pool->Stats()[0].in);
  a_down = false;
  f.env.Advance(PoolOptions{}.probe_cap_micros);
  const int posts = f.endpoints[0]->posts_;
  answered_by_0 = 0;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(f.Call("eth_getBlockByNumber").ok());
    answered_by_0 += f.Answered() == 0;
  }
  EXPECT_GE(answered_by_0, 15) << "the endpoint that refuses batches did not serve again";
  EXPECT_EQ(f.endpoints[0]->posts_, posts + 2 + answered_by_0);
  EXPECT_TRUE(f.pool->Stats()[0].in);

  Fixture g({NoBatches(OnChain(31337, &g1)), NoBatches(OnChain(31337, &g1))},
            Options(/*hedge=*/false), {}, /*check_chain=*/true);
  auto r = g.Call("eth_getBlockByNumber");
  ASSERT_TRUE(r.ok()) << "a pool whose endpoints all refuse batches cannot start: "
                      << r.status().ToString();
  ASSERT_TRUE(g.pool->chain().has_value());
  EXPECT_EQ(*g.pool->chain(), (ChainIdentity{31337, g1}));
}

// When no endpoint answers the chain check: the error names every endpoint; the endpoints are
// asked again only as their probe intervals allow; the endpoint that settles the chain at last
// serves at once (it is back in), from the very request that settled it.
TEST(EndpointPoolTest, WhenNoEndpointAnswersItsChainAllAreNamedAndProbedOnTheirSchedule) {
  const std::string g1 = "0x" + std::string(64, 'b');
  bool a_down = true, b_down = true;
  Fixture f({OnChain(31337, &g1, &a_down), OnChain(31337, &g1, &b_down)}, Options(/*hedge=*/false),
            {}, /*check_chain=*/true);
  auto first = f.Call("eth_getBlockByNumber");
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.status().message().find(f.pool->Describe(0)), std::string::npos)
      << first.status().ToString();
  EXPECT_NE(first.status().message().find(f.pool->Describe(1)), std::string::npos)
      << first.status().ToString();
  EXPECT_EQ(first.status().code(), Code::kUnavailable);
  // Taken out after take_out_after failures; then nobody is asked until a probe is due.
  for (int i = 0; i < 5; ++i) ASSERT_FALSE(f.Call().ok());
  EXPECT_FALSE(f.pool->Stats()[0].in);
  EXPECT_FALSE(f.pool->Stats()[1].in);
  const int posts = f.endpoints[0]->posts_ + f.endpoints[1]->posts_;
  EXPECT_EQ(posts, 2 * PoolOptions{}.take_out_after) << "asked while out, before its probe";
  // A comes back before its probe is due: not asked yet; once it is due, the request that settles
  // the chain is answered by it, and it is in.
  a_down = false;
  f.env.Advance(PoolOptions{}.probe_base_micros / 2);
  auto early = f.Call();
  if (f.pool->chain().has_value()) {
    EXPECT_TRUE(early.ok()) << "the chain settled, its endpoint left out: "
                            << early.status().ToString();
  }
  EXPECT_FALSE(early.ok());
  EXPECT_EQ(f.endpoints[0]->posts_ + f.endpoints[1]->posts_, posts);
  f.env.Advance(PoolOptions{}.probe_base_micros / 2);
  auto settled = f.Call("eth_getBlockByNumber");
  ASSERT_TRUE(f.pool->chain().has_value());
  ASSERT_TRUE(settled.ok()) << "the request that settled the chain failed: "
                            << settled.status().ToString();
  EXPECT_EQ(f.Answered(), 0);
  EXPECT_TRUE(f.pool->Stats()[0].in);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(f.Call().ok());
    EXPECT_EQ(f.Answered(), 0);
  }
}

// A chain check refused with HTTP 200 and one error object (here: rate limited) is the endpoint's
// failure, never handed to the caller as the answer to its own request.
TEST(EndpointPoolTest, AChainCheckRefusedWithHttp200IsNotTheCallersAnswer) {
  auto limited = [](const std::vector<JsonRpcCall>&, bool) -> Result<HttpResponse> {
    return HttpResponse{200,
                        R"({"jsonrpc":"2.0","id":null,"error":{"code":-32005,)"
                        R"("message":"rate limit exceeded"}})",
                        std::nullopt};
  };
  Fixture f({limited}, Options(/*hedge=*/false), {}, /*check_chain=*/true);
  auto r = f.Call("eth_getBlockByNumber");
  EXPECT_FALSE(r.ok()) << "handed back as the answer: " << r->body;
}

// A block 0 hash that is not 64 hex digits (a hostile endpoint's newline for a log line) is no
// chain.
TEST(EndpointPoolTest, AChainCheckAnswerNeedsAHexGenesisHash) {
  auto answer = [](const std::string& hash) {
    return R"([{"jsonrpc":"2.0","id":1,"result":"0x7a69"},)"
           R"({"jsonrpc":"2.0","id":2,"result":{"number":"0x0","hash":")" +
           hash + R"("}}])";
  };
  auto good = ParseChainCheck(answer("0x" + std::string(64, 'A')));
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->chain_id, 31337u);
  EXPECT_EQ(good->genesis_hash, "0x" + std::string(64, 'a'));
  EXPECT_FALSE(ParseChainCheck(answer("0x" + std::string(63, 'a') + "\\n")).ok());
  EXPECT_FALSE(ParseChainCheck(answer("0x" + std::string(64, 'g'))).ok());
  EXPECT_FALSE(ParseChainCheck(answer("0x" + std::string(62, 'a') + "\\r\\n")).ok());
}

// The chain check is a request like the others for the endpoint's rate limit: admitted first
// (its calls one at a time each, where the endpoint refuses batches).
TEST(EndpointPoolTest, TheChainCheckIsAdmittedByTheEndpointsRateLimit) {
  const std::string g1 = "0x" + std::string(64, 'c');
  std::atomic<int> posted[2] = {0, 0}, admitted[2] = {0, 0};
  auto counted = [&](size_t i, ScriptedEndpoint::Handler inner) -> ScriptedEndpoint::Handler {
    return [&, i, inner](const std::vector<JsonRpcCall>& calls, bool batch) {
      posted[i] += 1;
      return inner(calls, batch);
    };
  };
  Fixture f({counted(0, NoBatches(OnChain(31337, &g1))), counted(1, OnChain(31337, &g1))},
            Options(/*hedge=*/false), {}, /*check_chain=*/true);
  f.pool->SetAdmission({[&](size_t i) {
                          admitted[i] += 1;
                          return Status::Ok();
                        },
                        nullptr});
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(f.Call().ok());
  f.transport.reset();  // a check still running on its own thread ends
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(admitted[i].load(), posted[i].load()) << "endpoint " << i << ": posts not admitted";
  }
}

TEST(EndpointPoolTest, AnswersFoundWrongAreCountedAndTheRetryGoesElsewhere) {
  Fixture f({Healthy(), Healthy()}, Options(/*hedge=*/false));
  for (int i = 0; i < 20; ++i) {
    auto answer = f.Call();
    ASSERT_TRUE(answer.ok());
    const int wrong = f.Answered();
    EXPECT_EQ(answer->served_by, uint64_t{1} << wrong) << "the answer does not say who gave it";
    f.transport->Distrust(answer->served_by);
    for (int k = 0; k < 5; ++k) {  // this client's next requests, within kAvoidDistrustedMicros
      ASSERT_TRUE(f.Call().ok());
      EXPECT_NE(f.Answered(), wrong) << "a request went to the endpoint that answered wrong";
    }
    f.env.Advance(60'000'000);  // let a taken-out endpoint's probe come due
  }
  auto stats = f.pool->Stats();
  EXPECT_EQ(stats[0].distrusted + stats[1].distrusted, 20u);
}

TEST(EndpointPoolTest, ASlowAnswerIsHedgedAndTheFasterEndpointWins) {
  std::atomic<bool> slow{false};
  auto first = [&](const std::vector<JsonRpcCall>& c, bool b) {
    std::this_thread::sleep_for(std::chrono::milliseconds(slow ? 400 : 2));
    return AnswerAll(c, b);
  };
  auto second = [&](const std::vector<JsonRpcCall>& c, bool b) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return AnswerAll(c, b);
  };
  PoolOptions options;
  options.env = Env::Default();
  options.hedge_min_micros = 20'000;
  options.hedge_budget = 1.0;
  Fixture f({first, second}, options, {1000.0, 0.001});  // e0 first whenever it is in
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(f.Call().ok());
  ASSERT_GE(f.endpoints[0]->posts_, 19);
  slow = true;
  const auto start = std::chrono::steady_clock::now();
  auto r = f.Call();
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(f.Answered(), 1) << "the hedge did not win";
  EXPECT_LT(took, std::chrono::milliseconds(300)) << "the answer waited for the slow endpoint";
  auto stats = f.pool->Stats();
  EXPECT_EQ(stats[1].hedges, 1u);
  EXPECT_EQ(stats[1].hedge_wins, 1u);
}

TEST(EndpointPoolTest, HedgesStayWithinTheirBudget) {
  auto slow = [](const std::vector<JsonRpcCall>& c, bool b) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return AnswerAll(c, b);
  };
  PoolOptions options;
  options.env = Env::Default();
  options.hedge_min_micros = 1;  // hedge nearly every request if the budget let it
  options.hedge_budget = 0.1;
  Fixture f({slow, slow}, options);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(f.Call().ok());
  auto stats = f.pool->Stats();
  const uint64_t hedges = stats[0].hedges + stats[1].hedges;
  const uint64_t requests = stats[0].requests + stats[1].requests;
  EXPECT_LE(static_cast<double>(hedges), 0.1 * static_cast<double>(requests) + options.hedge_burst);
}

// What a fleet process publishes for `gapless status` reads back the same.
TEST(EndpointPoolTest, StatsRoundTripThroughJson) {
  EndpointStats e;
  e.endpoint = "http://a:8545/\"q\"";
  e.in = false;
  e.requests = 7;
  e.hedge_wins = 2;
  e.batch_limit = 10;
  e.missing_methods = {"trace_block"};
  auto back = ParseStatsJson(StatsJson({e, EndpointStats{}}));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].endpoint, e.endpoint);
  EXPECT_FALSE((*back)[0].in);
  EXPECT_EQ((*back)[0].requests, 7u);
  EXPECT_EQ((*back)[0].hedge_wins, 2u);
  EXPECT_EQ((*back)[0].batch_limit, 10u);
  EXPECT_EQ((*back)[0].missing_methods, e.missing_methods);
}

// The client halves its batches when the node refuses one as too large, and keeps the limit.
TEST(ClientBatchLimitTest, ARefusedBatchIsSplitAndTheLimitKept) {
  int biggest = 0;
  ScriptedEndpoint node(
      "node", [&](const std::vector<JsonRpcCall>& c, bool b) -> Result<HttpResponse> {
        if (c.size() > 10) {
          return HttpResponse{200,
                              R"({"jsonrpc":"2.0","id":null,"error":{"code":-32600,)"
                              R"("message":"Batch size too large"}})",
                              std::nullopt};
        }
        biggest = std::max<int>(biggest, static_cast<int>(c.size()));
        return AnswerAll(c, b);
      });
  SimEnv env;
  JsonRpcClientOptions options;
  options.env = &env;
  JsonRpcClient client(&node, options);
  std::vector<RpcRequest> calls(40, RpcRequest{"eth_chainId", "[]"});
  auto r = client.Batch(calls);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 40u);
  for (const auto& one : *r) EXPECT_TRUE(one.ok());
  EXPECT_LE(client.max_batch_size(), 10u);
  EXPECT_LE(biggest, 10);
  const int posts = node.posts_;
  ASSERT_TRUE(client.Batch(calls).ok());
  EXPECT_EQ(node.posts_ - posts,
            static_cast<int>((40 + client.max_batch_size() - 1) / client.max_batch_size()))
      << "the learned limit was not kept";
}

}  // namespace
}  // namespace gapless
