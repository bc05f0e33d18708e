#include "events/balances.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "events/event.h"

namespace gapless {

namespace {

constexpr std::string_view kZeroAddress = "0x0000000000000000000000000000000000000000";
// The ERC-20 token_id (see the header).
constexpr std::string_view kNoTokenId = "-1";

constexpr std::string_view kCreateTables = R"sql(
CREATE TABLE IF NOT EXISTS token_balances (
  holder   BYTEA NOT NULL,
  token    BYTEA NOT NULL,
  token_id NUMERIC(78,0) NOT NULL DEFAULT -1,  -- -1: ERC-20 (no token id)
  balance  NUMERIC(78,0) NOT NULL,
  PRIMARY KEY (holder, token, token_id)
);
CREATE TABLE IF NOT EXISTS applied_events (
  event_id   UUID PRIMARY KEY,
  applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
)sql";

// Retractions (block.reverted): columns added to tables made before them. ALTER TABLE takes an
// ACCESS EXCLUSIVE lock even when the column exists, so this runs only when a column is missing,
// and it first locks both tables in the order the service's transactions take them
// (applied_events, then token_balances: RecordApplied comes before ApplyMoves). Taken the other
// way round, a service starting beside a running one deadlocked with the running one's
// transactions and PostgreSQL aborted the start (issue 16).
constexpr std::string_view kAddColumns = R"sql(
LOCK TABLE applied_events, token_balances IN ACCESS EXCLUSIVE MODE;
ALTER TABLE applied_events ADD COLUMN IF NOT EXISTS reverted_at TIMESTAMPTZ;
ALTER TABLE token_balances ADD COLUMN IF NOT EXISTS transfer_count BIGINT;
)sql";

// True when both tables have every column: read from the catalog, which locks neither table.
constexpr char kSchemaComplete[] = R"sql(
SELECT count(*) FROM pg_attribute
 WHERE NOT attisdropped AND attnum > 0 AND
       ((attrelid = to_regclass('token_balances') AND attname = 'transfer_count') OR
        (attrelid = to_regclass('applied_events') AND attname = 'reverted_at'))
)sql";

// An address as the hex digits decode() takes; InvalidData unless it is 0x + 40 hex digits.
Result<std::string> AddressDigits(std::string_view field, std::string_view address) {
  if (address.size() != 42 || address.substr(0, 2) != "0x" ||
      address.find_first_not_of("0123456789abcdefABCDEF", 2) != std::string_view::npos) {
    return InvalidData("token.transfer payload: " + std::string(field) + " is not an address");
  }
  return std::string(address.substr(2));
}

// One balance row's change: (holder, token, token id) in hex digits / decimal, the signed amount
// and the change of the row's transfer_count.
struct Move {
  std::string holder;
  std::string token;
  std::string token_id;
  std::string delta;
  int count = 1;
  bool operator<(const Move& o) const {
    return std::tie(holder, token, token_id) < std::tie(o.holder, o.token, o.token_id);
  }
};

// The balance changes of a transfer, one per side that is not the zero address; `reverse` undoes
// it. InvalidData for an address that is not one.
Result<std::vector<Move>> TransferMoves(const TransferEvent& t, bool reverse) {
  GAPLESS_ASSIGN_OR_RETURN(std::string token, AddressDigits("token_address", t.token_address));
  const std::string token_id = t.token_id.value_or(std::string(kNoTokenId));
  const std::string out = (reverse ? "" : "-") + t.amount;
  const std::string in = (reverse ? "-" : "") + t.amount;
  const int count = reverse ? -1 : 1;
  std::vector<Move> moves;
  if (t.from_address != kZeroAddress) {
    GAPLESS_ASSIGN_OR_RETURN(std::string from, AddressDigits("from_address", t.from_address));
    moves.push_back({std::move(from), token, token_id, out, count});
  }
  if (t.to_address != kZeroAddress) {
    GAPLESS_ASSIGN_OR_RETURN(std::string to, AddressDigits("to_address", t.to_address));
    moves.push_back({std::move(to), token, token_id, in, count});
  }
  return moves;
}

