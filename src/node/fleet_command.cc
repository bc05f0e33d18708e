// run, leader and worker: one fleet process. Composes the parts of node/app.h (checked chain and
// database, coordination Redis, lock nodes, rate limiter, process identity, stop on signals) into
// its roles, runs each on its own thread, and watches them: progress, a status line every 30 s,
// the outcome. The roles:
//  - with_leader (run, leader): a candidate for the HA leader. The Elector (coord/elector.h, its
//    own thread) holds the lease and writes the head log from a HeadTracker; the Leader's duties
//    (seeder, janitor, frontier) run on another thread while the ElectorLease says so. On a
//    signal the elector steps down at once (release on every lock node), before the workers have
//    finished their ranges, so a follower elsewhere takes over without waiting for the TTL.
//  - N Workers, which check every fetched block against the head log (HeadLogCheck) before
//    writing it, and never lead.
//
// A new role (the event relay) is built beside the others in RunFleet and started with
// RoleThreads::Start; it gets the shared stop flag and stops the others by failing.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "coord/elector.h"
#include "node/commands.h"
#include "node/head_tracker.h"
#include "node/index_builder.h"
#include "node/kafka_worker.h"
#include "node/leader.h"
#include "node/ops.h"
#include "node/progress.h"
#include "node/startup.h"
#include "node/worker.h"

namespace gapless {
namespace {

// The roles of one fleet process, each on its own thread, sharing one stop flag: a signal sets it,
// and so does the first role that fails, which stops the others.
class RoleThreads {
 public:
  // Runs until `stop` (or by itself: a fixed range done); returns Ok or a fatal error.
  using Role = std::function<Status(const std::atomic<bool>& stop)>;

  explicit RoleThreads(std::atomic<bool>* stop) : stop_(stop) {}
  ~RoleThreads() { static_cast<void>(StopAndJoin()); }
  RoleThreads(const RoleThreads&) = delete;
  RoleThreads& operator=(const RoleThreads&) = delete;

  void Start(Role role) {
    ++running_;
    threads_.emplace_back([this, role = std::move(role)] {
      Record(role(*stop_));
      --running_;
    });
  }

  // True while a role is still running.
  bool running() const { return running_.load() > 0; }

  // Stops every role, waits for them, and returns the first error.
  Status StopAndJoin() {
    stop_->store(true);
    for (auto& t : threads_) t.join();
    threads_.clear();
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }

 private:
  void Record(const Status& st) {
    if (st.ok()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.ok()) first_error_ = st;
    stop_->store(true);
  }

