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
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "coord/elector.h"
#include "node/commands.h"
#include "node/head_tracker.h"
#include "node/leader.h"
#include "node/progress.h"
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
std::unique_ptr<HeadTracker> MakeHeadTracker(const FleetCommand& command,
                                             const CheckedChain& chain) {
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
  return std::make_unique<HeadTracker>(MakeRpcClientFactory(rpc)(), command.indexing.db, options);
}

// The process's workers, "host:pid:0".."host:pid:N-1". With a leader on a fixed range they also
// stop by themselves once it is done.
std::vector<std::unique_ptr<Worker>> MakeWorkers(const FleetCommand& command,
                                                 const CheckedChain& chain, const Keys& keys,
                                                 const std::string& process_id,
                                                 const RpcClientFactory& make_client,
                                                 RateLimiter* limiter, const Leader* leader,
                                                 const Election* head_log) {
  const IndexingOptions& args = command.indexing;
  std::vector<std::unique_ptr<Worker>> workers;
  for (uint32_t i = 0; i < command.workers; ++i) {
    WorkerOptions options;
    options.worker_id = fmt::format("{}:{}", process_id, i);
    options.lease_ttl_ms = command.lease_ttl_ms;
    options.rpc_timeout_ms = args.rpc.request_timeout_ms;
    options.max_attempts = args.rpc.max_attempts;
    options.blocks_per_request = args.batch;
    options.chain_id = chain.chain_id;
    options.write_mode = args.write_mode;
    options.limiter = limiter;
    if (leader != nullptr && !command.follow) options.done = [leader] { return leader->done(); };
    options.check_blocks = [head_log](const std::vector<BlockData>& blocks) {
      return HeadLogCheck(*head_log, blocks);
    };
    workers.push_back(
        std::make_unique<Worker>(options, RpcBlockSources(make_client), command.redis, keys, chain.pool.get()));
  }
  return workers;
}

