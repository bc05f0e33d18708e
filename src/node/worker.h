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
// Prefetch (WorkerOptions::prefetch, off by default: it pays only where a core is free, +13-24%
// with one worker on 2 cores and -3 to +4% with two, bench/RESULTS.md "the worker's fetch
// overlapped with its write"; docs/decisions.md): while part n (a task's
// range, or a part of it under the memory budget) is written to PostgreSQL on the worker's writer
// thread, the loop thread already claims the next task if it needs one and fetches and decodes
// the next part, at most one part ahead. Why that keeps the guarantees above:
//  - The next task is claimed before it is fetched, never after: its fencing token is granted
//    before any of its blocks are read, so a re-org rolled back after the fetch refuses the write
//    (store/writer.h: a token granted before the rollback cannot write above the fork point), as
//    it does without prefetch. Fetching ahead of the claim (peeking at the queue) would pair
//    blocks read before a rollback with a token granted after it, which nothing refuses.
//  - So a claimed task may wait behind the write for longer than its TTL: the keeper renews every
//    task the worker holds (two at most), and the loop renews it once more right before its own
//    write. If a renewal is refused, only that task is dropped.
//  - Each write carries its own task's token. A write refused by the fence, failed, or
//    dead-lettered settles its own task only (dropped, retried in series, or failed back to the
//    queue); the task fetched behind it keeps its lease and its fate is decided by its own write.
//    Parts of one task are written in order, one at a time, so a failed part stops the task's
//    later parts (fetched ones are dropped unwritten).
//  - A worker killed at any moment holds at most two leases; both expire and the janitor
//    requeues both. Stop: the write in flight ends (a write is never cut short) and is settled;
//    the task fetched ahead is left to its lease expiry, like a task abandoned at a stop.
//  - Memory: two decoded parts are held at once, so each part gets half of the thread's share
//    of the budget (MemoryBudget::PartBlocks with held_parts 2).
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
// Thread-safety: a Worker is run by one thread (Run); it starts one keeper thread of its own and,
// with prefetch, one writer thread (PostgreSQL only: the loop thread does every Redis call).
// counters() may be read from any thread. Connections: two RedisConns (loop, keeper) opened in
// Run; PostgreSQL connections leased from the shared pool for each write (with prefetch the loop
// thread leases one beside the writer's only to restore the fence counter).
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
#include <vector>

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
  // Fetch and decode the next part (of this task or of a newly claimed one) while the last part is
  // written (see "Prefetch" above). false: fetch, write, complete, claim in series.
  bool prefetch = false;
  std::optional<uint64_t> chain_id;     // every transaction's chainId must match, when set
  std::optional<VerifyOptions> verify;  // --verify: each block proven against its header
  bool token_metadata = true;           // --token-metadata (node/enrich.h)
  // --contracts: decoded into their tables in each range's write (store/decoded.h). Not owned.
  const ContractTables* contracts = nullptr;
  // --data events: only the logs matching this filter and their blocks (FetchEventsRange), in
  // sparse writes, with --verify-complete proven complete; nullopt: every block whole.
  std::optional<EventsFetch> events_filter;
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
  // locally, then failed back to the queue — so a block the check refuses is never committed;
  // the endpoint that served that block is distrusted (FetchAndDecodeRange).
  RangeCheck check_blocks;
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
  std::atomic<uint64_t> idle_micros{0};  // sleeping idle_poll_ms after an empty claim
  // With prefetch the write runs on the writer thread beside the loop: fetch is then the loop's
  // fetching (overlapping the write), write the loop's wait for the write to end (the part of it
  // that the fetch did not hide), and written the writer thread's own time in pool Acquire +
  // WriteRange. Without prefetch write and written are the same.
  std::atomic<uint64_t> fetch_micros{0};    // FetchAndDecodeRange: RPC round trips + decoding
  std::atomic<uint64_t> write_micros{0};    // pool Acquire + WriteRange (the fenced transaction)
  std::atomic<uint64_t> written_micros{0};  // the writes themselves (not part of the five)
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
  // A task whose range is committed and that is still to be completed in Redis.
  struct Committed {
    Lease lease;
    uint64_t blocks = 0, transactions = 0, logs = 0, token_transfers = 0;
  };
  // A claimed task from its claim until it is committed, failed or dropped; held (its lease
  // renewed by the keeper) while it is.
  struct Task {
    Lease lease;
    uint64_t seq = 0;  // the keeper's name for it
    // Abandon the task: the keeper saw its lease refused, or the worker is stopping.
    std::shared_ptr<std::atomic<bool>> abort = std::make_shared<std::atomic<bool>>(false);
    uint64_t next_from = 0;  // the first block not yet handed to a write
    bool over = false;       // committed, failed or dropped: nothing more is done with it
    Committed done;          // the parts committed so far
  };
  // How a part's attempts ended.
  struct PartOutcome {
    Status status;
    bool lost = false;       // renewal refused or fenced off: the task is someone else's
    bool abandoned = false;  // the task's abort flag seen
  };

  void RecordError(const Status& st);
  Status Validate() const;
  // Processes one claimed task in series: fetch, write, part after part (prefetch off); sets
  // *committed when its range was committed (the caller completes it). Returns a non-ok Status
  // only for errors that stop the worker.
  Status Process(Queue& queue, BlockSource& source, const Lease& lease,
                 std::optional<Committed>* committed);
  // The loop with prefetch (see the file comment; worker_prefetch.cc); returns what Run returns.
  class PrefetchLoop;  // its states: claim, fetch, hand off to the writer thread
  Status RunPrefetching(Queue& queue, BlockSource& source, RedisConn& redis,
                        const std::atomic<bool>& stop);
  // Attempts `attempt`.. of one part: fetch and decode into write->blocks, renew, write, with
  // local retries and backoff (the series path; with prefetch, a part whose write failed).
  PartOutcome ProcessPart(Queue& queue, BlockSource& source, Task& task, RangeWrite* write,
                          uint32_t batch, int attempt);
  // Fetches and decodes one part (with local retries of the fetch and check alone);
  // *attempts_used gets the attempts spent.
  PartOutcome FetchPart(BlockSource& source, Task& task, RangeWrite* write, uint32_t batch,
                        int* attempts_used);
  // Fetches, decodes and checks write->from_block..to_block (counted as fetch time).
  Status FetchAndCheck(BlockSource& source, const Task& task, RangeWrite* write, uint32_t batch);
  // Backs off before attempt `attempt` + 1 of a part that failed with `st`; false when the task
  // was abandoned meanwhile.
  bool BackoffBeforeRetry(const Task& task, int attempt, const Status& st);
  RangeWrite NewWrite(const Task& task, uint64_t from, uint64_t to) const;
  WriteOptions MakeWriteOptions() const;
  // Renews the task's lease right before its write (a full TTL ahead). A refusal: lost.
  PartOutcome RenewBeforeWrite(Queue& queue, const Task& task);
  // After a write refused by a fence (or the re-org fence): raises a lagging counter. Other
  // errors: nothing.
  void AfterFenceRefusal(Queue& queue, const Task& task, const Status& st);
  // The end of a task that was not committed: logs a lost or abandoned lease, or fails it back to
  // the queue. Returns a non-ok Status only for errors that stop the worker.
  Status EndUncommitted(Queue& queue, const Task& task, const PartOutcome& outcome);
  // Starts holding a claimed task (the keeper renews its lease) / stops.
  std::shared_ptr<Task> Hold(const Lease& lease);
  void Release(Task& task);
  // Completes `done` and claims the next task in one round trip (Queue::CompleteAndClaim); after
  // a failed call, completes `done` on its own and returns the call's error.
  Result<std::optional<Lease>> CompleteAndClaimNext(Queue& queue, const Committed& done);
  void CompleteCommitted(Queue& queue, const Committed& done);
  // Counts a completed task, or logs why its completion was refused.
  void RecordCompletion(const Committed& done, const Status& completed);
  // Floors the fence counter from PostgreSQL when Redis lost it (see the file comment).
  Status EnsureFenceFloor(RedisConn& redis);
  // Claims the next task (completing *committed with it), with the fence-floor check and the
  // data-set restore of the file comment; counts the time as coord.
  // A claim failed. FailedPrecondition (the worker cannot go on) ends the loop: true. Anything
  // else is the coordination Redis failing: sleeps a backoff growing with *failures (counted up
  // here, reset by the caller on success), capped at 5 s, as coordination time; false.
  bool EndsAfterClaimFailure(const Status& failure, int64_t* failures);
  Result<std::optional<Lease>> ClaimNext(Queue& queue, RedisConn& redis,
                                         std::optional<Committed>* committed);
  // Sleeps up to `micros` in short slices, returning early once `abort` is set.
  void SleepUnlessAborted(int64_t micros, const std::atomic<bool>& abort);
  void KeeperLoop(RedisConn* redis);

  mutable std::mutex error_mu_;
  std::string last_error_;
  WorkerOptions options_;
  BlockSourceFactory source_factory_;
  std::string redis_url_;
  Keys keys_;
  PgPool* pool_;
  WorkerCounters counters_;
  bool data_set_restored_ = false;  // the last claim was refused (IsFenceDataSetRefusal)

  // Shared with the keeper thread: the tasks held (at most two, with prefetch), oldest first.
  std::mutex mu_;
  uint64_t task_seq_ = 0;
  std::vector<std::shared_ptr<Task>> held_;
  std::atomic<bool> keeper_quit_{false};
  const std::atomic<bool>* stop_ = nullptr;
};

}  // namespace gapless
