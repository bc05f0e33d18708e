#include "node/ops.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <vector>

#include "coord/election.h"
#include "coord/elector.h"
#include "coord/lock_nodes.h"
#include "coord/redis.h"
#include "core/metrics.h"
#include "events/open_bus.h"
#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "store/pg.h"

namespace gapless {

void Ops::Add(std::string name, ReadinessProber::Probe probe, std::chrono::milliseconds every) {
  if (readiness != nullptr) readiness->Add(std::move(name), std::move(probe), every);
}

void Ops::SetStarting(std::string what) {
  if (readiness != nullptr) readiness->SetStarting(std::move(what));
}

void Ops::SetStarted() {
  if (readiness != nullptr) readiness->SetStarted();
}

void StatusSource::Set(StatusCommand command) {
  std::lock_guard<std::mutex> lock(mu_);
  command_ = std::move(command);
}

Result<std::string> StatusSource::Json() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!command_.has_value()) return Unavailable("starting: the fleet's state is not open yet");
  const auto now = std::chrono::steady_clock::now();
  if (!cached_.empty() && now - cached_at_ < std::chrono::seconds(1)) return cached_;
  if (fleet_ == nullptr) {
    GAPLESS_ASSIGN_OR_RETURN(FleetState opened, OpenFleetState(command_->fleet));
    fleet_ = std::make_unique<FleetState>(std::move(opened));
  }
  Result<StatusReport> report = GatherStatus(*fleet_, *command_);
  if (!report.ok()) {
    fleet_.reset();  // reopen next time (a connection may be what failed)
    return report.status();
  }
  cached_ = StatusJson(*report);
  cached_at_ = now;
  return cached_;
}

void Ops::SetStatus(StatusCommand command) {
  if (status != nullptr) status->Set(std::move(command));
}

Result<Ops> StartOps(const std::string& metrics_addr, bool with_status) {
  Ops ops;
  if (metrics_addr.empty()) return ops;
  ops.readiness = std::make_unique<ReadinessProber>();
  ops.readiness->Start();
  std::function<Result<std::string>()> status_json;
  if (with_status) {
    ops.status = std::make_shared<StatusSource>();
    status_json = [source = ops.status] { return source->Json(); };
  }
  GAPLESS_ASSIGN_OR_RETURN(
      ops.server, OpsServer::Start({metrics_addr, ops.readiness.get(), std::move(status_json)}));
  spdlog::info("serving /metrics, /healthz, /readyz{} at {}",
               with_status ? " and the status page" : "", ops.server->url());
  return ops;
}

ReadinessProber::Probe PostgresProbe(std::string url) {
  auto conn = std::make_shared<std::unique_ptr<PgConn>>();
  return [url = std::move(url), conn]() -> Result<std::string> {
    if (*conn == nullptr) {
      PgConnectOptions options;
      options.connect_timeout_seconds = 2;
      options.application_name = "gapless readiness";
      GAPLESS_ASSIGN_OR_RETURN(*conn, PgConn::Connect(url, options));
    }
    Result<PgResult> r = (*conn)->Query("SELECT 1");
    if (!r.ok()) {
      conn->reset();  // reconnect next time
      return r.status();
    }
    return std::string("answering");
  };
}

namespace {

// The coordination Redis's replicas, from the primary's INFO replication: how many are connected,
// and how far the one furthest behind is, in bytes of the replication stream (master_repl_offset
// minus its acknowledged offset). A failover to a replica loses what it has not received:
// the lag is what a failover would lose now. Nothing is set when INFO is refused (managed services
// that hide it).
void ExportReplicaLag(RedisConn& conn) {
  auto r = conn.Command({"INFO", "replication"});
  if (!r.ok()) return;
  // One pass: the primary's offset and each replica's (slave0:ip=..,port=..,offset=1234,lag=0).
  int64_t primary_offset = -1;
  std::vector<int64_t> replica_offsets;
  std::istringstream lines(r->str);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("master_repl_offset:")) {
      primary_offset = std::strtoll(line.c_str() + 19, nullptr, 10);
    } else if (line.starts_with("slave") && line.find(":ip=") != std::string::npos) {
      const size_t at = line.find(",offset=");
      if (at != std::string::npos) {
        replica_offsets.push_back(std::strtoll(line.c_str() + at + 8, nullptr, 10));
      }
    }
  }
  if (primary_offset < 0) return;  // not a primary, or INFO without the field
  int64_t max_lag = 0;
  for (int64_t offset : replica_offsets) max_lag = std::max(max_lag, primary_offset - offset);
  static Gauge& count =
      MetricsRegistry::Default()
          .GaugeFamily("gapless_redis_replicas",
                       "Replicas connected to the coordination Redis (its INFO replication)")
          .Get();
  static Gauge& lag = MetricsRegistry::Default()
                          .GaugeFamily("gapless_redis_replica_lag_bytes",
                                       "How far the coordination Redis's furthest replica is "
                                       "behind it, in bytes of the replication stream (0: none)")
                          .Get();
  count.Set(static_cast<double>(replica_offsets.size()));
  lag.Set(static_cast<double>(max_lag));
}

}  // namespace

