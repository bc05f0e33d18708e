#include "node/app.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include "decode/decode.h"
#include "node/indexer.h"
#include "node/node_metrics.h"
#include "rpc/curl_transport.h"
#include "rpc/endpoint_pool.h"
#include "store/migrate.h"
#include "store/partitions.h"
#include "store/state.h"
#include "store/writer.h"

namespace gapless {

RpcClientFactory MakeRpcClientFactory(const RpcOptions& options,
                                      std::shared_ptr<EndpointPool>* pool_out,
                                      std::shared_ptr<EndpointPool> same_chain_as) {
  JsonRpcClientOptions rpc_options;
  rpc_options.max_attempts = options.max_attempts;
  rpc_options.traces = options.traces;
  CurlTransportOptions curl_options;
  curl_options.connect_timeout_ms = options.connect_timeout_ms;
  curl_options.request_timeout_ms = options.request_timeout_ms;
  Result<std::vector<EndpointSpec>> specs = ParseEndpointList(options.url);
  if (!specs.ok() || specs->size() < 2) {
    std::string url = specs.ok() ? specs->front().url : options.url;
    return [url, rpc_options, curl_options]() {
      return std::make_unique<JsonRpcClient>(std::make_unique<CurlTransport>(url, curl_options),
                                             rpc_options);
    };
  }
  PoolOptions pool_options;
  pool_options.hedge = options.hedge;
  if (same_chain_as != nullptr) {
    pool_options.chain_from = [same_chain_as] { return same_chain_as->chain(); };
  }
  auto pool = std::make_shared<EndpointPool>(*specs, pool_options);
  if (pool_out != nullptr) *pool_out = pool;
  return [pool, rpc_options, curl_options]() {
    std::vector<std::unique_ptr<HttpTransport>> transports;
    for (size_t i = 0; i < pool->size(); ++i) {
      transports.push_back(std::make_unique<CurlTransport>(pool->spec(i).url, curl_options));
    }
    return std::make_unique<JsonRpcClient>(
        std::make_unique<PoolTransport>(pool, std::move(transports)), rpc_options);
  };
}

Result<std::unique_ptr<PgPool>> OpenDatabase(const std::string& url, size_t connections,
                                             uint64_t partition_blocks) {
  GAPLESS_ASSIGN_OR_RETURN(auto pool, PgPool::Open(url, connections));
  {
    auto conn = pool->Acquire();
    GAPLESS_RETURN_IF_ERROR(Migrate(*conn));
    if (partition_blocks > 0) {
      GAPLESS_RETURN_IF_ERROR(
          SetPartitionBlocks(*conn, partition_blocks)
              .WithContext("--partition-blocks " + std::to_string(partition_blocks)));
    }
  }
  return pool;
}

Result<uint64_t> ResolveBlockBound(JsonRpcClient& rpc, const BlockBound& bound) {
  if (bound.number.has_value()) return *bound.number;
  return rpc.ResolveBlockTag(bound.text);
}

Result<CheckedChain> CheckChain(JsonRpcClient& rpc, const ChainRequest& request,
                                const std::string& db_url, size_t db_connections) {
  CheckedChain out;
  // The node first, so a bad --rpc writes nothing. Its errors name the endpoint, redacted.
  GAPLESS_ASSIGN_OR_RETURN(out.chain_id, rpc.ChainId());
  if (request.expected_chain_id != 0 && out.chain_id != request.expected_chain_id) {
    return FailedPrecondition(fmt::format("--chain-id {}: the node at {} serves chain {}",
                                          request.expected_chain_id, rpc.Describe(), out.chain_id));
  }
  GAPLESS_ASSIGN_OR_RETURN(out.from, ResolveBlockBound(rpc, request.from));
  GAPLESS_ASSIGN_OR_RETURN(out.to, ResolveBlockBound(rpc, request.to));
  // Only a number can be the user's mistake. A tag is the node's own answer, and the next call
  // may see a lower head (a re-org to a shorter fork, another backend behind a load balancer):
  // chaos seed 418, a worker that started during a re-org exited on its own --to latest.
  if (request.to.number.has_value()) {
    GAPLESS_ASSIGN_OR_RETURN(uint64_t head, rpc.BlockNumber());
    SetChainHeadMetric(head);
    if (out.to > head) {
      return FailedPrecondition(fmt::format(
          "--to {}: above the node's head block {}; use --to latest to stop at the head", out.to,
          head));
    }
  }
  if (out.from > out.to) {
    return FailedPrecondition(fmt::format("--from {} is above --to {}", out.from, out.to));
  }

  // Block 0's hash tells this chain apart from another one with the same chain id.
  GAPLESS_ASSIGN_OR_RETURN(std::string genesis_json,
                           rpc.Call("eth_getBlockByNumber", R"(["0x0",false])"));
  GAPLESS_ASSIGN_OR_RETURN(Block genesis, DecodeBlockHeader(genesis_json, 0));
  // The client, for what differs per client (verify/verify.h anvil_blob_sidecar_quirk). A node
  // that does not answer web3_clientVersion is taken as a standard one.
  Result<std::string> version = rpc.Call("web3_clientVersion", "[]");
  if (version.ok()) out.client_version = *version;

  GAPLESS_ASSIGN_OR_RETURN(out.pool,
                           OpenDatabase(db_url, db_connections, request.partition_blocks));
  auto conn = out.pool->Acquire();
  GAPLESS_RETURN_IF_ERROR(EnsureChainId(*conn, out.chain_id));
  GAPLESS_RETURN_IF_ERROR(EnsureGenesisHash(*conn, genesis.hash));
  GAPLESS_RETURN_IF_ERROR(EnsureDataMode(*conn, request.data_mode).WithContext("--data"));
  if (request.contracts != nullptr) {
    GAPLESS_RETURN_IF_ERROR(
        ApplyContractTables(*conn, *request.contracts, request.rebuild).WithContext("--contracts"));
  }
  return out;
}

std::optional<VerifyOptions> VerificationFor(const CheckedChain& chain,
                                             std::optional<VerifyOptions> requested) {
  if (requested.has_value() && chain.client_version.starts_with("\"anvil/")) {
    requested->anvil_blob_sidecar_quirk = true;
  }
  return requested;
}

Result<uint64_t> RecordedChainId(PgConn& pg, const std::string& if_none) {
  GAPLESS_ASSIGN_OR_RETURN(std::optional<uint64_t> recorded, LoadChainId(pg));
  if (!recorded.has_value()) return FailedPrecondition(if_none);
  return *recorded;
}

Result<Coordination> OpenCoordination(const std::string& redis_url, PgConn& pg, uint64_t chain_id,
                                      EvictionCheck check) {
  Result<std::unique_ptr<RedisConn>> connected = RedisConn::Connect(redis_url);
  if (!connected.ok() && connected.status().reason() == ReplicaReason()) {
    // At start a replica is a configuration error, not a failover in progress.
    return FailedPrecondition("--redis: " + connected.status().message());
  }
  GAPLESS_ASSIGN_OR_RETURN(std::unique_ptr<RedisConn> redis, std::move(connected));
  if (check == EvictionCheck::kRequireNoEviction) GAPLESS_RETURN_IF_ERROR(redis->CheckNoEviction());
  GAPLESS_ASSIGN_OR_RETURN(std::string database_id, EnsureDatabaseId(pg));
  return Coordination{std::move(redis), Keys(static_cast<int64_t>(chain_id), database_id)};
}

Result<SharedRateLimiter> OpenRateLimiter(const std::string& redis_url, const Keys& keys,
                                          const std::string& endpoint, double requests_per_s) {
  SharedRateLimiter out;
  if (requests_per_s <= 0) return out;
  // Connected by its first use: the limiter rides out a Redis outage like every other client.
  GAPLESS_ASSIGN_OR_RETURN(out.conn, RedisConn::Connect(redis_url, {}, /*connect_now=*/false));
  RateLimiterOptions options;
  options.limit = std::max<int64_t>(1, static_cast<int64_t>(requests_per_s));
  options.window_ms = 1000;
  out.limiter = std::make_unique<RateLimiter>(out.conn.get(), keys.rate_limit(endpoint), options);
  return out;
}

bool ShowsLiveBar(ProgressDisplay display) {
  return display == ProgressDisplay::kTty ||
         (display == ProgressDisplay::kAuto && isatty(STDERR_FILENO));
}

std::string ProcessId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) return fmt::format("localhost:{}", getpid());
  return fmt::format("{}:{}", host, getpid());
}

