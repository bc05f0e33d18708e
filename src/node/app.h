// app: the parts every gapless command is built from, each made here and only here: the JSON-RPC
// client factory, the PostgreSQL pool (migrated, and checked to hold the node's chain), the
// coordination Redis (connection, no-eviction check, the Keys namespace of this chain and
// database), the fleet-wide rate limiter, the process identity, and the stop flag that SIGINT and
// SIGTERM set. node/commands.h composes them into the subcommands; a new subcommand or role (the
// HA leader, the event relay, a Kafka block source) takes what it needs from here rather than
// opening its own connections.
//
// Nothing here logs, prints or exits: errors come back as Status (the code is the retry policy),
// and the messages name the flag to fix where a flag is at fault. What is returned is owned by the
// caller. Thread-safety: the functions may be called from any thread; SignalStop is process-wide.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coord/election.h"
#include "coord/keys.h"
#include "coord/lock_nodes.h"
#include "coord/rate_limiter.h"
#include "coord/redis.h"
#include "core/status.h"
#include "node/range_job.h"
#include "rpc/endpoint_pool.h"
#include "rpc/json_rpc.h"
#include "store/decoded.h"
#include "store/pg.h"
#include "verify/verify.h"

namespace gapless {

class Indexer;

// How to reach the JSON-RPC node. The defaults are the client's and transport's own.
struct RpcOptions {
  std::string url;
  int max_attempts = 5;  // per request, for retriable failures (JsonRpcClientOptions)
  int64_t request_timeout_ms = 60'000;
  int64_t connect_timeout_ms = 5'000;
  bool traces = false;  // --traces: fetch every block's traces too (JsonRpcClientOptions)
  bool hedge = true;    // --rpc-hedge, with several endpoints (rpc/endpoint_pool.h)
};

// Makes one client per call (clients are not thread-safe: one per thread), all with `options`.
// `url` may list several endpoints (rpc/endpoint_pool.h ParseEndpointList): then every client of
// the factory goes through one shared EndpointPool, returned in `pool` (nullable) for metrics and
// status; with one endpoint (or a list that does not parse: the CLI checks it) a plain client and
// no pool. `same_chain_as`: a pool of this process whose settled chain this one's endpoints are
// held to (PoolOptions::chain_from), for the helper clients (head tracker, readiness probe).
RpcClientFactory MakeRpcClientFactory(const RpcOptions& options,
                                      std::shared_ptr<EndpointPool>* pool = nullptr,
                                      std::shared_ptr<EndpointPool> same_chain_as = nullptr);

// Opens `connections` (>= 1) connections and applies the schema migrations; with
// `partition_blocks` > 0 (--partition-blocks), sets the data tables' partition size, which only a
// database without block partitions accepts (store/partitions.h: FailedPrecondition naming the
// layout it has otherwise). Errors: the connection's (Unavailable naming host:port, never the
// password), the migration's, the layout's.
Result<std::unique_ptr<PgPool>> OpenDatabase(const std::string& url, size_t connections,
                                             uint64_t partition_blocks = 0);

// A block bound as given on the command line: a decimal number, or a tag the node resolves
// (latest, safe, finalized, or a 0x-hex number; JsonRpcClient::ResolveBlockTag).
struct BlockBound {
  std::string text;                // as given, e.g. "17000000", "finalized"
  std::optional<uint64_t> number;  // set when text is a decimal number
};

// The bound's block number: as given, or the tag resolved by the node.
Result<uint64_t> ResolveBlockBound(JsonRpcClient& rpc, const BlockBound& bound);

// What CheckChain checks the node and the database against.
struct ChainRequest {
  BlockBound from;
  BlockBound to;
  uint64_t expected_chain_id = 0;  // 0: whatever the node serves
  uint64_t partition_blocks = 0;   // --partition-blocks; 0: the database's (OpenDatabase)
  // --contracts: their tables made (or checked) once the database is migrated
  // (store/decoded.h ApplyContractTables), with --rebuild's tables; null: none.
  const ContractTables* contracts = nullptr;
  std::vector<std::string> rebuild;
  // --data: "full" or "events" (store/writer.h EnsureDataMode).
  std::string data_mode = "full";
};

// A node checked to serve the chain the database holds, and the database, ready to write.
struct CheckedChain {
  uint64_t chain_id = 0;
  uint64_t from = 0;  // the bounds, resolved against the node
  uint64_t to = 0;
  std::unique_ptr<PgPool> pool;  // migrated; records this chain
  std::string client_version;    // web3_clientVersion as JSON ("\"anvil/v1.7.1\""); "" unknown
};

// --verify's options for this chain's node: anvil's blob-transaction roots are not the standard
// ones (verify/verify.h anvil_blob_sidecar_quirk), so against anvil that one comparison is
// skipped for blocks holding a blob transaction. nullopt when verification is off.
std::optional<VerifyOptions> VerificationFor(const CheckedChain& chain,
                                             std::optional<VerifyOptions> requested);

// Checks the node before touching the database, so a bad --rpc writes nothing: its chain id
// (against expected_chain_id), the bounds (resolved; --to not above its head, --from not above
// --to) and its block 0. Then opens the database with `db_connections` connections, migrates it,
// and checks that it holds this chain: the chain id and block 0's hash, recorded on first use
// (another chain with the same id is told apart by its genesis hash). Errors: FailedPrecondition
// naming the flag (wrong chain, a bound above the head, from above to, a bad tag), the node's and
// the database's errors otherwise. With request.contracts, their tables are made or checked last
// (FailedPrecondition naming a table whose event the config now defines otherwise).
Result<CheckedChain> CheckChain(JsonRpcClient& rpc, const ChainRequest& request,
                                const std::string& db_url, size_t db_connections);

// The chain recorded in the database (EnsureChainId), or FailedPrecondition(`if_none`) before
// the first indexing run.
Result<uint64_t> RecordedChainId(PgConn& pg, const std::string& if_none);

// The coordination Redis of one chain and database.
struct Coordination {
  std::unique_ptr<RedisConn> redis;
  Keys keys;  // gapless:{chain-<id>-db-<database id>}:...
};

enum class EvictionCheck {
  kRequireNoEviction,  // every command that writes coordination state: evicted keys lose work
  kSkip,               // read-and-repair tools (status, dlq) work on any Redis
};

// Connects to the coordination Redis, checks its eviction policy (when asked), and derives the
// Keys namespace from the chain and the database's id (store/state.h EnsureDatabaseId, created on
// first use), so every process writing one database shares one queue, fence and frontier.
// Errors: Redis's (Unavailable; FailedPrecondition for a bad URL or an evicting policy) and
// PostgreSQL's.
Result<Coordination> OpenCoordination(const std::string& redis_url, PgConn& pg, uint64_t chain_id,
                                      EvictionCheck check);

// The fleet-wide rate limit of one RPC endpoint, on a Redis connection of its own. Thread-safe:
// every worker of the process shares it, so a 429 seen by one slows them all.
struct SharedRateLimiter {
  std::unique_ptr<RedisConn> conn;
  std::unique_ptr<RateLimiter> limiter;  // null: no limit
};

// requests_per_s <= 0: no limit (and no connection). Otherwise a window of one second admitting
// max(1, requests_per_s) requests to `endpoint` (JsonRpcClient::Describe) fleet-wide.
Result<SharedRateLimiter> OpenRateLimiter(const std::string& redis_url, const Keys& keys,
                                          const std::string& endpoint, double requests_per_s);

// The progress display of index, run and worker (node/progress.h).
enum class ProgressDisplay {
  kAuto,   // a live bar when stderr is a terminal, plain lines otherwise
  kTty,    // a live bar
  kPlain,  // a log line every 10 s (index) or 30 s (run, worker)
  kOff,
};

// True when `display` means the live bar here (kAuto: stderr is a terminal).
bool ShowsLiveBar(ProgressDisplay display);

// "host:pid": names this process in leases, the leader lock and the registry; its workers are
// "host:pid:n".
std::string ProcessId();

// The HA leader's lock nodes and lease (coord/election.h, coord/elector.h).
struct LeaderElectionOptions {
  // redis:// URLs of the lock nodes (1, 3 or 5 independent servers); empty: the coordination
  // Redis alone (one node: no tolerance of its loss, but the same protocol).
  std::vector<std::string> lock_nodes;
  int64_t ttl_ms = 3'000;            // the leader's lease
  int64_t node_timeout_ms = 100;     // per node and operation
  uint64_t head_log_window = 4'096;  // head-log heights kept on each node
};

// The lock nodes (`coordination_url` alone when none are given), each checked for the eviction
// policy when `check` asks (a node that evicts could drop the lock or the head log). A node that
// is down at start is not an error (the quorum decides later); a bad URL, an even count or a
// duplicate is FailedPrecondition naming --lock-nodes.
Result<std::unique_ptr<LockNodes>> OpenLockNodes(const LeaderElectionOptions& options,
                                                 const std::string& coordination_url,
                                                 EvictionCheck check);

// An Election over `nodes` in `keys`' namespace, owned by this process (ProcessId() and a random
// suffix, unique per call).
std::unique_ptr<Election> MakeElection(LockNodes* nodes, const Keys& keys,
                                       const LeaderElectionOptions& options);

// SIGINT and SIGTERM stop the command: while a SignalStop is alive, a signal sets flag() and, when
// an indexer was given, calls its Stop(). The handlers only store atomics (async-signal-safe).
// The handlers stay installed afterwards, so a late signal during shutdown does not kill the
// process halfway through it. One at a time per process.
class SignalStop {
 public:
  // Installs the handlers and clears the flag.
  explicit SignalStop(Indexer* indexer = nullptr);
  ~SignalStop();  // forgets the indexer
  SignalStop(const SignalStop&) = delete;
  SignalStop& operator=(const SignalStop&) = delete;

  // Set by a signal. The command may set it too, to stop every role after a fatal error.
  std::atomic<bool>& flag();
};

}  // namespace gapless
