#include "store/outbox.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/model.h"
#include "store/decoded_events.h"
#include "store/rollback.h"

namespace gapless {
namespace {

Result<uint64_t> GetU64(const PgResult& r, int row, int col) {
  GAPLESS_ASSIGN_OR_RETURN(int64_t v, r.GetInt64(row, col));
  if (v < 0) return DataLoss("negative value where a block number or count was expected");
  return static_cast<uint64_t>(v);
}

EventCursor CursorAt(const PgResult& r, int row) {
  EventCursor c;
  c.bus = std::string(r.Get(row, 0));
  c.next_block = GetU64(r, row, 1).ok() ? *GetU64(r, row, 1) : 0;
  c.leader_epoch = GetU64(r, row, 2).ok() ? *GetU64(r, row, 2) : 0;
  c.events_sent = GetU64(r, row, 3).ok() ? *GetU64(r, row, 3) : 0;
  c.published_at = std::string(r.Get(row, 4));
  c.retracted_through = GetU64(r, row, 5).ok() ? *GetU64(r, row, 5) : 0;
  return c;
}

constexpr char kCursorColumns[] =
    "bus, next_block, leader_epoch, events_sent, published_at, retracted_through";

// One of a bus's two progress columns, moved under the epoch fence.
struct CursorMove {
  const char* column;  // "next_block" | "retracted_through"
  const char* what;    // for messages
  uint64_t expected = 0;
  uint64_t to = 0;
  uint64_t next_block_if_new = 0;
  std::optional<uint64_t> expected_generation;  // checked after the cursor's lock when set
};

Status MoveCursor(PgConn& conn, std::string_view bus, const CursorMove& move, uint64_t events,
                  uint64_t leader_epoch, const std::vector<std::string>& buses) {
  PgTransaction txn(conn);
  GAPLESS_RETURN_IF_ERROR(txn.Begin());
  // Create the cursor at its start if absent, then lock it: concurrent relays, and a rollback
  // lowering the cursors (store/retractions.h), serialise here.
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("INSERT INTO event_cursors (bus, next_block, leader_epoch) VALUES ($1, $2, 0)"
                 " ON CONFLICT (bus) DO NOTHING",
                 {std::string(bus), std::to_string(move.next_block_if_new)})
          .status());
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult r, conn.Query(std::string("SELECT ") + move.column +
                                 ", leader_epoch FROM event_cursors WHERE bus = $1 FOR UPDATE",
                             {std::string(bus)}));
  GAPLESS_ASSIGN_OR_RETURN(uint64_t current, GetU64(r, 0, 0));
  GAPLESS_ASSIGN_OR_RETURN(uint64_t recorded_epoch, GetU64(r, 0, 1));
  // Every check before the first write.
  if (recorded_epoch > leader_epoch) {
    return Aborted(fmt::format("{} of {}: leader epoch {} is stale, epoch {} has published since",
                               move.what, bus, leader_epoch, recorded_epoch))
        .WithReason(std::string(kStaleRelayEpochReason));
  }
  if (current != move.expected) {
    return Aborted(
        fmt::format("{} of {} is at {}, not {} as this relay read it: another relay "
                    "moved it or a rollback lowered it",
                    move.what, bus, current, move.expected));
  }
  if (move.expected_generation.has_value()) {
    // Read after the cursor's lock: a rollback that committed before it is seen (a rollback
    // still running waits for this transaction at the cursors' lock, and lowers what it commits).
    GAPLESS_ASSIGN_OR_RETURN(uint64_t generation, ReorgGeneration(conn));
    if (generation != *move.expected_generation) {
      return Aborted(
          fmt::format("{} of {}: a rollback (reorg generation {} -> {}) happened since "
                      "this relay read its batch",
                      move.what, bus, *move.expected_generation, generation));
    }
  }
  GAPLESS_RETURN_IF_ERROR(conn.Query(std::string("UPDATE event_cursors SET ") + move.column +
                                         " = $2, leader_epoch = $3, events_sent = events_sent + $4,"
                                         " published_at = now() WHERE bus = $1",
                                     {std::string(bus), std::to_string(move.to),
                                      std::to_string(leader_epoch), std::to_string(events)})
                              .status());
  GAPLESS_RETURN_IF_ERROR(PruneOutbox(conn, buses));
  return txn.Commit();
}

}  // namespace

