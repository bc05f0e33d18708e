#include "node/reconcile.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>

#include "coord/frontier.h"
#include "coord/queue.h"
#include "node/ranges.h"
#include "store/queries.h"
#include "store/rollback.h"
#include "store/state.h"

namespace gapless {

namespace {

enum class FenceState { kLive, kFresh, kRestored };

struct FenceRestore {
  int64_t counter = 0;    // after the call
  int64_t max_token = 0;  // PostgreSQL's highest (MaxFenceToken)
  FenceState state = FenceState::kLive;
};

// Step 1 (see the header). A counter at or above PostgreSQL's highest token is live and left
// alone, with no write anywhere, unless `lost` (the caller saw the data set change, so even such a
// counter may have missed grants) and the counter was not floored on this data set since.
// Otherwise it is set to the highest of PostgreSQL's token, the last restore's value and itself,
// plus kFenceHeadroom; on the database's first start, to 0. Either way the data set it is now
// valid on is recorded with it (Queue::FloorFenceCounter), which lets grants there go on.
Result<FenceRestore> RestoreFenceCounter(Queue& queue, PgConn& pg, bool lost,
                                         const std::string& who) {
  FenceRestore out;
  GAPLESS_ASSIGN_OR_RETURN(out.max_token, MaxFenceToken(pg));
  GAPLESS_ASSIGN_OR_RETURN(std::optional<int64_t> current, queue.FenceCounter());
  if (current.has_value() && *current >= out.max_token) {
    bool live = !lost;
    // Several processes see one failover (every worker refused a claim, the leader its step):
    // the first restore serves them all, and each further one would only raise the next.
    if (lost) {
      GAPLESS_ASSIGN_OR_RETURN(live, queue.FenceFlooredOnThisDataSet());
    }
    if (live) {
      out.counter = *current;
      return out;
    }
  }
  GAPLESS_ASSIGN_OR_RETURN(std::optional<int64_t> base, LoadFenceBase(pg));
  int64_t target = 0;
  out.state = FenceState::kFresh;
  if (current.has_value() || base.has_value() || out.max_token > 0) {
    target = std::max({out.max_token, base.value_or(0), current.value_or(0)}) + kFenceHeadroom;
    out.state = FenceState::kRestored;
  }
  // Recorded before the counter is set: a crash between the two only raises the next restore.
  GAPLESS_RETURN_IF_ERROR(RecordFenceBase(pg, target));
  // Never lowers: a restore that raced this one and granted since stays where it is.
  GAPLESS_ASSIGN_OR_RETURN(FenceFloorResult floored,
                           queue.FloorFenceCounter(target, /*only_on_new_data_set=*/lost));
  out.counter = floored.counter;
  if (!floored.floored) {
    out.state = FenceState::kLive;  // another process restored it on this data set meanwhile
    return out;
  }
  if (out.state == FenceState::kRestored) {
    spdlog::warn(
        "{}: the fence counter was {} (PostgreSQL's highest token {}); restored at {}, above "
        "every token granted before, committed or not",
        who,
        !current.has_value() ? std::string("missing from Redis")
        : lost               ? fmt::format("{} on a Redis that is another data set now", *current)
                             : fmt::format("{}, behind", *current),
        out.max_token, out.counter);
  }
  return out;
}

}  // namespace

Result<ReconcileFloors> RestoreFloors(RedisConn& redis, const Keys& keys, PgConn& pg, uint64_t from,
                                      uint64_t to, uint64_t leader_epoch, bool counter_lost) {
  if (from > to) return FailedPrecondition(fmt::format("from {} is above to {}", from, to));
  ReconcileFloors out;
  // 1. The fence floor, before anything else (see the header). Creates the key when missing, so
  // RedisStateMissing() reports "reconciled" from now on.
  Queue queue(&redis, keys);
  GAPLESS_ASSIGN_OR_RETURN(FenceRestore fence,
                           RestoreFenceCounter(queue, pg, counter_lost, "reconcile"));
  out.fence_counter = fence.counter;

  // 2. The frontier: the contiguous committed prefix of [from, to].
  GAPLESS_ASSIGN_OR_RETURN(auto done, CommittedRanges(pg, from, to));
  uint64_t prefix = from;
  if (!done.empty() && done[0].first == from) prefix = done[0].second + 1;
  GAPLESS_ASSIGN_OR_RETURN(auto persisted, LoadFrontier(pg));
  if (persisted.has_value() && *persisted > prefix && *persisted <= to + 1) {
    // Another job's frontier (or rows deleted by hand): not trusted, only reported.
    spdlog::warn("reconcile: PostgreSQL frontier {} is above the committed prefix {} of [{}, {}]",
                 *persisted, prefix, from, to);
  }
  Frontier frontier(&redis, keys.completed(), keys.frontier(), prefix, keys.leader_epoch());
  GAPLESS_ASSIGN_OR_RETURN(out.frontier, frontier.Advance(leader_epoch));
  return out;
}

Result<std::optional<uint64_t>> FollowRollbacks(RedisConn& redis, const Keys& keys, PgConn& pg,
                                                uint64_t from, uint64_t leader_epoch) {
  GAPLESS_ASSIGN_OR_RETURN(uint64_t generation, ReorgGeneration(pg));
  if (generation == 0) return std::optional<uint64_t>();
  GAPLESS_ASSIGN_OR_RETURN(RedisReply followed, redis.Command({"GET", keys.reorg_generation()}));
  uint64_t seen = 0;
  if (!followed.str.empty()) seen = std::strtoull(followed.str.c_str(), nullptr, 10);
  if (seen >= generation) return std::optional<uint64_t>();
  GAPLESS_ASSIGN_OR_RETURN(std::optional<uint64_t> fork, ForkPointSince(pg, seen));
  if (!fork.has_value()) return std::optional<uint64_t>();
  GAPLESS_ASSIGN_OR_RETURN(
      RedisReply r,
      redis.Eval(LoadScript("reorg_reset.lua"),
                 {keys.frontier(), keys.completed(), keys.reorg_generation(), keys.leader_epoch(),
                  keys.pending(), keys.processing(), keys.leases()},
                 {std::to_string(leader_epoch), std::to_string(*fork), std::to_string(generation),
                  std::to_string(from)}));
  if (r.type != RedisReply::Type::kArray || r.elements.size() != 4) {
    return Internal("reorg_reset.lua: unexpected reply");
  }
  spdlog::warn(
      "re-org: coordination state follows PostgreSQL's rollback to block {} (generation "
      "{}): frontier {}, {} completed ranges dropped, {} leases revoked",
      *fork, generation, r.elements[1].str, r.elements[2].integer, r.elements[3].integer);
  return fork;
}

Status Reconcile(RedisConn& redis, const Keys& keys, PgConn& pg, uint64_t from, uint64_t to,
                 uint64_t range_size) {
  if (range_size == 0) return FailedPrecondition("range size must be at least 1");
  GAPLESS_ASSIGN_OR_RETURN(ReconcileFloors floors, RestoreFloors(redis, keys, pg, from, to));
  // 3. The gaps. Read after the floors: anything committed since is skipped by Push anyway.
  GAPLESS_ASSIGN_OR_RETURN(auto done, CommittedRanges(pg, from, to));
  std::vector<TaskRange> tasks;
  for (const BlockRange& r : PendingRanges(from, to, range_size, std::move(done))) {
    tasks.push_back(TaskRange{static_cast<int64_t>(r.from), static_cast<int64_t>(r.to)});
  }
  Queue queue(&redis, keys);
  GAPLESS_ASSIGN_OR_RETURN(int64_t pushed, queue.Push(tasks));
  spdlog::info("reconcile [{}, {}]: fence counter {}, frontier {}, {} gap ranges, {} pushed", from,
               to, floors.fence_counter, floors.frontier, tasks.size(), pushed);
  return Status::Ok();
}

Status EnsureFenceFloor(RedisConn& redis, const Keys& keys, PgConn& pg, const std::string& who) {
  GAPLESS_ASSIGN_OR_RETURN(bool missing, RedisStateMissing(redis, keys));
  if (!missing) return Status::Ok();
  Queue queue(&redis, keys);
  GAPLESS_ASSIGN_OR_RETURN(FenceRestore fence, RestoreFenceCounter(queue, pg, false, who));
  if (fence.state == FenceState::kFresh) {
    // A fresh start (nothing fenced yet), which every worker of a new fleet meets on its first
    // claims: said once per process, at debug after that. (A restore warned itself.)
    static std::atomic<bool> fresh_start_said{false};
    spdlog::log(fresh_start_said.exchange(true) ? spdlog::level::debug : spdlog::level::info,
                "{}: the fence counter was missing from Redis; started at {}", who, fence.counter);
  }
  return Status::Ok();
}

Status RestoreFenceOnNewDataSet(Queue& queue, PgConn& pg, const std::string& who) {
  return RestoreFenceCounter(queue, pg, /*lost=*/true, who).status();
}

Status RaiseFenceAfterRefusal(Queue& queue, PgConn& pg, int64_t refused_token,
                              const std::string& who) {
  GAPLESS_ASSIGN_OR_RETURN(FenceRestore fence, RestoreFenceCounter(queue, pg, false, who));
  // Equal: no grant since a re-org's floor was recorded at the counter's value. Restored: the
  // counter was behind (a failover to a lagging replica), warned above. Above: the usual lost
  // lease, a newer grant holds the range.
  if (fence.state == FenceState::kLive && fence.counter == fence.max_token) {
    spdlog::warn(
        "{}: fence token {} was refused; the fence counter is at PostgreSQL's highest token {}",
        who, refused_token, fence.counter);
  }
  return Status::Ok();
}
Result<bool> RedisStateMissing(RedisConn& redis, const Keys& keys) {
  GAPLESS_ASSIGN_OR_RETURN(auto reply, redis.Command({"EXISTS", keys.fence_counter()}));
  if (reply.type != RedisReply::Type::kInteger) return Internal("EXISTS: unexpected reply");
  return reply.integer == 0;
}

}  // namespace gapless
