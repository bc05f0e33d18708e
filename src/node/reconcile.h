// reconcile: rebuilds the coordination Redis from PostgreSQL, the source of truth (DESIGN
// principle 1), so that losing every Redis key (FLUSHALL, a restart without persistence, a
// failover to an empty replica) loses no data and no progress.
//
// What is rebuilt, in this order (the order is the safety argument):
//  1. The fencing-token counter, when missing or behind PostgreSQL, is restored to kFenceHeadroom
//     above the highest token recorded in indexed_ranges (or the last restore's value). FIRST,
//     before any task is pushed: a claim made after this gets a token above every token granted
//     before the loss, so the fence keeps rejecting any worker that still holds a lease granted
//     before it. The headroom is there because PostgreSQL only knows the tokens that were
//     committed: a token granted before the loss and not yet committed (its holder between renewing
//     and writing) would otherwise be granted again, and two holders would write with one token. It
//     assumes fewer than 2^32 grants after the later of the last commit and the last restore; a
//     database's first start (no token recorded, no restore recorded, no counter) starts at 0. (A
//     claim that slipped in before the floor, possible only if someone pushed tasks in between,
//     gets a low token: its write can still be rejected or accepted, never doubled, because range
//     writes are idempotent.) The value is recorded in PostgreSQL (store/state.h RecordFenceBase)
//     before the counter is set, so a second loss before any commit restores above the first
//     restore. With the counter, the data set it is valid on is recorded (the server's
//     replication id, coord/lua/fence_lib.lua): a failover to a replica that lagged keeps a
//     counter that looks live yet is behind grants of the old primary, and the new server's
//     scripts refuse to grant from it until a process restores it here (RestoreFenceOnNewDataSet).
//  2. The Redis frontier is raised to the contiguous committed prefix of [from, to] read from
//     indexed_ranges. That is at least the frontier persisted in PostgreSQL for this job
//     (PersistFrontier only records a covered frontier) but is computed rather than trusted, so a
//     frontier persisted by a job with another start block cannot move this job's frontier over a
//     gap. Raising is monotonic (frontier_advance.lua never decreases it).
//  3. Reconcile only: every aligned range of [from, to] not covered by indexed_ranges is pushed.
//     Push is idempotent (skips tasks pending, processing, completed, dead-lettered or below the
//     frontier), so reconciling a healthy Redis changes nothing but may be run at any time, by
//     any number of processes.
//
// Thread-safety: uses the connections given, one thread at a time.
#pragma once

#include <cstdint>
#include <string>

#include "coord/keys.h"
#include "coord/queue.h"
#include "coord/redis.h"
#include "core/status.h"
#include "store/pg.h"

namespace gapless {

// Added when a lost counter is restored (step 1 above). 2^32: more grants than a fleet makes
// between two commits, and room for 2^17 losses below the 15 digits the queue scripts accept.
inline constexpr int64_t kFenceHeadroom = int64_t{1} << 32;

struct ReconcileFloors {
  int64_t fence_counter = 0;  // the counter after flooring
  uint64_t frontier = 0;      // the Redis frontier after raising (next block not known done)
};

// Steps 1 and 2 above (no push). The leader runs this at the start of every term, with its epoch
// (the frontier step is leader-only: refused, IsStaleLeaderEpoch, if a newer leader has acted),
// and `counter_lost` when it saw the coordination Redis become another data set (a failover: a
// counter there may be above PostgreSQL's tokens and still behind grants made on the old one).
// Errors from Redis or PostgreSQL, unchanged (Unavailable: retry).
Result<ReconcileFloors> RestoreFloors(RedisConn& redis, const Keys& keys, PgConn& pg, uint64_t from,
                                      uint64_t to, uint64_t leader_epoch = 0,
                                      bool counter_lost = false);

// Steps 1-3: `gapless reconcile`, and the start of a run whose Redis state is missing. Pushes the
// gaps of [from, to] as aligned tasks of range_size blocks (at most one task per gap range; the
// whole interval at once, so bound it for a very long chain).
Status Reconcile(RedisConn& redis, const Keys& keys, PgConn& pg, uint64_t from, uint64_t to,
                 uint64_t range_size);

// Re-orgs: after the leader rolled PostgreSQL back (store/rollback.h), the coordination state
// follows it (lua/reorg_reset.lua): when PostgreSQL's re-org generation is above the one Redis
// recorded, the Redis frontier goes down to the lowest fork point of the newer re-orgs + 1 (never
// below `from`), the completed ranges above it are dropped, the leases of tasks in processing
// above it are revoked (the tasks requeued), and the generation is recorded. The
// leader calls it right after its rollback and at the start of every term BEFORE RestoreFloors
// (which only raises the frontier): a leader that died between the rollback and this step leaves
// it to its successor. Fenced by the leader's epoch; idempotent. Returns the fork point when the
// state moved (nullopt: nothing to follow).
Result<std::optional<uint64_t>> FollowRollbacks(RedisConn& redis, const Keys& keys, PgConn& pg,
                                                uint64_t from, uint64_t leader_epoch);

// True when this chain's coordination state is gone from Redis: the fence-token counter key,
// which exists from the first claim (or reconciliation) on and never expires, is absent.
Result<bool> RedisStateMissing(RedisConn& redis, const Keys& keys);

// Before a process takes fencing tokens: when the counter is missing (RedisStateMissing: a fresh
// start, or Redis lost its data), restores it as step 1 above does, so a token taken afterwards
// is above every token granted before. Logs the value as `who`.
Status EnsureFenceFloor(RedisConn& redis, const Keys& keys, PgConn& pg, const std::string& who);

// After a claim or a range lock was refused because the counter was floored on another Redis
// data set (IsFenceDataSetRefusal: a failover to a replica that may have lagged, a restart):
// restores it as step 1 does for a lost counter, above every token granted before on any data set,
// unless another process did so on this data set meanwhile. Then the caller claims again.
Status RestoreFenceOnNewDataSet(Queue& queue, PgConn& pg, const std::string& who);

// After a write the fence refused (store/writer.h: kStaleFenceReason, kReorgFencedReason): the
// token was at or below one PostgreSQL recorded. Usually a newer lease holds the range; but when
// the counter itself is behind PostgreSQL (a failover to a replica that missed the latest grants
// or a re-org's floor, before the leader's next term floors it again), every claim until then
// gets a token refused the same way, each spending an attempt. A counter below MaxFenceToken is
// restored as step 1 above does (the replica missed grants PostgreSQL never saw either); one at
// or above it is left alone (safe from any process at any time), so the next claim can write.
// Logs a warning when the counter was not above PostgreSQL's highest token.
Status RaiseFenceAfterRefusal(Queue& queue, PgConn& pg, int64_t refused_token,
                              const std::string& who);

}  // namespace gapless
