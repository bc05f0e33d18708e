// Coordination state that PostgreSQL, the source of truth, keeps for Redis: the floor under the
// fencing-token counter and the persisted frontier.
//
// Redis holds the fleet's live coordination state, and can lose it (FLUSHALL, a restart without
// persistence, a failover to an empty replica). Two things must survive that:
//  - Fencing tokens must stay monotonic: a new lease after the loss must get a token above every
//    token already recorded in indexed_ranges, or a stale worker's write could pass the fence.
//    MaxFenceToken() gives the floor that reconciliation sets the Redis counter above, and
//    LoadFenceBase() the value it was last restored at (grants after it may be unrecorded).
//  - The frontier (the next block not known to be committed, contiguous from the first job's start)
//  must
//    never decrease and never run ahead of committed rows. PersistFrontier() checks the second
//    against indexed_ranges in the same transaction that records it.
// Functions take a connection; they are as thread-safe as the connection (not).
#pragma once

#include <cstdint>
#include <optional>

#include "core/status.h"
#include "store/pg.h"

namespace gapless {

// The highest fencing token recorded in indexed_ranges or as a re-org's fence floor
// (store/rollback.h), 0 when there is none.
Result<int64_t> MaxFenceToken(PgConn& conn);

// The value the coordination Redis's fence counter was last started or restored at
// (node/reconcile.h), nullopt before its first start. Present means tokens may have been granted.
Result<std::optional<int64_t>> LoadFenceBase(PgConn& conn);

// Records `value` as the fence counter's base, before the counter is set to it; never lowers a
// recorded base.
Status RecordFenceBase(PgConn& conn, int64_t value);

// Records `next_block` as the frontier of the job that starts at `start_block`: every block in
// [start_block, next_block) is committed. Refuses with DataLoss (and records nothing) if
// indexed_ranges does not cover that interval, the frontier would run ahead of the data. Never
// decreases a recorded frontier: a lower value is accepted and ignored (a slower process may
// report late). Never passes a missing block, whatever the caller's start: the recorded frontier
// says "every block from the first job's start up to here is committed", so when it is below
// `start_block` (a later run with a higher --from, over a hole) it moves only as far as the
// blocks committed contiguously from where it is, capped at next_block. The first call records
// the row at `start_block` (the frontier's base). Returns the recorded frontier after the call.
Result<uint64_t> PersistFrontier(PgConn& conn, uint64_t start_block, uint64_t next_block);

// The chain id recorded by EnsureChainId, nullopt in a database not used yet.
Result<std::optional<uint64_t>> LoadChainId(PgConn& conn);

// The database's identity in the coordination Redis (coord/keys.h): 12 random hex digits,
// recorded in indexer_state on first use and the same ever after, so two databases indexing one
// chain through one Redis never share a queue, fence counter or frontier. Concurrent first calls
// agree (one insert wins).
Result<std::string> EnsureDatabaseId(PgConn& conn);

// The recorded frontier, nullopt before the first PersistFrontier.
Result<std::optional<uint64_t>> LoadFrontier(PgConn& conn);

}  // namespace gapless
