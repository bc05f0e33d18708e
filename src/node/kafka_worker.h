// KafkaWorker: the fleet's data path fed by a Kafka block stream instead of the work queue (issue
// 9, seed 000). One consumer in a consumer group reads the topic (docs/kafka-blocks.md: one
// message per block), groups the blocks it holds into ranges, and commits each range through the
// same fenced, idempotent writer as the RPC workers (store/writer.h).
//
// Ranges. Blocks are grouped by window: the aligned range of range_size blocks a block belongs to
// (node/ranges.h, the cut the seeder uses), clipped to [from, to]. A window is written when the
// worker holds all of it, or when its newest block is flush_after_ms old (the chain tip, or a
// producer whose partitioner scatters a window over several partitions): then the contiguous runs
// it holds are written. `gapless produce` keeps a window in one partition, so normally each window
// is written whole, once.
//
// One notion of "committed": a held block is committed when PostgreSQL stores a block at its
// height with its hash. Nothing else (no range coverage, no marker) says a window is done, so a
// re-org that replaced the stored block, or a new fork's message for a stored height, is never
// taken for done. Per window, in this order (the order is the safety argument):
//  0. The re-org generation the coordination Redis has followed is read (Keys::reorg_generation),
//     before anything below: every completion this step records is fenced by it
//     (Frontier::RecordFenced), so one of a fork that a rollback removed since can never lift
//     the frontier over the hole.
//  1. Completion, by hash: held blocks stored with their hash are done (their runs recorded for
//     the frontier again: a worker killed between its commit and its record left them out). With
//     a head log (head_log, the fleet's lock nodes), as RPC workers check theirs: a held block
//     whose height the log has not committed yet (at or above the lowest height it keeps) waits;
//     one whose hash differs from the log's is of another fork and is dropped (its message is
//     acknowledged with the window; the log's block comes as a later message, or the leader heals
//     the gap from the node); one whose height PostgreSQL stores with another hash waits for the
//     leader's rollback. Nothing left to write and nothing waiting: the window is done.
//  2. The window's range lock (SET NX PX with this worker's id; coord/range_lock.h), which hands
//     out a fresh fencing token. Held by another worker: the window waits and is looked at again.
//     Taken: step 1 runs again under the lock (the previous holder may have committed, the log
//     may have moved), so two live workers never both write a block, and the token predates the
//     head-log comparison: a truncation after it reads a fence floor at or above the token, so a
//     write of the old fork is deleted by the rollback or refused by the writer's re-org fence.
//     A keeper thread extends the lock every third of its TTL; once more right before the write.
//  3. Decode (source/block_source.h, the same checks as for RPC blocks) and WriteRange with the
//     token, one transaction per run (per part of a run, under a memory budget: see Memory). A
//     holder paused past its TTL whose lock was taken over is refused by the fence when it
//     resumes; it then starts the window again from step 0.
//  4. The run (part) is recorded for the frontier (fenced, step 0).
//  5. Only now are its messages acknowledged (Subscriber::AckAll: the partition's offset is
//     committed up to the lowest message not yet done) and their text dropped; blocks step 1
//     found committed are released the same way. The lock is released after the last run. A
//     crash anywhere before leaves the messages uncommitted: the group delivers them again, and
//     step 1 skips them.
// Two messages for one height with different hashes (a re-org, the producer publishing the new
// fork): the later one is held; both are acknowledged when it is written (one of another fork,
// dropped in step 1, with the window).
// Rebalances: messages of a partition this consumer lost are dropped from its windows (their new
// owner reads them again from the committed offset); duplicates of a block (a producer that
// re-published, a redelivery) join the same window and are acknowledged together.
//
// Memory (issue 19, node/memory_budget.h): with a budget, the worker's share bounds what it
// holds. librdkafka's queue of fetched messages is bounded (SubscribeOptions::max_queue_bytes);
// a poll takes no more messages than the room left under the share for held messages; when the
// held text passes that share, the oldest windows' contiguous runs are written at once (as when
// quiet), and if it is still above (the windows cannot be written now: their locks are held
// elsewhere, the head log has not reached them, PostgreSQL is away) what the next polls bring is
// handed back (Subscriber::HandBack: the partition's position goes back to the message, which
// comes again with everything after it; the offset commit stays below it), one message a poll,
// until a pass leaves it within its share again. Polling goes on, so the group membership stays.
// (Not librdkafka's pause: it resumes at a position of its own, which its issue tracker reports
// stale after a pause carried over a rebalance; a seek to the message handed back is exact.
// docs/decisions.md.) A run is decoded and written in parts of what the share lets it hold decoded,
// each part its own fenced write with the window's token, and each written part is released at
// once: its messages acknowledged, their text dropped. A window partly written keeps only what is
// left.
//
// Bad input: a message that is not a block (docs/kafka-blocks.md) is sent to the topic's dead-
// letter topic "{topic}.dlq" with the error and acknowledged, logged with its partition and
// offset. A block the decoder refuses (naming the block and field) is fetched from the RPC node
// instead when a fallback is configured; otherwise it is retried max_attempts times and then
// dead-lettered the same way. Its blocks stay missing: the frontier stops at the gap, `gapless
// status` shows it, and a leader with RPC workers heals it (node/leader.h heal_gaps_after_ms).
// Failures of PostgreSQL or Redis are retried with backoff for as long as they last: nothing is
// acknowledged before it is committed.
//
// Thread-safety: Run is called by one thread; it starts one keeper thread. counters() may be read
// from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coord/keys.h"
#include "coord/queue.h"
#include "coord/redis.h"
#include "core/env.h"
#include "core/status.h"
#include "events/bus.h"
#include "node/memory_budget.h"
#include "node/ranges.h"
#include "node/worker.h"
#include "source/block_source.h"
#include "store/pg.h"
#include "store/writer.h"