ReadinessProber::Probe RedisProbe(std::string url, bool coordination) {
  auto conn = std::make_shared<std::unique_ptr<RedisConn>>();
  return [url = std::move(url), conn, coordination]() -> Result<std::string> {
    if (*conn == nullptr) {
      RedisOptions options;
      options.connect_timeout_ms = 500;
      options.command_timeout_ms = 1'000;
      options.max_attempts = 1;
      GAPLESS_ASSIGN_OR_RETURN(*conn, RedisConn::Connect(url, options));
    }
    Result<RedisReply> r = (*conn)->Command({"PING"});
    if (!r.ok()) return r.status();
    if (coordination) ExportReplicaLag(**conn);
    return "answering (" + (*conn)->DescribeCurrent() + ")";
  };
}

ReadinessProber::Probe RpcProbe(RpcOptions rpc, std::shared_ptr<EndpointPool> serving) {
  // Short timeouts, no retries: a probe answers fast. Over a pool (several --rpc endpoints) the
  // node is reachable while any endpoint answers (the pool fails over within the call).
  rpc.connect_timeout_ms = 1'000;
  rpc.request_timeout_ms = 2'000;
  rpc.max_attempts = 1;
  rpc.hedge = false;
  std::shared_ptr<EndpointPool> pool;
  std::shared_ptr<JsonRpcClient> client = MakeRpcClientFactory(rpc, &pool, std::move(serving))();
  return [client, pool]() -> Result<std::string> {
    GAPLESS_ASSIGN_OR_RETURN(uint64_t chain, client->ChainId());
    std::string text = fmt::format("chain {}", chain);
    // An endpoint of the pool on another chain serves nothing (rpc/endpoint_pool.h, the chain
    // check): named, while the others keep the process ready.
    if (pool != nullptr) {
      for (const EndpointStats& e : pool->Stats()) {
        if (!e.other_chain.empty()) {
          text += fmt::format("; {} taken out: it serves {}", e.endpoint, e.other_chain);
        }
      }
    }
    return text;
  };
}

namespace {

// The lock nodes and an election over them, opened at the first probe (a bad --lock-nodes is
// refused by the command itself before the probe exists).
struct LockView {
  std::unique_ptr<LockNodes> nodes;
  std::unique_ptr<Election> election;
};

Result<std::vector<Election::NodeView>> ReadViews(LockView& view,
                                                  const LeaderElectionOptions& options,
                                                  const std::string& coordination_url,
                                                  const Keys& keys) {
  if (view.election == nullptr) {
    GAPLESS_ASSIGN_OR_RETURN(view.nodes,
                             OpenLockNodes(options, coordination_url, EvictionCheck::kSkip));
    view.election = MakeElection(view.nodes.get(), keys, options);
  }
  return view.election->Views();
}

std::string Unreachable(const std::vector<Election::NodeView>& views, const LockNodes& nodes) {
  std::string out;
  for (size_t i = 0; i < views.size(); ++i) {
    if (views[i].reachable) continue;
    out += (out.empty() ? "" : ", ") + nodes.describe(i);
  }
  return out;
}

}  // namespace

ReadinessProber::Probe LockQuorumProbe(LeaderElectionOptions election, std::string coordination_url,
                                       Keys keys) {
  auto view = std::make_shared<LockView>();
  return [view, election = std::move(election), url = std::move(coordination_url),
          keys = std::move(keys)]() -> Result<std::string> {
    GAPLESS_ASSIGN_OR_RETURN(auto views, ReadViews(*view, election, url, keys));
    size_t up = 0;
    for (const auto& v : views) up += v.reachable ? 1 : 0;
    const size_t quorum = view->nodes->quorum();
    std::string text =
        fmt::format("{} of {} lock nodes answer (quorum {})", up, views.size(), quorum);
    if (up < quorum) {
      return Unavailable(text + "; unreachable: " + Unreachable(views, *view->nodes));
    }
    return text;
  };
}

ReadinessProber::Probe BusProbe(std::string url, SubscribeOptions group) {
  return [url = std::move(url), group = std::move(group)]() -> Result<std::string> {
    Result<int64_t> lag = GroupLag(url, group);
    if (lag.ok()) return fmt::format("answering; group {} lags {} events", group.group, *lag);
    if (lag.status().code() == Code::kNotFound) {
      return fmt::format("answering; group {} not created yet", group.group);
    }
    return lag.status();
  };
}

ReadinessProber::Probe LeaderProbe(const Elector* elector, LeaderElectionOptions election,
                                   std::string coordination_url, Keys keys) {
  auto view = std::make_shared<LockView>();
  return [elector, view, election = std::move(election), url = std::move(coordination_url),
          keys = std::move(keys)]() -> Result<std::string> {
    if (std::optional<uint64_t> epoch = elector->LeaderToken()) {
      return fmt::format("this process leads (epoch {})", *epoch);
    }
    GAPLESS_ASSIGN_OR_RETURN(auto views, ReadViews(*view, election, url, keys));
    std::map<std::string, size_t> holders;
    for (const auto& v : views) {
      if (v.reachable && !v.holder.empty()) ++holders[v.holder];
    }
    for (const auto& [holder, count] : holders) {
      if (count >= view->nodes->quorum()) return "following " + holder;
    }
    return Unavailable(fmt::format("no leader holds a quorum of the {} lock nodes", views.size()));
  };
}

}  // namespace gapless
