// rollback: undoes the blocks of a re-orged fork in PostgreSQL (issue 10 item 2), in one
// transaction, fenced by the leader's epoch.
//
// RollBack(fork_point) deletes every row of every block above fork_point (blocks, withdrawals,
// transactions, logs, token transfers), trims indexed_ranges to end at fork_point (so the fence
// and CommittedRanges see those heights as never written), lowers the persisted frontier to
// fork_point + 1 when it was above, deletes the event outbox rows of the orphaned blocks that no
// bus has published yet, records their retractions and lowers the bus cursors when events are
// enabled (store/retractions.h: the relay publishes block.reverted for each orphaned block before
// the new fork's events), bumps indexer_state 'reorg_generation', and records the re-org in the
// reorgs table. All or nothing: a failure leaves the database as it was.
//
// Bounds and fencing, checked before the first write:
//   - the depth (blocks stored above the fork point) must not exceed max_depth: a deeper re-org is
//     FailedPrecondition naming the fork point, the depth and how to recover (reason
//     kReorgTooDeepReason), and nothing changes;
//   - leader_epoch must not be below the highest epoch that rolled back before (a deposed
//     leader, paused across its successor's rollback): Aborted with kStaleReorgEpochReason.
// Rolling back to a fork point at or above the highest stored block deletes nothing; it is
// recorded (depth 0) only when it carries a fence floor, because the floor is what keeps a late
// worker of the old fork out (below).
//
// The fence floor (the fleet's leader passes the coordination Redis's fence counter, read just
// before): every lease granted until then carries a token at or below it. The reorgs row keeps it,
// and the writer refuses a range above the fork point with such a token (store/writer.h,
// kReorgFencedReason). The rollback first locks indexed_ranges (EXCLUSIVE: range writes take ROW
// EXCLUSIVE), so it waits for every range write in flight and none starts until it commits: a write
// either commits before the rollback (and its rows above the fork point are deleted) or runs its
// fence check after it (and sees the floor). The order is the safety argument.
//
// Thread-safety: as the PgConn.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "store/pg.h"

namespace gapless {

inline constexpr std::string_view kReorgTooDeepReason = "reorg-too-deep";
inline constexpr std::string_view kStaleReorgEpochReason = "stale-reorg-epoch";

// The lowest fork point among the re-orgs recorded with a generation above `after` (nullopt: none):
// where the coordination state must go back to to follow PostgreSQL (node/leader.h).
Result<std::optional<uint64_t>> ForkPointSince(PgConn& conn, uint64_t after_generation);

struct RollbackRequest {
  uint64_t fork_point = 0;              // the highest block both forks share; kept
  std::vector<std::string> new_hashes;  // canonical hashes from fork_point + 1, for the record
  uint64_t leader_epoch = 0;
  uint64_t max_depth = 64;
  uint64_t fence_floor = 0;  // 0: none (see above)
  // The head log's fork generation (coord/election.h HeadFork) this rollback follows, recorded as
  // indexer_state 'head_fork_generation' (never lowered) even when nothing was deleted, so a new
  // leader knows which truncations PostgreSQL has followed. 0: none.
  uint64_t head_fork_generation = 0;
};

struct RollbackResult {
  uint64_t depth = 0;                   // blocks deleted
  std::vector<std::string> old_hashes;  // their hashes, from fork_point + 1 up
  uint64_t generation = 0;              // reorg_generation after the rollback (unchanged if 0)
  uint64_t frontier = 0;                // the persisted frontier afterwards (0: none recorded)
};

Result<RollbackResult> RollBack(PgConn& conn, const RollbackRequest& request);

// indexer_state 'reorg_generation': 0 before the first rollback.
Result<uint64_t> ReorgGeneration(PgConn& conn);
// indexer_state 'head_fork_generation': the head log's fork generation the last rollback followed.
Result<uint64_t> HeadForkGeneration(PgConn& conn);

// For status: how many re-orgs were rolled back, and the newest one (count 0: none).
struct ReorgSummary {
  uint64_t count = 0;
  uint64_t fork_point = 0;
  uint64_t depth = 0;
  std::string detected_at;  // as PostgreSQL prints it
};
Result<ReorgSummary> LoadReorgSummary(PgConn& conn);

}  // namespace gapless
