// Leader: the coordination role of issue 3 — seeder, janitor and frontier — run by whichever
// process holds a single-Redis lock (lua/leader_lock.lua, SET-if-free with a random token, PX
// expiry, renewed and released only by its holder). Issue 4 replaces the lock with the HA leader.
//
// Why a single-Redis lock is enough here: the lock buys efficiency, not safety. Everything the
// role does is safe when two processes briefly both run it (a holder paused past its TTL):
//  - Seeder: Queue::Push is idempotent (skips tasks pending, processing, completed, dead-lettered
//    or below the frontier), and ranges are aligned, so two seeders push the same tasks once.
//  - Janitor: requeues only tasks whose lease is gone or expired (Redis TIME), atomically.
//  - Frontier: Frontier::Advance is one monotonic script over ranges recorded only after their
//    rows committed; store::PersistFrontier never decreases and refuses (DataLoss) to run ahead of
//    the committed rows in indexed_ranges.
//
// Each new term (the lock taken while free — first start, after our own expiry, or after Redis
// lost its data, which takes the lock key with it) starts with RestoreFloors (node/reconcile.h):
// the fence counter floored at PostgreSQL's highest token, the Redis frontier raised to the
// committed prefix; the seeder then restarts from the frontier, re-pushing whatever Redis lost.
//
// Seeding is bounded: the seeder keeps at most max_outstanding_tasks tasks pending + processing,
// pushing the aligned ranges (node/ranges.h) of a window starting at its cursor that are not
// already committed in PostgreSQL. The bound is `to` (fixed range) or, when following, the block
// of `to_tag` minus `confirmations`, re-read every tick, so the range grows with the chain.
//
// Thread-safety: a Leader is driven by one thread (Run or Tick). It opens one RedisConn and uses
// the pool for PostgreSQL.
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
#include "rpc/json_rpc.h"
#include "store/pg.h"

namespace gapless {

struct LeaderOptions {
  uint64_t from = 0;
  std::optional<uint64_t> to;        // a fixed end (inclusive); or follow to_tag
  std::string to_tag = "finalized";  // "finalized" | "safe" | "latest" when following
  uint64_t confirmations = 0;        // bound = block(to_tag) - confirmations
  bool follow = false;               // requires rpc and !to
  uint64_t range_size = 50;
  uint64_t max_outstanding_tasks = 1000;  // pending + processing, the seeding look-ahead
  int64_t lock_ttl_ms = 10'000;
  int64_t tick_ms = 500;        // must be well below lock_ttl_ms (validated: <= lock_ttl_ms / 3)
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
  std::string holder_id;  // for logs; a random suffix makes the lock token unique
  Env* env = Env::Default();
};

class Leader {
 public:
  // `pool` is borrowed and must outlive the leader; `rpc` too (nullable unless following).
  Leader(LeaderOptions options, std::string redis_url, Keys keys, PgPool* pool,
         JsonRpcClient* rpc = nullptr);
  ~Leader();
  Leader(const Leader&) = delete;
  Leader& operator=(const Leader&) = delete;

  // Ticks every tick_ms until `stop`, or until done() for a fixed range; releases the lock on the
  // way out. Transient failures (Redis, PostgreSQL, RPC unreachable) are logged and retried at the
  // next tick; Run returns FailedPrecondition (bad options, a bad tag, a fixed range stuck on a
  // dead-lettered range for give_up_when_stuck_ms) or DataLoss (the frontier would run ahead of
  // committed rows: an invariant is broken, stop loudly).
  Status Run(const std::atomic<bool>& stop);

  // One step: take or renew the lock; while holding it, (new term: restore floors,) seed, run the
  // janitor, advance and persist the frontier. Returns the first error of the step.
  Status Tick();

  // Releases the lock if held (graceful hand-over).
  Status Release();

  bool holding() const { return holding_; }
  // True once the fixed range is complete: the frontier is above `to`.
  bool done() const { return options_.to.has_value() && frontier_ > *options_.to; }
  // The last frontier seen (next block not known complete).
  uint64_t frontier() const { return frontier_; }
  uint64_t terms() const { return terms_; }
  // The next block the seeder has not pushed yet.
  uint64_t seed_cursor() const { return cursor_; }

 private:
  Status Validate() const;
  Status Connect();
  Result<uint64_t> Bound();
  Status StartTerm(uint64_t bound);
  Status Seed(uint64_t bound);
  Status AdvanceFrontier();
  // Fixed range only: a non-ok Status once the range has been stuck on a dead letter for
  // give_up_when_stuck_ms (see LeaderOptions).
  Status CheckStuck();

  LeaderOptions options_;
  std::string redis_url_;
  Keys keys_;
  PgPool* pool_;
  JsonRpcClient* rpc_;
  std::string token_;
  std::unique_ptr<RedisConn> redis_;
  bool holding_ = false;
  bool term_started_ = false;
  uint64_t terms_ = 0;
  uint64_t cursor_ = 0;
  uint64_t frontier_ = 0;
  uint64_t persisted_ = 0;
  int64_t stuck_since_micros_ = 0;  // 0: not stuck
};

}  // namespace gapless
