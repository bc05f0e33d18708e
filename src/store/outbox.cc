#include "store/outbox.h"

#include <algorithm>

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
  return c;
}

constexpr char kCursorColumns[] = "bus, next_block, leader_epoch, events_sent, published_at";

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
                     const std::vector<std::string>& buses) {
  PgTransaction txn(conn);
  GAPLESS_RETURN_IF_ERROR(txn.Begin());
  // Create the cursor at its start if absent, then lock it: concurrent relays serialise here.
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("INSERT INTO event_cursors (bus, next_block, leader_epoch) VALUES ($1, $2, 0)"
                 " ON CONFLICT (bus) DO NOTHING",
                 {std::string(bus), std::to_string(expected_next)})
          .status());
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult r, conn.Query("SELECT next_block, leader_epoch FROM event_cursors WHERE bus = $1"
                             " FOR UPDATE",
                             {std::string(bus)}));
  GAPLESS_ASSIGN_OR_RETURN(uint64_t current, GetU64(r, 0, 0));
  GAPLESS_ASSIGN_OR_RETURN(uint64_t recorded_epoch, GetU64(r, 0, 1));
  // Every check before the first write.
  if (recorded_epoch > leader_epoch) {
    return Aborted("event cursor of " + std::string(bus) + ": leader epoch " +
                   std::to_string(leader_epoch) + " is stale, epoch " +
                   std::to_string(recorded_epoch) + " has published since")
        .WithReason(std::string(kStaleRelayEpochReason));
  }
  if (current != expected_next) {
    return Aborted("event cursor of " + std::string(bus) + " is at block " +
                   std::to_string(current) + ", not " + std::to_string(expected_next) +
                   " as this relay read it: another relay moved it");
  }
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("UPDATE event_cursors SET next_block = $2, leader_epoch = $3,"
                 " events_sent = events_sent + $4, published_at = now() WHERE bus = $1",
                 {std::string(bus), std::to_string(next_block), std::to_string(leader_epoch),
                  std::to_string(events)})
          .status());
  GAPLESS_RETURN_IF_ERROR(PruneOutbox(conn, buses));
  return txn.Commit();
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
  return conn
      .Query(
          "DELETE FROM event_outbox WHERE block_number < (SELECT CASE WHEN count(*) ="
          " cardinality($1::text[]) THEN min(next_block) ELSE 0 END FROM event_cursors"
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
