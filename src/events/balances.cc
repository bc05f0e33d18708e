#include "events/balances.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "events/event.h"

namespace gapless {

namespace {

constexpr std::string_view kZeroAddress = "0x0000000000000000000000000000000000000000";
// The ERC-20 token_id (see the header).
constexpr std::string_view kNoTokenId = "-1";

constexpr std::string_view kSchema = R"sql(
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

// An address as the hex digits decode() takes; InvalidData unless it is 0x + 40 hex digits.
Result<std::string> AddressDigits(std::string_view field, std::string_view address) {
  if (address.size() != 42 || address.substr(0, 2) != "0x" ||
      address.find_first_not_of("0123456789abcdefABCDEF", 2) != std::string_view::npos) {
    return InvalidData("token.transfer payload: " + std::string(field) + " is not an address");
  }
  return std::string(address.substr(2));
}

}  // namespace

Result<BalancesCheck> CheckBalancesAgainstTransfers(PgConn& conn) {
  static constexpr char kSql[] = R"sql(
WITH moves AS (
  SELECT to_address AS holder, token_address AS token, COALESCE(token_id, -1) AS token_id,
         value AS delta
    FROM token_transfers WHERE to_address <> '\x0000000000000000000000000000000000000000'
  UNION ALL
  SELECT from_address, token_address, COALESCE(token_id, -1), -value
    FROM token_transfers WHERE from_address <> '\x0000000000000000000000000000000000000000'
), expected AS (
  SELECT holder, token, token_id, sum(delta) AS balance FROM moves GROUP BY 1, 2, 3
), actual AS (
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
  GAPLESS_RETURN_IF_ERROR(conn.Exec(kSchema));
  return tx.Commit();
}

Status BalancesService::Process(const ConsumedEvent& event) {
  if (event.envelope.event_type != kTokenTransfer) return Status::Ok();
  return ApplyTransfer(event.envelope.event_id, event.envelope.payload_json);
}

Status BalancesService::ApplyTransfer(const std::string& event_id, std::string_view payload_json) {
  GAPLESS_ASSIGN_OR_RETURN(TransferEvent t, ParseTransferPayload(payload_json));
  GAPLESS_ASSIGN_OR_RETURN(std::string token, AddressDigits("token_address", t.token_address));
  // (holder digits, signed amount), one per side that is not the zero address.
  std::vector<std::pair<std::string, std::string>> moves;
  if (t.from_address != kZeroAddress) {
    GAPLESS_ASSIGN_OR_RETURN(std::string from, AddressDigits("from_address", t.from_address));
    moves.emplace_back(std::move(from), "-" + t.amount);
  }
  if (t.to_address != kZeroAddress) {
    GAPLESS_ASSIGN_OR_RETURN(std::string to, AddressDigits("to_address", t.to_address));
    moves.emplace_back(std::move(to), t.amount);
  }
  // Rows locked in one global order (holder, within one token and id): no deadlock between two
  // transfers of the same token in opposite directions.
  std::sort(moves.begin(), moves.end());
  const std::string token_id = t.token_id.value_or(std::string(kNoTokenId));

  PgPool::Lease conn = pool_->Acquire();
  PgTransaction tx(*conn);
  GAPLESS_RETURN_IF_ERROR(tx.Begin());
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult inserted,
      conn->Query("INSERT INTO applied_events (event_id, applied_at) VALUES ($1::uuid, now()) "
                  "ON CONFLICT DO NOTHING",
                  {event_id}));
  // Already applied: commit nothing else (the transaction is rolled back when tx goes).
  if (inserted.affected_rows() == 0) return Status::Ok();
  for (const auto& [holder, delta] : moves) {
    GAPLESS_ASSIGN_OR_RETURN(
        PgResult r,
        conn->Query("INSERT INTO token_balances (holder, token, token_id, balance) "
                    "VALUES (decode($1, 'hex'), decode($2, 'hex'), $3::numeric, $4::numeric) "
                    "ON CONFLICT (holder, token, token_id) "
                    "DO UPDATE SET balance = token_balances.balance + EXCLUDED.balance",
                    {holder, token, token_id, delta}));
    (void)r;
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
