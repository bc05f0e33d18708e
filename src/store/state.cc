#include "store/state.h"

#include <algorithm>
#include <string>

#include "store/notify.h"
#include "store/queries.h"

namespace gapless {

Result<int64_t> MaxFenceToken(PgConn& conn) {
  // A re-org's fence floor counts too: a token at or below it is refused above its fork point.
  GAPLESS_ASSIGN_OR_RETURN(
      auto res, conn.Query("SELECT greatest((SELECT coalesce(max(fence_token), 0) FROM "
                           "indexed_ranges), (SELECT coalesce(max(fence_floor), 0) FROM reorgs))"));
  return res.GetInt64(0, 0);
}

Status RecordFenceBase(PgConn& conn, int64_t value) {
  return conn
      .Query(
          "INSERT INTO indexer_state (key, value) VALUES ('fence_counter_base', $1) "
          "ON CONFLICT (key) DO UPDATE SET value = greatest(indexer_state.value::bigint, "
          "EXCLUDED.value::bigint)::text, updated_at = now()",
          {std::to_string(value)})
      .status();
}

Result<uint64_t> PersistFrontier(PgConn& conn, uint64_t start_block, uint64_t next_block) {
  PgTransaction txn(conn);
  GAPLESS_RETURN_IF_ERROR(txn.Begin());
  // Serialise frontier writers: the row lock of the state row (created on first use).
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("INSERT INTO indexer_state (key, value) VALUES ('frontier', $1)"
                 " ON CONFLICT (key) DO NOTHING",
                 {std::to_string(start_block)})
          .status());
  GAPLESS_ASSIGN_OR_RETURN(
      auto current,
      conn.Query("SELECT value::bigint FROM indexer_state WHERE key = 'frontier' FOR UPDATE"));
  GAPLESS_ASSIGN_OR_RETURN(int64_t recorded, current.GetInt64(0, 0));
  if (next_block <= static_cast<uint64_t>(recorded)) {
    GAPLESS_RETURN_IF_ERROR(txn.Commit());
    return static_cast<uint64_t>(recorded);
  }
  if (next_block > start_block) {
    GAPLESS_ASSIGN_OR_RETURN(auto done, CommittedRanges(conn, start_block, next_block - 1));
    bool covered =
        done.size() == 1 && done[0].first == start_block && done[0].second == next_block - 1;
    if (!covered) {
      uint64_t first_missing = start_block;
      if (!done.empty() && done[0].first == start_block) first_missing = done[0].second + 1;
      return DataLoss("frontier " + std::to_string(next_block) +
                      " would run ahead of the data: block " + std::to_string(first_missing) +
                      " is not committed");
    }
  }
  // The recorded frontier is below the caller's start (a run with a later --from): it moves only
  // over blocks committed from where it is, never over a missing one (the header).
  if (static_cast<uint64_t>(recorded) < start_block) {
    GAPLESS_ASSIGN_OR_RETURN(
        auto done, CommittedRanges(conn, static_cast<uint64_t>(recorded), next_block - 1));
    uint64_t reach = static_cast<uint64_t>(recorded);
    if (!done.empty() && done[0].first == reach) reach = done[0].second + 1;
    next_block = std::min(next_block, reach);
    if (next_block <= static_cast<uint64_t>(recorded)) {
      GAPLESS_RETURN_IF_ERROR(txn.Commit());
      return static_cast<uint64_t>(recorded);
    }
  }
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("UPDATE indexer_state SET value = $1, updated_at = now() WHERE key = 'frontier'",
                 {std::to_string(next_block)})
          .status());
  // Wakes the event relays (store/notify.h) at commit.
  GAPLESS_RETURN_IF_ERROR(conn.Exec("NOTIFY " + std::string(kFrontierChannel)));
  GAPLESS_RETURN_IF_ERROR(txn.Commit());
  return next_block;
}

namespace {

// An integer recorded in indexer_state under `key`, nullopt when there is none.
Result<std::optional<uint64_t>> LoadStateNumber(PgConn& conn, const char* key) {
  GAPLESS_ASSIGN_OR_RETURN(
      auto res, conn.Query("SELECT value::bigint FROM indexer_state WHERE key = $1", {key}));
  if (res.rows() == 0) return std::optional<uint64_t>();
  GAPLESS_ASSIGN_OR_RETURN(int64_t v, res.GetInt64(0, 0));
  return std::optional<uint64_t>(static_cast<uint64_t>(v));
}

}  // namespace

Result<std::optional<uint64_t>> LoadChainId(PgConn& conn) {
  return LoadStateNumber(conn, "chain_id");
}

Result<std::string> EnsureDatabaseId(PgConn& conn) {
  GAPLESS_RETURN_IF_ERROR(conn.Exec(
      "INSERT INTO indexer_state (key, value) VALUES ('database_id', "
      "substr(md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text), 1, 12)) "
      "ON CONFLICT (key) DO NOTHING"));
  GAPLESS_ASSIGN_OR_RETURN(auto res,
                           conn.Query("SELECT value FROM indexer_state WHERE key = 'database_id'"));
  if (res.rows() != 1) return Internal("indexer_state has no database_id after inserting one");
  return std::string(res.Get(0, 0));
}

Result<std::optional<int64_t>> LoadFenceBase(PgConn& conn) {
  GAPLESS_ASSIGN_OR_RETURN(auto base, LoadStateNumber(conn, "fence_counter_base"));
  if (!base.has_value()) return std::optional<int64_t>();
  return std::optional<int64_t>(static_cast<int64_t>(*base));
}

Result<std::optional<uint64_t>> LoadFrontier(PgConn& conn) {
  return LoadStateNumber(conn, "frontier");
}

}  // namespace gapless
