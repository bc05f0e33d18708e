// The ops endpoint of real fleet processes (--metrics-addr): /metrics scraped during a devnet run
// equals the database at the end (blocks, transactions, logs, token transfers), its histograms
// are well-formed and no label or value carries a configured secret; /readyz turns unready within
// the leader's TTL when two of three lock nodes die, and ready again when one returns.
//
// Servers: the test PostgreSQL, Redis and anvil devnet (through the test's own node that carries
// secrets in its URL), and private redis-servers as lock nodes.
#include <gtest/gtest.h>
#include <httplib.h>
#include <simdjson.h>

#include <algorithm>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "coord/redis.h"
#include "devnet_util.h"
#include "fake_node.h"
#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "testing/free_port.h"
#include "testing/redis_server.h"
#include "testing/tcp_proxy.h"
#include "testing/wait_for.h"

namespace gapless::e2e {
namespace {

using testing_util::WaitFor;

// One scrape: series ("name{labels}") -> value; TYPE lines name -> type.
struct Scrape {
  std::map<std::string, double> series;
  std::map<std::string, std::string> types;
  std::string text;
  double Value(const std::string& s) const {
    auto it = series.find(s);
    return it == series.end() ? -1 : it->second;
  }
};

Scrape ParseMetrics(const std::string& text) {
  Scrape out;
  out.text = text;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      out.types[name] = type;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.rfind(' ');
    std::string value = line.substr(space + 1);
    out.series[line.substr(0, space)] = value == "+Inf" ? 1e308 : std::stod(value);
  }
  return out;
}

// Every histogram's buckets are cumulative, end with le="+Inf", and that bucket equals _count.
void ExpectWellFormedHistograms(const Scrape& s) {
  int histograms = 0;
  for (const auto& [name, type] : s.types) {
    if (type != "histogram") continue;
    // Group the buckets by their other labels, in the order rendered.
    std::map<std::string, std::vector<std::pair<std::string, double>>> groups;
    std::istringstream in(s.text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(name + "_bucket{", 0) != 0) continue;
      // name_bucket{a="x",le="0.1"} 5: the labels other than le, and le.
      const size_t open = line.find('{'), close = line.rfind('}');
      std::istringstream labels(line.substr(open + 1, close - open - 1));
      std::string label, others, le;
      while (std::getline(labels, label, ',')) {  // no label value here holds a comma
        if (label.rfind("le=", 0) == 0) {
          le = label.substr(4, label.size() - 5);
        } else {
          others += (others.empty() ? "" : ",") + label;
        }
      }
      groups[others.empty() ? "" : "{" + others + "}"].push_back(
          {le, std::stod(line.substr(line.rfind(' ') + 1))});
    }
    for (const auto& [labels, buckets] : groups) {
      ++histograms;
      ASSERT_FALSE(buckets.empty()) << name;
      EXPECT_EQ(buckets.back().first, "+Inf") << name << labels;
      for (size_t i = 1; i < buckets.size(); ++i) {
        EXPECT_LE(buckets[i - 1].second, buckets[i].second) << name << labels << " not cumulative";
      }
      EXPECT_EQ(s.Value(name + "_count" + labels), buckets.back().second) << name << labels;
      EXPECT_GE(s.Value(name + "_sum" + labels), 0) << name << labels;
    }
  }
  EXPECT_GE(histograms, 3) << "rpc, redis and write latency at least";
}

int64_t Count(PgPool* pool, const std::string& table) {
  auto conn = pool->Acquire();
  auto r = conn->Query("SELECT count(*) FROM " + table);
  return r.ok() ? r->GetInt64(0, 0).value() : -1;
}

class OpsTest : public DbRedisTest {
 protected:
  Devnet devnet_ = OpenDevnet(GAPLESS_TEST_ANVIL_URL, GAPLESS_TEST_DEVNET_MANIFEST);
};

