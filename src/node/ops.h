// ops: the ops endpoint of a long-running command (node/ops_server.h) and the readiness checks
// its /readyz reports (node/readiness.h), wired once here for index, run, leader, worker and
// consume. Each check opens connections of its own with short timeouts, so probing never takes a
// connection a worker needs and a slow server makes one check fail, not the process hang.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "coord/keys.h"
#include "events/bus.h"
#include "node/app.h"
#include "node/ops_server.h"
#include "node/readiness.h"
#include "node/status.h"

namespace gapless {

class Elector;

// /status.json of a fleet process: the fleet's status (node/status.h) gathered on connections of
// its own, opened at the first request, at most once a second (the page polls every 2 s; several
// viewers share one gathering). Before Set: 503, "starting".
class StatusSource {
 public:
  void Set(StatusCommand command);
  Result<std::string> Json();

 private:
  std::mutex mu_;
  std::optional<StatusCommand> command_;
  std::unique_ptr<FleetState> fleet_;
  std::string cached_;
  std::chrono::steady_clock::time_point cached_at_{};
};

struct Ops {
  std::unique_ptr<ReadinessProber> readiness;  // null when there is no endpoint
  std::shared_ptr<StatusSource> status;        // null when there is no endpoint
  std::unique_ptr<OpsServer> server;
  // Serves /status.json (and the page at /) from now on (a no-op without an endpoint).
  void SetStatus(StatusCommand command);
  // Adds a check when there is an endpoint (a no-op otherwise).
  void Add(std::string name, ReadinessProber::Probe probe,
           std::chrono::milliseconds every = std::chrono::milliseconds(0));
  void SetStarting(std::string what);
  void SetStarted();
};

// Starts the endpoint at metrics_addr ("HOST:PORT"; empty: none, and every method of Ops does
// nothing). with_status: /status.json and the page are served (503 until SetStatus). Logs where it
// listens.
Result<Ops> StartOps(const std::string& metrics_addr, bool with_status = false);

// The checks. Each describes the state in a few words ("answering", "chain 1", "3 of 3 lock nodes
// answer") and fails with what is wrong; none shows a URL's credentials.
ReadinessProber::Probe PostgresProbe(std::string url);
// coordination: also export the server's replicas and their lag (gapless_redis_replicas,
// gapless_redis_replica_lag_bytes) from its INFO replication, at every probe.
ReadinessProber::Probe RedisProbe(std::string url, bool coordination = false);
// The RPC node's chain id; over a pool, also naming each endpoint taken out as on another chain
// (rpc/endpoint_pool.h, the chain check), which does not make the process unready while another
// endpoint serves the chain. `serving`: the process's own pool (nullable), whose settled chain the
// probe's endpoints are held to, so the probe names the same endpoints as taken out.
ReadinessProber::Probe RpcProbe(RpcOptions rpc, std::shared_ptr<EndpointPool> serving = nullptr);
// At least a quorum of the lock nodes (the coordination Redis alone when none are given) answer.
ReadinessProber::Probe LockQuorumProbe(LeaderElectionOptions election, std::string coordination_url,
                                       Keys keys);
// A leader candidate: it leads (elector, not owned, must outlive the probe and the prober), or a
// holder is on a quorum of the lock nodes (it follows a known leader).
ReadinessProber::Probe LeaderProbe(const Elector* elector, LeaderElectionOptions election,
                                   std::string coordination_url, Keys keys);

// An events bus a consumer group reads: it answers the group's lag (events/open_bus.h GroupLag,
// read without joining the group; a group not created yet is an answer too).
ReadinessProber::Probe BusProbe(std::string url, SubscribeOptions group);

// How often an events bus is probed: each probe is a client of its own (on Kafka a consumer handle
// and its broker connections).
inline constexpr std::chrono::milliseconds kBusProbeInterval{5'000};

// How often the RPC node is probed: paid providers bill requests.
inline constexpr std::chrono::milliseconds kRpcProbeInterval{5'000};

}  // namespace gapless
