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

Result<ReconcileFloors> RestoreFloors(RedisConn& redis, const Keys& keys, PgConn& pg, uint64_t from,
                                      uint64_t to, uint64_t leader_epoch) {
  if (from > to) return FailedPrecondition(fmt::format("from {} is above to {}", from, to));
  ReconcileFloors out;
  // 1. The fence floor, before anything else (see the header).
  GAPLESS_ASSIGN_OR_RETURN(int64_t max_token, MaxFenceToken(pg));
  Queue queue(&redis, keys);
  GAPLESS_ASSIGN_OR_RETURN(out.fence_counter, queue.FloorFenceCounter(max_token));
  // The floor script writes nothing when the floor is 0; create the key so that
  // RedisStateMissing() reports "reconciled" from now on. NX: never lowers a live counter.
  GAPLESS_RETURN_IF_ERROR(
      redis.Command({"SET", keys.fence_counter(), "0", "NX"}, /*idempotent=*/true).status());

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
  GAPLESS_ASSIGN_OR_RETURN(int64_t max_token, MaxFenceToken(pg));
  Queue queue(&redis, keys);
  GAPLESS_ASSIGN_OR_RETURN(int64_t counter, queue.FloorFenceCounter(max_token));
  // Above 0: Redis lost its data and the floor restored it, worth a warning each time. 0: a fresh
  // start (nothing fenced yet), which every worker of a new fleet meets on its first claims:
  // said once per process, at debug after that.
  static std::atomic<bool> fresh_start_said{false};
  spdlog::level::level_enum level = spdlog::level::warn;
  if (counter == 0) {
    level = fresh_start_said.exchange(true) ? spdlog::level::debug : spdlog::level::info;
  }
  spdlog::log(level, "{}: the fence counter was missing from Redis; floored at {}", who, counter);
  return Status::Ok();
}

Status RaiseFenceAfterRefusal(Queue& queue, PgConn& pg, int64_t refused_token,
                              const std::string& who) {
  GAPLESS_ASSIGN_OR_RETURN(int64_t max_token, MaxFenceToken(pg));
  GAPLESS_ASSIGN_OR_RETURN(int64_t counter, queue.FloorFenceCounter(max_token));
  // Above PostgreSQL's highest: a newer grant exists, the refusal was the usual lost lease.
  if (counter > max_token) return Status::Ok();
  // Equal: raised just now (the counter was behind: a failover to a lagging replica?), or no
  // grant since a re-org's floor was recorded at the counter's value.
  spdlog::warn(
      "{}: fence token {} was refused; the fence counter is at PostgreSQL's highest token {} "
      "(raised if it was behind, as after a failover to a lagging replica)",
      who, refused_token, counter);
  return Status::Ok();
}

Result<bool> RedisStateMissing(RedisConn& redis, const Keys& keys) {
  GAPLESS_ASSIGN_OR_RETURN(auto reply, redis.Command({"EXISTS", keys.fence_counter()}));
  if (reply.type != RedisReply::Type::kInteger) return Internal("EXISTS: unexpected reply");
  return reply.integer == 0;
}

}  // namespace gapless