TEST_F(OpsTest, MetricsScrapedDuringARunEqualTheDatabaseAndCarryNoSecret) {
  FakeNode node;
  node.Set(FakeNode::Mode::kProxy);
  const int port = FreePort();  // testing/free_port.h
  const std::string log = std::string(GAPLESS_BINARY_DIR) + "/ops_itest-run.log";
  std::remove(log.c_str());
  FleetFlags flags;
  flags.workers = "2";
  flags.range_size = "7";
  flags.log_level = "info";
  flags.extra = {"--follow", "--metrics-addr", "127.0.0.1:" + std::to_string(port)};
  Devnet via_node = devnet_;
  via_node.url = node.SecretUrl();
  // Following the head (--to latest --follow): the process keeps running once it has caught up,
  // so it can be scraped at the end. The devnet's head does not move during the test (it holds
  // the anvil_chain lock that the tests mining blocks take).
  std::vector<std::string> args =
      FleetCommand("run", via_node, WithDbSecrets(db_.url()), redis_url_, 0, flags);
  args[std::find(args.begin(), args.end(), "--to") - args.begin() + 1] = "latest";
  JsonRpcClient rpc(std::make_unique<CurlTransport>(devnet_.url));
  auto head_block = rpc.BlockNumber();
  ASSERT_TRUE(head_block.ok()) << head_block.status().ToString();
  const int64_t head = static_cast<int64_t>(*head_block);
  pid_t pid = Spawn(args, log);
  ASSERT_GT(pid, 0);
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(1);
  client.set_read_timeout(2);

  // Until the run has indexed the whole chain and the counters have caught up with it.
  Scrape last;
  bool caught_up = WaitFor(
      [&] {
        auto res = client.Get("/metrics");
        if (!res || res->status != 200) return false;
        last = ParseMetrics(res->body);
        return last.Value("gapless_blocks_indexed_total") == head + 1 &&
               Count(pool_.get(), "blocks") == head + 1;
      },
      120'000);
  ASSERT_TRUE(caught_up) << last.text << "\n" << ReadIfThere(log);
  // The counters equal what the database holds (each range committed once in a healthy run).
  EXPECT_EQ(last.Value("gapless_transactions_indexed_total"), Count(pool_.get(), "transactions"));
  EXPECT_EQ(last.Value("gapless_logs_indexed_total"), Count(pool_.get(), "logs"));
  EXPECT_EQ(last.Value("gapless_token_transfers_indexed_total"),
            Count(pool_.get(), "token_transfers"));
  EXPECT_EQ(last.Value("gapless_ranges_committed_total"), Count(pool_.get(), "indexed_ranges"));
  EXPECT_GT(last.Value("gapless_transactions_indexed_total"), 0);
  // The leader's view: it leads, the frontier is past the head, no lag.
  EXPECT_EQ(last.Value("gapless_leader"), 1);
  EXPECT_GE(last.Value("gapless_leader_epoch"), 1);
  EXPECT_TRUE(WaitFor(
      [&] {
        auto res = client.Get("/metrics");
        if (!res) return false;
        last = ParseMetrics(res->body);
        return last.Value("gapless_frontier_next_block") == head + 1 &&
               last.Value("gapless_lag_blocks") == 0;
      },
      30'000))
      << last.text;
  EXPECT_GT(last.Value("gapless_rpc_requests_total"), 0);
  EXPECT_GT(last.Value("gapless_redis_round_trips_total"), 0);
  EXPECT_GT(last.Value("gapless_lease_renewals_total"), 0);
  EXPECT_GT(last.Value("gapless_process_resident_memory_bytes"), 1e6);
  EXPECT_EQ(last.types["gapless_rpc_requests_total"], "counter");
  EXPECT_EQ(last.types["gapless_range_write_seconds"], "histogram");
  ExpectWellFormedHistograms(last);
  EXPECT_EQ(FindSecret(last.text), "") << last.text;
  // docs/operations.md lists every metric this run exported, and every metric the Grafana
  // dashboard uses (without the _bucket/_sum/_count of a histogram's series).
  const std::string docs = ReadIfThere(std::string(GAPLESS_SOURCE_DIR) + "/docs/operations.md");
  const std::string dashboard =
      ReadIfThere(std::string(GAPLESS_SOURCE_DIR) + "/docs/grafana-dashboard.json");
  ASSERT_FALSE(docs.empty() || dashboard.empty());
  auto documented = [&](const std::string& name) {
    return docs.find("`" + name + "`") != std::string::npos ||
           docs.find("`" + name + "{") != std::string::npos;
  };
  for (const auto& [name, type] : last.types) {
    EXPECT_TRUE(documented(name)) << name << " is not in docs/operations.md";
  }
  std::regex metric(R"(gapless_[a-z_]+)");
  for (auto it = std::sregex_iterator(dashboard.begin(), dashboard.end(), metric);
       it != std::sregex_iterator(); ++it) {
    std::string name = it->str();
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string sfx = suffix;
      if (name.size() > sfx.size() &&
          name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
        name = name.substr(0, name.size() - sfx.size());
      }
    }
    EXPECT_TRUE(documented(name)) << name << " (dashboard) is not in docs/operations.md";
  }

  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200) << ready->body;
  EXPECT_NE(ready->body.find("leader: ok: this process leads"), std::string::npos) << ready->body;
  EXPECT_NE(ready->body.find("rpc node: ok: chain 31337"), std::string::npos) << ready->body;
  EXPECT_EQ(FindSecret(ready->body), "") << ready->body;
  EXPECT_EQ(client.Get("/healthz")->status, 200);

  // /status.json and `gapless status --json` agree on the end state, and name no secret.
  auto status_json = client.Get("/status.json");
  ASSERT_TRUE(status_json);
  EXPECT_EQ(status_json->status, 200) << status_json->body;
  const std::string frontier = "\"frontier\":" + std::to_string(head + 1) + ",";
  EXPECT_NE(status_json->body.find(frontier), std::string::npos) << status_json->body;
  EXPECT_NE(status_json->body.find("\"lag\":0,"), std::string::npos) << status_json->body;
  EXPECT_EQ(FindSecret(status_json->body), "") << status_json->body;
  auto [code, json] =
      RunForOutput({GaplessBinary(), "status", "--json", "--db", WithDbSecrets(db_.url()),
                    "--redis", redis_url_, "--rpc", node.SecretUrl(), "--log-level", "warn"});
  EXPECT_EQ(code, 0) << json;
  EXPECT_EQ(json.front(), '{') << json;
  EXPECT_NE(json.find(frontier), std::string::npos) << json;
  EXPECT_EQ(FindSecret(json), "") << json;

  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status)) << ReadIfThere(log);
  EXPECT_EQ(FindSecret(ReadIfThere(log)), "") << ReadIfThere(log);
}