Result<uint64_t> EnableEvents(PgConn& conn, uint64_t from_block) {
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("INSERT INTO indexer_state (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                 {std::string(kEventsFromKey), std::to_string(from_block)})
          .status());
  GAPLESS_ASSIGN_OR_RETURN(std::optional<uint64_t> from, EventsFrom(conn));
  if (!from) return Internal("events_from vanished right after it was recorded");
  return *from;
}

Result<std::optional<uint64_t>> EventsFrom(PgConn& conn) {
  GAPLESS_ASSIGN_OR_RETURN(PgResult r,
                           conn.Query("SELECT value::bigint FROM indexer_state WHERE key = $1",
                                      {std::string(kEventsFromKey)}));
  if (r.rows() == 0) return std::optional<uint64_t>();
  GAPLESS_ASSIGN_OR_RETURN(uint64_t v, GetU64(r, 0, 0));
  return std::optional<uint64_t>(v);
}

Result<std::vector<OutboxRow>> ReadOutbox(PgConn& conn, uint64_t from, uint64_t to, size_t limit) {
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult r, conn.Query("SELECT block_number, '0x' || encode(block_hash, 'hex'), event_count"
                             " FROM event_outbox WHERE block_number >= $1 AND block_number < $2"
                             " ORDER BY block_number LIMIT $3",
                             {std::to_string(from), std::to_string(to), std::to_string(limit)}));
  std::vector<OutboxRow> out;
  out.reserve(r.rows());
  for (int i = 0; i < r.rows(); ++i) {
    OutboxRow row;
    GAPLESS_ASSIGN_OR_RETURN(row.block_number, GetU64(r, i, 0));
    row.block_hash = std::string(r.Get(i, 1));
    GAPLESS_ASSIGN_OR_RETURN(row.event_count, GetU64(r, i, 2));
    out.push_back(std::move(row));
  }
  return out;
}

std::string OutboxCountSql(std::string_view block_sql, const ContractTables* contracts) {
  const std::string b(block_sql);
  return "1 + (SELECT count(*) FROM transactions t WHERE t.block_number = " + b +
         ") + (SELECT count(*) FROM token_transfers x WHERE x.block_number = " + b +
         ") + (SELECT count(*) FROM traces WHERE traces.block_number = " + b + " AND " +
         std::string(kInternalTransferSql) + ") + " + DecodedCountSql(contracts, b);
}

Status RecordLiveFrom(PgConn& conn, std::optional<uint64_t> block) {
  if (!block.has_value()) {
    return conn.Query("DELETE FROM indexer_state WHERE key = $1", {std::string(kLiveFromKey)})
        .status();
  }
  return conn
      .Query(
          "INSERT INTO indexer_state (key, value) VALUES ($1, $2) ON CONFLICT (key)"
          " DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
          {std::string(kLiveFromKey), std::to_string(*block)})
      .status();
}

Result<std::vector<uint64_t>> LiveBlocks(PgConn& conn, uint64_t from, uint64_t to) {
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult r, conn.Query("SELECT number FROM blocks WHERE number BETWEEN $1 AND $2 AND live"
                             " ORDER BY number",
                             {std::to_string(from), std::to_string(to)}));
  std::vector<uint64_t> out;
  out.reserve(r.rows());
  for (int i = 0; i < r.rows(); ++i) {
    GAPLESS_ASSIGN_OR_RETURN(uint64_t n, GetU64(r, i, 0));
    out.push_back(n);
  }
  return out;
}

Result<OutboxBackfill> BackfillOutbox(PgConn& conn, uint64_t from, uint64_t to,
                                      const ContractTables* contracts) {
  if (from >= to) return OutboxBackfill{};
  PgTransaction txn(conn);
  GAPLESS_RETURN_IF_ERROR(txn.Begin());
  // As a range write does: a rollback (EXCLUSIVE) commits wholly before the insert's snapshot or
  // waits for its commit and then deletes what it inserted above the fork point.
  GAPLESS_RETURN_IF_ERROR(conn.Exec("LOCK TABLE indexed_ranges IN ROW EXCLUSIVE MODE"));
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult r,
      conn.Query("WITH added AS (INSERT INTO event_outbox (block_number, block_hash, event_count)"
                 " SELECT b.number, b.hash, " +
                     OutboxCountSql("b.number", contracts) +
                     " FROM blocks b WHERE b.number >= $1 AND b.number < $2"
                     " AND NOT EXISTS (SELECT 1 FROM event_outbox o WHERE o.block_number ="
                     " b.number) ON CONFLICT (block_number) DO NOTHING RETURNING 1)"
                     " SELECT count(*) FROM added",
                 {std::to_string(from), std::to_string(to)}));
  OutboxBackfill out;
  GAPLESS_ASSIGN_OR_RETURN(out.added, GetU64(r, 0, 0));
  // A new statement: it sees the rows of another relay's backfill that committed while the
  // insert waited on them.
  GAPLESS_ASSIGN_OR_RETURN(PgResult present,
                           conn.Query("SELECT count(*) FROM event_outbox WHERE block_number = $1",
                                      {std::to_string(from)}));
  GAPLESS_ASSIGN_OR_RETURN(uint64_t rows_at_from, GetU64(present, 0, 0));
  out.has_from = rows_at_from > 0;
  GAPLESS_RETURN_IF_ERROR(txn.Commit());
  return out;
}

