// fleet_itest_util: what the fleet's integration tests share (fleet_itest.cc and its families:
// fleet_startup_itest.cc, fleet_redis_loss_itest.cc, fleet_prefetch_itest.cc,
// fleet_reorg_itest.cc): the devnet's manifest and RPC clients, a migrated test database, fast
// worker and leader options, RunFleet (a leader and workers as threads until the leader is done),
// the FleetTest fixture, and a scripted head-log lease. Header-only, test code; each test uses its
// own database and Redis key prefix, so the executables may run side by side.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <thread>

#include "coord/election.h"
#include "coord/elector.h"
#include "coord/frontier.h"
#include "coord/lock_nodes.h"
#include "coord/queue.h"
#include "events/event.h"
#include "node/commands.h"
#include "node/head_tracker.h"
#include "node/indexer.h"
#include "node/leader.h"
#include "node/range_job.h"
#include "node/reconcile.h"
#include "node/worker.h"
#include "rpc/curl_transport.h"
#include "store/migrate.h"
#include "store/queries.h"
#include "store/rollback.h"
#include "store/state.h"
#include "store/testdata.h"
#include "testing/devnet_manifest.h"
#include "testing/free_port.h"
#include "testing/http_test_server.h"
#include "testing/pg_test_db.h"
#include "testing/redis_failover.h"
#include "testing/redis_server.h"
#include "testing/redis_test_db.h"
#include "testing/tcp_proxy.h"
#include "testing/wait_for.h"

namespace gapless::fleet_testing {

inline const std::string kAnvilUrl = GAPLESS_TEST_ANVIL_URL;
inline const std::string kManifest = GAPLESS_TEST_DEVNET_MANIFEST;

// The devnet's manifest; a test that cannot read it cannot compare anything, so it stops there.
inline const DevnetManifest& LoadDevnet() {
  static const DevnetManifest* devnet = [] {
    auto m = LoadDevnetManifest(kManifest);
    if (!m.ok()) {
      std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
      std::abort();
    }
    return *m;
  }();
  return *devnet;
}

inline RpcClientFactory ClientsFor(const std::string& url) {
  return [url] {
    CurlTransportOptions transport;
    transport.request_timeout_ms = 2'000;
    JsonRpcClientOptions options;
    options.max_attempts = 2;
    options.backoff_base_micros = 1'000;
    return std::make_unique<JsonRpcClient>(std::make_unique<CurlTransport>(url, transport),
                                           options);
  };
}

inline std::unique_ptr<PgPool> OpenPool(const PgTestDb& db, size_t size) {
  auto pool = PgPool::Open(db.url(), size);
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  if (!pool.ok()) return nullptr;
  auto conn = (*pool)->Acquire();
  Status st = Migrate(*conn);
  EXPECT_TRUE(st.ok()) << st.ToString();
  st = EnsureChainId(*conn, LoadDevnet().chain_id);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return std::move(pool).value();
}

// Every block of [from, to] stored once, chained, consistent.
inline void ExpectComplete(PgPool* pool, uint64_t from, uint64_t to) {
  auto conn = pool->Acquire();
  auto report = Verify(*conn, from, to);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok()) << report->Render();
  EXPECT_EQ(report->blocks_found, to - from + 1);
  auto n = conn->Query(
      "SELECT count(*), count(DISTINCT number) FROM blocks WHERE number BETWEEN "
      "$1 AND $2",
      {std::to_string(from), std::to_string(to)});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->Get(0, 0), std::to_string(to - from + 1));
  EXPECT_EQ(n->Get(0, 1), std::to_string(to - from + 1));
}

// The port of a PostgreSQL URL "postgresql://user@127.0.0.1:PORT/db...", and the URL with
// another port (a TcpProxy's in front of the server).
inline int PgPort(const std::string& url) {
  const std::string host = "@127.0.0.1:";
  const size_t at = url.find(host);
  EXPECT_NE(at, std::string::npos) << url;
  return std::stoi(url.substr(at + host.size()));
}
inline std::string PgUrlVia(const std::string& url, int port) {
  const std::string host = "@127.0.0.1:";
  const size_t at = url.find(host) + host.size();
  return url.substr(0, at) + std::to_string(port) + url.substr(url.find('/', at));
}

inline WorkerOptions FastWorker(const std::string& id) {
  WorkerOptions w;
  w.worker_id = id;
  w.lease_ttl_ms = 5'000;
  w.rpc_timeout_ms = 2'000;
  w.idle_poll_ms = 20;
  w.retry_base_micros = 1'000;
  w.retry_cap_micros = 20'000;
  w.heartbeat_interval_ms = 200;
  w.blocks_per_request = 10;
  w.chain_id = LoadDevnet().chain_id;
  return w;
}

// A prefetching worker (node/worker.h "Prefetch") with leases of 1 s.
inline WorkerOptions PrefetchingWorker(const std::string& id) {
  WorkerOptions w = FastWorker(id);
  w.lease_ttl_ms = 1'000;
  w.rpc_timeout_ms = 500;
  w.prefetch = true;
  return w;
}

// The test database reached through a link that adds 30 ms to every chunk it forwards: a write
// then takes longer than a 1 s lease.
struct SlowPostgres {
  std::unique_ptr<TcpProxy> link;
  std::unique_ptr<PgPool> pool;  // null when it did not open (the failure is reported)
};
inline SlowPostgres SlowPostgresFor(const std::string& db_url) {
  SlowPostgres out;
  out.link = std::make_unique<TcpProxy>("127.0.0.1", PgPort(db_url));
  auto pool = PgPool::Open(PgUrlVia(db_url, out.link->port()), 3);
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  if (pool.ok()) out.pool = std::move(pool).value();
  out.link->SetLatency(30);
  return out;
}

