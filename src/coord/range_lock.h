// range_lock: the per-range locks of the Kafka block source (issue 9, seed 000). Blocks come from
// a consumer group, so two workers can hold the same range (a rebalance, a redelivery): before
// writing a range a worker takes its lock. (Whether a range is committed is asked of PostgreSQL,
// by block hash (node/kafka_worker.h); the completion markers that once answered it outlived
// re-orgs and were removed in issue 16.)
//
//   lock      SET NX PX with the worker's identity (lua/range_lock.lua); the heartbeat extends it
//             at a third of its TTL; only the owner extends or releases it. A lock whose holder
//             died expires with its TTL (the reclaimer may also release locks of dead workers).
//
// It carries a TTL (DESIGN: no coordination key without a TTL or a bound).
// Thread-safety: as the RedisConn (one thread at a time).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coord/keys.h"
#include "coord/queue.h"
#include "coord/redis.h"
#include "core/status.h"

namespace gapless {

class RangeLocks {
 public:
  // `conn` must outlive this.
  RangeLocks(RedisConn* conn, const Keys& keys) : conn_(conn), keys_(keys) {}

  // When `owner` holds the range's lock now (taken, or already held: its TTL renewed), a fresh
  // fencing token for the write (the queue's counter: higher than every earlier lease or lock);
  // nullopt while another owner holds it. Resending after a lost answer is safe (the owner gets
  // the lock again, with a higher token). IsFenceDataSetRefusal (nothing taken) when the counter
  // must be floored again first (Queue::FloorFenceCounter, node/reconcile.h).
  Result<std::optional<int64_t>> Acquire(const TaskRange& range, const std::string& owner,
                                         int64_t ttl_ms);
  // Renews the TTL while `owner` holds it; false when the lock was lost (expired or taken).
  Result<bool> Extend(const TaskRange& range, const std::string& owner, int64_t ttl_ms);
  // Deletes the lock if `owner` holds it; false otherwise (nothing changes).
  Result<bool> Release(const TaskRange& range, const std::string& owner);
  // The reclaimer (seed 000): frees every range lock whose holder's heartbeat (coord/registry.h)
  // is gone, checked and deleted atomically per lock, so a live holder's lock is never touched.
  // One SCAN pass over the lock keys. Returns the ranges freed and who held them.
  Result<std::vector<std::pair<TaskRange, std::string>>> ReclaimOrphans();

  // The lock's holder, nullopt when free.
  Result<std::optional<std::string>> Holder(const TaskRange& range);

 private:
  Result<bool> Run(const TaskRange& range, const char* op, const std::string& owner,
                   int64_t ttl_ms);

  RedisConn* conn_;
  Keys keys_;
};

}  // namespace gapless
