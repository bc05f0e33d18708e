#include "store/state.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

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

namespace {

// indexer_state key: compaction has merged what it could of the rows below this block.
constexpr const char* kCompactedToKey = "ranges_compacted_to";
// Compaction reads the rows after its mark a page at a time, the first page small (in most steps
// the next row is too young and the walk ends there), each next one four times the last, and at
// most this many rows a step: a backlog (a frontier that jumped far) is worked off over steps.
constexpr int kFirstPage = 16;
constexpr int kMaxCompactRowsPerStep = 4096;

struct RangeRow {
  uint64_t from = 0;
  uint64_t to = 0;
  std::optional<int64_t> token;
  std::optional<std::string> owner;
  std::string datasets;  // the datasets column as PostgreSQL renders it (sorted: store/datasets.h)
  bool settled = false;
};

constexpr const char* kRowColumns =
    "SELECT from_block, to_block, fence_token, fence_owner,"
    " committed_at <= clock_timestamp() - make_interval(secs => $1::bigint), datasets::text"
    " FROM indexed_ranges ";

Result<std::vector<RangeRow>> RangeRows(PgConn& conn, const std::string& sql,
                                        const std::vector<PgParam>& params) {
  GAPLESS_ASSIGN_OR_RETURN(auto res, conn.Query(sql, params));
  std::vector<RangeRow> rows;
  for (int i = 0; i < res.rows(); ++i) {
    RangeRow r;
    GAPLESS_ASSIGN_OR_RETURN(int64_t from, res.GetInt64(i, 0));
    GAPLESS_ASSIGN_OR_RETURN(int64_t to, res.GetInt64(i, 1));
    r.from = static_cast<uint64_t>(from);
    r.to = static_cast<uint64_t>(to);
    if (!res.IsNull(i, 2)) {
      GAPLESS_ASSIGN_OR_RETURN(int64_t token, res.GetInt64(i, 2));
      r.token = token;
    }
    r.owner = res.GetOptional(i, 3);
    r.settled = res.Get(i, 4) == "t";
    r.datasets = std::string(res.Get(i, 5));
    rows.push_back(std::move(r));
  }
  return rows;
}

// Adjacent rows folded into the first of them (state.h, "Compaction").
struct MergedRow {
  RangeRow kept;  // the first row, as read
  uint64_t to = 0;
  std::optional<int64_t> token;      // the highest token of the rows
  std::optional<std::string> owner;  // the one owner among the rows holding `token`, if any
  std::vector<std::string> folded;   // from_block of each row folded in (deleted)

  explicit MergedRow(const RangeRow& first)
      : kept(first), to(first.to), token(first.token), owner(first.owner) {}

  // Folds `r` in, unless that would let a write through that one of the rows refuses: two rows
  // holding the highest token with two owners (a token granted twice, node/reconcile.h) stay
  // apart, or the merged row, having one owner, would pass the other one's equal token. Rows
  // holding different datasets stay apart too: the merged row would claim for every block what
  // only some hold (store/datasets.h), and a backfill would skip the others.
  bool Fold(const RangeRow& r) {
    if (r.datasets != kept.datasets) return false;
    if (r.token.has_value()) {
      if (!token.has_value() || *r.token > *token) {
        token = r.token;
        owner = r.owner;
      } else if (*r.token == *token && r.owner.has_value()) {
        if (owner.has_value() && *owner != *r.owner) return false;
        owner = r.owner;
      }
    }
    to = std::max(to, r.to);
    folded.push_back(std::to_string(r.from));
    return true;
  }
};

Status Store(PgConn& conn, const MergedRow& m) {
  if (m.folded.empty()) return Status::Ok();
  std::string ids = "{";
  for (const std::string& f : m.folded) ids += (ids.size() > 1 ? "," : "") + f;
  ids += "}";
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("DELETE FROM indexed_ranges WHERE from_block = ANY($1::bigint[])", {ids})
          .status());
  PgParam token, owner;
  if (m.token.has_value()) token = std::to_string(*m.token);
  owner = m.owner;
  return conn
      .Query(
          "UPDATE indexed_ranges SET to_block = $2, fence_token = $3, fence_owner = $4"
          " WHERE from_block = $1",
          {std::to_string(m.kept.from), std::to_string(m.to), token, owner})
      .status();
}