Result<std::unique_ptr<LockNodes>> OpenLockNodes(const LeaderElectionOptions& options,
                                                 const std::string& coordination_url,
                                                 EvictionCheck check) {
  std::vector<std::string> urls = options.lock_nodes;
  if (urls.empty()) urls.push_back(coordination_url);
  LockNodesOptions node_options;
  node_options.node_timeout_ms = options.node_timeout_ms;
  auto nodes = LockNodes::Open(urls, node_options);
  if (!nodes.ok()) return nodes.status().WithContext("--lock-nodes");
  if (check == EvictionCheck::kRequireNoEviction) {
    for (const std::string& url : urls) {
      auto conn = RedisConn::Connect(url);
      Status st = conn.ok() ? (*conn)->CheckNoEviction() : conn.status();
      // Down at start: the quorum decides later (and the elector's logs name the node).
      if (st.code() == Code::kUnavailable) continue;
      GAPLESS_RETURN_IF_ERROR(st.WithContext("--lock-nodes"));
    }
  }
  return std::move(*nodes);
}

std::unique_ptr<Election> MakeElection(LockNodes* nodes, const Keys& keys,
                                       const LeaderElectionOptions& options) {
  static std::atomic<uint64_t> sequence{0};
  ElectionOptions election;
  election.owner = fmt::format("{}:{:08x}{}", ProcessId(), Env::Default()->Uniform(UINT32_MAX),
                               sequence.fetch_add(1));
  election.ttl_ms = options.ttl_ms;
  election.window = options.head_log_window;
  return std::make_unique<Election>(nodes, keys, election);
}

namespace {

std::atomic<bool> g_stop{false};
std::atomic<Indexer*> g_indexer{nullptr};

void OnStopSignal(int) {
  if (Indexer* indexer = g_indexer.load()) indexer->Stop();
  g_stop.store(true);
}

}  // namespace

SignalStop::SignalStop(Indexer* indexer) {
  g_indexer.store(indexer);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
  g_stop.store(false);
}

SignalStop::~SignalStop() { g_indexer.store(nullptr); }

std::atomic<bool>& SignalStop::flag() { return g_stop; }

}  // namespace gapless