  std::atomic<bool>* stop_;
  std::atomic<int> running_{0};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  Status first_error_;
};

// The leader's duties (seeder, janitor, frontier) of `run` and `leader`: a fixed range from..to,
// or following the --to tag; acting only while `lease` is held.
std::unique_ptr<Leader> MakeLeader(const FleetCommand& command, const CheckedChain& chain,
                                   const Keys& keys, const std::string& process_id,
                                   LeaderLease* lease, JsonRpcClient* rpc) {
  LeaderOptions options;
  options.from = chain.from;
  options.range_size = command.indexing.range_size;
  options.holder_id = process_id;
  options.max_lease_expiries = command.max_lease_expiries;
  options.give_up_when_stuck_ms = command.dlq_wait_ms;
  options.blocks_from_stream = command.source == BlockSourceKind::kKafka;
  options.heal_gaps_after_ms = command.heal_gaps_after_ms;
  options.max_reorg_depth = command.max_reorg_depth;
  options.compact_after_seconds = command.compact_after_seconds;
  options.head_log_window = command.election.head_log_window;
  if (command.follow) {
    options.follow = true;
    options.to_tag = command.indexing.to.text;
    options.confirmations = command.confirmations;
  } else {
    options.to = chain.to;
  }
  return std::make_unique<Leader>(options, command.redis, keys, chain.pool.get(), lease, rpc);
}

// The head source of the elector: the chain's headers up to the bound, over an RPC client of its
// own that fails fast (the lease waits on it), with PostgreSQL's health in every call.
std::unique_ptr<HeadTracker> MakeHeadTracker(const FleetCommand& command, const CheckedChain& chain,
                                             std::shared_ptr<EndpointPool> serving) {
  RpcOptions rpc = command.indexing.rpc;
  rpc.max_attempts = 1;
  rpc.request_timeout_ms = std::max<int64_t>(
      100, std::min<int64_t>(rpc.request_timeout_ms, command.election.ttl_ms / 3));
  rpc.connect_timeout_ms = std::min<int64_t>(rpc.connect_timeout_ms, rpc.request_timeout_ms);
  HeadTrackerOptions options;
  options.from = chain.from;
  if (command.follow) {
    options.tag = command.indexing.to.text;
    options.confirmations = command.confirmations;
  } else {
    options.to = chain.to;
  }
  options.window = command.election.head_log_window;
  options.max_reorg_depth = command.max_reorg_depth;
  // Held to the chain the workers' pool settled (the database's): a pool of its own would settle
  // its chain by the list rule at its own start, and bind the head log to another chain when the
  // first endpoint is slow (this client's shorter timeout) or away then.
  return std::make_unique<HeadTracker>(MakeRpcClientFactory(rpc, nullptr, std::move(serving))(),
                                       command.indexing.db, options);
}

// The process's workers, "host:pid:0".."host:pid:N-1". With a leader on a fixed range they also
// stop by themselves once it is done.
std::vector<std::unique_ptr<Worker>> MakeWorkers(
    const FleetCommand& command, const CheckedChain& chain, const Keys& keys,
    const std::string& process_id, const RpcClientFactory& make_client, RateLimiter* limiter,
    const Leader* leader, const Election* head_log, uint32_t count, MemoryBudget* budget,
    std::function<bool()> done = nullptr) {
  const IndexingOptions& args = command.indexing;
  std::vector<std::unique_ptr<Worker>> workers;
  for (uint32_t i = 0; i < count; ++i) {
    WorkerOptions options;
    options.worker_id = fmt::format("{}:{}", process_id, i);
    options.lease_ttl_ms = command.lease_ttl_ms;
    options.prefetch = command.prefetch;
    options.rpc_timeout_ms = args.rpc.request_timeout_ms;
    options.max_attempts = args.rpc.max_attempts;
    options.blocks_per_request = args.batch;
    options.chain_id = chain.chain_id;
    options.verify = VerificationFor(chain, args.Verification());
    options.token_metadata = args.token_metadata;
    options.contracts = args.contracts.get();
    options.events_filter = args.EventsFilter();
    options.write_mode = args.write_mode;
    options.copy_format = args.copy_format;
    options.memory_budget = budget;
    options.limiter = limiter;
    if (leader != nullptr && !command.follow) options.done = [leader] { return leader->done(); };
    if (done) options.done = done;
    options.check_blocks = [head_log](std::span<const BlockData> blocks, size_t* wrong) {
      return HeadLogCheck(*head_log, blocks, wrong);
    };
    workers.push_back(std::make_unique<Worker>(options, RpcBlockSources(make_client), command.redis,
                                               keys, chain.pool.get()));
  }
  return workers;
}

// The process's Kafka workers, "host:pid:k0".."host:pid:kN-1", one consumer each in the group.
// With --rpc they fetch blocks the stream lacks or that the decoder refused from the node.
std::vector<std::unique_ptr<KafkaWorker>> MakeKafkaWorkers(
    const FleetCommand& command, const CheckedChain& chain, const Keys& keys,
    const std::string& process_id, const RpcClientFactory* make_client, const Election* head_log,
    MemoryBudget* budget) {
  const IndexingOptions& args = command.indexing;
  std::vector<std::unique_ptr<KafkaWorker>> workers;
  for (uint32_t i = 0; i < command.workers; ++i) {
    KafkaWorkerOptions options;
    options.worker_id = fmt::format("{}:k{}", process_id, i);
    options.bus_url = "kafka://" + command.kafka.brokers;
    options.topic = command.kafka.topic;
    options.group = command.kafka.group;
    options.from = chain.from;
    // A tag (the default "finalized") bounds nothing here: the workers follow the stream.
    if (!command.follow && args.to.number.has_value()) options.to = *args.to.number;
    options.range_size = args.range_size;
    options.flush_after_ms = command.kafka.flush_after_ms;
    options.lock_ttl_ms = command.kafka.lock_ttl_ms;
    options.max_attempts = args.rpc.max_attempts;
    options.chain_id = chain.chain_id;
    options.verify = VerificationFor(chain, args.Verification());
    options.token_metadata = args.token_metadata;
    options.contracts = args.contracts.get();
    options.write_mode = args.write_mode;
    options.copy_format = args.copy_format;
    options.memory_budget = budget;
    if (make_client != nullptr) options.fallback = RpcBlockSources(*make_client);
    // As RPC workers do: only blocks the head log has committed, with its hashes.
    options.head_log = [head_log](uint64_t from,
                                  uint64_t to) -> Result<KafkaWorkerOptions::HeadLogView> {
      KafkaWorkerOptions::HeadLogView view;
      GAPLESS_ASSIGN_OR_RETURN(auto committed, head_log->Committed(from, to));
      for (const auto& [height, entry] : committed) view.hashes[height] = entry.hash;
      GAPLESS_ASSIGN_OR_RETURN(view.lowest, head_log->LowestHeight());
      return view;
    };
    workers.push_back(
        std::make_unique<KafkaWorker>(options, command.redis, keys, chain.pool.get()));
  }
  return workers;
}

// Until every role has returned: feeds the workers' counters to the progress display every
// 200 ms and, without the live bar (logs), writes a status line every 30 s: tasks done, rate,
// success ratio, last error.
void WatchFleet(const RoleThreads& roles, const std::vector<std::unique_ptr<Worker>>& queue_workers,
                const std::vector<std::unique_ptr<KafkaWorker>>& kafka_workers, bool live_bar,
                IndexCounters* totals) {
  std::vector<const WorkerCounters*> workers;
  for (auto& w : queue_workers) workers.push_back(&w->counters());
  for (auto& w : kafka_workers) workers.push_back(&w->counters());
  auto last_error = [&] {
    std::string last;
    for (auto& w : queue_workers) {
      if (std::string e = w->last_error(); !e.empty()) last = e;
    }
    return last;
  };
  auto next_report = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto started = std::chrono::steady_clock::now();
  while (roles.running()) {
    if (!live_bar && std::chrono::steady_clock::now() >= next_report) {
      next_report += std::chrono::seconds(30);
      uint64_t done = 0, failed = 0, blocks = 0;
      std::string error = last_error();
      for (auto& w : workers) {
        done += w->tasks.load();
        failed += w->failed.load();
        blocks += w->blocks.load();
      }
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      spdlog::info(
          "status: {} ranges done, {} failed attempts handed back, success {:.1f}%, {:.1f} "
          "blocks/s, last error: {}",
          done, failed, done + failed > 0 ? 100.0 * done / (done + failed) : 100.0,
          elapsed > 0 ? blocks / elapsed : 0.0, error.empty() ? "none" : error);
    }
    uint64_t blocks = 0, txs = 0, logs = 0, transfers = 0, tasks = 0, retries = 0;
    for (auto& w : workers) {
      blocks += w->blocks.load();
      txs += w->transactions.load();
      logs += w->logs.load();
      transfers += w->token_transfers.load();
      tasks += w->tasks.load();
      retries += w->retries.load();
    }
    totals->blocks = blocks;
    totals->transactions = txs;
    totals->logs = logs;
    totals->token_transfers = transfers;
    totals->ranges = tasks;
    totals->retries = retries;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// The chain and bounds of a Kafka worker that has no node: the database's recorded chain (it
// must agree with --chain-id when given), waited for up to a minute (workers and their leader are
// often started together; the leader, which has the node, records it); --from and --to must be
// numbers (a tag such as the default "finalized" means no upper bound: follow the stream).
Result<CheckedChain> ChainFromDatabase(const IndexingOptions& args, size_t connections) {
  CheckedChain chain;
  GAPLESS_ASSIGN_OR_RETURN(chain.pool, OpenDatabase(args.db, connections, args.partition_blocks));
  for (int waited_s = 0;; ++waited_s) {
    auto conn = chain.pool->Acquire();
    Result<uint64_t> id = RecordedChainId(
        *conn,
        "the database records no chain yet: start the leader (`gapless leader --source kafka "
        "--rpc URL ...`), or give this worker --rpc");
    if (id.ok()) {
      chain.chain_id = *id;
      break;
    }
    if (id.status().code() != Code::kFailedPrecondition || waited_s >= 60) return id.status();
    if (waited_s == 0) spdlog::info("waiting for the leader to record the chain in the database");
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (args.chain_id != 0 && args.chain_id != chain.chain_id) {
    return FailedPrecondition(fmt::format("--chain-id {} but the database holds chain {}",
                                          args.chain_id, chain.chain_id));
  }
  if (!args.from.number.has_value()) {
    return FailedPrecondition(fmt::format(
        "--from {}: without --rpc a Kafka worker needs a block number", args.from.text));
  }
  chain.from = *args.from.number;
  chain.to = args.to.number.value_or(UINT64_MAX);
  // What CheckChain does last for a worker with a node: the data mode, the decoded tables.
  const ChainRequest request = args.Chain();
  auto conn = chain.pool->Acquire();
  GAPLESS_RETURN_IF_ERROR(EnsureDataMode(*conn, request.data_mode).WithContext("--data"));
  if (request.contracts != nullptr) {
    GAPLESS_RETURN_IF_ERROR(ApplyContractTables(*conn, *request.contracts, request.rebuild)
                                .WithContext("--contracts"));
  }
  return chain;
}

// Publishes a process's RPC pool counts every 2 s for `gapless status` (Keys::rpc_pool, 15 s TTL),
// on a thread and a Redis connection of its own; a failed write is skipped (status shows less).
class PoolPublisher {
 public:
  PoolPublisher(std::shared_ptr<EndpointPool> pool, const std::string& redis_url, std::string key)
      : pool_(std::move(pool)), key_(std::move(key)) {
    auto conn = RedisConn::Connect(redis_url, {}, /*connect_now=*/false);
    if (!conn.ok()) return;
    conn_ = std::move(conn).value();
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!stop_) {
        lock.unlock();
        Publish();
        lock.lock();
        cv_.wait_for(lock, std::chrono::seconds(2), [this] { return stop_; });
      }
    });
  }
  ~PoolPublisher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (conn_) Publish();  // the final counts
  }
  PoolPublisher(const PoolPublisher&) = delete;
  PoolPublisher& operator=(const PoolPublisher&) = delete;

