// Hedging in the RPC endpoint pool (rpc/endpoint_pool.h, "Hedging"; PoolTransport::SendHedged),
// with real threads and time: a slow answer is hedged and the faster endpoint wins, and hedges
// stay within their budget.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "rpc/endpoint_pool.h"
#include "rpc/endpoint_pool_test_util.h"
#include "testing/replay_transport.h"

namespace gapless::pool_test {
namespace {

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

}  // namespace
}  // namespace gapless::pool_test