// Applies `moves` in the caller's transaction, rows locked in one global order (holder, token,
// token id), so no two transactions of this service deadlock; a row whose transfer_count a
// reversal brings to 0 is deleted (its balance is then 0 too, unless the data is broken: then it
// stays for CheckBalancesAgainstTransfers to see).
Status ApplyMoves(PgConn& conn, std::vector<Move> moves) {
  std::sort(moves.begin(), moves.end());
  for (const Move& m : moves) {
    GAPLESS_ASSIGN_OR_RETURN(
        PgResult r,
        conn.Query("INSERT INTO token_balances (holder, token, token_id, balance, transfer_count) "
                   "VALUES (decode($1, 'hex'), decode($2, 'hex'), $3::numeric, $4::numeric, "
                   "$5::bigint) ON CONFLICT (holder, token, token_id) "
                   "DO UPDATE SET balance = token_balances.balance + EXCLUDED.balance, "
                   "transfer_count = token_balances.transfer_count + EXCLUDED.transfer_count "
                   "RETURNING transfer_count = 0 AND balance = 0",
                   {m.holder, m.token, m.token_id, m.delta, std::to_string(m.count)}));
    if (r.rows() == 1 && r.Get(0, 0) == "t") {
      GAPLESS_RETURN_IF_ERROR(
          conn.Query("DELETE FROM token_balances WHERE holder = decode($1, 'hex') AND "
                     "token = decode($2, 'hex') AND token_id = $3::numeric",
                     {m.holder, m.token, m.token_id})
              .status());
    }
  }
  return Status::Ok();
}

// Records `event_id` in applied_events; false when it was already there (done before, or a
// tombstone of a retracted transfer).
Result<bool> RecordApplied(PgConn& conn, const std::string& event_id) {
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult inserted,
      conn.Query("INSERT INTO applied_events (event_id, applied_at) VALUES ($1::uuid, now()) "
                 "ON CONFLICT DO NOTHING",
                 {event_id}));
  return inserted.affected_rows() == 1;
}

}  // namespace

const char kExpectedBalancesCte[] = R"sql(
WITH moves AS (
  SELECT to_address AS holder, token_address AS token, COALESCE(token_id, -1) AS token_id,
         value AS delta
    FROM token_transfers WHERE to_address <> '\x0000000000000000000000000000000000000000'
  UNION ALL
  SELECT from_address, token_address, COALESCE(token_id, -1), -value
    FROM token_transfers WHERE from_address <> '\x0000000000000000000000000000000000000000'
), expected AS (
  SELECT holder, token, token_id, sum(delta) AS balance FROM moves GROUP BY 1, 2, 3
)
)sql";

Result<BalancesCheck> CheckBalancesAgainstTransfers(PgConn& conn) {
  static const std::string kSql = std::string(kExpectedBalancesCte) + R"sql(
, actual AS (
  SELECT holder, token, token_id, balance FROM token_balances
)
SELECT (SELECT count(*) FROM (SELECT * FROM expected EXCEPT SELECT * FROM actual) a) +
       (SELECT count(*) FROM (SELECT * FROM actual EXCEPT SELECT * FROM expected) b),
       (SELECT count(*) FROM expected)
)sql";
  GAPLESS_ASSIGN_OR_RETURN(PgResult r, conn.Query(kSql));
  BalancesCheck out;
  GAPLESS_ASSIGN_OR_RETURN(out.differing, r.GetInt64(0, 0));
  GAPLESS_ASSIGN_OR_RETURN(out.expected, r.GetInt64(0, 1));
  return out;
}

Status EnsureBalancesSchema(PgConn& conn) {
  PgTransaction tx(conn);
  GAPLESS_RETURN_IF_ERROR(tx.Begin());
  // Two services creating the tables at once would collide on the catalog's unique indexes.
  GAPLESS_RETURN_IF_ERROR(conn.Exec("SELECT pg_advisory_xact_lock(hashtext('gapless.balances'))"));
  // The usual case, a service starting beside others that already made the tables: nothing to
  // change, and no lock taken that would queue the running services' transactions behind it.
  GAPLESS_ASSIGN_OR_RETURN(PgResult complete, conn.Query(kSchemaComplete));
  GAPLESS_ASSIGN_OR_RETURN(int64_t columns, complete.GetInt64(0, 0));
  if (columns == 2) return tx.Commit();
  GAPLESS_RETURN_IF_ERROR(conn.Exec(kCreateTables));
  GAPLESS_RETURN_IF_ERROR(conn.Exec(kAddColumns));
  return tx.Commit();
}

Status BalancesService::Process(const ConsumedEvent& event) {
  if (event.envelope.event_type == kTokenTransfer) {
    return ApplyTransfer(event.envelope.event_id, event.envelope.payload_json);
  }
  if (event.envelope.event_type == kBlockReverted) {
    return RevertBlock(event.envelope.event_id, event.envelope.payload_json);
  }
  return Status::Ok();
}

Status BalancesService::ApplyTransfer(const std::string& event_id, std::string_view payload_json) {
  GAPLESS_ASSIGN_OR_RETURN(TransferEvent t, ParseTransferPayload(payload_json));
  GAPLESS_ASSIGN_OR_RETURN(std::vector<Move> moves, TransferMoves(t, /*reverse=*/false));

  PgPool::Lease conn = pool_->Acquire();
  PgTransaction tx(*conn);
  GAPLESS_RETURN_IF_ERROR(tx.Begin());
  GAPLESS_ASSIGN_OR_RETURN(bool first, RecordApplied(*conn, event_id));
  // Already applied (or retracted): commit nothing else (the transaction is rolled back when tx
  // goes).
  if (!first) {
    spdlog::debug("balances: transfer {} was applied or retracted before: skipped", event_id);
    return Status::Ok();
  }
  GAPLESS_RETURN_IF_ERROR(ApplyMoves(*conn, std::move(moves)));
  GAPLESS_RETURN_IF_ERROR(tx.Commit());
  spdlog::debug("balances: transfer {} applied (block {}, log {})", event_id, t.block_number,
                t.log_index);
  return Status::Ok();
}

