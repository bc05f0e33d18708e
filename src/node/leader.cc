#include "node/leader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "coord/frontier.h"
#include "coord/key_watch.h"
#include "coord/queue.h"
#include "coord/range_lock.h"
#include "node/node_metrics.h"
#include "node/ranges.h"
#include "node/reconcile.h"
#include "store/outbox.h"
#include "store/partitions.h"
#include "store/queries.h"
#include "store/rollback.h"
#include "store/state.h"

namespace gapless {
Leader::Leader(LeaderOptions options, std::string redis_url, Keys keys, PgPool* pool,
               LeaderLease* lease, JsonRpcClient* rpc)
    : options_(std::move(options)),
      redis_url_(std::move(redis_url)),
      keys_(std::move(keys)),
      pool_(pool),
      lease_(lease),
      rpc_(rpc) {
  if (options_.env == nullptr) options_.env = Env::Default();
  cursor_ = options_.from;
  frontier_ = options_.from;
}

Leader::~Leader() = default;

Status Leader::Validate() const {
  if (options_.range_size == 0) return FailedPrecondition("leader: range size must be >= 1");
  if (options_.max_outstanding_tasks == 0) {
    return FailedPrecondition("leader: max outstanding tasks must be >= 1");
  }
  if (options_.max_lease_expiries < 1) {
    return FailedPrecondition("leader: max lease expiries must be >= 1");
  }
  if (options_.tick_ms <= 0) return FailedPrecondition("leader: the tick must be > 0 ms");
  if (options_.to.has_value() == options_.follow) {
    return FailedPrecondition("leader: give either a fixed end (to) or follow, not both");
  }
  if (options_.to.has_value() && *options_.to < options_.from) {
    return FailedPrecondition(
        fmt::format("leader: from {} is above to {}", options_.from, *options_.to));
  }
  if (lease_ == nullptr) return FailedPrecondition("leader: no lease");
  if (options_.follow && rpc_ == nullptr && !lease_->has_head_log()) {
    return FailedPrecondition("leader: following needs RPC or a head log");
  }
  if (pool_ == nullptr) return FailedPrecondition("leader: no PostgreSQL pool");
  return Status::Ok();
}

Status Leader::Connect() {
  if (redis_ != nullptr) return Status::Ok();
  RedisOptions redis_options;
  redis_options.env = options_.env;
  GAPLESS_ASSIGN_OR_RETURN(redis_, RedisConn::Connect(redis_url_, redis_options));
  return Status::Ok();
}

Result<std::optional<uint64_t>> Leader::Bound() {
  std::optional<uint64_t> bound;
  if (lease_->has_head_log()) {
    // The head tracker already applied the tag and the confirmations (node/head_tracker.h).
    bound = lease_->CommittedHeight();
    if (!bound.has_value()) return bound;
    if (options_.to.has_value()) bound = std::min(*bound, *options_.to);
  } else if (options_.to.has_value()) {
    bound = *options_.to;
  } else {
    GAPLESS_ASSIGN_OR_RETURN(uint64_t tip, rpc_->ResolveBlockTag(options_.to_tag));
    if (tip < options_.confirmations) return std::optional<uint64_t>();
    bound = tip - options_.confirmations;
  }
  // Below `from` (a young chain): nothing to seed yet.
  if (*bound < options_.from) return std::optional<uint64_t>();
  return bound;
}

Status Leader::RollBackTo(uint64_t fork_point, uint64_t head_fork_generation, uint64_t epoch) {
  // The fence floor first, then PostgreSQL (leader.h "Re-orgs", step 1).
  GAPLESS_ASSIGN_OR_RETURN(RedisReply counter, redis_->Command({"GET", keys_.fence_counter()}));
  RollbackRequest request;
  request.fork_point = fork_point;
  request.leader_epoch = epoch;
  request.max_depth = options_.max_reorg_depth;
  request.fence_floor = counter.str.empty() ? 0 : std::strtoull(counter.str.c_str(), nullptr, 10);
  request.head_fork_generation = head_fork_generation;
  // The canonical hashes above the fork point, for the record (best effort).
  auto entries = lease_->HeadEntries(fork_point + 1, fork_point + options_.max_reorg_depth);
  if (entries.ok()) {
    for (const auto& [height, entry] : *entries) request.new_hashes.push_back(entry.hash);
  }
  // Then PostgreSQL.
  RollbackResult result;
  {
    auto conn = pool_->Acquire();
    GAPLESS_ASSIGN_OR_RETURN(result, RollBack(*conn, request));
  }
  CountReorg(result.depth);
  if (result.depth > 0) {
    spdlog::warn(
        "leader {}: re-org: rolled back {} stored blocks above block {} (generation {}); tokens up "
        "to {} are fenced above it",
        options_.holder_id, result.depth, fork_point, result.generation, request.fence_floor);
  } else {
    spdlog::info("leader {}: re-org above block {}: nothing stored there; tokens up to {} fenced",
                 options_.holder_id, fork_point, request.fence_floor);
  }
  // Redis and this leader's cursors follow in LevelReorgs, steps 2 and 3, at every step until
  // level.
  return Status::Ok();
}

Status Leader::LevelReorgs(uint64_t epoch, bool term_start) {
  // 1. PostgreSQL follows the head log: the truncations above the fork generation PostgreSQL
  //    recorded with its last rollback (read from PostgreSQL, never from memory).
  if (lease_->has_head_log()) {
    uint64_t followed = 0;
    {
      auto conn = pool_->Acquire();
      GAPLESS_ASSIGN_OR_RETURN(followed, HeadForkGeneration(*conn));
    }
    if (term_start) {
      // Stored blocks that disagree with the log's window (a predecessor died mid-re-org, or
      // wrote before any of this existed): roll back to below the first one.
      GAPLESS_RETURN_IF_ERROR(RollBackStoredMismatch(epoch));
    }
    std::optional<HeadFork> forks = lease_->ForksSince(followed);
    if (forks.has_value()) {
      GAPLESS_RETURN_IF_ERROR(RollBackTo(static_cast<uint64_t>(std::max<int64_t>(0, forks->point)),
                                         forks->generation, epoch));
    }
  }
  // 2. The coordination Redis follows PostgreSQL: a no-op once its recorded generation is
  //    PostgreSQL's, so it is retried at every step until it has been done.
  uint64_t pg_generation = 0;
  std::optional<uint64_t> lowest_fork;
  {
    auto conn = pool_->Acquire();
    GAPLESS_RETURN_IF_ERROR(FollowRollbacks(*redis_, keys_, *conn, options_.from, epoch).status());
    // 3. This leader's cursors follow PostgreSQL's generation (Redis may have followed in an
    //    earlier step, or under another leader, whose reply this one never saw).
    GAPLESS_ASSIGN_OR_RETURN(pg_generation, ReorgGeneration(*conn));
    if (pg_generation <= cursors_generation_) return Status::Ok();
    GAPLESS_ASSIGN_OR_RETURN(lowest_fork, ForkPointSince(*conn, cursors_generation_));
  }
  if (lowest_fork.has_value()) {
    const uint64_t back = std::max(options_.from, *lowest_fork + 1);
    if (frontier_.load() > back) frontier_ = back;
    cursor_ = std::min(cursor_, back);
    persisted_ = std::min(persisted_, back);
    stalled_at_ = UINT64_MAX;
  }
  cursors_generation_ = pg_generation;
  return Status::Ok();
}

Status Leader::RollBackStoredMismatch(uint64_t epoch) {
  std::optional<uint64_t> tip = lease_->CommittedHeight();
  if (!tip.has_value()) return Status::Ok();
  const uint64_t window = std::max<uint64_t>(1, options_.head_log_window);
  const uint64_t lo = std::max(options_.from, *tip >= window ? *tip - window + 1 : 0);
  GAPLESS_ASSIGN_OR_RETURN(auto logged, lease_->HeadEntries(lo, *tip));
  std::vector<std::pair<uint64_t, std::string>> stored;
  {
    auto conn = pool_->Acquire();
    GAPLESS_ASSIGN_OR_RETURN(
        auto rows, conn->Query("SELECT number, '0x' || encode(hash, 'hex') FROM blocks WHERE "
                               "number BETWEEN $1 AND $2 ORDER BY number",
                               {std::to_string(lo), std::to_string(*tip)}));
    for (int i = 0; i < rows.rows(); ++i) {
      GAPLESS_ASSIGN_OR_RETURN(int64_t n, rows.GetInt64(i, 0));
      stored.emplace_back(static_cast<uint64_t>(n), std::string(rows.Get(i, 1)));
    }
  }
  for (const auto& [number, hash] : stored) {
    auto it = logged.find(number);
    if (it == logged.end() || it->second.hash == hash || number == 0) continue;
    spdlog::warn("leader {}: stored block {} is {} but the head log has {}: rolling back",
                 options_.holder_id, number, hash, it->second.hash);
    return RollBackTo(number - 1, 0, epoch);
  }
  return Status::Ok();
}

Status Leader::StartTerm(uint64_t bound, uint64_t epoch, bool data_set_changed) {
  GAPLESS_RETURN_IF_ERROR(LevelReorgs(epoch, /*term_start=*/true));
  uint64_t to = std::max(bound, options_.from);
  auto conn = pool_->Acquire();
  GAPLESS_ASSIGN_OR_RETURN(ReconcileFloors floors,
                           RestoreFloors(*redis_, keys_, *conn, options_.from, to, epoch,
                                         /*counter_lost=*/data_set_changed));
  frontier_ = std::max(frontier_.load(), floors.frontier);
  // metadata.phase (store/outbox.h "Phase"): following, the blocks above the chain's bound now
  // (asked of the node: a head log may still be filling up to it) are committed live; without
  // --follow, none is.
  std::optional<uint64_t> live_from;
  if (options_.follow) {
    live_from = bound + 1;
    if (rpc_ != nullptr) {
      GAPLESS_ASSIGN_OR_RETURN(uint64_t tip, rpc_->ResolveBlockTag(options_.to_tag));
      live_from =
          std::max(options_.from,
                   tip >= options_.confirmations ? tip - options_.confirmations + 1 : uint64_t{0});
    }
  }
  GAPLESS_RETURN_IF_ERROR(RecordLiveFrom(*conn, live_from));
  // Re-seed from the frontier: whatever Redis lost between it and the old cursor is pushed again
  // (Push skips what it still knows).
  cursor_ = frontier_;
  GAPLESS_RETURN_IF_ERROR(
      redis_->Command({"SET", keys_.leader_term(), std::to_string(epoch)}).status());
  ++terms_;
  SetFrontierMetric(frontier_.load());
  spdlog::info("leader {}: term {} (epoch {}) started: fence counter {}, frontier {}",
               options_.holder_id, terms_, epoch, floors.fence_counter, frontier_.load());
  return Status::Ok();
}

Status Leader::Seed(uint64_t bound, uint64_t epoch) {
  cursor_ = std::max(cursor_, frontier_.load());
  if (bound < options_.from || cursor_ > bound) return Status::Ok();
  Queue queue(redis_.get(), keys_);
  GAPLESS_ASSIGN_OR_RETURN(QueueDepths depths, queue.Depths());
  uint64_t outstanding = static_cast<uint64_t>(std::max<int64_t>(0, depths.pending)) +
                         static_cast<uint64_t>(std::max<int64_t>(0, depths.processing));
  if (outstanding >= options_.max_outstanding_tasks) return Status::Ok();
  uint64_t slots = options_.max_outstanding_tasks - outstanding;
  const uint64_t size = options_.range_size;
  // Aligned window end: the cuts stay where every other run puts them.
  uint64_t window_end = bound;
  uint64_t aligned_start = cursor_ / size;
  if (slots < (bound - cursor_) / size + 1) {
    window_end = std::min(bound, (aligned_start + slots) * size - 1);
  }
  std::vector<std::pair<uint64_t, uint64_t>> committed;
  {
    auto conn = pool_->Acquire();
    GAPLESS_ASSIGN_OR_RETURN(committed, CommittedRanges(*conn, cursor_, window_end));
    // The partitions of the blocks about to be queued, before any worker claims them
    // (store/partitions.h; a worker ensures its own too, so this only keeps the workers' write
    // path free of partition creation).
    GAPLESS_RETURN_IF_ERROR(EnsurePartitions(*conn, cursor_, window_end));
  }
  std::vector<TaskRange> tasks;
  for (const BlockRange& r : PendingRanges(cursor_, window_end, size, std::move(committed))) {
    tasks.push_back(TaskRange{static_cast<int64_t>(r.from), static_cast<int64_t>(r.to)});
  }
  if (!tasks.empty()) {
    GAPLESS_ASSIGN_OR_RETURN(int64_t pushed, queue.Push(tasks, epoch));
    spdlog::debug("leader: seeded [{}, {}]: {} tasks, {} new", cursor_, window_end, tasks.size(),
                  pushed);
  }
  cursor_ = window_end + 1;
  return Status::Ok();
}

Status Leader::AdvanceFrontier(uint64_t epoch) {
  // Our last frontier is a floor: it was computed from committed ranges, and it keeps the
  // frontier where it was if Redis lost its keys since.
  Frontier frontier(redis_.get(), keys_.completed(), keys_.frontier(),
                    std::max(options_.from, frontier_.load()), keys_.leader_epoch());
  GAPLESS_ASSIGN_OR_RETURN(uint64_t next, frontier.Advance(epoch));
  // Stalled at the same block for a second step (the first may just be early: a commit's NOTIFY
  // wakes this step before the worker recorded its completion in Redis).
  const bool stalled = next <= frontier_.load() && stalled_at_ == next;
  stalled_at_ = next <= frontier_.load() ? next : UINT64_MAX;
  if (stalled) {
    // Stalled. A completion can be lost while its rows are committed: a worker whose lease
    // vanished with Redis's data commits, and its completion is refused. PostgreSQL is the
    // truth: if ranges at the frontier are committed there, move over them.
    std::vector<std::pair<uint64_t, uint64_t>> committed;
    {
      auto conn = pool_->Acquire();
      GAPLESS_ASSIGN_OR_RETURN(committed,
                               CommittedRanges(*conn, next, next + options_.range_size * 1024 - 1));
    }
    if (!committed.empty() && committed.front().first == next) {
      Frontier from_pg(redis_.get(), keys_.completed(), keys_.frontier(),
                       committed.front().second + 1, keys_.leader_epoch());
      GAPLESS_ASSIGN_OR_RETURN(next, from_pg.Advance(epoch));
      spdlog::info("leader {}: frontier moved to {} over ranges committed in PostgreSQL",
                   options_.holder_id, next);
    }
  }
  uint64_t now = std::max(frontier_.load(), next);
  frontier_ = now;
  SetFrontierMetric(now);
  if (now > persisted_ && now > options_.from) {
    auto conn = pool_->Acquire();
    GAPLESS_ASSIGN_OR_RETURN(
        persisted_, PersistFrontier(*conn, options_.from, now, options_.compact_after_seconds));
  }
  return Status::Ok();
}

Status Leader::HealGaps(uint64_t bound, uint64_t epoch) {
  const uint64_t at = frontier_.load();
  // The first completed range above the frontier: everything before it is the gap.
  GAPLESS_ASSIGN_OR_RETURN(RedisReply next,
                           redis_->Command({"ZRANGEBYSCORE", keys_.completed(), std::to_string(at),
                                            "+inf", "LIMIT", "0", "1"}));
  std::optional<TaskRange> above;
  if (next.type == RedisReply::Type::kArray && !next.elements.empty()) {
    Result<TaskRange> r = ParseTask(next.elements[0].str);
    if (r.ok() && static_cast<uint64_t>(r->from) > at) above = *r;
  }
  if (!above.has_value()) {
    if (gap_from_ != UINT64_MAX) {
      spdlog::info("leader {}: the gap at block {} is closed", options_.holder_id, gap_from_);
      (void)redis_->Command({"DEL", keys_.gap()});
    }
    gap_from_ = UINT64_MAX;
    gap_healing_ = false;
    return Status::Ok();
  }
  const uint64_t gap_to = std::min<uint64_t>(static_cast<uint64_t>(above->from) - 1, bound);
  const int64_t now = options_.env->NowMicros();
  if (gap_from_ != at) {
    gap_from_ = at;
    gap_since_micros_ = now;
    gap_healing_ = false;
  }
  const int64_t open_ms = (now - gap_since_micros_) / 1000;
  const bool heal = options_.heal_gaps_after_ms > 0 && open_ms >= options_.heal_gaps_after_ms;
  GAPLESS_RETURN_IF_ERROR(
      redis_
          ->Command({"SET", keys_.gap(),
                     fmt::format(R"({{"from":{},"to":{},"open_ms":{},"healing":{}}})", at, gap_to,
                                 open_ms, heal ? "true" : "false"),
                     "PX", std::to_string(std::max<int64_t>(10'000, 20 * options_.tick_ms))})
          .status());
  if (!heal || at > gap_to) return Status::Ok();
  std::vector<std::pair<uint64_t, uint64_t>> committed;
  {
    auto conn = pool_->Acquire();
    GAPLESS_ASSIGN_OR_RETURN(committed, CommittedRanges(*conn, at, gap_to));
  }
  std::vector<TaskRange> tasks;
  for (const BlockRange& r : PendingRanges(at, gap_to, options_.range_size, committed)) {
    tasks.push_back(TaskRange{static_cast<int64_t>(r.from), static_cast<int64_t>(r.to)});
  }
  Queue queue(redis_.get(), keys_);
  GAPLESS_ASSIGN_OR_RETURN(int64_t pushed, queue.Push(tasks, epoch));
  if (!gap_healing_ || pushed > 0) {
    spdlog::warn(
        "leader {}: blocks {}..{} are missing from the stream after {:.1f} s; queued {} ranges "
        "for RPC workers to fetch",
        options_.holder_id, at, gap_to, static_cast<double>(open_ms) / 1e3, tasks.size());
  }
  gap_healing_ = true;
  return Status::Ok();
}

Status Leader::ReclaimLocks() {
  const int64_t now = options_.env->NowMicros();
  if (now < next_reclaim_micros_) return Status::Ok();
  next_reclaim_micros_ = now + options_.reclaim_every_ms * 1000;
  RangeLocks locks(redis_.get(), keys_);
  GAPLESS_ASSIGN_OR_RETURN(auto freed, locks.ReclaimOrphans());
  for (const auto& [range, holder] : freed) {
    spdlog::warn("leader {}: freed the lock of blocks {} held by {}, whose heartbeat is gone",
                 options_.holder_id, range.id(), holder);
  }
  return Status::Ok();
}

void Leader::WatchKeys() {
  const int64_t now = options_.env->NowMicros();
  if (options_.key_sample_every_ms <= 0 || now < next_key_sample_micros_) return;
  next_key_sample_micros_ = now + options_.key_sample_every_ms * 1000;
  KeyWatchOptions watch;
  watch.min_interval_ms = options_.key_sample_every_ms;
  Result<KeyCountHistory> history = RecordKeyCountSample(*redis_, keys_, watch);
  if (!history.ok()) {
    spdlog::warn("leader {}: key-count sample failed: {}", options_.holder_id,
                 history.status().ToString());
    return;
  }
  KeyGrowth growth = DetectKeyGrowth(history->samples);
  if (growth.growing) {
    spdlog::warn(
        "leader {}: the coordination Redis's key count rose at every sample for {:.0f} min ({} "
        "-> {} keys): something writes keys without a TTL or a bound; `gapless status` names the "
        "largest key prefixes",
        options_.holder_id, static_cast<double>(growth.span_ms) / 60'000.0, growth.from_keys,
        growth.to_keys);
  }
}

Status Leader::CheckStuck() {
  uint64_t frontier_now = frontier_.load();
  if (!options_.to.has_value() || frontier_now > *options_.to || cursor_ <= *options_.to) {
    stuck_since_micros_ = 0;
    return Status::Ok();
  }
  Queue queue(redis_.get(), keys_);
  GAPLESS_ASSIGN_OR_RETURN(QueueDepths depths, queue.Depths());
  std::optional<DeadLetter> blocking;
  if (depths.pending == 0 && depths.processing == 0 && depths.dlq > 0) {
    GAPLESS_ASSIGN_OR_RETURN(auto dead, queue.DlqList());
    for (const DeadLetter& d : dead) {  // sorted by task: the first one in range blocks
      if (d.task.to >= static_cast<int64_t>(frontier_now) &&
          d.task.from <= static_cast<int64_t>(*options_.to)) {
        blocking = d;
        break;
      }
    }
  }
  if (!blocking.has_value()) {
    stuck_since_micros_ = 0;
    return Status::Ok();
  }
  int64_t now = options_.env->NowMicros();
  std::string what = fmt::format(
      "blocks {}..{} cannot complete: range {} is dead-lettered after {} attempts ({}); fix the "
      "cause, then `gapless dlq retry {}` and run again",
      options_.from, *options_.to, blocking->task.id(), blocking->attempts, blocking->error,
      blocking->task.id());
  if (stuck_since_micros_ == 0) {
    stuck_since_micros_ = now;
    spdlog::error("leader {}: {}{}", options_.holder_id, what,
                  options_.give_up_when_stuck_ms > 0
                      ? fmt::format(" (giving up in {:.0f} s unless it is retried)",
                                    static_cast<double>(options_.give_up_when_stuck_ms) / 1e3)
                      : "");
  }
  if (options_.give_up_when_stuck_ms > 0 &&
      now - stuck_since_micros_ >= options_.give_up_when_stuck_ms * 1000) {
    return FailedPrecondition(what);
  }
  return Status::Ok();
}

Status Leader::Standby() {
  GAPLESS_RETURN_IF_ERROR(Validate());
  GAPLESS_RETURN_IF_ERROR(lease_->Fatal());
  GAPLESS_RETURN_IF_ERROR(Connect());
  if (holding_.load()) spdlog::warn("leader {}: no longer leading", options_.holder_id);
  holding_ = false;
  term_epoch_ = 0;
  // A standby still follows the frontier, so done() works wherever it is asked.
  Frontier frontier(redis_.get(), keys_.completed(), keys_.frontier(), options_.from);
  GAPLESS_ASSIGN_OR_RETURN(uint64_t seen, frontier.Get());
  frontier_ = std::max(frontier_.load(), seen);
  return Status::Ok();
}

Status Leader::Step(uint64_t epoch) {
  GAPLESS_RETURN_IF_ERROR(Validate());
  GAPLESS_RETURN_IF_ERROR(lease_->Fatal());
  GAPLESS_RETURN_IF_ERROR(Connect());
  holding_ = true;
  GAPLESS_ASSIGN_OR_RETURN(std::optional<uint64_t> bound, Bound());
  // Redis's data set is the term's while it is the same server's, and it holds the term marker.
  // Another replication id (a failover, even to a replica that lagged and so kept the marker but
  // lost the latest writes: the fence counter below tokens PostgreSQL holds; a restart), or the
  // marker gone (FLUSHALL, a restart without persistence, a failover to an empty replica) or
  // another's: start the term again, restoring the floors from PostgreSQL and re-seeding from the
  // frontier before anything else. The id is read first: a failover after it is seen next step.
  // A term that started while INFO failed (a server coming back, a connection reset) knows no id:
  // whatever happened since is unknown, so the first id read starts it again. (Where INFO is
  // always refused, no id is ever read and only the marker check remains.)
  const std::string replid = ReplicationId(*redis_);
  GAPLESS_ASSIGN_OR_RETURN(RedisReply marker, redis_->Command({"GET", keys_.leader_term()}));
  bool data_set_changed = false;
  if (term_epoch_ != 0 && !replid.empty() && term_replid_.empty()) {
    spdlog::warn(
        "leader {}: the term started without the coordination Redis's replication id (INFO "
        "failed); it is {}: restoring the state, since a failover meanwhile cannot be ruled out",
        options_.holder_id, replid);
    term_epoch_ = 0;
    data_set_changed = true;
  } else if (term_epoch_ != 0 && !replid.empty() && replid != term_replid_) {
    spdlog::warn(
        "leader {}: the coordination Redis is another data set now (replication id {} -> {}: a "
        "failover or a restart), which may lack the latest writes: restoring the state",
        options_.holder_id, term_replid_, replid);
    term_epoch_ = 0;
    data_set_changed = true;
  } else if (term_epoch_ != 0 && marker.str != std::to_string(term_epoch_)) {
    spdlog::warn("leader {}: the term marker in Redis is {} (ours: {}): restoring the state",
                 options_.holder_id, marker.is_nil() ? "gone" : marker.str, term_epoch_);
    term_epoch_ = 0;
  }
  if (term_epoch_ != epoch) {
    // The floors over the whole job when it has an end; else up to what the head log knows.
    GAPLESS_RETURN_IF_ERROR(
        StartTerm(options_.to.has_value() ? *options_.to : bound.value_or(options_.from), epoch,
                  data_set_changed));
    term_epoch_ = epoch;
    term_replid_ = replid;
  }
  GAPLESS_RETURN_IF_ERROR(LevelReorgs(epoch, /*term_start=*/false));
  if (bound.has_value() && !options_.blocks_from_stream) {
    GAPLESS_RETURN_IF_ERROR(Seed(*bound, epoch));
  }
  Queue queue(redis_.get(), keys_);
  GAPLESS_ASSIGN_OR_RETURN(
      auto expired, queue.Janitor(options_.janitor_limit, options_.max_lease_expiries, epoch));
  for (const ExpiredTask& e : expired) {
    if (e.outcome == FailOutcome::kDeadLettered) {
      spdlog::error(
          "leader: task {} dead-lettered: its lease expired {} times without completing (last "
          "holder {}); `gapless dlq retry` requeues it",
          e.task.id(), e.expiries, e.worker.empty() ? "unknown" : e.worker);
    } else {
      spdlog::warn(
          "leader: task {} requeued: its lease expired (holder {}; expiry {} of {} before "
          "the DLQ)",
          e.task.id(), e.worker.empty() ? "unknown" : e.worker, e.expiries,
          options_.max_lease_expiries);
    }
  }
  GAPLESS_RETURN_IF_ERROR(AdvanceFrontier(epoch));
  if (options_.blocks_from_stream) {
    GAPLESS_RETURN_IF_ERROR(HealGaps(bound.value_or(options_.to.value_or(UINT64_MAX)), epoch));
    GAPLESS_RETURN_IF_ERROR(ReclaimLocks());
  }
  WatchKeys();
  return CheckStuck();
}

Status Leader::Run(const std::atomic<bool>& stop) {
  GAPLESS_RETURN_IF_ERROR(Validate());
  DutyHost host(lease_, options_.tick_ms, "leader " + options_.holder_id, options_.env);
  host.Add(this);
  host.set_waker(waker_);
  return host.Run(stop);
}

}  // namespace gapless