namespace gapless {

class RangeLocks;

struct KafkaWorkerOptions {
  std::string worker_id;  // unique in the fleet ("host:pid:n"); the lock owner and group member
  // kafka://host:port[,host:port][?property=value...] (events/kafka_bus.h: librdkafka properties
  // pass through the query).
  std::string bus_url;
  std::string topic;
  std::string group = "gapless-blocks";
  uint64_t from = 0;                // blocks below are acknowledged and ignored
  std::optional<uint64_t> to;       // blocks above too
  uint64_t range_size = 50;         // the window (aligned, like the seeder's ranges)
  int64_t flush_after_ms = 2'000;   // a window not held whole is written when this quiet
  size_t max_held_blocks = 20'000;  // above it the oldest windows are written at once
  int64_t lock_ttl_ms = 60'000;
  int max_attempts = 5;  // decode/refused-row failures of one window before dead-lettering
  int64_t retry_base_micros = 200'000;
  int64_t retry_cap_micros = 5'000'000;
  int64_t heartbeat_interval_ms = 2'000;
  std::optional<uint64_t> chain_id;
  std::optional<VerifyOptions> verify;  // --verify: each block proven against its header
  bool token_metadata = true;           // --token-metadata (node/enrich.h)
  // --contracts: decoded into their tables in each range's write (store/decoded.h). Not owned.
  const ContractTables* contracts = nullptr;
  WriteMode write_mode = WriteMode::kStagingUpsert;
  CopyFormat copy_format = CopyFormat::kBinary;  // --copy-format (store/copy_rows.h)
  // Blocks missing from the stream or refused by the decoder come from here (an RPC node);
  // nullable: none.
  BlockSourceFactory fallback;
  // With `to`: Run returns Ok once idle and the fleet's frontier has passed `to` (the fleet's
  // leader advances it; the last window may have been written by another worker).
  bool stop_when_done = true;
  // The head log (the fleet's lock nodes): its committed hashes at heights [from, to]
  // (Election::Committed) and the lowest height it keeps (Election::LowestHeight: below it is
  // history the log no longer holds, written unchecked as RPC workers do). Nullable: no head log
  // (no re-org handling: held blocks are written as they come).
  struct HeadLogView {
    std::map<uint64_t, std::string> hashes;
    std::optional<uint64_t> lowest;
  };
  std::function<Result<HeadLogView>(uint64_t from, uint64_t to)> head_log;
  // Test hook: the subscriber to use instead of opening bus_url (the worker owns it).
  std::function<Result<std::unique_ptr<Subscriber>>()> open_subscriber;
  // The process's memory budget (node/memory_budget.h), borrowed, nullable (no budget: windows
  // are written whole and at most max_held_blocks blocks are held), shared with its other
  // fetching threads.
  MemoryBudget* memory_budget = nullptr;
  Env* env = Env::Default();
};

class KafkaWorker {
 public:
  // `pool` is borrowed and must outlive the worker.
  KafkaWorker(KafkaWorkerOptions options, std::string redis_url, Keys keys, PgPool* pool);
  ~KafkaWorker();
  KafkaWorker(const KafkaWorker&) = delete;
  KafkaWorker& operator=(const KafkaWorker&) = delete;

  // Consumes until `stop` (or, with `to`, until idle and done: see stop_when_done). Ok then;
  // FailedPrecondition for bad options or a wrong chain; Unavailable when Redis or the brokers
  // cannot be reached at start.
  Status Run(const std::atomic<bool>& stop);