inline LeaderOptions FixedLeader(uint64_t from, uint64_t to, uint64_t range_size) {
  LeaderOptions l;
  l.from = from;
  l.to = to;
  l.range_size = range_size;
  l.tick_ms = 50;
  l.max_outstanding_tasks = 4;  // small, so seeding really is incremental
  l.holder_id = "test-leader";
  return l;
}

// Runs a leader and `workers` workers until the leader is done (or `deadline_s` passes), calling
// `during` from the test thread while they run.
struct FleetRun {
  Status leader_status;
  std::vector<Status> worker_status;
  uint64_t blocks = 0, tasks = 0;
  bool finished = false;
};

inline FleetRun RunFleet(
    const std::string& redis_url, const Keys& keys, PgPool* pool, LeaderOptions leader_options,
    int workers, const std::string& rpc_url,
    const std::function<void(const std::vector<std::unique_ptr<Worker>>&)>& during = nullptr,
    int deadline_s = 120, std::function<void(WorkerOptions&)> tweak = nullptr,
    LeaderLease* lease = nullptr) {
  FleetRun out;
  std::atomic<bool> stop{false};
  std::atomic<bool> leader_done{false};
  LocalLease local;  // by default the duties alone, always leading
  Leader leader(leader_options, redis_url, keys, pool, lease != nullptr ? lease : &local);
  std::vector<std::unique_ptr<Worker>> fleet;
  for (int i = 0; i < workers; ++i) {
    WorkerOptions w = FastWorker("w" + std::to_string(i));
    w.done = [&leader_done] { return leader_done.load(); };
    if (tweak) tweak(w);
    fleet.push_back(
        std::make_unique<Worker>(w, RpcBlockSources(ClientsFor(rpc_url)), redis_url, keys, pool));
  }
  out.worker_status.resize(fleet.size());
  std::thread leader_thread([&] {
    out.leader_status = leader.Run(stop);
    leader_done.store(true);
  });
  std::vector<std::thread> threads;
  for (size_t i = 0; i < fleet.size(); ++i) {
    threads.emplace_back([&, i] { out.worker_status[i] = fleet[i]->Run(stop); });
  }
  if (during) during(fleet);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(deadline_s);
  while (!leader_done.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  out.finished = leader.done();
  stop.store(true);
  leader_thread.join();
  for (auto& t : threads) t.join();
  for (auto& w : fleet) {
    out.blocks += w->counters().blocks.load();
    out.tasks += w->counters().tasks.load();
  }
  return out;
}

class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (db_.skipped()) GTEST_SKIP() << "GAPLESS_TEST_PG_URL not set";
    ASSERT_FALSE(db_.failed()) << db_.error().ToString();
    if (redis_.skipped()) GTEST_SKIP() << "GAPLESS_TEST_REDIS_URL not set";
    ASSERT_FALSE(redis_.failed()) << redis_.error().ToString();
    pool_ = OpenPool(db_, 6);
    ASSERT_NE(pool_, nullptr);
  }
  const Keys& keys() { return redis_.keys(); }

  // A worker's `done` for a run without a leader: nothing pending or in processing (read on a
  // connection of its own; never done when it cannot connect).
  std::function<bool()> QueueDrained() {
    auto conn = redis_.Connect();
    EXPECT_TRUE(conn.ok()) << conn.status().ToString();
    if (!conn.ok()) return [] { return false; };
    std::shared_ptr<RedisConn> shared(std::move(*conn));
    return [shared, keys = keys()] {
      Queue queue(shared.get(), keys);
      auto d = queue.Depths();
      return d.ok() && d->pending == 0 && d->processing == 0;
    };
  }

  PgTestDb db_;
  RedisTestDb redis_;
  std::unique_ptr<PgPool> pool_;
};

// A head-log lease the test scripts: always leading with the epoch it is given, a fixed
// committed height, and the truncation it is told about.
class ScriptedLease : public LeaderLease {
 public:
  std::optional<uint64_t> Token() const override { return epoch; }
  bool has_head_log() const override { return true; }
  std::optional<uint64_t> CommittedHeight() const override { return height; }
  std::optional<HeadFork> ForksSince(uint64_t after) const override {
    if (fork.has_value() && fork->generation > after) return fork;
    return std::nullopt;
  }
  uint64_t epoch = 1;
  uint64_t height = 0;
  std::optional<HeadFork> fork;
};

// Blocks 0..29 committed and recorded as completed; a leader of [0, 39] under `lease` has stepped
// once: frontier 30 in Redis, in PostgreSQL and in its memory.
inline void CommitThirtyAndStep(PgPool* pool, RedisConn* redis, const Keys& keys, Leader& leader,
                                uint64_t epoch) {
  SyntheticOptions small{.transactions_per_block = 1, .seed = 3};
  for (uint64_t from : {0, 10, 20}) {
    RangeWrite w = SyntheticRange(from, from + 9, small);
    w.fence_token = 5;
    auto conn = pool->Acquire();
    ASSERT_TRUE(WriteRange(*conn, w).ok());
  }
  Frontier frontier(redis, keys.completed(), keys.frontier(), 0, keys.leader_epoch());
  ASSERT_TRUE(frontier.Record(0, 29).ok());
  Status st = leader.Step(epoch);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(leader.frontier(), 30u);
  ASSERT_EQ(frontier.Get().value(), 30u);
}

}  // namespace gapless::fleet_testing
