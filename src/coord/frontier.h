// Frontier: the contiguous indexing frontier of one chain (seed 000, DESIGN "Coordination").
//
// Workers record each completed range [from, to] in a sorted set (the queue's complete script
// does it in the same step as the lease release, owner-checked; RecordFenced() is for other
// producers, fenced by the re-org generation; Record() for tests and tools). Advance() runs
// lua/frontier_advance.lua, which moves the frontier over every range that joins it, removes the
// consumed ranges, and stores the result. The frontier is "the next block not yet known complete":
// all blocks in [start, frontier) are complete. It never decreases, tolerates duplicate and
// overlapping ranges, and is held back by a gap until the gap's range completes.
//
// Safety (DESIGN principle 1): ranges are recorded only after their PostgreSQL transaction
// committed, so the Redis frontier never runs ahead of committed rows. Losing the Redis keys
// loses no data: reconciliation rebuilds from PostgreSQL and passes the persisted frontier as
// `start`, which also acts as a floor.
//
// Thread-safety: not thread-safe (it uses one RedisConn); one per thread. Any number of Frontier
// objects in any number of processes may advance the same keys concurrently: each Advance is one
// atomic script.
#pragma once

#include <cstdint>
#include <string>

#include "coord/redis.h"
#include "core/status.h"

namespace gapless {

class Frontier {
 public:
  // `conn` is borrowed and must outlive this object. `completed_key` is the sorted set of completed
  // ranges (Keys::completed()), `frontier_key` the frontier string (Keys::frontier()), both in one
  // hash slot. `start_block` is the first block of the indexing job (a floor for the frontier).
  // `leader_epoch_key` (Keys::leader_epoch) fences Advance; empty: "<frontier_key>:epoch".
  Frontier(RedisConn* conn, std::string completed_key, std::string frontier_key,
           uint64_t start_block, std::string leader_epoch_key = {});

  // Records that blocks [from, to] (inclusive) are committed. Idempotent. FailedPrecondition if
  // from > to; Unavailable / Internal from Redis.
  Status Record(uint64_t from, uint64_t to);
  // The same, fenced by re-orgs (lua/frontier_record.lua): recorded only while the coordination
  // Redis's followed re-org generation (`generation_key`, Keys::reorg_generation) is still
  // `generation`, which the caller read before it looked at PostgreSQL and wrote. Returns whether
  // it was recorded (false: a re-org was followed since; nothing is lost, the leader's PostgreSQL
  // catch-up finds committed rows).
  Result<bool> RecordFenced(uint64_t from, uint64_t to, const std::string& generation_key,
                            uint64_t generation);

  // Advances the frontier as far as the recorded ranges allow and returns it (the next block not
  // yet known complete). Idempotent. Unavailable when Redis cannot be reached; DataLoss (reason
  // RedisErrorReason(kCorruptStateError)) when the stored state is corrupt (a malformed member, a
  // non-numeric frontier) — the frontier then stays where it is until a human or reconciliation
  // repairs the keys; Internal for a start_block the script cannot take (above 15 digits).
  // Leader-only: `leader_epoch` is the caller's (0 = unfenced); refused (IsStaleLeaderEpoch,
  // queue.h) below the highest seen.
  Result<uint64_t> Advance(uint64_t leader_epoch = 0);

  // The stored frontier without advancing it: max(stored, start_block), start_block when absent.
  Result<uint64_t> Get();

  uint64_t start_block() const { return start_; }

 private:
  RedisConn* conn_;
  std::string completed_key_;
  std::string frontier_key_;
  std::string epoch_key_;
  uint64_t start_;
};

}  // namespace gapless