// The walk over the rows after the compaction mark, in from_block order: it takes rows while the
// frontier has passed them wholly, they are settled and they join the blocks taken before, and
// stops at the first that does not (a row a writer holds now, skipped by SKIP LOCKED, leaves a
// hole): what follows waits for a later step. A hole in the table itself is gone past: below the
// frontier there is one only below its base (a run with a later --from than another's), and
// stopping there would stop every later step too. The unlocked probe finds those (`holes`: the
// row after each, with the block before it); the locked walk goes past exactly those, so a hole
// a held row leaves still stops it. No merged row spans a hole (`crossed`).
struct Walk {
  std::optional<uint64_t> end;  // the last block of the rows taken, from the mark on
  bool stopped = false;
  bool crossed = false;                           // the row just taken follows a hole
  std::map<uint64_t, uint64_t>* holes = nullptr;  // from_block after a hole -> the block before
  bool probing = false;                           // records the holes it meets, and goes past

  bool Take(const RangeRow& r, uint64_t frontier) {
    crossed = false;
    if (stopped || r.to >= frontier || !r.settled) {
      stopped = true;
      return false;
    }
    if (end.has_value() && r.from > *end + 1) {
      if (probing) {
        (*holes)[r.from] = *end;
      } else if (holes == nullptr || holes->count(r.from) == 0 || holes->at(r.from) != *end) {
        stopped = true;
        return false;
      }
      crossed = true;
    }
    end = std::max(end.value_or(0), r.to);
    return true;
  }
};

// Merges the settled rows below `frontier` that follow the compaction mark (state.h,
// "Compaction"). Runs in PersistFrontier's transaction, after it moved the frontier from
// `recorded`. First finds, without locking, how far the walk goes (most steps: not past the
// first row, too young); then locks those rows, reads them again and merges.
Status CompactBelow(PgConn& conn, uint64_t recorded, uint64_t frontier, int64_t settle_seconds) {
  const std::string settle = std::to_string(std::max<int64_t>(0, settle_seconds));
  GAPLESS_ASSIGN_OR_RETURN(auto mark,
                           conn.Query("SELECT value::bigint FROM indexer_state WHERE key = $1",
                                      {std::string(kCompactedToKey)}));
  // A rollback (store/rollback.h) may have lowered the frontier below the mark, and deleted or
  // trimmed the rows there: start again from the frontier it left.
  uint64_t mark_at = 0;
  if (mark.rows() > 0) {
    GAPLESS_ASSIGN_OR_RETURN(int64_t v, mark.GetInt64(0, 0));
    mark_at = std::min(static_cast<uint64_t>(v), recorded);
  }
  // The row compaction left last (the one holding the block before the mark), to merge the
  // next rows into; nullopt when there is none to use.
  auto head = [&](bool lock) -> Result<std::optional<RangeRow>> {
    if (mark_at == 0) return std::optional<RangeRow>();
    GAPLESS_ASSIGN_OR_RETURN(
        auto rows, RangeRows(conn,
                             std::string(kRowColumns) +
                                 "WHERE blocks @> $2::bigint ORDER BY to_block DESC LIMIT 1" +
                                 (lock ? " FOR UPDATE SKIP LOCKED" : ""),
                             {settle, std::to_string(mark_at - 1)}));
    if (rows.empty() || rows[0].to >= frontier) return std::optional<RangeRow>();
    return std::optional<RangeRow>(rows[0]);
  };
  auto start = [&](const std::optional<RangeRow>& h) {
    Walk walk;
    if (mark_at > 0) walk.end = mark_at - 1;
    if (h.has_value()) walk.end = std::max(*walk.end, h->to);
    return walk;
  };

  // How far: pages of rows from the mark on, unlocked.
  GAPLESS_ASSIGN_OR_RETURN(auto probe_head, head(false));
  std::map<uint64_t, uint64_t> holes;
  Walk probe = start(probe_head);
  probe.holes = &holes;
  probe.probing = true;
  std::optional<uint64_t> last;  // from_block of the last row the walk takes
  uint64_t cursor = mark_at;
  int page = kFirstPage;
  for (int read = 0; !probe.stopped && read < kMaxCompactRowsPerStep; page *= 4) {
    page = std::min(page, kMaxCompactRowsPerStep - read);
    GAPLESS_ASSIGN_OR_RETURN(
        auto rows, RangeRows(conn,
                             std::string(kRowColumns) +
                                 "WHERE from_block >= $2 AND from_block < $3 ORDER BY from_block"
                                 " LIMIT $4",
                             {settle, std::to_string(cursor), std::to_string(frontier),
                              std::to_string(page)}));
    read += static_cast<int>(rows.size());
    for (const RangeRow& r : rows) {
      if (!probe.Take(r, frontier)) break;
      last = r.from;
    }
    if (static_cast<int>(rows.size()) < page) break;
    cursor = rows.back().from + 1;
  }
  if (!last.has_value()) return Status::Ok();

  // Merge: the same walk over the rows locked, as they are now.
  GAPLESS_ASSIGN_OR_RETURN(auto locked_head, head(true));
  Walk walk = start(locked_head);
  walk.holes = &holes;
  std::optional<MergedRow> merged;
  if (locked_head.has_value()) merged.emplace(*locked_head);
  std::vector<MergedRow> done;
  GAPLESS_ASSIGN_OR_RETURN(
      auto rows, RangeRows(conn,
                           std::string(kRowColumns) +
                               "WHERE from_block >= $2 AND from_block <= $3 ORDER BY from_block"
                               " FOR UPDATE SKIP LOCKED",
                           {settle, std::to_string(mark_at), std::to_string(*last)}));
  for (const RangeRow& r : rows) {
    if (!walk.Take(r, frontier)) break;
    if (!merged.has_value() || walk.crossed || !merged->Fold(r)) {
      if (merged.has_value()) done.push_back(std::move(*merged));
      merged.emplace(r);
    }
  }
  if (merged.has_value()) done.push_back(std::move(*merged));
  for (const MergedRow& m : done) GAPLESS_RETURN_IF_ERROR(Store(conn, m));
  if (!walk.end.has_value() || *walk.end + 1 <= mark_at) return Status::Ok();
  return conn
      .Query(
          "INSERT INTO indexer_state (key, value) VALUES ($1, $2) ON CONFLICT (key)"
          " DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
          {std::string(kCompactedToKey), std::to_string(*walk.end + 1)})
      .status();
}

}  // namespace

