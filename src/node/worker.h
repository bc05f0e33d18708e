// Worker: the fleet's data-path role (DESIGN "Roles"). Claims range tasks from the leased work
// queue, fetches and decodes their blocks from a block source (source/block_source.h: a JSON-RPC
// node), commits them to PostgreSQL in one fenced transaction,
// and completes the task together with claiming the next one (Queue::CompleteAndClaim: one Redis
// round trip between two tasks). Many workers, in one process or many, share a queue with no
// coordinator in the data path.
//
// Why a worker can be killed or paused at any moment without a gap or a duplicate:
//  - A claimed task carries a lease (worker id, fencing token, TTL). A worker that dies stops
//    renewing; the janitor requeues the task after the TTL and another worker takes it. No gap.
//  - The write carries the lease's token into PostgreSQL (store/writer.h), which refuses it when a
//    higher token was recorded for the range: a worker paused past its TTL (SIGSTOP, GC, a
//    partition) whose task was re-leased cannot commit when it resumes. It logs the loss and
//    drops the task without completing it. And range writes are idempotent, so the commit that
//    did happen twice (the new owner rewrites a range the old one committed) leaves the rows as
//    written once. No duplicate.
//  - Complete/Fail/Renew are owner-only (queue scripts); a refusal (Aborted) means the task
//    belongs to someone else now: drop it.
//  - A healthy slow worker never loses its lease: a keeper thread renews it every
//    lease_ttl_ms / 3 while the task is fetched, written or waiting out a backoff, and the main
//    thread renews it once more right before the write. rpc_timeout_ms must be below the TTL.
//  - After Redis lost its data the fence counter restarts at 0; before each claim the worker
//    checks the counter exists and, if not, floors it at PostgreSQL's highest token first.
//
// Failure policy per task: up to local_attempts tries (exponential backoff with jitter between
// them, the lease renewed meanwhile) for retriable failures (Unavailable, InvalidData, Aborted
// other than the fence, NotFound: a block not yet at the node); then Queue::Fail, which puts the
// task at the back of the queue, or into the DLQ with the error at max_attempts failures. A
// FailedPrecondition (wrong chain, bad config) fails the task and stops the worker: Run returns it.
//
// Stop: when `stop` becomes true the current task is abandoned (not completed; its lease expires
// and the janitor requeues it) and Run returns Ok after leaving the registry.
//
// Thread-safety: a Worker is run by one thread (Run); it starts one keeper thread of its own.
// counters() may be read from any thread. Connections: two RedisConns (loop, keeper) opened in
// Run; PostgreSQL connections leased from the shared pool for each write.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "coord/keys.h"
#include "coord/queue.h"
#include "coord/rate_limiter.h"
#include "coord/redis.h"
#include "core/env.h"
#include "core/status.h"
#include "node/memory_budget.h"
#include "node/range_job.h"
#include "store/pg.h"
#include "store/writer.h"

namespace gapless {

struct WorkerOptions {
  std::string worker_id;  // unique in the fleet, e.g. "host:pid:n"; required
  int64_t lease_ttl_ms = 30'000;
  int local_attempts = 3;  // tries per claim before Fail()
  int max_attempts = 5;    // Fail() dead-letters the task at this many failures
  int64_t idle_poll_ms = 200;
  // The RPC client's per-request timeout, as configured by the caller on the transport the
  // factory builds. Must be below lease_ttl_ms (FailedPrecondition otherwise).
  int64_t rpc_timeout_ms = 10'000;
  int64_t retry_base_micros = 500'000;
  int64_t retry_cap_micros = 10'000'000;
  int64_t heartbeat_interval_ms = 2'000;  // registry beat; the heartbeat TTL is 3 intervals
  uint32_t blocks_per_request = 10;
  std::optional<uint64_t> chain_id;     // every transaction's chainId must match, when set
  std::optional<VerifyOptions> verify;  // --verify: each block proven against its header
  bool token_metadata = true;           // --token-metadata (node/enrich.h)
  WriteMode write_mode = WriteMode::kStagingUpsert;
  CopyFormat copy_format = CopyFormat::kBinary;  // --copy-format (store/copy_rows.h)
  // The process's memory budget (node/memory_budget.h), borrowed, nullable (no budget), shared by
  // the workers of a process: a task's range is fetched and written in the parts it allows.
  MemoryBudget* memory_budget = nullptr;
  // Fleet-wide RPC rate limiter, borrowed, nullable; thread-safe, so all the workers of a process
  // may share one (a 429 seen by one then slows them all).
  RateLimiter* limiter = nullptr;
  // Checks a fetched range before it is written (nullable): the HA leader's head log
  // (node/head_tracker.h HeadLogCheck). A failure is handled like a fetch failure — retried
  // locally, then failed back to the queue — so a block the check refuses is never committed.
  std::function<Status(const std::vector<BlockData>&)> check_blocks;
  // Asked when there is nothing to claim; returning true makes Run return Ok (e.g. "the leader's
  // fixed range is done"). Nullable: run until stopped.
  std::function<bool()> done;
  Env* env = Env::Default();
};

struct WorkerCounters {
  std::atomic<uint64_t> blocks{0};
  std::atomic<uint64_t> transactions{0};
  std::atomic<uint64_t> logs{0};
  std::atomic<uint64_t> token_transfers{0};
  std::atomic<uint64_t> tasks{0};    // completed
  std::atomic<uint64_t> retries{0};  // local retries
  std::atomic<uint64_t> failed{0};   // Fail() calls (requeued or dead-lettered)
  std::atomic<uint64_t> dead_lettered{0};
  std::atomic<uint64_t> leases_lost{0};  // tasks dropped: renewal refused or fenced off

