// The ops endpoint over real HTTP (cpp-httplib's client): /healthz, /readyz following the
// prober's checks, /metrics in the text format, and clear errors for a bad --metrics-addr.
#include "node/ops_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/metrics.h"
#include "node/readiness.h"
#include "testing/wait_for.h"

namespace gapless {
namespace {

using testing_util::WaitFor;

TEST(OpsServer, ServesHealthReadinessAndMetrics) {
  ReadinessProber prober(std::chrono::milliseconds(50));
  std::atomic<bool> db_up{true};
  prober.Add("postgresql", [&]() -> Result<std::string> {
    if (db_up.load()) return std::string("127.0.0.1:5432");
    return Unavailable("connection refused");
  });
  prober.SetStarting("opening the coordination Redis");
  prober.Start();
  auto server = OpsServer::Start({"127.0.0.1:0", &prober, nullptr});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client client("127.0.0.1", (*server)->port());

  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");

  // Not started: not ready, and the body says what it waits for.
  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_NE(ready->body.find("opening the coordination Redis"), std::string::npos) << ready->body;

  prober.SetStarted();
  ASSERT_TRUE(WaitFor([&] { return client.Get("/readyz")->status == 200; }, 5'000));
  EXPECT_NE(client.Get("/readyz")->body.find("postgresql: ok: 127.0.0.1:5432"), std::string::npos);

  // The database goes away: unready within a few intervals, naming it.
  db_up = false;
  ASSERT_TRUE(WaitFor([&] { return client.Get("/readyz")->status == 503; }, 5'000));
  EXPECT_NE(client.Get("/readyz")->body.find("postgresql: FAILED: connection refused"),
            std::string::npos)
      << client.Get("/readyz")->body;

  MetricsRegistry::Default()
      .CounterFamily("gapless_ops_test_total", "A counter of the test")
      .Get()
      .Inc(3);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(metrics->body.find("# TYPE gapless_ops_test_total counter\ngapless_ops_test_total 3\n"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("gapless_process_resident_memory_bytes "), std::string::npos);

  // No status in this process.
  EXPECT_EQ(client.Get("/status.json")->status, 404);
}

TEST(OpsServer, AProbeThatHangsMakesTheProcessUnready) {
  ReadinessProber prober(std::chrono::milliseconds(50));
  std::atomic<bool> hang{false};
  prober.Add("rpc node", [&]() -> Result<std::string> {
    while (hang.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return std::string("chain 1");
  });
  prober.SetStarted();
  prober.Start();
  ASSERT_TRUE(WaitFor([&] { return prober.Read().ready; }, 5'000));
  hang = true;
  ASSERT_TRUE(WaitFor([&] { return !prober.Read().ready; }, 10'000));
  EXPECT_NE(prober.Read().text.find("rpc node: FAILED: no result for"), std::string::npos)
      << prober.Read().text;
  hang = false;  // else the destructor leaves the thread behind after 3 s, holding `hang`
}

TEST(OpsServer, ABadOrBusyAddressIsAClearError) {
  auto bad = OpsServer::Start({"9464", nullptr, nullptr});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(bad.status().message().find("--metrics-addr 9464"), std::string::npos);
  EXPECT_FALSE(OpsServer::Start({"127.0.0.1:99999", nullptr, nullptr}).ok());
  auto first = OpsServer::Start({"127.0.0.1:0", nullptr, nullptr});
  ASSERT_TRUE(first.ok());
  auto second =
      OpsServer::Start({"127.0.0.1:" + std::to_string((*first)->port()), nullptr, nullptr});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("cannot listen"), std::string::npos);
}

// A slow /status.json (a server behind the status that does not answer) never holds the threads
// that /readyz and /metrics need: one request gathers, the others get the last body at once.
TEST(OpsServer, ASlowStatusLeavesReadinessAndMetricsAnswering) {
  std::atomic<int> gatherings{0};
  std::atomic<bool> slow{false};
  auto server = OpsServer::Start({"127.0.0.1:0", nullptr, [&]() -> Result<std::string> {
                                    ++gatherings;
                                    while (slow.load()) {
                                      std::this_thread::sleep_for(std::chrono::milliseconds(10));
                                    }
                                    return std::string("{\"frontier\":7}");
                                  }});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client client("127.0.0.1", (*server)->port());
  client.set_read_timeout(10);
  ASSERT_EQ(client.Get("/status.json")->body, "{\"frontier\":7}");
  slow = true;
  std::vector<std::thread> viewers;
  std::atomic<int> answered{0};
  for (int i = 0; i < 4; ++i) {
    viewers.emplace_back([&] {
      httplib::Client c("127.0.0.1", (*server)->port());
      c.set_read_timeout(10);
      auto res = c.Get("/status.json");
      if (res && res->body == "{\"frontier\":7}") ++answered;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  auto ready = client.Get("/readyz");
  auto metrics = client.Get("/metrics");
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  slow = false;
  for (auto& t : viewers) t.join();
  ASSERT_TRUE(ready && metrics);
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_LT(took, 2.0) << "/readyz and /metrics waited behind /status.json";
  EXPECT_EQ(answered.load(), 4) << "every viewer got a body";
  EXPECT_EQ(gatherings.load(), 2) << "one gathering at a time (plus the first)";
}

}  // namespace
}  // namespace gapless
