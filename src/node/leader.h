// Leader: the leader's duties on the coordination Redis — seeder, janitor, frontier — run on a
// thread of their own while a LeaderLease says this process leads, each step fenced by the lease's
// epoch. The lease itself is elsewhere, so nothing here (a slow RPC call, PostgreSQL) can cost it:
//  - in the fleet (`run`, `leader`) it is the HA leader, coord/elector.h (ElectorLease): a Redlock
//    quorum of lock nodes, renewed only by head-log writes on the elector's own thread;
//  - in `index` (no Redis) it is a LocalLease: always held, so the same duties (and later ones,
//    such as the event relay) have one home in both modes.
//
// Fencing: every leader-only script on the coordination Redis (Queue::Push, Queue::Janitor,
// Frontier::Advance) takes the lease's epoch and refuses an epoch below the highest it has seen
// (lua/leader_epoch_lib.lua), so a deposed leader — paused past its lease while another was
// elected — cannot act once its successor has. The epoch is persisted on a quorum of lock nodes
// before it is used (coord/election.h), so epochs used here increase from leader to leader.
// Besides, every duty is idempotent (Push skips known tasks, the janitor requeues only expired
// leases, the frontier is monotonic and never runs ahead of committed rows), so even the short
// overlap before the successor's first step does no harm.
//
// Each new term (a new epoch) starts with RestoreFloors (node/reconcile.h): a lost fence counter
// restored above every token granted (a failover seen by the replication id counts as lost), the
// Redis frontier raised to the committed prefix; the
// seeder then restarts from the frontier, re-pushing whatever Redis lost.
//
// Seeding is bounded: at most max_outstanding_tasks tasks pending + processing, pushing the
// aligned ranges (node/ranges.h) of a window starting at the cursor that are not committed in
// PostgreSQL. The bound is `to` (fixed range) or the block of `to_tag` minus `confirmations`
// (following); with an HA lease it is further capped at the head log's committed height, so
// workers only get blocks whose hashes the head log knows.
//
// Re-orgs (issue 10), with a head log. The head tracker finds them and the elector truncates the
// log at the fork point (node/head_tracker.h, coord/elector.h). The re-org state lives in three
// places, each with its own generation — the head log's fork generation, PostgreSQL's
// reorg_generation (with the head fork generation its last rollback followed), the coordination
// Redis's followed generation — plus this leader's in-memory cursors (seeder cursor, frontier,
// persisted frontier). One idempotent step, LevelReorgs, run at the start of every leader step,
// brings them level, in this order (the order is the safety argument):
//  1. PostgreSQL follows the head log: for the truncations above the head fork generation that
//     PostgreSQL recorded, the fence floor is read first (the coordination Redis's fence counter,
//     so every lease granted so far, any of which may hold the old fork, carries a token at or
//     below it), then store/rollback.h rolls back in one transaction that waits out the range
//     writes in flight: rows above the fork point deleted, the floor recorded (the writer refuses
//     those tokens above the fork point from now on), the persisted frontier lowered;
//  2. the coordination Redis follows PostgreSQL (node/reconcile.h FollowRollbacks): frontier down,
//     completed ranges above the fork dropped, leases above it revoked, PostgreSQL's generation
//     recorded — a no-op once Redis's generation is PostgreSQL's;
//  3. this leader's cursors follow PostgreSQL's generation: seeder cursor, frontier and persisted
//     frontier go back to the lowest fork point since the generation they last followed.
// Nothing is marked done before it is: each part compares generations read from where they are
// stored (only the last one is in memory, and it is set after the cursors moved), so a failure at
// any point (Redis unreachable between 1 and 2, a reply lost) leaves the rest to the next step,
// of this leader or of the next. At the start of every term the stored blocks of the log's window
// are also compared with its entries, a first mismatch rolled back; and Redis follows PostgreSQL's
// generation before RestoreFloors raises the frontier. A re-org deeper than max_reorg_depth stops
// the duty (FailedPrecondition naming the fork point and the flag), whether the head tracker or
// the rollback finds it.
//
// Thread-safety: Run (or a DutyHost calling Step/Standby) is driven by one thread. done(),
// frontier() and holding() may be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "coord/keys.h"
#include "coord/redis.h"
#include "core/env.h"
#include "core/status.h"
#include "node/duties.h"
#include "rpc/json_rpc.h"
#include "store/pg.h"
#include "store/state.h"

