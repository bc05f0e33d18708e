// The RPC endpoint pool (rpc/endpoint_pool.h) against real servers: `gapless run` over a pool of
// endpoints in front of the test devnet (anvil), each but two with one fault of a real provider:
// one down, one that turns slow, one answering 429 with Retry-After, one serving other forks'
// blocks at every third height (a lagging or forked backend behind a load balancer), one refusing
// batches above 10 calls. The run must finish with rows equal to a clean run, never committing
// another fork's block, and the per-endpoint counts (its log, `gapless status`) must show what
// each endpoint did. Its duration against the two healthy endpoints alone is printed; the rate
// target is bench/pool_bench's (bench/RESULTS.md), not a timed test's.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <regex>
#include <string>

#include "devnet_util.h"
#include "fake_node.h"
#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "testing/http_test_server.h"
#include "testing/pg_test_db.h"

namespace gapless::e2e {
namespace {

// An endpoint in front of the test devnet with one fault.
class PoolEndpoint {
 public:
  enum class Fault { kNone, kSlow, kRateLimited, kOtherFork, kSmallBatches };

  // real_hashes: for kOtherFork, the heights whose blocks it serves from "another fork", with
  // their real hashes.
  explicit PoolEndpoint(Fault fault, std::map<uint64_t, std::string> real_hashes = {})
      : fault_(fault),
        real_hashes_(std::move(real_hashes)),
        server_([this](const HttpTestServer::Request& r) { return Answer(r); }),
        devnet_(GAPLESS_TEST_ANVIL_URL) {}

  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()) + "/"; }
  int requests() const { return requests_; }
  int faults() const { return faults_; }
  // The hash this endpoint serves at a forked height instead of the real one.
  static std::string ForkHash(uint64_t height) {
    std::string hex = HexQuantity(height).substr(2);
    return "0x" + std::string(64 - hex.size(), 'f') + hex;
  }

 private:
  HttpTestServer::Response Answer(const HttpTestServer::Request& r) {
    ++requests_;
    size_t calls = 0;
    for (size_t at = r.body.find("\"method\""); at != std::string::npos;
         at = r.body.find("\"method\"", at + 1)) {
      ++calls;
    }
    if (fault_ == Fault::kRateLimited && requests_ % 3 == 1) {
      ++faults_;
      auto res = HttpTestServer::Response::Json(R"({"error":"too many requests"})", 429);
      res.headers.push_back({"Retry-After", "1"});
      return res;
    }
    if (fault_ == Fault::kSmallBatches && calls > 10) {
      ++faults_;
      return HttpTestServer::Response::Json(
          R"x({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch size too large (max 10)"}})x");
    }
    HttpTestServer::Response res = Forward(r.body);
    // A provider that turns slow: fast for its first answers, then 400 ms each.
    if (fault_ == Fault::kSlow && requests_ > 3) {
      ++faults_;
      res.delay_ms = 400;
    }
    // Other forks' blocks: the same block with another hash everywhere it appears (its receipts
    // and logs included), only in the workers' full-block fetches.
    if (fault_ == Fault::kOtherFork && r.body.find("true]") != std::string::npos) {
      for (const auto& [height, hash] : real_hashes_) {
        const std::string fork = ForkHash(height);
        for (size_t at = res.body.find(hash); at != std::string::npos;
             at = res.body.find(hash, at + fork.size())) {
          res.body.replace(at, hash.size(), fork);
          ++faults_;
        }
      }
    }
    return res;
  }

  HttpTestServer::Response Forward(const std::string& body) {
    std::lock_guard<std::mutex> lock(mu_);
    auto answer = devnet_.Post(body);
    if (!answer.ok()) return HttpTestServer::Response::Json("devnet down", 502);
    return HttpTestServer::Response::Json(answer->body, static_cast<int>(answer->status));
  }

  const Fault fault_;
  const std::map<uint64_t, std::string> real_hashes_;
  std::atomic<int> requests_{0};
  std::atomic<int> faults_{0};
  HttpTestServer server_;
  std::mutex mu_;
  CurlTransport devnet_;
};

