// outbox: the PostgreSQL side of the event relay (migrations/002_events.sql): enabling events in a
// database, the outbox rows that range writes add, and each bus's cursor.
//
// The contract with the writer (store/writer.h): once EnableEvents has recorded 'events_from',
// every range write inserts one event_outbox row per block in its own transaction (on conflict only
// its event count is brought up to date), so an outbox row exists only if its block's data is
// committed, in both write modes.
// Blocks committed without one (before events were enabled, or by a run without --events since)
// get theirs from BackfillOutbox when the relay reaches them: it never steps over a block.
//
// The relay (node/relay.h) per bus: read the cursor, take the outbox rows in [cursor, frontier),
// publish their events in chain order, and only after the broker confirmed, AdvanceCursor, fenced
// by the leader's epoch: an epoch below the one recorded for the bus is refused (Aborted, reason
// kStaleRelayEpochReason) and nothing changes, so a deposed leader's relay cannot move the cursor
// back or forth. Blocks below every configured bus's cursor are pruned from the outbox.
//
// Re-orgs (issue 10, store/retractions.h): a rollback records a retraction per orphaned block and
// lowers every cursor above the fork point to it, in its own transaction. Each bus also keeps how
// far it has published the retractions (retracted_through), moved by AdvanceRetractions under the
// same epoch fence; the relay publishes pending retractions before any outbox row. AdvanceCursor
// takes the reorg generation the relay read with its batch and refuses the move when a rollback
// happened since, so a batch that was in flight across a rollback never moves the cursor.
//
// Phase (events/event.h metadata.phase): a leader following the chain tip records, at the start
// of each of its terms, the first block above the tip bound it sees (RecordLiveFrom); a leader
// or `index` without --follow removes it. Every range write marks its blocks at or above the
// recorded block live (blocks.live, migration 016), in its own transaction, so a block's phase
// is fixed when it is committed and every publication of its events carries the same one.
//
// Functions take a connection; they are as thread-safe as the connection (not).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "store/decoded.h"
#include "store/pg.h"

namespace gapless {

// indexer_state key: the first block whose events are published (present = events are enabled).
inline constexpr std::string_view kEventsFromKey = "events_from";
inline constexpr std::string_view kStaleRelayEpochReason = "stale-relay-epoch";

// Records that events are enabled from `from_block` on, if they are not yet; returns the block
// recorded (the earlier one when events were already enabled).
Result<uint64_t> EnableEvents(PgConn& conn, uint64_t from_block);
// nullopt while events are not enabled.
Result<std::optional<uint64_t>> EventsFrom(PgConn& conn);

// indexer_state key: the first block a write marks live (see "Phase").
inline constexpr std::string_view kLiveFromKey = "live_from";
// Records `block` as the first live block; nullopt removes the record (nothing is live).
Status RecordLiveFrom(PgConn& conn, std::optional<uint64_t> block);
// The blocks of [from, to] committed live (blocks.live), ascending.
Result<std::vector<uint64_t>> LiveBlocks(PgConn& conn, uint64_t from, uint64_t to);

struct OutboxRow {
  uint64_t block_number = 0;
  std::string block_hash;  // 0x-hex
  uint64_t event_count = 0;
};
// The outbox rows in [from, to), ascending, at most `limit`.
Result<std::vector<OutboxRow>> ReadOutbox(PgConn& conn, uint64_t from, uint64_t to, size_t limit);

// An SQL expression: the events of the committed block `block_sql` (an SQL expression of its
// number), as BackfillOutbox counts them.
std::string OutboxCountSql(std::string_view block_sql, const ContractTables* contracts);

// Inserts the outbox rows that committed blocks in [from, to) lack, counted as a range write
// counts them (1 + transactions + token transfers + internal transfers + the rows of
// `contracts`' decoded tables, store/decoded_events.h; null: none): for blocks committed
// without outbox rows (before events were enabled in the database, or by a process without --events
// since) that the relay reaches below the frontier. It locks indexed_ranges as a range write does,
// so a rollback either commits before it (its blocks are not found) or waits for it (and deletes
// the rows added above its fork point). `added` counts this call's rows; `has_from` says whether
// block `from` has its row afterwards, whoever added it: the relays of other buses backfill the
// same hole, and one may commit its rows while this call waits (then `added` is 0 and `has_from`
// true).
struct OutboxBackfill {
  uint64_t added = 0;
  bool has_from = false;
};
Result<OutboxBackfill> BackfillOutbox(PgConn& conn, uint64_t from, uint64_t to,
                                      const ContractTables* contracts = nullptr);

struct EventCursor {
  std::string bus;
  uint64_t next_block = 0;
  uint64_t leader_epoch = 0;
  uint64_t events_sent = 0;
  std::string published_at;        // as PostgreSQL prints it
  uint64_t retracted_through = 0;  // the highest retraction seq published (0: none)
};
// The bus's cursor, nullopt before its first publish.
Result<std::optional<EventCursor>> LoadCursor(PgConn& conn, std::string_view bus);
Result<std::vector<EventCursor>> LoadCursors(PgConn& conn);

// Moves the bus's cursor from `expected_next` to `next_block` (creating it when absent and
// expected_next is its start), adding `events` to its count, and prunes the outbox below the
// lowest cursor among `buses` (the buses this relay serves), in one transaction. Aborted with
// reason kStaleRelayEpochReason when a higher leader epoch is recorded for the bus; Aborted
// (another reason) when the cursor is not at expected_next (another relay moved it, or a rollback
// lowered it) or when indexer_state 'reorg_generation' is no longer `expected_generation` (the
// value read with the batch: a rollback since may have orphaned blocks of the batch while leaving
// the cursor where it was).
Status AdvanceCursor(PgConn& conn, std::string_view bus, uint64_t expected_next,
                     uint64_t next_block, uint64_t events, uint64_t leader_epoch,
                     const std::vector<std::string>& buses, uint64_t expected_generation);

// Moves the bus's retraction progress from `expected_through` to `through` (the highest
// retraction seq now published), adding `events` to its count, and prunes, in one transaction; a
// bus without a cursor gets one at `next_block_if_new`. Aborted as AdvanceCursor for a stale
// epoch (kStaleRelayEpochReason) or a progress that is not at expected_through.
Status AdvanceRetractions(PgConn& conn, std::string_view bus, uint64_t expected_through,
                          uint64_t through, uint64_t events, uint64_t leader_epoch,
                          uint64_t next_block_if_new, const std::vector<std::string>& buses);

// Deletes the outbox rows below the lowest cursor of `buses`, and the retractions every one of
// them has published (none while one of them has no cursor yet). AdvanceCursor and
// AdvanceRetractions do it; the relay also calls it when idle, for rows a late rewrite of an
// already published range added after the last advance.
Status PruneOutbox(PgConn& conn, const std::vector<std::string>& buses);

struct OutboxStats {
  uint64_t rows = 0;    // outbox rows not yet pruned
  uint64_t events = 0;  // events they give
  std::optional<uint64_t> lowest, highest;
};
Result<OutboxStats> LoadOutboxStats(PgConn& conn);

}  // namespace gapless
