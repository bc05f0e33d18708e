// pool_bench: the RPC endpoint pool (rpc/endpoint_pool.h) with one of three endpoints slowed to
// 10x the others' latency, hedging on and off, against the two healthy endpoints alone (the
// baseline, measured in the same run): ranges/s, tx/s and p50/p99 range latency.
//
// The blocks and receipts of a real node (--source, e.g. the test devnet) are copied into memory
// once and served by three in-process HTTP servers that answer every request after a fixed
// latency (--latency-ms; the slow one --slow times that). --threads threads, each with a client of
// its own over one shared pool (as a process's workers are), fetch ranges of --range blocks
// (blocks and receipts in one batch, as a worker does) round-robin over the chain for --seconds.
//
//   pool_bench --source http://127.0.0.1:58545 [--range 10] [--threads 4] [--seconds 20]
//              [--latency-ms 20] [--slow 10]
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "rpc/curl_transport.h"
#include "rpc/endpoint_pool.h"
#include "rpc/json_rpc.h"
#include "testing/http_test_server.h"
#include "testing/replay_transport.h"

namespace gapless {
namespace {

using bench::Check;
using bench::Die;

struct Chain {
  std::vector<std::string> blocks, receipts;  // raw JSON results, by number
  std::vector<size_t> txs;                    // transactions per block
};

Chain CopyChain(const std::string& source) {
  JsonRpcClient rpc(std::make_unique<CurlTransport>(source));
  auto head = rpc.BlockNumber();
  Check(head.status(), "the source's head");
  Chain c;
  simdjson::dom::parser parser;
  for (uint64_t n = 0; n <= *head; ++n) {
    auto b = rpc.Call("eth_getBlockByNumber", "[\"" + HexQuantity(n) + "\",true]");
    auto r = rpc.Call("eth_getBlockReceipts", "[\"" + HexQuantity(n) + "\"]");
    Check(b.status(), "copying a block");
    Check(r.status(), "copying receipts");
    simdjson::dom::element doc;
    simdjson::dom::array txs;
    if (parser.parse(*b).get(doc) != simdjson::SUCCESS ||
        doc["transactions"].get_array().get(txs) != simdjson::SUCCESS) {
      Die("block " + std::to_string(n) + " has no transactions array");
    }
    c.blocks.push_back(*b);
    c.receipts.push_back(*r);
    c.txs.push_back(txs.size());
  }
  return c;
}

// An endpoint answering from the copied chain after `latency_ms`.
class Endpoint {
 public:
  Endpoint(const Chain& chain, int latency_ms)
      : chain_(chain),
        latency_ms_(latency_ms),
        server_([this](const HttpTestServer::Request& r) { return Answer(r); }) {}
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()) + "/"; }

 private:
  HttpTestServer::Response Answer(const HttpTestServer::Request& r) const {
    bool batch = false;
    auto calls = ParseJsonRpcRequests(r.body, &batch);
    if (!calls.ok()) return HttpTestServer::Response::Json("bad request", 400);
    std::string body;
    for (const JsonRpcCall& call : *calls) {
      size_t q = call.params_json.find("\"0x");
      uint64_t n =
          q == std::string::npos ? 0 : std::strtoull(call.params_json.c_str() + q + 3, nullptr, 16);
      std::string result = "null";
      if (n < chain_.blocks.size()) {
        result = call.method == "eth_getBlockReceipts" ? chain_.receipts[n] : chain_.blocks[n];
      }
      if (!body.empty()) body += ",";
      body += "{\"jsonrpc\":\"2.0\",\"id\":" + call.id_json + ",\"result\":" + result + "}";
    }
    auto res = HttpTestServer::Response::Json(batch ? "[" + body + "]" : body);
    res.delay_ms = latency_ms_;
    return res;
  }

  const Chain& chain_;
  const int latency_ms_;
  HttpTestServer server_;
};

struct ModeResult {
  double seconds = 0;
  uint64_t ranges = 0, txs = 0;
  double p50_ms = 0, p99_ms = 0;
  uint64_t hedges = 0, hedge_wins = 0;
};

