#include "store/writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>

#include "core/metrics.h"
#include "core/mutation.h"
#include "store/copy_rows.h"
#include "store/decoded.h"
#include "store/decoded_events.h"
#include "store/notify.h"
#include "store/outbox.h"
#include "store/partitions.h"

namespace gapless {
namespace {

constexpr const char* kStagingFlag = "gapless.staging_tables";
constexpr uint64_t kMaxBlockNumber = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - 1;

std::string StagingName(DataTable table) {
  return std::string("gapless_stage_") + TableInfo(table).name;
}

std::string RangeName(const RangeWrite& w) {
  return "blocks " + std::to_string(w.from_block) + "-" + std::to_string(w.to_block);
}

Status Check(bool ok, uint64_t block, const std::string& what) {
  if (ok) return Status::Ok();
  return InvalidData("block " + std::to_string(block) + ": " + what);
}

Status ValidateRange(const RangeWrite& w) {
  if (w.from_block > w.to_block) {
    return InvalidData("range " + std::to_string(w.from_block) + "-" + std::to_string(w.to_block) +
                       " is empty (from above to)");
  }
  if (w.to_block > kMaxBlockNumber) {
    return InvalidData("block number " + std::to_string(w.to_block) + " is out of range");
  }
  uint64_t expected = w.to_block - w.from_block + 1;
  if (w.sparse ? w.blocks.size() > expected : w.blocks.size() != expected) {
    return InvalidData(std::to_string(w.blocks.size()) + " blocks given, the range has " +
                       std::to_string(expected));
  }
  for (size_t i = 0; i < w.blocks.size(); ++i) {
    const BlockData& d = w.blocks[i];
    uint64_t n = d.block.number;
    if (w.sparse) {
      GAPLESS_RETURN_IF_ERROR(Check(
          n >= w.from_block && n <= w.to_block && (i == 0 || n > w.blocks[i - 1].block.number), n,
          "out of place: not ascending inside the range"));
    } else {
      GAPLESS_RETURN_IF_ERROR(Check(n == w.from_block + i, n,
                                    "out of place: expected block " +
                                        std::to_string(w.from_block + i) + " at position " +
                                        std::to_string(i)));
    }
    if (i > 0 && w.blocks[i - 1].block.number + 1 == n) {
      GAPLESS_RETURN_IF_ERROR(Check(d.block.parent_hash == w.blocks[i - 1].block.hash, n,
                                    "parent " + d.block.parent_hash + " is not block " +
                                        std::to_string(n - 1) + " " + w.blocks[i - 1].block.hash +
                                        " of the same range (blocks from two forks)"));
    }
    // The hash is also spliced into the outbox insert's SQL text (OutboxInsert).
    GAPLESS_RETURN_IF_ERROR(
        Check(d.block.hash.size() > 2 && d.block.hash.starts_with("0x") &&
                  d.block.hash.find_first_not_of("0123456789abcdef", 2) == std::string::npos,
              n, "block hash \"" + d.block.hash + "\" is not lower-case 0x-hex"));
    for (size_t j = 0; j < d.transactions.size(); ++j) {
      const Transaction& t = d.transactions[j];
      GAPLESS_RETURN_IF_ERROR(Check(t.block_number == n, n,
                                    "transaction " + std::to_string(t.transaction_index) +
                                        " has blockNumber " + std::to_string(t.block_number)));
      GAPLESS_RETURN_IF_ERROR(Check(
          j == 0 || t.transaction_index > d.transactions[j - 1].transaction_index, n,
          "transaction indexes not strictly increasing at " + std::to_string(t.transaction_index)));
    }
    for (size_t j = 0; j < d.logs.size(); ++j) {
      const Log& l = d.logs[j];
      GAPLESS_RETURN_IF_ERROR(Check(l.block_number == n, n,
                                    "log " + std::to_string(l.log_index) + " has blockNumber " +
                                        std::to_string(l.block_number)));
      GAPLESS_RETURN_IF_ERROR(
          Check(j == 0 || l.log_index > d.logs[j - 1].log_index, n,
                "log indexes not strictly increasing at " + std::to_string(l.log_index)));
    }
    for (size_t j = 0; j < d.token_transfers.size(); ++j) {
      const TokenTransfer& t = d.token_transfers[j];
      GAPLESS_RETURN_IF_ERROR(Check(t.block_number == n, n,
                                    "token transfer at log " + std::to_string(t.log_index) +
                                        " has block number " + std::to_string(t.block_number)));
      if (j > 0) {
        const TokenTransfer& p = d.token_transfers[j - 1];
        bool increasing = t.log_index > p.log_index ||
                          (t.log_index == p.log_index && t.batch_index > p.batch_index);
        GAPLESS_RETURN_IF_ERROR(Check(increasing, n,
                                      "token transfer keys not strictly increasing at log " +
                                          std::to_string(t.log_index) + "." +
                                          std::to_string(t.batch_index)));
      }
    }
    for (const Contract& c : d.contracts) {
      GAPLESS_RETURN_IF_ERROR(
          Check(c.block_number == n, n,
                "contract " + c.address + " has block number " + std::to_string(c.block_number)));
    }
    for (const Token& t : d.tokens) {
      GAPLESS_RETURN_IF_ERROR(
          Check(t.block_number == n, n,
                "token " + t.address + " has block number " + std::to_string(t.block_number)));
      GAPLESS_RETURN_IF_ERROR(
          Check(t.address.size() == 42 && t.address.starts_with("0x") &&
                    t.address.find_first_not_of("0123456789abcdef", 2) == std::string::npos,
                n, "token address \"" + t.address + "\" is not an address"));
    }
    const auto& ws = d.block.withdrawals;
    for (size_t j = 1; j < ws.size(); ++j) {
      GAPLESS_RETURN_IF_ERROR(
          Check(ws[j].index > ws[j - 1].index, n,
                "withdrawal indexes not strictly increasing at " + std::to_string(ws[j].index)));
    }
  }
  return Status::Ok();
}

// Temporary staging tables live as long as the session; created once per connection (again after
// a reconnect). Created outside the write transaction so a failed write cannot roll them back while
// the flag says they exist.
Status EnsureStagingTables(PgConn& conn) {
  if (conn.session_flag(kStagingFlag)) return Status::Ok();
  // The staged rows of a range are ~10 MB; keep them in local buffers rather than spilling to the
  // temp files. Only possible before the session first touches a temporary table, hence ignored
  // when it fails.
  (void)conn.Exec("SET temp_buffers = '128MB'");
  std::string sql;
  for (DataTable t : kDataTables) {
    sql += "CREATE TEMP TABLE IF NOT EXISTS " + StagingName(t) + " (LIKE " + TableInfo(t).name +
           ") ON COMMIT DELETE ROWS;\n";
  }
  GAPLESS_RETURN_IF_ERROR(conn.Exec(sql));
  conn.set_session_flag(kStagingFlag);
  return Status::Ok();
}

// Records the range (and row-locks its record until commit), then refuses a stale token.
// The range must join the chain already stored around it: block from-1 (when stored) is the
// first block's parent, and block to+1 (when stored) has the last block as its parent. A
// mismatch means the chain re-orged between the two writes, or a worker of the old fork writes
// late: nothing commits (writer.h, "Chain").
Status CheckJoins(PgConn& conn, const RangeWrite& w) {
  // A sparse write (writer.h) joins a stored neighbour only where it holds the range's end block.
  if (w.blocks.empty()) return Status::Ok();
  const BlockData& first = w.blocks.front();
  const BlockData& last = w.blocks.back();
  const bool has_first = first.block.number == w.from_block;
  const bool has_last = last.block.number == w.to_block;
  std::vector<PgParam> params = {std::to_string(w.from_block > 0 ? w.from_block - 1 : 0),
                                 std::to_string(w.to_block + 1)};
  GAPLESS_ASSIGN_OR_RETURN(
      auto around,
      conn.Query("SELECT number, '0x' || encode(hash, 'hex'), '0x' || encode(parent_hash, 'hex')"
                 " FROM blocks WHERE number IN ($1, $2)",
                 params));
  for (int i = 0; i < around.rows(); ++i) {
    GAPLESS_ASSIGN_OR_RETURN(int64_t n, around.GetInt64(i, 0));
    std::string hash(around.Get(i, 1)), parent(around.Get(i, 2));
    if (has_first && w.from_block > 0 && static_cast<uint64_t>(n) == w.from_block - 1 &&
        hash != first.block.parent_hash) {
      return Aborted("block " + std::to_string(w.from_block) + " has parent " +
                     first.block.parent_hash + " but the stored block " + std::to_string(n) +
                     " is " + hash + ": the chain re-orged (nothing was written)")
          .WithReason(std::string(kParentMismatchReason));
    }
    if (has_last && static_cast<uint64_t>(n) == w.to_block + 1 && parent != last.block.hash) {
      return Aborted("the stored block " + std::to_string(n) + " has parent " + parent +
                     " but block " + std::to_string(w.to_block) + " is " + last.block.hash +
                     ": the chain re-orged (nothing was written)")
          .WithReason(std::string(kParentMismatchReason));
    }
  }
  return Status::Ok();
}

// What the write holds: "blocks" (unless sparse: writer.h), what the fetch reports, and one
// dataset per decoded table it writes (store/decoded.h).
Datasets Held(const RangeWrite& w, const WriteOptions& options) {
  Datasets held = w.datasets;
  if (!w.sparse) held.Add(kBlocksDataset);
  if (options.contracts != nullptr) {
    for (const std::string& d : options.contracts->datasets().names()) held.Add(d);
  }
  return held;
}

// Records the rest of a row cut at `first - 1` (FenceAndRecord): blocks first..last, with the cut
// row's token, owner, datasets and commit time (`cut`: row 0 of its SELECT). A row written since
// may start inside the rest (a write inside a row that compaction merged, state.h "Compaction"):
// it records its own blocks, so the rest is recorded around it, a row per stretch no row starts
// in. A writer inserting a row there meanwhile wins the insert; the walk is then read again.
Status RecordCutRest(PgConn& conn, uint64_t first, uint64_t last, const PgResult& cut) {
  auto param = [&](int col) { return cut.IsNull(0, col) ? PgParam() : PgParam(cut.Get(0, col)); };
  for (int pass = 0; pass < 8; ++pass) {
    GAPLESS_ASSIGN_OR_RETURN(
        auto inside,
        conn.Query("SELECT from_block, to_block FROM indexed_ranges WHERE from_block BETWEEN $1"
                   " AND $2 ORDER BY from_block",
                   {std::to_string(first), std::to_string(last)}));
    std::vector<std::pair<uint64_t, uint64_t>> stretches;
    uint64_t cursor = first;
    for (int i = 0; i < inside.rows() && cursor <= last; ++i) {
      GAPLESS_ASSIGN_OR_RETURN(int64_t a, inside.GetInt64(i, 0));
      GAPLESS_ASSIGN_OR_RETURN(int64_t b, inside.GetInt64(i, 1));
      if (static_cast<uint64_t>(a) > cursor) stretches.emplace_back(cursor, a - 1);
      cursor = std::max(cursor, static_cast<uint64_t>(b) + 1);
    }
    if (cursor <= last) stretches.emplace_back(cursor, last);
    bool all = true;
    for (const auto& [a, b] : stretches) {
      GAPLESS_ASSIGN_OR_RETURN(
          auto inserted,
          conn.Query(
              "INSERT INTO indexed_ranges (from_block, to_block, fence_token, fence_owner,"
              " datasets, committed_at) VALUES ($1, $2, $3, $4, $5::text[], $6)"
              " ON CONFLICT (from_block) DO NOTHING RETURNING from_block",
              {std::to_string(a), std::to_string(b), param(1), param(2), param(3), param(4)}));
      all = all && inserted.rows() > 0;
    }
    if (all) return Status::Ok();
  }
  return Aborted(
      fmt::format("blocks {}-{}: rows kept being written inside them while a longer "
                  "row was cut there; the write is retried",
                  first, last));
}

Status FenceAndRecord(PgConn& conn, const RangeWrite& w, const Datasets& held) {
  std::string from = std::to_string(w.from_block);
  std::string to = std::to_string(w.to_block);
  // A longer row at from_block holding other datasets is cut at to_block first: the upsert below
  // would stretch this write's record over the rest of it (writer.h "Datasets"). The rest keeps
  // its token and owner, so the fence over its blocks is what it was (RecordCutRest). Rolled back
  // with the write when the fence refuses it.
  GAPLESS_ASSIGN_OR_RETURN(
      auto cut, conn.Query("SELECT to_block, fence_token, fence_owner, datasets, committed_at"
                           " FROM indexed_ranges WHERE from_block = $1::bigint"
                           " AND to_block > $2::bigint AND datasets <> $3::text[] FOR UPDATE",
                           {from, to, held.SqlArray()}));
  if (cut.rows() > 0) {
    GAPLESS_ASSIGN_OR_RETURN(int64_t cut_to, cut.GetInt64(0, 0));
    GAPLESS_RETURN_IF_ERROR(
        RecordCutRest(conn, w.to_block + 1, static_cast<uint64_t>(cut_to), cut));
    GAPLESS_RETURN_IF_ERROR(
        conn.Query("UPDATE indexed_ranges SET to_block = $2 WHERE from_block = $1", {from, to})
            .status());
  }
  PgParam token;
  if (w.fence_token.has_value()) token = std::to_string(*w.fence_token);
  PgParam owner;
  if (w.fence_token.has_value() && !w.fence_owner.empty()) owner = w.fence_owner;
  // An equal token passes only for the same owner (or where either owner is unknown).
  const char* equal_ok = Mutated("fence")
                             ? "TRUE"
                             : "r.fence_owner IS NOT DISTINCT FROM EXCLUDED.fence_owner"
                               " OR r.fence_owner IS NULL OR EXCLUDED.fence_owner IS NULL";
  const char* newer_ok = Mutated("fence") ? "TRUE" : "r.fence_token < EXCLUDED.fence_token";
  GAPLESS_ASSIGN_OR_RETURN(
      auto upsert,
      // A new row's datasets are '{}' until the write sets them (RecordDatasets), never
      // committed so.
      conn.Query(fmt::format("INSERT INTO indexed_ranges AS r (from_block, to_block, fence_token,"
                             " fence_owner, datasets) VALUES ($1, $2, $3, $4, '{{}}')"
                             " ON CONFLICT (from_block) DO UPDATE"
                             "   SET to_block = GREATEST(r.to_block, EXCLUDED.to_block),"
                             "       fence_token = GREATEST(r.fence_token, EXCLUDED.fence_token),"
                             "       fence_owner = CASE WHEN EXCLUDED.fence_token IS NULL"
                             "         THEN r.fence_owner ELSE EXCLUDED.fence_owner END,"
                             "       committed_at = now()"
                             "   WHERE EXCLUDED.fence_token IS NULL OR r.fence_token IS NULL"
                             "      OR {} OR (r.fence_token = EXCLUDED.fence_token AND ({}))"
                             " RETURNING from_block",
                             newer_ok, equal_ok),
                 {from, to, token, owner}));
  if (upsert.rows() == 0) {
    // The row exists (and is now locked by us) with a higher token.
    GAPLESS_ASSIGN_OR_RETURN(
        auto held,
        conn.Query("SELECT fence_token FROM indexed_ranges WHERE from_block = $1", {from}));
    std::string recorded = held.rows() > 0 ? std::string(held.Get(0, 0)) : "?";
    return Aborted("stale fence token " + *token + ": the range was already written with token " +
                   recorded + " (by another lease holder when equal)")
        .WithReason(std::string(kStaleFenceReason));
  }
  if (!w.fence_token.has_value()) return Status::Ok();
  GAPLESS_ASSIGN_OR_RETURN(
      auto newer,
      conn.Query(Mutated("fence")
                     ? "SELECT from_block, to_block, fence_token FROM indexed_ranges WHERE FALSE"
                       " AND $1::bigint IS NULL AND $2::bigint IS NULL AND $3::bigint IS NULL"
                       " AND $4::text IS NULL"
                     : "SELECT from_block, to_block, fence_token FROM indexed_ranges"
                       " WHERE blocks && int8range($1, $2, '[]') AND (fence_token > $3"
                       "   OR (fence_token = $3 AND fence_owner IS DISTINCT FROM $4"
                       "       AND fence_owner IS NOT NULL AND $4 IS NOT NULL))"
                       " ORDER BY fence_token DESC LIMIT 1",
                 {from, to, token, owner}));
  if (newer.rows() > 0) {
    return Aborted("stale fence token " + *token + ": overlapping blocks " +
                   std::string(newer.Get(0, 0)) + "-" + std::string(newer.Get(0, 1)) +
                   " were written with token " + std::string(newer.Get(0, 2)))
        .WithReason(std::string(kStaleFenceReason));
  }
  // The re-org fence (writer.h). This statement's snapshot is taken after the insert above got its
  // lock, so it sees every rollback that committed before this write could proceed.
  GAPLESS_ASSIGN_OR_RETURN(auto fenced, conn.Query("SELECT fork_point, fence_floor FROM reorgs"
                                                   " WHERE fork_point < $1 AND fence_floor >= $2"
                                                   " ORDER BY id DESC LIMIT 1",
                                                   {to, token}));
  if (fenced.rows() > 0 && !Mutated("reorg-floor")) {
    return Aborted("fence token " + *token + " was granted before the re-org above block " +
                   std::string(fenced.Get(0, 0)) + " was rolled back (tokens up to " +
                   std::string(fenced.Get(0, 1)) + " may hold the old fork): blocks " + from + "-" +
                   to + " must be fetched again under a new lease (nothing was written)")
        .WithReason(std::string(kReorgFencedReason));
  }
  return Status::Ok();
}

// SQL true when a committed range overlapping the write ($1..$2) lacks a dataset it holds ($3):
// the write is a backfill and replaces the range's rows (writer.h "Datasets"). Asked after the
// fence, which holds the range's row: a writer of the same range that committed first is seen.
std::string BackfillSql() {
  return "EXISTS (SELECT 1 FROM indexed_ranges WHERE blocks && int8range($1, $2, '[]')"
         " AND datasets <> '{}' AND NOT datasets @> $3::text[])";
}

// Sets the range's record to what the write holds; a write that replaced the range's rows also
// takes what it lacks off the other rows overlapping it (writer.h "Datasets").
std::string RecordDatasets(const RangeWrite& w, const Datasets& held_sets, bool replaced) {
  const std::string from = std::to_string(w.from_block);
  const std::string held = "'" + held_sets.SqlArray() + "'::text[]";
  std::string sql =
      "UPDATE indexed_ranges SET datasets = " + held + " WHERE from_block = " + from + ";\n";
  if (replaced) {
    sql +=
        "UPDATE indexed_ranges SET datasets = ARRAY(SELECT d FROM unnest(datasets) d WHERE d ="
        " ANY(" +
        held + ") ORDER BY d COLLATE \"C\") WHERE blocks && int8range(" + from + ", " +
        std::to_string(w.to_block) + ", '[]') AND from_block <> " + from + " AND NOT datasets <@ " +
        held + ";\n";
  }
  return sql;
}

// The tokens first seen in the range (BlockData::tokens): each row keeps the lowest block any
// write gave it, whatever order ranges commit in (migrations/009_contracts_tokens.sql). One
// statement per token (a range holds few), in address order: two ranges upserting the same
// tokens in another order each would wait for the other's row lock (a deadlock, seen in
// bench/traces_bench.sh with 4 workers).
Status UpsertTokens(PgConn& conn, const RangeWrite& w) {
  std::vector<const Token*> tokens;
  for (const BlockData& d : w.blocks) {
    for (const Token& t : d.tokens) tokens.push_back(&t);
  }
  std::sort(tokens.begin(), tokens.end(), [](const Token* a, const Token* b) {
    return std::tie(a->address, a->block_number) < std::tie(b->address, b->block_number);
  });
  {
    for (const Token* token : tokens) {
      const Token& t = *token;
      std::vector<PgParam> params = {
          t.address.substr(2),
          std::to_string(t.block_number),
          t.standard,
          t.name,
          t.symbol,
          t.decimals.has_value() ? PgParam(std::to_string(*t.decimals)) : PgParam(),
          t.total_supply.has_value() ? PgParam(t.total_supply->ToDecimal()) : PgParam()};
      GAPLESS_RETURN_IF_ERROR(
          conn.Query("INSERT INTO tokens (address, block_number, standard, name, symbol, decimals,"
                     " total_supply) VALUES (decode($1, 'hex'), $2, $3, $4, $5, $6, $7)"
                     " ON CONFLICT (address) DO UPDATE SET block_number = excluded.block_number,"
                     " standard = excluded.standard, name = excluded.name,"
                     " symbol = excluded.symbol, decimals = excluded.decimals,"
                     " total_supply = excluded.total_supply"
                     " WHERE excluded.block_number < tokens.block_number",
                     params)
              .status()
              .WithContext("token " + t.address + " at block " + std::to_string(t.block_number)));
    }
  }
  return Status::Ok();
}

// The event outbox rows of the range (store/outbox.h), one per block, inserted only once events
// are enabled in the database: one statement, sent with the last batch of the write. Hashes were
// checked to be 0x-hex by ValidateRange.
// The count holds the block's decoded events too (`contracts`' tables, just written); a range
// written again (with a dataset added) updates the count of its blocks' rows still there.
std::string OutboxInsert(const RangeWrite& w, const ContractTables* contracts) {
  std::string sql =
      "INSERT INTO event_outbox (block_number, block_hash, event_count)"
      " SELECT v.n, decode(v.h, 'hex'), v.c + " +
      DecodedCountSql(contracts, "v.n") + " FROM (VALUES ";
  for (const BlockData& d : w.blocks) {
    if (&d != &w.blocks.front()) sql += ',';
    const auto internal = std::count_if(d.traces.begin(), d.traces.end(), IsInternalTransfer);
    sql += "(" + std::to_string(d.block.number) + "::bigint,'" + d.block.hash.substr(2) + "'," +
           std::to_string(1 + d.transactions.size() + d.token_transfers.size() +
                          static_cast<size_t>(internal)) +
           ")";
  }
  // Not for blocks every bus has published already (a committed range written again after the
  // relay pruned its rows): they would only wait to be pruned again.
  sql += ") AS v(n, h, c) WHERE EXISTS (SELECT 1 FROM indexer_state WHERE key = '" +
         std::string(kEventsFromKey) +
         "') AND v.n >= (SELECT coalesce(min(next_block), 0) FROM event_cursors)"
         " ON CONFLICT (block_number) DO UPDATE SET event_count = EXCLUDED.event_count"
         " WHERE event_outbox.block_hash = EXCLUDED.block_hash"
         " AND event_outbox.event_count <> EXCLUDED.event_count;\n";
  return sql;
}

// Marks the range's blocks at or above indexer_state 'live_from' live (store/outbox.h "Phase");
// nothing while no live_from is recorded.
std::string LiveUpdate(const RangeWrite& w) {
  return "UPDATE blocks SET live = true WHERE number BETWEEN " + std::to_string(w.from_block) +
         " AND " + std::to_string(w.to_block) +
         " AND number >= (SELECT value::bigint FROM indexer_state WHERE key = '" +
         std::string(kLiveFromKey) + "') AND live IS NOT TRUE;\n";
}

Status WriteRangeImpl(PgConn& conn, const RangeWrite& w, const WriteOptions& options) {
  GAPLESS_RETURN_IF_ERROR(ValidateRange(w));
  // Before the transaction: creating a partition commits on its own (store/partitions.h).
  GAPLESS_RETURN_IF_ERROR(EnsurePartitions(conn, w.from_block, w.to_block));
  bool staging = options.mode == WriteMode::kStagingUpsert;
  if (staging) GAPLESS_RETURN_IF_ERROR(EnsureStagingTables(conn));

  PgTransaction txn(conn);
  GAPLESS_RETURN_IF_ERROR(txn.Begin());
  // First: the children's lock orders this write against those that find factory children
  // (store/decoded.h "Factories"), before any row lock is taken.
  if (options.contracts != nullptr) {
    GAPLESS_RETURN_IF_ERROR(LockForChildren(conn, *options.contracts, w));
  }
  const Datasets held = Held(w, options);
  if (w.decode_only) {
    // Decoding stored logs (writer.h, store/decoded.h): checked against the stored range under
    // the lock a rollback waits for, then fenced and recorded as any write; the data tables stay.
    if (options.contracts == nullptr) return Internal("a decode-only write without --contracts");
    GAPLESS_RETURN_IF_ERROR(CheckStoredForDecoding(conn, w));
    GAPLESS_RETURN_IF_ERROR(FenceAndRecord(conn, w, held));
    std::string buffer;
    GAPLESS_RETURN_IF_ERROR(WriteDecodedRows(conn, *options.contracts, w, &buffer));
    // The range's outbox rows not published yet count its decoded events now (store/outbox.h).
    GAPLESS_RETURN_IF_ERROR(conn.Exec(
        RecordDatasets(w, held, /*replaced=*/false) + "UPDATE event_outbox o SET event_count = " +
        OutboxCountSql("o.block_number", options.contracts) + " WHERE o.block_number BETWEEN " +
        std::to_string(w.from_block) + " AND " + std::to_string(w.to_block) + ";\n"));
    return txn.Commit();
  }
  GAPLESS_RETURN_IF_ERROR(FenceAndRecord(conn, w, held));
  GAPLESS_RETURN_IF_ERROR(CheckJoins(conn, w));

  std::string from = std::to_string(w.from_block);
  std::string to = std::to_string(w.to_block);
  // A backfill replaces the range's rows (writer.h "Datasets"); asked with the fast path's "no
  // rows yet" in one round trip.
  bool replace = options.mode == WriteMode::kReplaceRange;
  if (!replace) {
    std::string sql = "SELECT " + BackfillSql();
    const bool ask_empty = staging && options.direct_copy_when_empty;
    if (ask_empty) {
      // The fence row lock makes us the range's only writer, so "no rows yet" stays true until
      // we commit (a differently cut overlapping range is the exception, see writer.h).
      sql += ", ";
      for (DataTable t : kDataTables) {
        const DataTableInfo& info = TableInfo(t);
        if (t != kDataTables.front()) sql += " OR ";
        sql += std::string("EXISTS (SELECT 1 FROM ") + info.name + " WHERE " + info.block_column +
               " BETWEEN $1 AND $2)";
      }
    }
    GAPLESS_ASSIGN_OR_RETURN(auto asked, conn.Query(sql, {from, to, held.SqlArray()}));
    replace = asked.Get(0, 0) == "t";
    if (replace || (ask_empty && asked.Get(0, 1) == "f")) staging = false;
    if (replace) {
      // A backfill must not delete what the range holds beyond this write (traces, when it
      // fills in token metadata): refused, naming the option that keeps it. An explicit
      // kReplaceRange is the caller's choice and takes it off the record (RecordDatasets).
      GAPLESS_ASSIGN_OR_RETURN(Datasets beyond, HeldBeyond(conn, w.from_block, w.to_block, held));
      if (!beyond.empty()) return BackfillWouldDrop(w.from_block, w.to_block, beyond);
    }
  }
  if (replace) {
    // Children first: nothing references anything (no foreign keys), but this is the order a
    // reader joining from blocks would prefer to see disappear.
    std::string sql;
    for (auto it = kDataTables.rbegin(); it != kDataTables.rend(); ++it) {
      const DataTableInfo& info = TableInfo(*it);
      sql += std::string("DELETE FROM ") + info.name + " WHERE " + info.block_column + " BETWEEN " +
             from + " AND " + to + ";\n";
    }
    // The tokens first seen here are in this write again (node/enrich.h reads again every token
    // not stored below the range).
    sql += "DELETE FROM tokens WHERE block_number BETWEEN " + from + " AND " + to + ";\n";
    GAPLESS_RETURN_IF_ERROR(conn.Exec(sql));
  }

  std::string buffer;
  buffer.reserve(options.copy_chunk_bytes + (256 << 10));
  for (DataTable t : kDataTables) {
    std::string target = staging ? StagingName(t) : TableInfo(t).name;
    GAPLESS_RETURN_IF_ERROR(CopyBlocks(conn, t, target, w.blocks, options.copy_format,
                                       options.copy_chunk_bytes, &buffer));
  }

  GAPLESS_RETURN_IF_ERROR(UpsertTokens(conn, w));
  if (options.contracts != nullptr) {
    GAPLESS_RETURN_IF_ERROR(WriteDecodedRows(conn, *options.contracts, w, &buffer));
  }

  std::string sql;
  if (staging) {
    for (DataTable t : kDataTables) {
      const DataTableInfo& info = TableInfo(t);
      sql += std::string("INSERT INTO ") + info.name + " (" + info.columns + ") SELECT " +
             info.columns + " FROM " + StagingName(t) + " ON CONFLICT DO NOTHING;\n";
    }
  }
  sql += RecordDatasets(w, held, replace);
  if (!w.blocks.empty()) sql += LiveUpdate(w) + OutboxInsert(w, options.contracts);
  // Wakes the frontier duty (store/notify.h) at commit.
  sql += "NOTIFY " + std::string(kRangeCommittedChannel) + ";\n";
  GAPLESS_RETURN_IF_ERROR(conn.Exec(sql));
  return txn.Commit();
}

}  // namespace

namespace {

// What WriteRange counts (core/metrics.h): rows of committed ranges, the write's latency, and
// refused writes by reason.
struct WriteMetrics {
  Counter& ranges;
  Counter& blocks;
  Counter& transactions;
  Counter& logs;
  Counter& transfers;
  Histogram& latency;
  Family<Counter>& failures;
};

WriteMetrics& Metrics() {
  MetricsRegistry& m = MetricsRegistry::Default();
  auto rows = [&](const char* name, const char* what) -> Counter& {
    return m
        .CounterFamily(name, std::string(what) +
                                 " in ranges this process committed (a range written again, "
                                 "after a lost lease or a crash, counts again)")
        .Get();
  };
  static WriteMetrics metrics{
      m.CounterFamily("gapless_ranges_committed_total",
                      "Ranges of blocks this process committed to PostgreSQL")
          .Get(),
      rows("gapless_blocks_indexed_total", "Blocks"),
      rows("gapless_transactions_indexed_total", "Transactions"),
      rows("gapless_logs_indexed_total", "Logs"),
      rows("gapless_token_transfers_indexed_total", "Token transfers (ERC-20, ERC-721, ERC-1155)"),
      m.HistogramFamily("gapless_range_write_seconds",
                        "Time of one committed range write: one PostgreSQL transaction",
                        LatencyBuckets())
          .Get(),
      m.CounterFamily("gapless_range_write_failures_total",
                      "Range writes that did not commit, by reason (stale-fence-token, "
                      "reorg:fenced, reorg:parent-mismatch, a SQLSTATE) or error code",
                      {"reason"})};
  return metrics;
}

}  // namespace

Status WriteRange(PgConn& conn, const RangeWrite& write, const WriteOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  Status st = WriteRangeImpl(conn, write, options);
  WriteMetrics& metrics = Metrics();
  if (st.ok()) {
    metrics.latency.Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    metrics.ranges.Inc();
    metrics.blocks.Inc(static_cast<double>(write.blocks.size()));
    for (const BlockData& b : write.blocks) {
      metrics.transactions.Inc(static_cast<double>(b.transactions.size()));
      metrics.logs.Inc(static_cast<double>(b.logs.size()));
      metrics.transfers.Inc(static_cast<double>(b.token_transfers.size()));
    }
    return st;
  }
  metrics.failures.With({st.reason().empty() ? CodeName(st.code()) : st.reason()}).Inc();
  if (st.reason() == PgSqlStateReason(kPgUniqueViolation)) {
    // The input's keys are checked to be unique, and a direct COPY only happens into a range
    // without rows (old rows deleted, or none there), so a duplicate key can only come from a
    // concurrent writer of an overlapping, differently cut range: redoing the unit of work
    // succeeds once that writer has committed.
    st = Aborted(st.message()).WithReason(st.reason());
  }
  return st.WithContext("write " + RangeName(write));
}

namespace {

// Records `value` under `key` in indexer_state on first use; afterwards the stored value must
// match. Returns the stored value, or the Status of the query.
Result<std::string> RecordOrReadState(PgConn& conn, const char* key, const std::string& value) {
  GAPLESS_RETURN_IF_ERROR(conn.Query("INSERT INTO indexer_state (key, value) VALUES"
                                     " ($1, $2) ON CONFLICT (key) DO NOTHING",
                                     {std::string(key), value})
                              .status());
  GAPLESS_ASSIGN_OR_RETURN(
      auto res, conn.Query("SELECT value FROM indexer_state WHERE key = $1", {std::string(key)}));
  if (res.rows() != 1) return Internal(std::string("indexer_state has no ") + key);
  return std::string(res.Get(0, 0));
}

}  // namespace

Status EnsureChainId(PgConn& conn, uint64_t chain_id) {
  std::string id = std::to_string(chain_id);
  GAPLESS_ASSIGN_OR_RETURN(std::string stored, RecordOrReadState(conn, "chain_id", id));
  if (stored != id) {
    return FailedPrecondition("database " + conn.address() + " holds chain " + stored +
                              ", not chain " + id + ": use one database per chain");
  }
  return Status::Ok();
}

Status EnsureDataMode(PgConn& conn, std::string_view mode) {
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("INSERT INTO indexer_state (key, value) SELECT 'data_mode', CASE WHEN EXISTS"
                 " (SELECT 1 FROM indexed_ranges) THEN 'full' ELSE $1 END"
                 " ON CONFLICT (key) DO NOTHING",
                 {std::string(mode)})
          .status());
  GAPLESS_ASSIGN_OR_RETURN(auto res,
                           conn.Query("SELECT value FROM indexer_state WHERE key = 'data_mode'"));
  if (res.rows() != 1) return Internal("indexer_state has no data_mode");
  if (res.Get(0, 0) != mode) {
    return FailedPrecondition("database " + conn.address() + " holds an index of --data " +
                              std::string(res.Get(0, 0)) + ", not --data " + std::string(mode) +
                              ": the two modes cannot share a database; use another database");
  }
  return Status::Ok();
}

Status EnsureGenesisHash(PgConn& conn, const std::string& genesis_hash) {
  GAPLESS_ASSIGN_OR_RETURN(std::string stored,
                           RecordOrReadState(conn, "genesis_hash", genesis_hash));
  if (stored != genesis_hash) {
    return FailedPrecondition("database " + conn.address() + " holds a chain whose block 0 is " +
                              stored + ", but the node's block 0 is " + genesis_hash +
                              ": same chain id, different chain (a restarted devnet?); use a new "
                              "database");
  }
  return Status::Ok();
}

}  // namespace gapless