Status BalancesService::RevertBlock(const std::string& event_id, std::string_view payload_json) {
  GAPLESS_ASSIGN_OR_RETURN(RevertedBlock block, ParseBlockRevertedPayload(payload_json));
  // Everything checked before the transaction.
  std::map<std::string, std::vector<Move>> reversals;  // by transfer event id
  std::string ids = "{";
  for (const auto& [id, transfer] : block.token_transfers) {
    std::string key = id;  // as PostgreSQL prints a uuid
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    GAPLESS_ASSIGN_OR_RETURN(reversals[key], TransferMoves(transfer, /*reverse=*/true));
  }
  for (const auto& entry : reversals) {  // sorted: row locks in one order
    if (ids.size() > 1) ids += ',';
    ids += entry.first;
  }
  ids += '}';

  PgPool::Lease conn = pool_->Acquire();
  PgTransaction tx(*conn);
  GAPLESS_RETURN_IF_ERROR(tx.Begin());
  GAPLESS_ASSIGN_OR_RETURN(bool first, RecordApplied(*conn, event_id));
  if (!first) return Status::Ok();  // this retraction was processed before
  if (!reversals.empty()) {
    // Tombstones for the ids never applied (waiting for an apply of one in progress)...
    GAPLESS_RETURN_IF_ERROR(
        conn->Query("INSERT INTO applied_events (event_id, applied_at, reverted_at) "
                    "SELECT id, now(), now() FROM unnest($1::uuid[]) AS id ON CONFLICT DO NOTHING",
                    {ids})
            .status());
    // ...then, in a new statement (which sees an apply that committed meanwhile), the applied
    // ones not yet reverted: these are reversed.
    GAPLESS_ASSIGN_OR_RETURN(
        PgResult applied,
        conn->Query("UPDATE applied_events SET reverted_at = now() "
                    "WHERE event_id = ANY($1::uuid[]) AND reverted_at IS NULL RETURNING event_id",
                    {ids}));
    std::vector<Move> moves;
    for (int i = 0; i < applied.rows(); ++i) {
      auto it = reversals.find(std::string(applied.Get(i, 0)));
      if (it == reversals.end()) {
        return Internal("applied_events returned an id the retraction does not hold: " +
                        std::string(applied.Get(i, 0)));
      }
      moves.insert(moves.end(), it->second.begin(), it->second.end());
    }
    GAPLESS_RETURN_IF_ERROR(ApplyMoves(*conn, std::move(moves)));
    spdlog::debug("balances: block {} ({}) reverted: {} of {} transfers had been applied",
                  block.block_number, block.block_hash, applied.rows(), reversals.size());
  }
  return tx.Commit();
}

Result<bool> BalancesService::IsCompleted(const std::string& event_id) {
  PgPool::Lease conn = pool_->Acquire();
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult r,
      conn->Query("SELECT 1 FROM applied_events WHERE event_id = $1::uuid", {event_id}));
  return r.rows() > 0;
}

ErrorClass BalancesService::Classify(const Status& error) {
  // Every I/O of this service is PostgreSQL: a lost connection (Unavailable, no SQLSTATE) is the
  // database's trouble, not the network's in general.
  if (error.code() == Code::kUnavailable && error.reason().empty()) return ErrorClass::kDatabase;
  return ClassifyError(error);
}

Status RunBalancesConsumer(const BalancesOptions& options, Subscriber* subscriber,
                           const std::atomic<bool>& stop) {
  ConsumerOptions consumer = options.consumer;
  if (consumer.name == ConsumerOptions{}.name) consumer.name = "balances";
  size_t connections = std::max<size_t>(1, consumer.concurrency);
  GAPLESS_ASSIGN_OR_RETURN(auto pool, PgPool::Open(options.pg_url, connections));
  {
    PgPool::Lease conn = pool->Acquire();
    GAPLESS_RETURN_IF_ERROR(EnsureBalancesSchema(*conn).WithContext("balances schema"));
  }
  RedisOptions redis;
  redis.env = consumer.env;
  GAPLESS_ASSIGN_OR_RETURN(
      auto locks, RedisProcessingLocks::Open(options.redis_url, options.redis_key_prefix, redis));
  BalancesService service(pool.get());
  EventConsumer c(std::move(consumer), subscriber, locks.get(), &service);
  return c.Run(stop);
}

}  // namespace gapless
