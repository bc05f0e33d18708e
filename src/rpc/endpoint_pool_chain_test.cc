// The RPC endpoint pool's chain check (rpc/endpoint_pool.h, "Chain check") over scripted
// endpoints of given chains: the pool's chain settled by the first endpoint of the list that
// answers, an endpoint on another chain taken out and never serving, a helper pool held to the
// serving pool's chain, endpoints that refuse batches asked call by call, failures named, and the
// check admitted by each endpoint's rate limit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "rpc/endpoint_pool.h"
#include "rpc/endpoint_pool_test_util.h"
#include "rpc/json_rpc.h"
#include "testing/replay_transport.h"

namespace gapless::pool_test {
namespace {

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

}  // namespace
}  // namespace gapless::pool_test
