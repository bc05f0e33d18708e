// Coordination state that PostgreSQL, the source of truth, keeps for Redis: the floor under the
// fencing-token counter and the persisted frontier.
//
// Redis holds the fleet's live coordination state, and can lose it (FLUSHALL, a restart without
// persistence, a failover to an empty replica). Two things must survive that:
//  - Fencing tokens must stay monotonic: a new lease after the loss must get a token above every
//    token already recorded in indexed_ranges, or a stale worker's write could pass the fence.
//    MaxFenceToken() gives the floor that reconciliation sets the Redis counter above, and
//    LoadFenceBase() the value it was last restored at (grants after it may be unrecorded).
//  - The frontier (the next block not known to be committed, contiguous from the first job's
//    start) must never decrease and never run ahead of committed rows. PersistFrontier() checks
//    the second against indexed_ranges in the same transaction that records it, and compacts
//    the rows it passed, so the table and the step's cost stay bounded as the chain grows.
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
//
// Its cost does not grow with the chain (DESIGN: bookkeeping stays bounded): it reads only the
// rows of indexed_ranges from the recorded frontier on (below it, the blocks were checked when
// it got there, and only a rollback, which lowers it too, removes rows), and then compacts.
//
// Compaction. A range write leaves a row in indexed_ranges per part, so a run leaves one row per
// part of its history. When the frontier moves, the rows wholly below it, committed at least
// `compact_after_seconds` ago (negative: never), are merged: each run of adjacent rows becomes
// its first row, spanning them all, with the highest token among them and the owner of that
// token. At most a few thousand rows a call, from a mark in indexer_state
// (ranges_compacted_to) on, so a backlog is worked off over calls. A hole in the table (below
// the frontier only below its base: another run's rows under a later --from) is gone past, never
// merged over.
// Why the fence (store/writer.h "Fencing") refuses after it whatever it refused before: a write
// is refused by a row holding a higher token, or an equal one with another (known) owner. The
// merged row's token is the highest of its rows, so a write refused by any of them for a higher
// token still is; one refused for an equal token by another owner is refused by the merged row
// too, because rows whose highest token has two owners (a token granted twice, after a Redis
// failover) are never merged with each other. Rows holding different datasets
// (store/datasets.h) are not merged either: a merged row would claim for all what some hold. The
// highest token stays in the table, so MaxFenceToken, the counter's floor, does not change either.
// The merged row can refuse more: a token between a row's own and the run's highest, or the row's
// own holder retrying. Below the frontier every block is committed already, so such a refusal loses
// nothing (the worker drops the lease, node/worker.h); and ranges still in flight are above the
// frontier, or not settled yet, and keep their rows as they are: an equal token passes there for
// the same holder only, as before. The delay keeps a row its holder may still be writing near (a
// retry after a lost commit reply, the next part of a task whose first parts the frontier passed)
// out of a merge, so a token stays the record of one task (the chaos harness's tokens-unique); the
// fence itself does not depend on it. The rows are locked while merged (SKIP LOCKED: a row a writer
// holds ends the walk), and the table is locked as a rollback locks it, table before frontier
// row, so a rollback sees the rows either before or after a merge.
inline constexpr int64_t kCompactAfterSeconds = 600;
Result<uint64_t> PersistFrontier(PgConn& conn, uint64_t start_block, uint64_t next_block,
                                 int64_t compact_after_seconds = kCompactAfterSeconds);

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
