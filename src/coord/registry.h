// Registry: which processes of the fleet are alive and what each is doing, for `gapless status`.
//
// Every process beats: a heartbeat key with a TTL of a few beat intervals (alive while it exists)
// and a registry hash entry with its host, pid, current range and rate, whose expiry (the same
// TTL) is indexed in a sorted set. A process that dies stops beating; its heartbeat and entry
// expire, and the next beat of any process removes up to kMaxPrunePerBeat expired entries
// (lua/registry_beat.lua), so the hash stays bounded by the live fleet plus the recently dead even
// when nobody lists it; List() also prunes the dead entries it sees. Every update is one script.
// Liveness only: safety never depends on a heartbeat (leases and fencing tokens carry that).
// Not thread-safe: one Registry per thread, like the RedisConn it uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coord/keys.h"
#include "coord/redis.h"
#include "core/status.h"

namespace gapless {

struct WorkerInfo {
  std::string worker;  // unique id, e.g. "host:pid:n"
  std::string host;
  int64_t pid = 0;
  std::string range;  // current task "from-to", empty when idle
  double blocks_per_s = 0;
  int64_t updated_ms = 0;  // Redis TIME of the last beat, milliseconds
};

class Registry {
 public:
  // Expired entries one Beat removes at most: bounds the work of a beat, and is far more than one
  // beat adds (one entry), so dead entries drain quickly.
  static constexpr int kMaxPrunePerBeat = 16;

  Registry(RedisConn* redis, const Keys* keys) : redis_(redis), keys_(keys) {}

  // Refreshes the heartbeat (TTL ttl_ms) and the registry entry of info.worker, and prunes up to
  // kMaxPrunePerBeat entries of processes whose TTL ran out. Errors: from Redis.
  Status Beat(const WorkerInfo& info, int64_t ttl_ms);
  // Removes the process's heartbeat and entry (graceful shutdown). Errors: from Redis.
  Status Leave(const std::string& worker);
  // The live processes, sorted by worker id; prunes entries whose heartbeat is gone unless
  // prune_dead is false (a read-only listing, e.g. from a replica, which refuses writes).
  Result<std::vector<WorkerInfo>> List(bool prune_dead = true);

  // JSON encoding of the registry entry (exposed for tests).
  static std::string Encode(const WorkerInfo& info);
  static bool Decode(const std::string& worker, const std::string& json, WorkerInfo* out);

 private:
  RedisConn* redis_;
  const Keys* keys_;
};

}  // namespace gapless
