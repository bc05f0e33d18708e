// A manual Redis failover the way Sentinel performs one, for tests of gapless following a new
// primary without Sentinel (a multi-server URL, coord/redis.h):
//   1. CLIENT PAUSE WRITE on the old primary, so no write is acknowledged that the replica lacks;
//   2. wait until the replica's offset reaches the old primary's;
//   3. REPLICAOF NO ONE on the replica (the new primary);
//   4. on the old primary, in one MULTI: REPLICAOF <new primary>, CLIENT KILL TYPE normal and
//      pubsub (so no client keeps reading the demoted server on a connection it opened while it
//      was the primary), CONFIG RESETSTAT (so a test can tell what reached it afterwards);
//   5. CLIENT UNPAUSE on the old primary.
// Also the role helpers the failover tests share. Thread-safety: none; the caller owns the
// connections, which must be opened with RedisOptions::require_primary = false.
#pragma once

#include <cstdint>
#include <string>

#include "coord/redis.h"
#include "core/status.h"

namespace gapless {

// InfoField (coord/redis.h) reads one field of INFO.

// One counter of INFO commandstats' line for `command` (lower case), e.g. CommandStat(c, "get",
// "calls"); 0 when the command has not run since the last CONFIG RESETSTAT.
int64_t CommandStat(RedisConn& conn, const std::string& command, const std::string& counter);

// Waits up to timeout_ms until `replica` reports master_link_status:up.
Status WaitForReplicaLink(RedisConn& replica, int64_t timeout_ms);

// The failover above: `replica` (reachable by the old primary at new_host:new_port) becomes the
// primary and `old_primary` its replica. close_clients false leaves out step 4's CLIENT KILLs: the
// clients of the old primary learn of the failover from the READONLY answer to their next write.
// Errors: a command refused, or the replica not caught up within timeout_ms (the old primary is
// unpaused and nothing was switched).
Status ManualFailover(RedisConn& old_primary, RedisConn& replica, const std::string& new_host,
                      int new_port, bool close_clients = true, int64_t timeout_ms = 10'000);

}  // namespace gapless