Result<std::optional<EventCursor>> LoadCursor(PgConn& conn, std::string_view bus) {
  GAPLESS_ASSIGN_OR_RETURN(PgResult r, conn.Query(std::string("SELECT ") + kCursorColumns +
                                                      " FROM event_cursors WHERE bus = $1",
                                                  {std::string(bus)}));
  if (r.rows() == 0) return std::optional<EventCursor>();
  return std::optional<EventCursor>(CursorAt(r, 0));
}

Result<std::vector<EventCursor>> LoadCursors(PgConn& conn) {
  GAPLESS_ASSIGN_OR_RETURN(PgResult r, conn.Query(std::string("SELECT ") + kCursorColumns +
                                                  " FROM event_cursors ORDER BY bus"));
  std::vector<EventCursor> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(CursorAt(r, i));
  return out;
}

Status AdvanceCursor(PgConn& conn, std::string_view bus, uint64_t expected_next,
                     uint64_t next_block, uint64_t events, uint64_t leader_epoch,
                     const std::vector<std::string>& buses, uint64_t expected_generation) {
  return MoveCursor(conn, bus,
                    {.column = "next_block",
                     .what = "event cursor",
                     .expected = expected_next,
                     .to = next_block,
                     .next_block_if_new = expected_next,
                     .expected_generation = expected_generation},
                    events, leader_epoch, buses);
}

Status AdvanceRetractions(PgConn& conn, std::string_view bus, uint64_t expected_through,
                          uint64_t through, uint64_t events, uint64_t leader_epoch,
                          uint64_t next_block_if_new, const std::vector<std::string>& buses) {
  return MoveCursor(conn, bus,
                    {.column = "retracted_through",
                     .what = "retraction progress",
                     .expected = expected_through,
                     .to = through,
                     .next_block_if_new = next_block_if_new,
                     .expected_generation = std::nullopt},
                    events, leader_epoch, buses);
}

Status PruneOutbox(PgConn& conn, const std::vector<std::string>& buses) {
  // Below the lowest cursor of the buses this relay serves (a bus without a cursor yet holds
  // everything back).
  std::string list = "{";
  for (const std::string& b : buses) {
    if (list.size() > 1) list += ',';
    list += '"' + b + '"';
  }
  list += '}';
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("DELETE FROM event_outbox WHERE block_number < (SELECT CASE WHEN count(*) ="
                 " cardinality($1::text[]) THEN min(next_block) ELSE 0 END FROM event_cursors"
                 " WHERE bus = ANY($1::text[]))",
                 {list})
          .status());
  // Their transfers go with them (ON DELETE CASCADE).
  return conn
      .Query(
          "DELETE FROM event_retractions WHERE seq <= (SELECT CASE WHEN count(*) ="
          " cardinality($1::text[]) THEN min(retracted_through) ELSE 0 END FROM event_cursors"
          " WHERE bus = ANY($1::text[]))",
          {list})
      .status();
}

Result<OutboxStats> LoadOutboxStats(PgConn& conn) {
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult r, conn.Query("SELECT count(*), coalesce(sum(event_count), 0), min(block_number),"
                             " max(block_number) FROM event_outbox"));
  OutboxStats s;
  GAPLESS_ASSIGN_OR_RETURN(s.rows, GetU64(r, 0, 0));
  GAPLESS_ASSIGN_OR_RETURN(s.events, GetU64(r, 0, 1));
  if (!r.IsNull(0, 2)) {
    GAPLESS_ASSIGN_OR_RETURN(uint64_t lo, GetU64(r, 0, 2));
    GAPLESS_ASSIGN_OR_RETURN(uint64_t hi, GetU64(r, 0, 3));
    s.lowest = lo;
    s.highest = hi;
  }
  return s;
}

}  // namespace gapless