 private:
  void Publish() {
    static_cast<void>(
        conn_->Command({"SET", key_, StatsJson(pool_->Stats()), "PX", "15000"}).status());
  }

  std::shared_ptr<EndpointPool> pool_;
  std::string key_;
  std::unique_ptr<RedisConn> conn_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

Result<Outcome> RunFleet(const FleetCommand& command) {
  const IndexingOptions& args = command.indexing;
  if (!command.with_leader && command.workers == 0) {
    return FailedPrecondition("worker: --workers must be at least 1 (0 is for run only)");
  }
  if (args.rpc.request_timeout_ms >= command.lease_ttl_ms) {
    return FailedPrecondition(fmt::format(
        "--rpc-timeout {} must be below --lease-ttl {}: a healthy worker must not lose its lease "
        "to one slow request",
        args.rpc.request_timeout_ms, command.lease_ttl_ms));
  }
  const bool kafka = command.source == BlockSourceKind::kKafka;
  if (kafka && command.workers > 0 &&
      (command.kafka.brokers.empty() || command.kafka.topic.empty())) {
    return FailedPrecondition("--source kafka needs --brokers and --topic");
  }
  if (kafka && command.kafka.brokers.find("://") != std::string::npos) {
    return FailedPrecondition("--brokers takes host:port[,host:port...], not a URL");
  }
  const bool has_rpc = !args.rpc.url.empty();
  if (!has_rpc && (!kafka || command.with_leader)) {
    return FailedPrecondition(command.with_leader
                                  ? "--rpc is required (the leader tracks the chain's head)"
                                  : "--rpc is required (or --source kafka)");
  }
  // The ops endpoint first: /healthz answers and /readyz says what the process waits for while
  // it checks the node and opens the database and Redis.
  GAPLESS_ASSIGN_OR_RETURN(Ops ops, StartOps(args.metrics_addr, /*with_status=*/true));
  ops.SetStarting("checking the node and opening the database");
  ops.Add("postgresql", PostgresProbe(args.db));
  std::shared_ptr<EndpointPool> rpc_pool;  // with several --rpc endpoints
  RpcClientFactory make_client = MakeRpcClientFactory(args.rpc, &rpc_pool);
  if (has_rpc) ops.Add("rpc node", RpcProbe(args.rpc, rpc_pool), kRpcProbeInterval);
  std::unique_ptr<JsonRpcClient> rpc = has_rpc ? make_client() : nullptr;
  const size_t connections =
      std::max<size_t>(args.db_connections, command.workers + 2) + command.events.buses.size();
  // The node and PostgreSQL may be away as a fleet process (re)starts, like the coordination
  // Redis below (node/startup.h): waited for. A Kafka worker without a node: the chain is the one
  // the database records (the leader, which has the node, recorded it), and the bounds must be
  // numbers.
  auto check_chain = [&]() -> Result<CheckedChain> {
    if (!has_rpc) return ChainFromDatabase(args, connections);
    return CheckChain(*rpc, args.Chain(), args.db, connections);
  };
  // A run with an end gives up after --startup-timeout; one that follows the chain (or a
  // worker, which serves until stopped) waits as long as it takes.
  const int64_t give_up_ms =
      command.with_leader && !command.follow ? command.startup_timeout_ms : 0;
  GAPLESS_ASSIGN_OR_RETURN(
      CheckedChain chain,
      OpenWhenReachable<CheckedChain>(has_rpc ? "the node and the database" : "the database",
                                      check_chain, /*stop=*/nullptr, give_up_ms));
  // What the fleet asks for besides the blocks (store/datasets.h): token metadata only where its
  // workers fetch from a node (a Kafka worker without --rpc cannot read it). The leader seeds from
  // the frontier on, so a committed range below it that lacks one would stay without it while the
  // run says it is complete: refused, naming the `index` run that backfills it (decisions.md,
  // "Datasets per range").
  Datasets asked = args.AskedDatasets();
  if (!has_rpc || kafka) asked = asked.Minus(Datasets().Add(kTokenMetadataDataset));
  const uint64_t asked_to = command.follow ? UINT64_MAX : chain.to;
  {
    auto conn = chain.pool->Acquire();
    GAPLESS_ASSIGN_OR_RETURN(auto lacking, RangesLacking(*conn, asked, chain.from, asked_to));
    if (!lacking.empty()) {
      const DatasetGap& first = lacking.front();
      return FailedPrecondition(fmt::format(
          "{}: this run asks for them, and a fleet does not backfill committed ranges (it "
          "indexes from its frontier on); write them again first with `gapless index --from {} "
          "--to {} {}` (for each range listed), then start the fleet again",
          DescribeGaps(lacking), first.from, first.to, HowToAskFor(first.dataset)));
    }
    if (command.with_leader) {
      GAPLESS_RETURN_IF_ERROR(RecordDatasetRequest(*conn, asked, chain.from, asked_to));
    }
  }
  auto open_coordination = [&] {
    auto conn = chain.pool->Acquire();
    return OpenCoordination(command.redis, *conn, chain.chain_id,
                            EvictionCheck::kRequireNoEviction);
  };
  // The coordination Redis (or PostgreSQL) may be away as a fleet process (re)starts
  // (node/startup.h). Nothing is held yet, so a signal may end the wait as it likes.
  ops.SetStarting("opening the coordination Redis");
  ops.Add("coordination redis", RedisProbe(command.redis, /*coordination=*/true));
  Result<Coordination> opened = OpenWhenReachable<Coordination>(
      "the coordination state", open_coordination, /*stop=*/nullptr, give_up_ms);
  GAPLESS_ASSIGN_OR_RETURN(Coordination coord, std::move(opened));
  ops.Add("lock quorum", LockQuorumProbe(command.election, command.redis, coord.keys));
  {
    StatusCommand status;
    status.fleet = FleetStateOptions{args.db, command.redis, chain.chain_id, command.election};
    status.rpc = args.rpc.url;
    ops.SetStatus(std::move(status));
  }
  // The fleet-wide rate limit: one window for the node, or with a pool one window per endpoint
  // (its rate-limit= setting, else --rate-limit), taken by the pool as it sends to the endpoint;
  // then the workers' own limiter is off, so no request is counted twice.
  GAPLESS_ASSIGN_OR_RETURN(
      SharedRateLimiter limiter,
      OpenRateLimiter(command.redis, coord.keys, has_rpc ? rpc->Describe() : std::string(),
                      has_rpc && !rpc_pool ? command.rate_limit : 0));
  if (rpc_pool) {
    // Shared with the pool, which outlives this function in the clients it made.
    auto limiters = std::make_shared<std::vector<SharedRateLimiter>>();
    for (size_t i = 0; i < rpc_pool->size(); ++i) {
      const double rate =
          rpc_pool->spec(i).rate_limit > 0 ? rpc_pool->spec(i).rate_limit : command.rate_limit;
      GAPLESS_ASSIGN_OR_RETURN(SharedRateLimiter one,
                               OpenRateLimiter(command.redis, coord.keys, rpc_pool->Key(i), rate));
      limiters->push_back(std::move(one));
    }
    EndpointAdmission admission;
    admission.acquire = [limiters](size_t i) {
      RateLimiter* l = limiters->at(i).limiter.get();
      return l == nullptr ? Status::Ok() : l->Acquire();
    };
    admission.slow_down = [limiters](size_t i) {
      RateLimiter* l = limiters->at(i).limiter.get();
      if (l != nullptr) l->SlowDown();
    };
    rpc_pool->SetAdmission(std::move(admission));
  }

  const std::string process_id = ProcessId();
  // The head log, as the workers read it (connections of their own, shared by all of them).
  GAPLESS_ASSIGN_OR_RETURN(
      std::unique_ptr<LockNodes> worker_nodes,
      OpenLockNodes(command.election, command.redis, EvictionCheck::kRequireNoEviction));
  std::unique_ptr<Election> head_log =
      MakeElection(worker_nodes.get(), coord.keys, command.election);
  // The candidate: lock nodes, election, head tracker, elector, and the duties under its lease.
  std::unique_ptr<LockNodes> leader_nodes;
  std::unique_ptr<Election> election;
  std::unique_ptr<HeadTracker> tracker;
  std::unique_ptr<Elector> elector;
  std::unique_ptr<ElectorLease> lease;
  std::unique_ptr<Leader> leader;
  std::unique_ptr<PgWaker> leader_waker;  // wakes the leader's duties when a range commits
  if (command.with_leader) {
    GAPLESS_ASSIGN_OR_RETURN(leader_nodes,
                             OpenLockNodes(command.election, command.redis, EvictionCheck::kSkip));
    election = MakeElection(leader_nodes.get(), coord.keys, command.election);
    tracker = MakeHeadTracker(command, chain, rpc_pool);
    tracker->set_election(election.get());
    ElectorOptions elector_options;
    elector_options.name = election->options().owner;
    elector = std::make_unique<Elector>(election.get(), tracker.get(), elector_options);
    lease = std::make_unique<ElectorLease>(elector.get(), election.get());
    leader = MakeLeader(command, chain, coord.keys, process_id, lease.get(), rpc.get());
    Result<std::unique_ptr<PgWaker>> waker = PgWaker::Open(
        chain.pool->url(), {std::string(kRangeCommittedChannel)}, chain.pool->options());
    if (waker.ok()) {
      leader_waker = std::move(waker).value();
      leader->set_waker(leader_waker.get());
    }
  }
  // The leader check reads the elector: probing stops (at the latest when this guard goes, before
  // the elector does) before the elector is destroyed.
  struct StopProbes {
    ReadinessProber* prober;
    ~StopProbes() {
      if (prober != nullptr) prober->Stop();
    }
  } stop_probes{ops.readiness.get()};
  if (elector != nullptr) {
    ops.Add("leader", LeaderProbe(elector.get(), command.election, command.redis, coord.keys));
  }
  // The partitions' secondary indexes, built by the leader as they finish (node/index_builder.h).
  std::unique_ptr<IndexBuilder> index_builder;
  if (command.with_leader) {
    IndexBuilderOptions options;
    options.near_head = args.index_near_head;
    if (!command.follow) options.to = chain.to;
    index_builder =
        std::make_unique<IndexBuilder>(chain.pool->url(), chain.pool->options(), options,
                                       lease.get(), [l = leader.get()] { return l->frontier(); });
  }
  std::unique_ptr<EventRelays> relays;
  if (command.with_leader) {
    GAPLESS_ASSIGN_OR_RETURN(
        relays, EventRelays::Open(command.events, chain.pool.get(), chain.chain_id, chain.from,
                                  command.follow ? std::nullopt : std::optional(chain.to),
                                  lease.get(), make_client));
  }
  // Kafka: the consumers, plus one queue worker fetching the gaps the leader queues from the node
  // (when there is one). RPC: the queue workers.
  const uint32_t queue_workers = kafka ? (has_rpc ? 1 : 0) : command.workers;
  // One budget for the process's fetching threads (node/memory_budget.h), Kafka workers included.
  MemoryBudget budget(args.memory_budget_mib * MemoryBudget::kMiB,
                      queue_workers + (kafka ? command.workers : 0));
  std::vector<std::unique_ptr<KafkaWorker>> kafka_workers;
  if (kafka) {
    kafka_workers = MakeKafkaWorkers(command, chain, coord.keys, process_id,
                                     has_rpc ? &make_client : nullptr, head_log.get(), &budget);
  }
  std::vector<std::unique_ptr<Worker>> workers =
      MakeWorkers(command, chain, coord.keys, process_id, make_client, limiter.limiter.get(),
                  leader.get(), head_log.get(), queue_workers, &budget,
                  // The gap healer beside Kafka workers stops with them.
                  kafka && leader == nullptr ? std::function<bool()>([&kafka_workers] {
                    return std::all_of(kafka_workers.begin(), kafka_workers.end(),
                                       [](const auto& w) { return w->done(); });
                  })
                                             : nullptr);

  spdlog::info(
      "{} blocks {}..{} of chain {} with {} workers{} (coordination: redis {}; {} lock node{})",
      leader != nullptr ? "indexing" : "working on", chain.from,
      command.follow ? "(following)" : std::to_string(chain.to), chain.chain_id, command.workers,
      leader != nullptr ? " and a leader candidate" : "", coord.redis->Describe(),
      worker_nodes->size(), worker_nodes->size() == 1 ? "" : "s");

  std::unique_ptr<PoolPublisher> pool_publisher;
  if (rpc_pool) {
    pool_publisher =
        std::make_unique<PoolPublisher>(rpc_pool, command.redis, coord.keys.rpc_pool(process_id));
  }

  IndexCounters totals;
  const bool live_bar = ShowsLiveBar(args.progress);
  Progress progress(&totals, chain.to - chain.from + 1, live_bar, Env::Default(),
                    /*plain_interval_seconds=*/30);
  SignalStop signals;
  RoleThreads roles(&signals.flag());
  for (auto& w : workers) {
    roles.Start([worker = w.get()](const std::atomic<bool>& stop) { return worker->Run(stop); });
  }
  for (auto& w : kafka_workers) {
    roles.Start([worker = w.get()](const std::atomic<bool>& stop) { return worker->Run(stop); });
  }
  if (leader != nullptr) {
    // The lease: from now until a signal (graceful stepdown: stop producing, release on every
    // lock node at once, not after the workers' last writes) or until the fixed range is done.
    elector->Start();
    roles.Start([e = elector.get(), l = leader.get(), r = relays.get(),
                 b = index_builder.get()](const std::atomic<bool>& stop) {
      while (!stop.load() && !(l->done() && r->done() && b->done())) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      e->Stop();
      return Status::Ok();
    });
    // The duties return when a fixed range is done (the workers see done() and return by
    // themselves too), on a signal, or on an error, which stops every role.
    roles.Start([l = leader.get()](const std::atomic<bool>& stop) { return l->Run(stop); });
    roles.Start([b = index_builder.get()](const std::atomic<bool>& stop) { return b->Run(stop); });
    if (relays->size() > 0) {
      // The relays: a thread per bus; they return once the fixed range is published.
      // A relay stopped by an error stops the process (every role), rather than leave its bus
      // without events while the others go on.
      roles.Start([r = relays.get()](const std::atomic<bool>& stop) {
        r->Start(stop);
        GAPLESS_RETURN_IF_ERROR(r->Wait());
        return r->Join();
      });
    }
  }
  ops.SetStarted();
  if (args.progress != ProgressDisplay::kOff) progress.Start();
  WatchFleet(roles, workers, kafka_workers, live_bar, &totals);
  Status first_error = roles.StopAndJoin();
  progress.Stop();
  spdlog::info("{}", progress.Summary());

  uint64_t dead = 0, lost = 0;
  for (auto& w : workers) {
    dead += w->counters().dead_lettered.load();
    lost += w->counters().leases_lost.load();
  }
  for (auto& w : kafka_workers) {
    if (uint64_t d = w->counters().dead_lettered.load(); d > 0) {
      spdlog::warn("{} block messages were dead-lettered to {}.dlq (see the log for why)", d,
                   command.kafka.topic);
    }
    spdlog::info("kafka worker {}: {} windows written, {} skipped as already committed", w->id(),
                 w->counters().tasks.load(), w->skipped());
  }
  if (dead > 0) {
    spdlog::warn(
        "{} ranges were dead-lettered: see `gapless dlq list`, re-queue with `gapless dlq retry`",
        dead);
  }
  if (lost > 0) spdlog::info("{} tasks were dropped after their lease was lost", lost);
  if (rpc_pool) {
    for (const EndpointStats& e : rpc_pool->Stats()) {
      spdlog::info("rpc endpoint {}: {}", e.endpoint, DescribeStats(e));
    }
  }
  GAPLESS_RETURN_IF_ERROR(first_error);
  if (!kafka_workers.empty() && leader == nullptr &&
      std::all_of(kafka_workers.begin(), kafka_workers.end(),
                  [](const auto& w) { return w->done(); })) {
    spdlog::info("done: the fleet's frontier passed block {}", *command.indexing.to.number);
    return Outcome::kDone;
  }
  if (leader != nullptr && leader->done()) {
    spdlog::info("done: blocks {}..{} are committed (frontier {})", chain.from, chain.to,
                 leader->frontier());
    return Outcome::kDone;
  }
  return Outcome::kStopped;
}

}  // namespace gapless