TEST_F(OpsTest, ReadyzTurnsUnreadyWhenTwoOfThreeLockNodesDieAndReadyWhenOneReturns) {
  std::vector<std::unique_ptr<RedisServer>> nodes;
  std::string lock_nodes;
  for (int i = 0; i < 3; ++i) {
    auto n = RedisServer::Start();
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    lock_nodes += (i > 0 ? "," : "") + (*n)->url();
    nodes.push_back(std::move(n).value());
  }
  const int port = FreePort();  // testing/free_port.h
  const std::string log = std::string(GAPLESS_BINARY_DIR) + "/ops_itest-readyz.log";
  std::remove(log.c_str());
  FleetFlags flags;
  flags.log_level = "info";
  flags.extra = {"--follow",     "--metrics-addr", "127.0.0.1:" + std::to_string(port),
                 "--lock-nodes", lock_nodes,       "--log-format",
                 "json"};
  std::vector<std::string> args = FleetCommand("run", devnet_, db_.url(), redis_url_, 0, flags);
  args[std::find(args.begin(), args.end(), "--to") - args.begin() + 1] = "latest";
  pid_t pid = Spawn(args, log);
  ASSERT_GT(pid, 0);
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(1);
  client.set_read_timeout(2);
  auto readyz = [&] {
    auto res = client.Get("/readyz");
    return res ? std::make_pair(res->status, res->body) : std::make_pair(-1, std::string());
  };
  ASSERT_TRUE(WaitFor([&] { return readyz().first == 200; }, 60'000))
      << readyz().second << ReadIfThere(log);

  nodes[0]->Kill();
  nodes[1]->Kill();
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return readyz().first == 503; }, 20'000)) << readyz().second;
  const double unready_after_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  // The leader's TTL is 3 s (the default): unready within it, give or take a probe interval.
  EXPECT_LE(unready_after_s, 3.0 + 1.5) << readyz().second;
  EXPECT_NE(readyz().second.find("lock quorum: FAILED: 1 of 3 lock nodes answer"),
            std::string::npos)
      << readyz().second;

  ASSERT_TRUE(nodes[0]->Restart().ok());
  ASSERT_TRUE(WaitFor([&] { return readyz().first == 200; }, 30'000))
      << readyz().second << ReadIfThere(log);
  EXPECT_NE(readyz().second.find("lock quorum: ok: 2 of 3 lock nodes answer"), std::string::npos)
      << readyz().second;

  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  // --log-format json: every line of the log is one JSON object with a level and a message.
  std::istringstream lines(ReadIfThere(log));
  simdjson::dom::parser parser;
  int parsed = 0;
  for (std::string line; std::getline(lines, line);) {
    simdjson::dom::element e;
    ASSERT_EQ(parser.parse(line).get(e), simdjson::SUCCESS) << line;
    std::string_view level, message;
    EXPECT_EQ(e["level"].get_string().get(level), simdjson::SUCCESS) << line;
    EXPECT_EQ(e["message"].get_string().get(message), simdjson::SUCCESS) << line;
    ++parsed;
  }
  EXPECT_GE(parsed, 3) << ReadIfThere(log);
}

// A fleet process (re)started while PostgreSQL is away (restarting, failing over) waits for it, as
// it waits for the coordination Redis, instead of exiting (chaos seed 1 at 397abc5: a Kafka
// worker restarted while PostgreSQL was slow to come back exited five times). Its link to
// PostgreSQL leads nowhere for the first seconds; then the run must index every block.
TEST_F(OpsTest, AFleetProcessStartedWhilePostgresIsAwayWaitsForIt) {
  const std::string pg_url = db_.url();
  const std::regex host_port("@127\\.0\\.0\\.1:([0-9]+)/");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(pg_url, m, host_port)) << pg_url;
  const int pg_port = std::stoi(m[1]);
  TcpProxy link("127.0.0.1", 1);  // nothing listens on port 1: connection refused
  const std::string via_link =
      std::regex_replace(pg_url, host_port, "@127.0.0.1:" + std::to_string(link.port()) + "/");
  const std::string log = std::string(GAPLESS_BINARY_DIR) + "/ops_itest-pg-away.log";
  std::remove(log.c_str());
  FleetFlags flags;
  flags.log_level = "info";
  const uint64_t to = 20;
  pid_t pid = Spawn(FleetCommand("run", devnet_, via_link, redis_url_, to, flags), log);
  ASSERT_GT(pid, 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_EQ(waitpid(pid, nullptr, WNOHANG), 0) << "the process exited while PostgreSQL was away:\n"
                                               << ReadIfThere(log);
  link.SetTarget("127.0.0.1", pg_port);
  EXPECT_EQ(WaitForExit(pid, 120), 0) << ReadIfThere(log);
  auto conn = pool_->Acquire();
  auto blocks = conn->Query("SELECT count(*) FROM blocks WHERE number <= $1", {std::to_string(to)});
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ(blocks->Get(0, 0), std::to_string(to + 1));
  EXPECT_NE(ReadIfThere(log).find("cannot be opened yet"), std::string::npos) << ReadIfThere(log);
}

// The coordination Redis's replica as metrics: its count, and its lag growing while it is paused
// and a megabyte is written to the primary, back near 0 once it resumes (the fleet writes all the
// time, and a replica acknowledges once a second: a few KiB behind is caught up).
TEST_F(OpsTest, TheCoordinationRedisReplicaAndItsLagAreExported) {
  constexpr double kCaughtUp = 64 * 1024;
  auto primary = RedisServer::Start();
  ASSERT_TRUE(primary.ok()) << primary.status().ToString();
  auto replica = RedisServer::Start();
  ASSERT_TRUE(replica.ok()) << replica.status().ToString();
  RedisOptions any;
  any.require_primary = false;
  auto admin = RedisConn::Connect((*primary)->url());
  auto replica_admin = RedisConn::Connect((*replica)->url(), any);
  ASSERT_TRUE(admin.ok() && replica_admin.ok());
  ASSERT_TRUE((*replica_admin)
                  ->Command({"REPLICAOF", "127.0.0.1", std::to_string((*primary)->port())})
                  .ok());
  const int port = FreePort();  // testing/free_port.h
  const std::string log = std::string(GAPLESS_BINARY_DIR) + "/ops_itest-replica.log";
  std::remove(log.c_str());
  FleetFlags flags;
  flags.log_level = "info";
  flags.extra = {"--follow", "--metrics-addr", "127.0.0.1:" + std::to_string(port)};
  std::vector<std::string> args =
      FleetCommand("run", devnet_, db_.url(), (*primary)->url(), 0, flags);
  args[std::find(args.begin(), args.end(), "--to") - args.begin() + 1] = "latest";
  pid_t pid = Spawn(args, log);
  ASSERT_GT(pid, 0);
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(1);
  client.set_read_timeout(2);
  Scrape last;
  auto scraped = [&](const std::function<bool(const Scrape&)>& pred) {
    auto res = client.Get("/metrics");
    if (!res || res->status != 200) return false;
    last = ParseMetrics(res->body);
    return pred(last);
  };
  EXPECT_TRUE(WaitFor(
      [&] {
        return scraped([](const Scrape& s) {
          return s.Value("gapless_redis_replicas") == 1 &&
                 s.Value("gapless_redis_replica_lag_bytes") < kCaughtUp;
        });
      },
      60'000))
      << last.text << ReadIfThere(log);
  (*replica)->Pause();
  ASSERT_TRUE((*admin)->Command({"SET", "ballast", std::string(1 << 20, 'x')}).ok());
  EXPECT_TRUE(WaitFor(
      [&] {
        return scraped([](const Scrape& s) {
          return s.Value("gapless_redis_replica_lag_bytes") >= (1 << 20);
        });
      },
      20'000))
      << last.text;
  (*replica)->Resume();
  EXPECT_TRUE(WaitFor(
      [&] {
        return scraped(
            [](const Scrape& s) { return s.Value("gapless_redis_replica_lag_bytes") < kCaughtUp; });
      },
      30'000))
      << last.text;
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
}

// Headless chromium (Debian's) on a page: its DOM after the page's scripts ran (--dump-dom), or a
// screenshot. The virtual time budget lets the page's first fetch of /status.json and its render
// happen before the dump.
std::string Chromium(const std::string& url, const std::string& mode) {
  // Its stderr (D-Bus complaints of a machine without a session bus) is of no interest.
  auto [code, out] = RunForOutput(
      {"/bin/sh", "-c",
       "exec /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
       "--hide-scrollbars --window-size=1280,900 --virtual-time-budget=4000 " +
           mode + " " + url + " 2>/dev/null"});
  return code == 0 ? out : "";
}

// The data-value attribute of the element with this id, or -1.
int64_t DomValue(const std::string& dom, const std::string& id) {
  size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return -1;
  size_t end = dom.find('>', at);
  size_t v = dom.find("data-value=\"", at);
  if (v == std::string::npos || v > end) return -1;
  return std::stoll(dom.substr(v + 12, dom.find('"', v + 12) - v - 12));
}

TEST_F(OpsTest, TheStatusPageShowsTheFrontierAdvancing) {
  ASSERT_EQ(access("/usr/bin/chromium", X_OK), 0)
      << "Debian's chromium is needed (scripts/setup.sh installs it)";
  const int port = FreePort();
  const std::string log = std::string(GAPLESS_BINARY_DIR) + "/ops_itest-page.log";
  std::remove(log.c_str());
  // Following the head: the frontier stands still once the run has caught up, and moves when the
  // test mines blocks (the test holds the anvil_chain lock: nothing else mines meanwhile).
  FleetFlags flags;
  flags.range_size = "2";
  flags.extra = {"--follow", "--metrics-addr", "127.0.0.1:" + std::to_string(port)};
  std::vector<std::string> args = FleetCommand("run", devnet_, db_.url(), redis_url_, 0, flags);
  args[std::find(args.begin(), args.end(), "--to") - args.begin() + 1] = "latest";
  JsonRpcClient rpc(std::make_unique<CurlTransport>(devnet_.url));
  auto head = rpc.BlockNumber();
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  pid_t pid = Spawn(args, log);
  ASSERT_GT(pid, 0);
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(1);
  client.set_read_timeout(5);
  auto json_frontier = [&]() -> int64_t {
    auto res = client.Get("/status.json");
    if (!res || res->status != 200) return -1;
    size_t at = res->body.find("\"frontier\":");
    if (at == std::string::npos || res->body.compare(at + 11, 4, "null") == 0) return -1;
    return std::stoll(res->body.substr(at + 11));
  };
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";

  // A look at the page once the run has caught up with block `through`: the page's frontier
  // equals /status.json's, which stands still meanwhile.
  auto look = [&](uint64_t through, int n) -> int64_t {
    const int64_t expected = static_cast<int64_t>(through) + 1;
    EXPECT_TRUE(WaitFor([&] { return json_frontier() == expected; }, 60'000)) << ReadIfThere(log);
    std::string dom = Chromium(url, "--dump-dom");
    EXPECT_EQ(json_frontier(), expected);
    EXPECT_NE(dom.find("id=\"leader\""), std::string::npos) << dom;
    EXPECT_EQ(FindSecret(dom), "");
    const std::string png =
        std::string(GAPLESS_BINARY_DIR) + "/ops_itest-page-" + std::to_string(n) + ".png";
    std::remove(png.c_str());
    Chromium(url, "--screenshot=" + png);
    EXPECT_GT(ReadIfThere(png).size(), 10'000u) << "no screenshot at " << png;
    const int64_t shown = DomValue(dom, "frontier");
    EXPECT_EQ(shown, expected) << dom;
    return shown;
  };
  const int64_t first = look(*head, 1);
  ASSERT_TRUE(rpc.Call("anvil_mine", "[\"0x5\"]").ok());
  const int64_t second = look(*head + 5, 2);
  EXPECT_GT(second, first) << "the page shows the frontier advancing";

  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
}

}  // namespace
}  // namespace gapless::e2e