ModeResult Measure(const Chain& chain, const std::vector<const Endpoint*>& endpoints, bool hedge,
                   int threads, uint64_t range, double seconds) {
  std::vector<EndpointSpec> specs;
  for (const Endpoint* e : endpoints) specs.push_back({e->url(), 1.0, 0});
  PoolOptions options;
  options.hedge = hedge;
  // The endpoints serve blocks and receipts only (no eth_chainId); the chain check is one request
  // per endpoint at the start, outside what is measured.
  options.check_chain = false;
  auto pool = std::make_shared<EndpointPool>(specs, options);
  std::atomic<uint64_t> next{0}, ranges{0}, txs{0};
  std::mutex mu;
  std::vector<double> latencies;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      std::vector<std::unique_ptr<HttpTransport>> transports;
      for (const Endpoint* e : endpoints) {
        transports.push_back(std::make_unique<CurlTransport>(e->url()));
      }
      JsonRpcClient client(std::make_unique<PoolTransport>(pool, std::move(transports)));
      std::vector<double> mine;
      while (std::chrono::steady_clock::now() < deadline) {
        const uint64_t first = (next++ * range) % (chain.blocks.size() - range + 1);
        const auto t0 = std::chrono::steady_clock::now();
        auto blocks = client.FetchBlocks(first, range);
        Check(blocks.status(), "fetching a range");
        mine.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
        uint64_t n = 0;
        for (uint64_t b = first; b < first + range; ++b) n += chain.txs[b];
        txs += n;
        ++ranges;
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  for (auto& w : workers) w.join();
  ModeResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.ranges = ranges;
  r.txs = txs;
  std::sort(latencies.begin(), latencies.end());
  if (!latencies.empty()) {
    r.p50_ms = latencies[latencies.size() / 2];
    r.p99_ms = latencies[std::min(latencies.size() - 1, latencies.size() * 99 / 100)];
  }
  for (const auto& s : pool->Stats()) {
    r.hedges += s.hedges;
    r.hedge_wins += s.hedge_wins;
  }
  return r;
}

}  // namespace
}  // namespace gapless

int main(int argc, char** argv) {
  using namespace gapless;
  bench::ProgramName() = "pool_bench";
  std::string source;
  uint64_t range = 10;
  int threads = 4, latency_ms = 20, slow = 10;
  double seconds = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--source")
      source = value;
    else if (flag == "--range")
      range = std::stoull(value);
    else if (flag == "--threads")
      threads = std::stoi(value);
    else if (flag == "--seconds")
      seconds = std::stod(value);
    else if (flag == "--latency-ms")
      latency_ms = std::stoi(value);
    else if (flag == "--slow")
      slow = std::stoi(value);
    else
      Die("unknown flag " + flag);
  }
  if (source.empty()) Die("--source URL is required (a node to copy the chain from)");
  spdlog::set_level(spdlog::level::err);
  const Chain chain = CopyChain(source);
  if (chain.blocks.size() <= range) Die("the source's chain is shorter than --range");
  uint64_t total_txs = 0;
  for (size_t t : chain.txs) total_txs += t;
  std::printf(
      "pool_bench: %zu blocks (%llu transactions) copied; range %llu, %d threads, "
      "latency %d ms, slow endpoint x%d, %.0f s per mode\n",
      chain.blocks.size(), static_cast<unsigned long long>(total_txs),
      static_cast<unsigned long long>(range), threads, latency_ms, slow, seconds);
  Endpoint a(chain, latency_ms), b(chain, latency_ms), s(chain, latency_ms * slow);
  struct Mode {
    const char* name;
    std::vector<const Endpoint*> endpoints;
    bool hedge;
  };
  const std::vector<Mode> modes = {{"two healthy endpoints (baseline)", {&a, &b}, true},
                                   {"+ one slow, hedging off", {&a, &b, &s}, false},
                                   {"+ one slow, hedging on", {&a, &b, &s}, true}};
  double baseline = 0;
  std::printf("%-34s %10s %10s %9s %9s %8s %9s\n", "mode", "ranges/s", "tx/s", "p50 ms", "p99 ms",
              "vs base", "hedges");
  for (const Mode& m : modes) {
    ModeResult r = Measure(chain, m.endpoints, m.hedge, threads, range, seconds);
    const double tx_s = static_cast<double>(r.txs) / r.seconds;
    if (baseline == 0) baseline = tx_s;
    std::printf("%-34s %10.1f %10.0f %9.1f %9.1f %7.2fx %4llu/%-4llu\n", m.name,
                static_cast<double>(r.ranges) / r.seconds, tx_s, r.p50_ms, r.p99_ms,
                tx_s / baseline, static_cast<unsigned long long>(r.hedge_wins),
                static_cast<unsigned long long>(r.hedges));
  }
  return 0;
}