namespace gapless {

struct LeaderOptions {
  uint64_t from = 0;
  std::optional<uint64_t> to;        // a fixed end (inclusive); or follow to_tag
  std::string to_tag = "finalized";  // "finalized" | "safe" | "latest" when following
  uint64_t confirmations = 0;        // bound = block(to_tag) - confirmations
  bool follow = false;               // requires rpc and !to
  uint64_t range_size = 50;
  uint64_t max_outstanding_tasks = 1000;  // pending + processing, the seeding look-ahead
  int64_t tick_ms = 500;
  int64_t janitor_limit = 100;  // tasks examined per tick
  // The janitor dead-letters a task whose lease expired this many times (a range that kills
  // every worker holding it must not circulate forever). Above the failure max_attempts (5): an
  // honest range may lose a few leases to deliberately killed workers (chaos tests, deploys).
  int64_t max_lease_expiries = 10;
  // A fixed range that cannot finish: everything seeded, nothing pending or processing, and a
  // dead-lettered range between the frontier and `to`. Only a human can unblock it (`gapless dlq
  // retry` after fixing the cause), so after this long stuck Run gives up with FailedPrecondition
  // naming the range and its error, instead of waiting forever. 0 = wait forever (and log).
  int64_t give_up_when_stuck_ms = 30'000;
  // Blocks come from a Kafka stream (node/kafka_worker.h), not from the queue: the seeder pushes
  // only gaps. A gap is the blocks from the frontier up to the next completed range: a message
  // lost or dead-lettered, a producer that skipped blocks. It is written to Keys::gap() for
  // `status` at once, and once it has stayed open heal_gaps_after_ms its uncommitted aligned
  // ranges are pushed to the queue for RPC workers (a Kafka worker given --rpc runs one) to fetch
  // from the node. 0: report only. The reclaimer runs too: every reclaim_every_ms it frees the
  // range locks of workers whose heartbeat is gone (coord/range_lock.h ReclaimOrphans).
  bool blocks_from_stream = false;
  int64_t heal_gaps_after_ms = 30'000;
  int64_t reclaim_every_ms = 5'000;
  // The leader samples the coordination Redis's key count this often (`status` shows the history
  // and warns about growth without bound; the leader logs the same warning).
  int64_t key_sample_every_ms = 60'000;
  uint64_t max_reorg_depth = 64;     // --max-reorg-depth (see "Re-orgs" above)
  uint64_t head_log_window = 4'096;  // heights the head log keeps: the term-start comparison's
  std::string holder_id;             // for logs
  // Rows of indexed_ranges below the frontier are merged this long after their commit
  // (store/state.h "Compaction"; --compact-after; negative: never).
  int64_t compact_after_seconds = kCompactAfterSeconds;
  Env* env = Env::Default();
};

class Leader : public Duty {
 public:
  // `pool` and `lease` are borrowed and must outlive the leader; `rpc` too (nullable unless
  // following without a head log).
  Leader(LeaderOptions options, std::string redis_url, Keys keys, PgPool* pool, LeaderLease* lease,
         JsonRpcClient* rpc = nullptr);
  ~Leader();
  Leader(const Leader&) = delete;
  Leader& operator=(const Leader&) = delete;

