#include "node/leader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "coord/frontier.h"
#include "coord/queue.h"
#include "node/ranges.h"
#include "node/reconcile.h"
#include "store/queries.h"
#include "store/state.h"

namespace gapless {
namespace {

constexpr int64_t kSliceMicros = 20'000;

}  // namespace

Leader::Leader(LeaderOptions options, std::string redis_url, Keys keys, PgPool* pool,
               JsonRpcClient* rpc)
    : options_(std::move(options)),
      redis_url_(std::move(redis_url)),
      keys_(std::move(keys)),
      pool_(pool),
      rpc_(rpc) {
  if (options_.env == nullptr) options_.env = Env::Default();
  token_ =
      fmt::format("{}:{:016x}{:016x}", options_.holder_id.empty() ? "leader" : options_.holder_id,
                  options_.env->Uniform(UINT64_MAX), options_.env->Uniform(UINT64_MAX));
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
  if (options_.lock_ttl_ms <= 0 || options_.tick_ms <= 0 ||
      options_.tick_ms > options_.lock_ttl_ms / 3) {
    return FailedPrecondition(
        fmt::format("leader: the tick ({} ms) must be at most a third of the lock TTL ({} ms), "
                    "or the lock expires between two renewals",
                    options_.tick_ms, options_.lock_ttl_ms));
  }
  if (options_.to.has_value() == options_.follow) {
    return FailedPrecondition("leader: give either a fixed end (to) or follow, not both");
  }
  if (options_.to.has_value() && *options_.to < options_.from) {
    return FailedPrecondition(
        fmt::format("leader: from {} is above to {}", options_.from, *options_.to));
  }
  if (options_.follow && rpc_ == nullptr) return FailedPrecondition("leader: following needs RPC");
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

Result<uint64_t> Leader::Bound() {
  if (options_.to.has_value()) return *options_.to;
  GAPLESS_ASSIGN_OR_RETURN(uint64_t tip, rpc_->ResolveBlockTag(options_.to_tag));
  // Below `from` (a young chain): nothing to seed yet; callers compare with from.
  if (tip < options_.confirmations || tip - options_.confirmations < options_.from) {
    return options_.from == 0 ? UINT64_MAX : options_.from - 1;
  }
  return tip - options_.confirmations;
}

Status Leader::StartTerm(uint64_t bound) {
  uint64_t to = (bound == UINT64_MAX || bound < options_.from) ? options_.from : bound;
  auto conn = pool_->Acquire();
  GAPLESS_ASSIGN_OR_RETURN(ReconcileFloors floors,
                           RestoreFloors(*redis_, keys_, *conn, options_.from, to));
  frontier_ = std::max(frontier_, floors.frontier);
  // Re-seed from the frontier: whatever Redis lost between it and the old cursor is pushed again
  // (Push skips what it still knows).
  cursor_ = frontier_;
  ++terms_;
  spdlog::info("leader {}: term {} started: fence counter {}, frontier {}", options_.holder_id,
               terms_, floors.fence_counter, frontier_);
  return Status::Ok();
}

Status Leader::Seed(uint64_t bound) {
  cursor_ = std::max(cursor_, frontier_);
  if (bound == UINT64_MAX || bound < options_.from || cursor_ > bound) return Status::Ok();
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
  }
  std::vector<TaskRange> tasks;
  for (const BlockRange& r : PendingRanges(cursor_, window_end, size, std::move(committed))) {
    tasks.push_back(TaskRange{static_cast<int64_t>(r.from), static_cast<int64_t>(r.to)});
  }
  if (!tasks.empty()) {
    GAPLESS_ASSIGN_OR_RETURN(int64_t pushed, queue.Push(tasks));
    spdlog::debug("leader: seeded [{}, {}]: {} tasks, {} new", cursor_, window_end, tasks.size(),
                  pushed);
  }
  cursor_ = window_end + 1;
  return Status::Ok();
}

Status Leader::AdvanceFrontier() {
  // Our last frontier is a floor: it was computed from committed ranges, and it keeps the
  // frontier where it was if Redis lost its keys since.
  Frontier frontier(redis_.get(), keys_.completed(), keys_.frontier(),
                    std::max(options_.from, frontier_));
  GAPLESS_ASSIGN_OR_RETURN(uint64_t next, frontier.Advance());
  frontier_ = std::max(frontier_, next);
  if (frontier_ > persisted_ && frontier_ > options_.from) {
    auto conn = pool_->Acquire();
    GAPLESS_ASSIGN_OR_RETURN(persisted_, PersistFrontier(*conn, options_.from, frontier_));
  }
  return Status::Ok();
}

Status Leader::CheckStuck() {
  if (!options_.to.has_value() || frontier_ > *options_.to || cursor_ <= *options_.to) {
    stuck_since_micros_ = 0;
    return Status::Ok();
  }
  Queue queue(redis_.get(), keys_);
  GAPLESS_ASSIGN_OR_RETURN(QueueDepths depths, queue.Depths());
  std::optional<DeadLetter> blocking;
  if (depths.pending == 0 && depths.processing == 0 && depths.dlq > 0) {
    GAPLESS_ASSIGN_OR_RETURN(auto dead, queue.DlqList());
    for (const DeadLetter& d : dead) {  // sorted by task: the first one in range blocks
      if (d.task.to >= static_cast<int64_t>(frontier_) &&
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

Status Leader::Tick() {
  GAPLESS_RETURN_IF_ERROR(Validate());
  GAPLESS_RETURN_IF_ERROR(Connect());
  // Idempotent: a retried call after a lost answer sees its own token and answers "renewed",
  // which a holder that did not know it held the lock treats as a new term anyway.
  GAPLESS_ASSIGN_OR_RETURN(auto reply,
                           redis_->Eval(LoadScript("leader_lock.lua"), {keys_.leader_lock()},
                                        {token_, std::to_string(options_.lock_ttl_ms)},
                                        /*idempotent=*/true));
  if (reply.type != RedisReply::Type::kInteger) return Internal("leader_lock: unexpected reply");
  if (reply.integer == 0) {
    if (holding_) spdlog::warn("leader {}: lost the lock", options_.holder_id);
    holding_ = false;
    term_started_ = false;
    // A standby still follows the frontier, so done() works wherever it is asked.
    Frontier frontier(redis_.get(), keys_.completed(), keys_.frontier(), options_.from);
    GAPLESS_ASSIGN_OR_RETURN(uint64_t seen, frontier.Get());
    frontier_ = std::max(frontier_, seen);
    return Status::Ok();
  }
  if (reply.integer == 2 || !holding_) term_started_ = false;
  holding_ = true;

  GAPLESS_ASSIGN_OR_RETURN(uint64_t bound, Bound());
  if (!term_started_) {
    GAPLESS_RETURN_IF_ERROR(StartTerm(bound));
    term_started_ = true;
  }
  GAPLESS_RETURN_IF_ERROR(Seed(bound));
  Queue queue(redis_.get(), keys_);
  GAPLESS_ASSIGN_OR_RETURN(auto expired,
                           queue.Janitor(options_.janitor_limit, options_.max_lease_expiries));
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
  GAPLESS_RETURN_IF_ERROR(AdvanceFrontier());
  return CheckStuck();
}

Status Leader::Release() {
  if (!holding_ || redis_ == nullptr) return Status::Ok();
  holding_ = false;
  term_started_ = false;
  return redis_
      ->Eval(LoadScript("leader_release.lua"), {keys_.leader_lock()}, {token_},
             /*idempotent=*/true)
      .status();
}

Status Leader::Run(const std::atomic<bool>& stop) {
  GAPLESS_RETURN_IF_ERROR(Validate());
  while (!stop.load()) {
    Status st = Tick();
    if (!st.ok()) {
      if (st.code() == Code::kFailedPrecondition || st.code() == Code::kDataLoss) {
        (void)Release();
        return st;
      }
      spdlog::warn("leader {}: tick failed: {}", options_.holder_id, st.ToString());
    }
    if (done()) break;
    for (int64_t left = options_.tick_ms * 1000; left > 0 && !stop.load(); left -= kSliceMicros) {
      options_.env->SleepMicros(std::min(left, kSliceMicros));
    }
  }
  Status released = Release();
  if (!released.ok()) spdlog::warn("leader: release failed: {}", released.ToString());
  return Status::Ok();
}

}  // namespace gapless