// Until every role has returned: feeds the workers' counters to the progress display every
// 200 ms and, without the live bar (logs), writes a status line every 30 s: tasks done, rate,
// success ratio, last error.
void WatchFleet(const RoleThreads& roles, const std::vector<std::unique_ptr<Worker>>& workers,
                bool live_bar, IndexCounters* totals) {
  auto next_report = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto started = std::chrono::steady_clock::now();
  while (roles.running()) {
    if (!live_bar && std::chrono::steady_clock::now() >= next_report) {
      next_report += std::chrono::seconds(30);
      uint64_t done = 0, failed = 0, blocks = 0;
      std::string last_error;
      for (auto& w : workers) {
        done += w->counters().tasks.load();
        failed += w->counters().failed.load();
        blocks += w->counters().blocks.load();
        if (std::string e = w->last_error(); !e.empty()) last_error = e;
      }
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      spdlog::info(
          "status: {} ranges done, {} failed attempts handed back, success {:.1f}%, {:.1f} "
          "blocks/s, last error: {}",
          done, failed, done + failed > 0 ? 100.0 * done / (done + failed) : 100.0,
          elapsed > 0 ? blocks / elapsed : 0.0, last_error.empty() ? "none" : last_error);
    }
    uint64_t blocks = 0, txs = 0, logs = 0, transfers = 0, tasks = 0, retries = 0;
    for (auto& w : workers) {
      blocks += w->counters().blocks.load();
      txs += w->counters().transactions.load();
      logs += w->counters().logs.load();
      transfers += w->counters().token_transfers.load();
      tasks += w->counters().tasks.load();
      retries += w->counters().retries.load();
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
  RpcClientFactory make_client = MakeRpcClientFactory(args.rpc);
  auto rpc = make_client();
  GAPLESS_ASSIGN_OR_RETURN(
      CheckedChain chain, CheckChain(*rpc, ChainRequest{args.from, args.to, args.chain_id}, args.db,
                                     std::max<size_t>(args.db_connections, command.workers + 1) +
                                         command.events.buses.size()));
  auto open_coordination = [&] {
    auto conn = chain.pool->Acquire();
    return OpenCoordination(command.redis, *conn, chain.chain_id,
                            EvictionCheck::kRequireNoEviction);
  };
  GAPLESS_ASSIGN_OR_RETURN(Coordination coord, open_coordination());
  GAPLESS_ASSIGN_OR_RETURN(
      SharedRateLimiter limiter,
      OpenRateLimiter(command.redis, coord.keys, rpc->Describe(), command.rate_limit));

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
    tracker = MakeHeadTracker(command, chain);
    ElectorOptions elector_options;
    elector_options.name = election->options().owner;
    elector = std::make_unique<Elector>(election.get(), tracker.get(), elector_options);
    lease = std::make_unique<ElectorLease>(elector.get());
    leader = MakeLeader(command, chain, coord.keys, process_id, lease.get(), rpc.get());
    Result<std::unique_ptr<PgWaker>> waker = PgWaker::Open(
        chain.pool->url(), {std::string(kRangeCommittedChannel)}, chain.pool->options());
    if (waker.ok()) {
      leader_waker = std::move(waker).value();
      leader->set_waker(leader_waker.get());
    }
  }
  std::unique_ptr<EventRelays> relays;
  if (command.with_leader) {
    GAPLESS_ASSIGN_OR_RETURN(
        relays, EventRelays::Open(command.events, chain.pool.get(), chain.chain_id, chain.from,
                                  command.follow ? std::nullopt : std::optional(chain.to),
                                  lease.get(), make_client));
  }
  std::vector<std::unique_ptr<Worker>> workers =
      MakeWorkers(command, chain, coord.keys, process_id, make_client, limiter.limiter.get(),
                  leader.get(), head_log.get());

  spdlog::info(
      "{} blocks {}..{} of chain {} with {} workers{} (coordination: redis {}; {} lock node{})",
      leader != nullptr ? "indexing" : "working on", chain.from,
      command.follow ? "(following)" : std::to_string(chain.to), chain.chain_id, command.workers,
      leader != nullptr ? " and a leader candidate" : "", coord.redis->Describe(),
      worker_nodes->size(), worker_nodes->size() == 1 ? "" : "s");

  IndexCounters totals;
  const bool live_bar = ShowsLiveBar(args.progress);
  Progress progress(&totals, chain.to - chain.from + 1, live_bar, Env::Default(),
                    /*plain_interval_seconds=*/30);
  SignalStop signals;
  RoleThreads roles(&signals.flag());
  for (auto& w : workers) {
    roles.Start([worker = w.get()](const std::atomic<bool>& stop) { return worker->Run(stop); });
  }
  if (leader != nullptr) {
    // The lease: from now until a signal (graceful stepdown: stop producing, release on every
    // lock node at once, not after the workers' last writes) or until the fixed range is done.
    elector->Start();
    roles.Start(
        [e = elector.get(), l = leader.get(), r = relays.get()](const std::atomic<bool>& stop) {
          while (!stop.load() && !(l->done() && r->done())) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          e->Stop();
          return Status::Ok();
        });
    // The duties return when a fixed range is done (the workers see done() and return by
    // themselves too), on a signal, or on an error, which stops every role.
    roles.Start([l = leader.get()](const std::atomic<bool>& stop) { return l->Run(stop); });
    if (relays->size() > 0) {
      // The relays: a thread per bus; they return once the fixed range is published.
      roles.Start([r = relays.get()](const std::atomic<bool>& stop) {
        r->Start(stop);
        return r->Join();
      });
    }
  }
  if (args.progress != ProgressDisplay::kOff) progress.Start();
  WatchFleet(roles, workers, live_bar, &totals);
  Status first_error = roles.StopAndJoin();
  progress.Stop();
  spdlog::info("{}", progress.Summary());

  uint64_t dead = 0, lost = 0;
  for (auto& w : workers) {
    dead += w->counters().dead_lettered.load();
    lost += w->counters().leases_lost.load();
  }
  if (dead > 0) {
    spdlog::warn(
        "{} ranges were dead-lettered: see `gapless dlq list`, re-queue with `gapless dlq retry`",
        dead);
  }
  if (lost > 0) spdlog::info("{} tasks were dropped after their lease was lost", lost);
  GAPLESS_RETURN_IF_ERROR(first_error);
  if (leader != nullptr && leader->done()) {
    spdlog::info("done: blocks {}..{} are committed (frontier {})", chain.from, chain.to,
                 leader->frontier());
    return Outcome::kDone;
  }
  return Outcome::kStopped;
}

}  // namespace gapless