class RpcPoolTest : public DbRedisTest {
 protected:
  Devnet devnet_ = OpenDevnet(GAPLESS_TEST_ANVIL_URL, GAPLESS_TEST_DEVNET_MANIFEST);

  // `gapless run` of the whole devnet over `rpc` into a fresh database; its seconds, or -1.
  double TimedRun(const std::string& rpc, PgTestDb& db, const std::string& log,
                  std::vector<std::string> extra = {}) {
    FleetFlags flags;
    flags.range_size = "6";
    flags.workers = "2";
    // A loaded machine must not turn the faulty endpoints' answers into timeouts, which would
    // hide what they answer (the TTL stays above the timeout).
    flags.rpc_timeout_ms = "5000";
    flags.lease_ttl_ms = "15000";
    flags.log_level = "info";
    flags.extra = std::move(extra);
    flags.extra.insert(flags.extra.end(), {"--batch", "6"});  // 12 calls: above 10
    std::vector<std::string> args =
        FleetCommand("run", devnet_, db.url(), redis_url_, devnet_.last_block(), flags);
    args[std::find(args.begin(), args.end(), "--rpc") - args.begin() + 1] = rpc;
    std::remove(log.c_str());
    ClearChainKeys(redis_url_, devnet_.chain_id());
    const auto start = std::chrono::steady_clock::now();
    pid_t pid = Spawn(args, log);
    if (pid <= 0) return -1;
    int code = WaitForExit(pid, 300);
    EXPECT_EQ(code, 0) << ReadIfThere(log);
    if (code != 0) return -1;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

TEST_F(RpcPoolTest, AFaultyPoolIndexesLikeItsHealthyEndpointsAlone) {
  // Every third height is served from another fork by one endpoint.
  JsonRpcClient rpc(std::make_unique<CurlTransport>(GAPLESS_TEST_ANVIL_URL));
  std::map<uint64_t, std::string> forked_heights;
  for (uint64_t h = 3; h <= devnet_.last_block(); h += 3) {
    auto block = rpc.Call("eth_getBlockByNumber", "[\"" + HexQuantity(h) + "\",false]");
    ASSERT_TRUE(block.ok()) << block.status().ToString();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(*block, m, std::regex(R"re("hash":"(0x[0-9a-f]{64})")re")));
    forked_heights[h] = m[1];
  }

  PoolEndpoint healthy_a(PoolEndpoint::Fault::kNone), healthy_b(PoolEndpoint::Fault::kNone);
  PoolEndpoint slow(PoolEndpoint::Fault::kSlow);
  PoolEndpoint limited(PoolEndpoint::Fault::kRateLimited);
  PoolEndpoint forked(PoolEndpoint::Fault::kOtherFork, forked_heights);
  PoolEndpoint small(PoolEndpoint::Fault::kSmallBatches);
  const std::string down = "http://127.0.0.1:1/";

  // The baseline: the healthy endpoints alone.
  PgTestDb baseline_db;
  ASSERT_FALSE(baseline_db.failed());
  const double baseline_s =
      TimedRun(healthy_a.url() + "," + healthy_b.url(), baseline_db,
               std::string(GAPLESS_BINARY_DIR) + "/rpc_pool_itest-baseline.log");
  ASSERT_GT(baseline_s, 0);

  const std::string log = std::string(GAPLESS_BINARY_DIR) + "/rpc_pool_itest-pool.log";
  const std::string pool = down + ", " + healthy_a.url() + ", " + slow.url() + ", " +
                           limited.url() + ", " + forked.url() + ", " + small.url() + ", " +
                           healthy_b.url();
  const double pool_s = TimedRun(pool, db_, log);
  ASSERT_GT(pool_s, 0);
  std::printf("rpc pool: %.2f s over the faulty pool, %.2f s over the healthy endpoints alone\n",
              pool_s, baseline_s);

  // Whole and right: rows equal a clean run, the other fork's block never committed.
  ExpectEqualsACleanRun(devnet_, pool_.get(), devnet_.last_block());
  auto conn = pool_->Acquire();
  for (const auto& [height, hash] : forked_heights) {
    auto stored = conn->Query("SELECT '0x' || encode(hash, 'hex') FROM blocks WHERE number = $1",
                              {std::to_string(height)});
    ASSERT_TRUE(stored.ok());
    EXPECT_EQ(std::string(stored->Get(0, 0)), hash)
        << "another fork's block committed at " << height;
  }
  // The faulty endpoints were met (else the test proves nothing about them). Whether the forked
  // one's answer is used or loses a hedge depends on the draws: its blocks never being committed
  // (above) is what must hold; endpoint_pool_test proves the distrust itself.
  std::printf("rpc pool: %d forked hashes served\n", forked.faults());
  EXPECT_GT(small.faults(), 0) << "no batch above 10 calls reached the endpoint that refuses them";
  EXPECT_GT(limited.faults(), 0);
  EXPECT_GT(slow.faults(), 0) << "the slow endpoint was never slow";
  const std::string out = ReadIfThere(log);
  EXPECT_NE(out.find("taken out"), std::string::npos) << "the endpoint that is down stayed in";
  EXPECT_NE(out.find("larger batches than"), std::string::npos) << out;
  // The per-endpoint counts at the end of the run: the other fork's answers found wrong, the
  // 429s, the hedges that won over the slow endpoint.
  // "<N> <what>" on the line of the endpoint with this URL.
  auto count = [&](const std::string& url, const std::string& what) {
    size_t at = out.find("rpc endpoint " + url);
    if (at == std::string::npos) return -1;
    std::string line = out.substr(at, out.find('\n', at) - at);
    std::smatch c;
    return std::regex_search(line, c, std::regex("(\\d+) " + what)) ? std::stoi(c[1]) : -1;
  };
  std::printf("rpc pool: %d answers distrusted\n", count(forked.url(), "distrusted"));
  // A wrong block is blamed on the endpoint that served it (issue 35 item 1), never on one that
  // answered the part's other batches or its enrichment calls.
  for (const auto* e : {&healthy_a, &healthy_b}) {
    EXPECT_EQ(count(e->url(), "distrusted"), 0) << e->url() << " blamed for another's block\n"
                                                << out;
  }
  EXPECT_GT(count(limited.url(), "rate-limited"), 0) << out;
  EXPECT_GT(count(healthy_a.url(), "calls served"), 0) << out;
  // `gapless status` shows the pool per endpoint (published by the run, kept 15 s past it).
  auto [status_code, status] =
      RunForOutput({GaplessBinary(), "status", "--db", db_.url(), "--redis", redis_url_});
  EXPECT_EQ(status_code, 0) << status;
  EXPECT_NE(status.find("rpc endpoints (7)"), std::string::npos) << status;
  for (const auto* e : {&healthy_a, &limited, &forked}) {
    EXPECT_NE(status.find(e->url()), std::string::npos) << status;
  }
  EXPECT_NE(status.find("http://127.0.0.1:1/"), std::string::npos) << status;
  EXPECT_NE(status.find("WARNING: taken out in 1 of 1 processes"), std::string::npos) << status;
  int hedges_won = 0;
  for (const auto* e : {&healthy_a, &healthy_b, &limited, &forked, &small}) {
    hedges_won += std::max(0, count(e->url(), "won"));
  }
  // Whether a hedge meets the slow endpoint in a run this short depends on the draws (once its
  // latency is known it is rarely asked): endpoint_pool_test proves hedging, the bench measures it.
  std::printf("rpc pool: %d hedges won\n", hedges_won);

  // The rate against the healthy endpoints alone is a speed target: measured by bench/pool_bench
  // (bench/RESULTS.md), not asserted by a timed test; printed above for the record.
}

}  // namespace
}  // namespace gapless::e2e