Result<uint64_t> PersistFrontier(PgConn& conn, uint64_t start_block, uint64_t next_block,
                                 int64_t compact_after_seconds) {
  PgTransaction txn(conn);
  GAPLESS_RETURN_IF_ERROR(txn.Begin());
  // The table before the frontier row, in the order a rollback takes them (store/rollback.cc):
  // compaction below rewrites rows, and a rollback must not run between the two.
  GAPLESS_RETURN_IF_ERROR(conn.Exec("LOCK TABLE indexed_ranges IN ROW EXCLUSIVE MODE"));
  // Serialise frontier writers: the row lock of the state row (created on first use).
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("INSERT INTO indexer_state (key, value) VALUES ('frontier', $1)"
                 " ON CONFLICT (key) DO NOTHING",
                 {std::to_string(start_block)})
          .status());
  GAPLESS_ASSIGN_OR_RETURN(
      auto current,
      conn.Query("SELECT value::bigint FROM indexer_state WHERE key = 'frontier' FOR UPDATE"));
  GAPLESS_ASSIGN_OR_RETURN(int64_t recorded_value, current.GetInt64(0, 0));
  const uint64_t recorded = static_cast<uint64_t>(recorded_value);
  if (next_block <= recorded) {
    GAPLESS_RETURN_IF_ERROR(txn.Commit());
    return recorded;
  }
  // Only rows from the recorded frontier on are read: every block from its base up to it is
  // committed already (the header), so [start_block, recorded) needs no second look.
  const uint64_t check_from = std::max(start_block, recorded);
  if (next_block > check_from) {
    GAPLESS_ASSIGN_OR_RETURN(auto done, CommittedRanges(conn, check_from, next_block - 1));
    bool covered =
        done.size() == 1 && done[0].first == check_from && done[0].second == next_block - 1;
    if (!covered) {
      uint64_t first_missing = check_from;
      if (!done.empty() && done[0].first == check_from) first_missing = done[0].second + 1;
      return DataLoss("frontier " + std::to_string(next_block) +
                      " would run ahead of the data: block " + std::to_string(first_missing) +
                      " is not committed");
    }
  }
  // The recorded frontier is below the caller's start (a run with a later --from): it moves only
  // over blocks committed from where it is, never over a missing one (the header).
  if (recorded < start_block) {
    GAPLESS_ASSIGN_OR_RETURN(auto done, CommittedRanges(conn, recorded, next_block - 1));
    uint64_t reach = recorded;
    if (!done.empty() && done[0].first == reach) reach = done[0].second + 1;
    next_block = std::min(next_block, reach);
    if (next_block <= recorded) {
      GAPLESS_RETURN_IF_ERROR(txn.Commit());
      return recorded;
    }
  }
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("UPDATE indexer_state SET value = $1, updated_at = now() WHERE key = 'frontier'",
                 {std::to_string(next_block)})
          .status());
  if (compact_after_seconds >= 0) {
    GAPLESS_RETURN_IF_ERROR(CompactBelow(conn, recorded, next_block, compact_after_seconds));
  }
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
