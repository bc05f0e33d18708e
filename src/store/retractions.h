// retractions: the events side of a rollback (issue 10): which published events of orphaned
// blocks are void, kept in PostgreSQL until every bus has published them as block.reverted
// (migrations/005_retractions.sql, docs/events.md).
//
// RollBack (store/rollback.h) calls RetractOrphanedEvents in its transaction before it deletes the
// rows. When events are enabled (indexer_state 'events_from'), it
//   - locks every bus cursor and lowers those above fork_point + 1 to fork_point + 1, so the new
//     fork's blocks are published again (their event ids differ: the identity holds the block
//     hash); a relay's AdvanceCursor waiting on that lock then sees the lowered cursor or the new
//     reorg generation and is refused (store/outbox.h);
//   - records one retraction per orphaned block at or above events_from, whatever the cursors
//     say: a batch may have been published and confirmed by the broker while its cursor advance
//     had not committed, so every orphaned block is retracted and consumers ignore retractions of
//     events they never saw. Within one rollback, seq descends with the block number (the highest
//     orphaned block is retracted first); a later rollback's retractions come after.
// Each orphaned block's incarnation (block_incarnations, migration 007: how often its hash was
// orphaned) is recorded with its retraction and then incremented, so a block that comes back (a
// flip-flop re-org) is published under new event ids (events/event.h) and its retraction names
// the ids of the publication it retracts.
// A retraction keeps what undoing needs once the rows are gone: the block's number and hash, its
// transactions' hashes, a copy of its token transfers and internal transfers, and its decoded
// events' types and log indexes (migration 016); the event ids are derived from these
// by the code that gave the original events their ids (events/event.h), in node/relay.
//
// Functions take a connection; they are as thread-safe as the connection (not).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "store/pg.h"

namespace gapless {

// See the file comment. `generation` is the reorg_generation the rollback gives (its identity in
// the block.reverted event ids). Call only inside the rollback's transaction, which must hold the
// frontier row's lock (rollbacks are serialised by it; the retraction seq relies on that).
Status RetractOrphanedEvents(PgConn& conn, uint64_t fork_point, uint64_t generation);

struct Retraction {
  uint64_t seq = 0;
  uint64_t generation = 0;
  uint64_t reverted_at = 0;  // unix seconds: when the rollback committed
  // The block's incarnation when its events were published (block_incarnations before this
  // rollback): the ids it retracts carry it (events/event.h).
  uint64_t incarnation = 0;
  // The orphaned block as its retraction needs it: block.number and block.hash; each
  // transaction's hash, block_number, block_hash and transaction_index (by index); every token
  // transfer, complete (by log index, batch index). Nothing else is filled in.
  BlockData block;
  // The block's decoded events (the contracts mode, store/decoded_events.h) as (event type, log
  // index), by log index.
  std::vector<std::pair<std::string, uint64_t>> decoded;
};

// The retractions with seq above `after`, ascending, at most `limit`.
Result<std::vector<Retraction>> ReadRetractions(PgConn& conn, uint64_t after, size_t limit);

// How often each of `hashes` (0x-hex block hashes) was orphaned (migration 007,
// block_incarnations): the incarnation its events are published with now. Absent: 0.
Result<std::map<std::string, uint64_t>> BlockIncarnations(PgConn& conn,
                                                          const std::vector<std::string>& hashes);

}  // namespace gapless