  // blocks/transactions/logs/token_transfers/tasks (windows written)/retries/dead_lettered/
  // leases_lost (locks lost while writing) as in worker.h.
  const WorkerCounters& counters() const { return counters_; }
  const std::string& id() const { return options_.worker_id; }
  // Windows skipped because they were already committed (duplicates, redeliveries).
  uint64_t skipped() const { return skipped_.load(); }
  // True once Run returned because the fleet's frontier passed `to`.
  bool done() const { return done_.load(); }
  // The most message text held at once (bytes), and the messages handed back because the worker
  // was above the budget's share with nothing it could write (see the file comment).
  uint64_t held_peak_bytes() const { return held_peak_bytes_.load(); }
  uint64_t handed_back() const { return handed_back_.load(); }

 private:
  struct Window {
    uint64_t start = 0, end = 0;             // the aligned window, clipped to [from, to]
    std::map<uint64_t, std::string> blocks;  // held block number -> its hash
    // Every message of those blocks (block number, delivery), to acknowledge or dead-letter.
    std::vector<std::pair<uint64_t, Delivery>> deliveries;
    uint64_t written = 0;  // blocks of it written and released (a window partly written)
    int64_t last_added_micros = 0;
    int64_t not_before_micros = 0;  // retry backoff
    int attempts = 0;
  };
  enum class Outcome { kDone, kRetry, kDeadLetter };

  Status Validate() const;
  // Holds the message's block in its window; returns the text held (0: not held).
  uint64_t Take(Delivery delivery);
  void DropRevoked();
  // Windows ready now (held whole, or quiet for flush_after_ms), oldest first.
  std::vector<uint64_t> ReadyWindows();
  // Steps 1-5 for one window; the window is erased unless it is to be retried.
  Status ProcessWindow(uint64_t start);
  Outcome WriteWindow(Window& w, Status* error);
  // How the part of WriteWindow under the window's lock ended: the outcome, and what is left to
  // do once the lock is released (WriteWindow releases it in one place, whichever way it ended).
  struct LockedWrite {
    Outcome outcome = Outcome::kRetry;
    enum class Then {
      kNothing,
      kSkip,          // nothing was left to write: a skipped window
      kRaiseFence,    // the write was refused (*error): raise the fence counter if it was fenced
      kCountWritten,  // every run written: a task done
    } then = Then::kNothing;
  };
  // Steps 2 (again, under the lock) to 4 of WriteWindow, writing with `token`.
  LockedWrite WriteLocked(Window& w, const TaskRange& window, uint64_t generation, int64_t token,
                          RangeLocks& locks, Status* error);
  // Step 1: the runs of held blocks still to write, given PostgreSQL and the head log; records
  // the committed runs (fenced by `generation`) and drops blocks of another fork. *waiting: some
  // block cannot be written yet (the log has not reached it, or a rollback is pending).
  Status Classify(Window& w, uint64_t generation, std::vector<BlockRange>* todo, bool* waiting);
  void Acknowledge(Window& w);
  // Acknowledges the messages of the window's blocks from..to (written, or found committed) and
  // drops their text: the window keeps only what is left to do.
  void Release(Window& w, uint64_t from, uint64_t to);
  // While the held text is above the budget's share: the oldest windows not waiting for a retry
  // are written (each at most once per call).
  Status FlushOverBudget(const std::atomic<bool>& stop);
  bool OverBudget() const;
  // Logs that the worker is above its share with nothing writable (once at info).
  void SayStuck();
  void DeadLetter(Window& w, const Status& error);
  // "topic[partition]@offset": where a message came from, for log lines.
  static std::string Where(const Delivery& d);
  void KeeperLoop();

  KafkaWorkerOptions options_;
  std::string redis_url_;
  Keys keys_;
  PgPool* pool_;
  WorkerCounters counters_;
  std::atomic<uint64_t> skipped_{0};
  std::atomic<bool> done_{false};

  std::unique_ptr<RedisConn> redis_;
  std::unique_ptr<RedisConn> keeper_redis_;  // the keeper thread's
  std::unique_ptr<Subscriber> subscriber_;
  std::unique_ptr<BlockSource> fallback_;
  std::unique_ptr<HeldBlockSource> held_;
  std::map<uint64_t, Window> windows_;  // by start
  uint64_t held_limit_ = 0;             // the budget's StreamHeldBytes; UINT64_MAX: none
  // Above the share after a flush: polled messages are handed back, not held.
  bool stuck_ = false;
  uint64_t largest_block_bytes_ = 0;  // the largest block text taken so far
  std::atomic<uint64_t> held_peak_bytes_{0};
  std::atomic<uint64_t> handed_back_{0};

  // Shared with the keeper thread: the lock being held, extended every lock_ttl_ms / 3.
  std::mutex mu_;
  std::optional<TaskRange> locked_;
  std::atomic<bool> lock_lost_{false};
  std::atomic<bool> keeper_quit_{false};
};

}  // namespace gapless
