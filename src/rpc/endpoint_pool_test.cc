// The RPC endpoint pool (rpc/endpoint_pool.h) over scripted endpoints: parsing of the --rpc list,
// how answers are classified, routing by weight and speed, failover, taking out and probing back
// (SimEnv time), per-endpoint 429 cooling, learned batch limits and missing methods, distrusted
// answers, the counts' JSON, and the client's own batch splitting. The chain check is tested in
// endpoint_pool_chain_test.cc, hedging in endpoint_pool_hedge_test.cc.
#include "rpc/endpoint_pool.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "rpc/endpoint_pool_test_util.h"
#include "rpc/json_rpc.h"
#include "testing/replay_transport.h"

namespace gapless::pool_test {
namespace {

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
}  // namespace gapless::pool_test
