// The fleet's processes started while their servers are away (chaos seeds 170, 270): a worker
// whose coordination Redis is down and a balances consumer whose bus and database are down wait
// for them instead of exiting. Against PostgreSQL, redis-server and the anvil devnet (fixtures pg,
// redis, anvil); shared helpers in fleet_itest_util.h.
#include <gtest/gtest.h>

#include "node/fleet_itest_util.h"

namespace gapless::fleet_testing {
namespace {

// A worker (re)started while the coordination Redis is down (restarting, failing over) waits
// for it, as a running worker does, instead of exiting (chaos seed 170: a worker restarted
// during a Redis restart exited twice at its first ROLE).
TEST_F(FleetTest, AWorkerStartedWhileTheCoordinationRedisIsDownWaitsForIt) {
  Queue queue(redis_.conn(), keys());
  ASSERT_TRUE(queue.Push({TaskRange{0, 9}}).ok());
  auto parsed = ParseRedisUrl(redis_.url());
  ASSERT_TRUE(parsed.ok());
  // The worker's link to Redis leads nowhere at first (nothing listens on port 1).
  TcpProxy link("127.0.0.1", 1);
  const std::string url = fmt::format("redis://127.0.0.1:{}/{}", link.port(), parsed->db);
  WorkerOptions options = FastWorker("w");
  options.done = QueueDrained();
  Worker worker(options, RpcBlockSources(ClientsFor(kAnvilUrl)), url, keys(), pool_.get());
  std::atomic<bool> stop{false};
  Status result;
  std::thread run([&] { result = worker.Run(stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1'000));
  link.SetTarget("127.0.0.1", parsed->hosts[0].port);  // Redis is back
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (worker.counters().tasks.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop.store(true);
  run.join();
  EXPECT_TRUE(result.ok()) << "the worker gave up: " << result.ToString();
  EXPECT_EQ(worker.counters().tasks.load(), 1u);
  ExpectComplete(pool_.get(), 0, 9);
}

// `gapless consume balances` (re)started while its bus and its database are away (a broker
// restart, a failover) waits for them, as the fleet does, instead of exiting (chaos seed 270: a
// balances consumer killed while RabbitMQ restarted exited six times as the harness restarted
// it). Here the bus (Redis Streams) and PostgreSQL are reached through links that lead nowhere
// until healed one after the other; the consumer must then make its group on the streams.
TEST_F(FleetTest, ABalancesConsumerStartedWhileItsBusAndDatabaseAreDownWaitsForThem) {
  auto redis = ParseRedisUrl(redis_.url());
  ASSERT_TRUE(redis.ok());
  const int pg_port = PgPort(db_.url());
  TcpProxy bus_link("127.0.0.1", 1);  // nothing listens on port 1
  TcpProxy pg_link("127.0.0.1", 1);
  ConsumeBalancesCommand command;
  command.bus = fmt::format("redis://127.0.0.1:{}/{}", bus_link.port(), redis->db);
  command.redis = command.bus;
  command.db = PgUrlVia(db_.url(), pg_link.port());
  command.chain_id = 424242;
  command.group = "waits";
  const int ops_port = FreePort();
  command.metrics_addr = "127.0.0.1:" + std::to_string(ops_port);
  httplib::Client ops("127.0.0.1", ops_port);
  ops.set_connection_timeout(1);
  ops.set_read_timeout(5);
  // The line /readyz gives the events bus, once it has been probed.
  auto bus_readiness = [&] {
    std::string line;
    testing_util::WaitFor(
        [&] {
          auto res = ops.Get("/readyz");
          const size_t at = res ? res->body.find("events bus: ") : std::string::npos;
          if (at == std::string::npos) return false;
          line = res->body.substr(at, res->body.find('\n', at) - at);
          return line.find("not probed") == std::string::npos;
        },
        10'000);
    return line;
  };
  std::atomic<bool> returned{false};
  Result<Outcome> result = Outcome::kDone;
  std::thread run([&] {
    result = RunConsumeBalances(command);
    returned.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1'500));
  EXPECT_FALSE(returned.load()) << "it gave up while the bus was away: "
                                << (result.ok() ? "ok" : result.status().ToString());
  EXPECT_NE(bus_readiness().find("events bus: FAILED"), std::string::npos)
      << "/readyz names the bus while it is away";
  bus_link.SetTarget("127.0.0.1", redis->hosts[0].port);
  std::this_thread::sleep_for(std::chrono::milliseconds(1'500));
  EXPECT_FALSE(returned.load()) << "it gave up while PostgreSQL was away: "
                                << (result.ok() ? "ok" : result.status().ToString());
  pg_link.SetTarget("127.0.0.1", pg_port);
  const std::string stream = EventTopic(kTokenTransfer, command.chain_id);
  bool grouped = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!grouped && !returned.load() && std::chrono::steady_clock::now() < deadline) {
    auto groups = redis_.conn()->Command({"XINFO", "GROUPS", stream});
    grouped = groups.ok() && !groups->elements.empty();
    if (!grouped) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(grouped) << "the consumer never made its group on " << stream;
  EXPECT_TRUE(testing_util::WaitFor(
      [&] { return bus_readiness().find("events bus: ok: answering; group waits") == 0; }, 20'000))
      << "/readyz: " << bus_readiness();
  if (!returned.load()) std::raise(SIGTERM);  // its SignalStop ends it
  run.join();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(*result, Outcome::kStopped);
  auto cleanup =
      redis_.conn()->Command({"DEL", stream, EventTopic(kBlockReverted, command.chain_id)});
  EXPECT_TRUE(cleanup.ok());
}

}  // namespace
}  // namespace gapless::fleet_testing