  // Where the Run thread's time goes, in microseconds of options.env->NowMicros() (so virtual
  // under a SimEnv), for the scaling benchmark (bench/scale_bench.cc): how much of a worker's
  // time coordination costs next to the data path. Cheap (two clock reads per step). The keeper
  // thread's renewals and heartbeats are not counted: they run beside the loop on their own
  // connection and never hold it up. Start-up (connecting) and leaving the registry are not
  // counted either, so the five sum to slightly less than the Run call.
  //
  // Redis: the fence-floor check (with PostgreSQL's highest token when the counter is missing)
  // and the claim, also when it finds nothing; the renewal right before the write; complete (with
  // its retry sleeps); fail; and the backoff while Redis is away.
  std::atomic<uint64_t> coord_micros{0};
  std::atomic<uint64_t> idle_micros{0};     // sleeping idle_poll_ms after an empty claim
  std::atomic<uint64_t> fetch_micros{0};    // FetchAndDecodeRange: RPC round trips + decoding
  std::atomic<uint64_t> write_micros{0};    // pool Acquire + WriteRange (the fenced transaction)
  std::atomic<uint64_t> backoff_micros{0};  // sleeping between local attempts of a task
};

class Worker {
 public:
  // `pool` is borrowed and must outlive the worker.
  Worker(WorkerOptions options, BlockSourceFactory source_factory, std::string redis_url, Keys keys,
         PgPool* pool);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Claims and processes tasks until `stop` is true (or options.done() says so when idle).
  // Returns Ok then; FailedPrecondition for invalid options or a task that failed with it;
  // Unavailable only when Redis cannot be reached at start (later outages are waited out).
  Status Run(const std::atomic<bool>& stop);

  const WorkerCounters& counters() const { return counters_; }
  const std::string& id() const { return options_.worker_id; }
  // The last failed attempt's error ("" if none yet), for the periodic status line. Thread-safe.
  std::string last_error() const;

 private:
  void RecordError(const Status& st);
  Status Validate() const;
  // A task whose range is committed and that is still to be completed in Redis.
  struct Committed {
    Lease lease;
    uint64_t blocks = 0, transactions = 0, logs = 0, token_transfers = 0;
  };
  // Processes one claimed task; sets *committed when its range was committed (the caller
  // completes it). Returns a non-ok Status only for errors that stop the worker.
  Status Process(Queue& queue, BlockSource& source, const Lease& lease,
                 std::optional<Committed>* committed);
  // Completes `done` and claims the next task in one round trip (Queue::CompleteAndClaim); after
  // a failed call, completes `done` on its own and returns the call's error.
  Result<std::optional<Lease>> CompleteAndClaimNext(Queue& queue, const Committed& done);
  void CompleteCommitted(Queue& queue, const Committed& done);
  // Counts a completed task, or logs why its completion was refused.
  void RecordCompletion(const Committed& done, const Status& completed);
  // Floors the fence counter from PostgreSQL when Redis lost it (see the file comment).
  Status EnsureFenceFloor(RedisConn& redis);
  // Sleeps up to `micros` in short slices, returning early once abort_ is set.
  void SleepUnlessAborted(int64_t micros);
  void KeeperLoop(RedisConn* redis);

  mutable std::mutex error_mu_;
  std::string last_error_;
  WorkerOptions options_;
  BlockSourceFactory source_factory_;
  std::string redis_url_;
  Keys keys_;
  PgPool* pool_;
  WorkerCounters counters_;

  // Shared with the keeper thread.
  std::mutex mu_;
  bool active_ = false;  // a task is being processed
  uint64_t task_seq_ = 0;
  Lease lease_;
  std::atomic<bool> abort_{false};  // abandon the current task: lease lost or stopping
  std::atomic<bool> keeper_quit_{false};
  const std::atomic<bool>* stop_ = nullptr;
};

}  // namespace gapless