  // Ticks every tick_ms until `stop`, or until done() for a fixed range. Transient failures
  // (Redis, PostgreSQL, RPC unreachable, a newer leader's epoch) are logged and retried at the
  // next tick; Run returns FailedPrecondition (bad options, a bad tag, a fixed range stuck on a
  // dead-lettered range for give_up_when_stuck_ms) or DataLoss (the frontier would run ahead of
  // committed rows: an invariant is broken, stop loudly).
  Status Run(const std::atomic<bool>& stop);
  // Run waits between ticks with `waker` (a range commit wakes it: the frontier moves sooner).
  // Borrowed; nullptr: sleep.
  void set_waker(PgWaker* waker) { waker_ = waker; }

  // Duty: while leading with `epoch`, (new term: restore floors,) seed, run the janitor, advance
  // and persist the frontier, all fenced by the epoch. Standby: follow the frontier.
  const char* name() const override { return "seeder/janitor/frontier"; }
  Status Step(uint64_t epoch) override;
  Status Standby() override;

  bool holding() const { return holding_.load(); }
  // True once the fixed range is complete: the frontier is above `to`.
  bool done() const override { return options_.to.has_value() && frontier_.load() > *options_.to; }
  // The last frontier seen (next block not known complete).
  uint64_t frontier() const { return frontier_.load(); }
  uint64_t terms() const { return terms_; }
  // The next block the seeder has not pushed yet.
  uint64_t seed_cursor() const { return cursor_; }

 private:
  Status Validate() const;
  Status Connect();
  Result<std::optional<uint64_t>> Bound();
  Status StartTerm(uint64_t bound, uint64_t epoch, bool data_set_changed);
  // Re-orgs: head log, PostgreSQL, Redis and this leader's cursors brought level (see "Re-orgs"
  // above); at a term's start also the stored blocks that disagree with the log's window.
  Status LevelReorgs(uint64_t epoch, bool term_start);
  // PostgreSQL's half of one re-org: the fence floor, then store/rollback.h.
  Status RollBackTo(uint64_t fork_point, uint64_t head_fork_generation, uint64_t epoch);
  Status RollBackStoredMismatch(uint64_t epoch);
  Status Seed(uint64_t bound, uint64_t epoch);
  Status AdvanceFrontier(uint64_t epoch);
  // blocks_from_stream: report and heal the gap at the frontier; free dead workers' range locks.
  Status HealGaps(uint64_t bound, uint64_t epoch);
  Status ReclaimLocks();
  // Every key_sample_every_ms: a sample of the coordination Redis's key count (coord/key_watch.h),
  // and a warning while the count grows without bound. Failures are logged, never fatal.
  void WatchKeys();
  // Fixed range only: a non-ok Status once the range has been stuck on a dead letter for
  // give_up_when_stuck_ms (see LeaderOptions).
  Status CheckStuck();

  LeaderOptions options_;
  std::string redis_url_;
  Keys keys_;
  PgPool* pool_;
  LeaderLease* lease_;
  JsonRpcClient* rpc_;
  std::unique_ptr<RedisConn> redis_;
  std::atomic<bool> holding_{false};
  uint64_t term_epoch_ = 0;  // the epoch whose term has started (0: none)
  // The coordination Redis's replication id (INFO replication master_replid) when the term
  // started: a failover or a restart gives the server another one, and the data set may then
  // lack writes the term made (a lagging replica keeps the term marker). "" when unknown.
  std::string term_replid_;
  uint64_t terms_ = 0;
  uint64_t cursor_ = 0;
  std::atomic<uint64_t> frontier_{0};
  uint64_t persisted_ = 0;
  // PostgreSQL's reorg_generation that cursor_, frontier_ and persisted_ have followed.
  uint64_t cursors_generation_ = 0;
  int64_t stuck_since_micros_ = 0;  // 0: not stuck
  PgWaker* waker_ = nullptr;
  uint64_t stalled_at_ = UINT64_MAX;  // the frontier the last step could not move past
  uint64_t gap_from_ = UINT64_MAX;    // the open gap's first block, and since when (micros)
  int64_t gap_since_micros_ = 0;
  bool gap_healing_ = false;
  int64_t next_reclaim_micros_ = 0;
  int64_t next_key_sample_micros_ = 0;
};

}  // namespace gapless
