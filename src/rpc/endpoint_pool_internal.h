// What the parts of the RPC endpoint pool (rpc/endpoint_pool.h) share, internal to rpc/: an
// endpoint's state as the pool keeps it (EndpointPool::Endpoint, guarded by the pool's mutex), one
// request of a PoolTransport in flight (PoolTransport::Flight), the pool's metrics, and Trim.
//
// The pool's implementation, by part:
//  - endpoint_pool.cc: the pool's routing and health state (Route, Record, taking out and probing
//    back, cooling after a 429, the learned batch limits and missing methods, the hedge delay and
//    budget), the --rpc list (ParseEndpointList) and the metrics.
//  - endpoint_pool_answers.cc: what an endpoint's answer means for the pool (ClassifyAnswer,
//    MethodsOf, MethodsAnsweredMissing).
//  - endpoint_pool_chain.cc: the chain check, in the pool (settling, comparing, taking out) and
//    in the transport (asking an endpoint, settling the pool's chain).
//  - endpoint_pool_stats.cc: an endpoint's counts as a line and as JSON, and back.
//  - endpoint_pool_transport.cc: PoolTransport: one request routed, failed over and hedged.
#pragma once

#include <cctype>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "core/metrics.h"
#include "rpc/endpoint_pool.h"

namespace gapless {

namespace pool_internal {

// Without leading and trailing white space.
inline std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The gapless_rpc_endpoint_* metrics (endpoint_pool.cc).
struct PoolMetrics {
  Family<Counter>& requests;
  Family<Counter>& failures;
  Family<Counter>& hedges;
  Family<Counter>& hedge_wins;
  Family<Counter>& calls;
  Family<Gauge>& up;
  Family<Gauge>& latency;
};
PoolMetrics& Metrics();

}  // namespace pool_internal

struct EndpointPool::Endpoint {
  // Whether it serves the pool's chain (the chain check): not known (never asked, or taken out
  // since), yes, or another chain (out until asked again).
  enum class Chain { kUnchecked, kSame, kOther };
  EndpointSpec spec;
  std::string name;  // redacted
  Chain chain = Chain::kUnchecked;
  std::optional<ChainIdentity> offered;  // answered before the pool's chain was settled
  bool in = true;
  bool probing = false;
  int consecutive_failures = 0;
  int64_t out_until = 0;
  int64_t probe_interval = 0;
  int64_t cooling_until = 0;
  double latency_ewma_us = 0;
  std::deque<int64_t> recent;  // latencies of the last good answers, for p95
  size_t batch_limit = 0;
  // Methods answered -32601 here, each with the time from which it may be asked here again (a
  // provider adds methods; a misreading must heal). Kept, and listed, until it is served.
  std::map<std::string, int64_t> missing;
  EndpointStats stats;
  // Whether method m is to be avoided here now.
  bool Lacks(const std::string& m, int64_t now) const {
    auto it = missing.find(m);
    return it != missing.end() && now < it->second;
  }
};

// One request to one endpoint, possibly on a thread of its own. `done` and `result` are guarded
// by the signal's mutex, shared by the flights of one Post.
struct PoolTransport::FlightSignal {
  std::mutex mu;
  std::condition_variable cv;
};

struct PoolTransport::Flight {
  std::shared_ptr<FlightSignal> signal;
  size_t endpoint = 0;
  bool done = false;
  Result<HttpResponse> result = Unavailable("not sent");
  EndpointOutcome outcome = EndpointOutcome::kTransport;
  std::optional<ChainIdentity> chain;  // a chain check's answer
  std::thread thread;
};

}  // namespace gapless
