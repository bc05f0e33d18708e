// balances: the token-balances service, a consumer of token.transfer and block.reverted events
// built on the consumer framework (events/consumer.h). It keeps every holder's balance of every
// token in PostgreSQL.
//
// Tables (created by EnsureBalancesSchema with CREATE TABLE IF NOT EXISTS; they may live in the
// indexer's own database):
//   token_balances(holder BYTEA, token BYTEA, token_id NUMERIC(78,0) NOT NULL DEFAULT -1,
//                  balance NUMERIC(78,0), transfer_count BIGINT,
//                  PRIMARY KEY (holder, token, token_id))
//       token_id -1 is the convention for ERC-20 (no token id: a real id is never negative); an
//       ERC-721 or ERC-1155 balance is per id. A balance can be negative for a while when events
//       arrive out of order (a transfer out before the mint that funded it); it is exact once
//       every event has been applied. transfer_count: the applied transfers that moved it; the
//       row goes when a retraction takes the last one back (NULL in rows made before the column:
//       such a row stays, at 0).
//   applied_events(event_id UUID PRIMARY KEY, applied_at TIMESTAMPTZ, reverted_at TIMESTAMPTZ)
//       the completion record: one row per token.transfer event applied and per block.reverted
//       event processed; reverted_at is set on a transfer's row when a retraction took it back,
//       and a retraction of a transfer never applied inserts its row with reverted_at set (a
//       tombstone), so the original arriving late is skipped as already done.
//
// Exactly once: Process applies one transfer in ONE transaction that first inserts the event id
// into applied_events (ON CONFLICT DO NOTHING) and, if the id was already there, writes nothing
// else; otherwise it subtracts the amount from `from` (unless it is the zero address: a mint)
// and adds it to `to` (unless it is the zero address: a burn), by upserts. So however often an
// event is delivered, and even when two consumers run it at the same moment (the second insert
// waits for the first transaction and then does nothing), it counts once, and token_balances
// equals the aggregate of the indexer's token_transfers over the same transfers. Completion is
// recorded by Process itself; MarkCompleted is the framework's no-op. The two balance rows are
// locked in holder order, so concurrent transfers cannot deadlock each other.
//
// Retractions: Process(block.reverted) runs in ONE transaction: it inserts the block.reverted
// event's own id into applied_events (already there: nothing else, as for a transfer); then for
// each reverted token.transfer id, inserts a tombstone (the id was never applied: no balance
// changes, a late delivery of it is skipped) or, when the id was applied and not yet reverted,
// sets reverted_at and reverses the transfer (adds the amount back to `from`, takes it from `to`;
// a row whose transfer_count reaches 0 is deleted). The balance rows are locked in one global
// order (holder, token, token id), as ApplyTransfer's are. So however often and in whatever
// order a retraction and its transfers arrive, token_balances ends equal to the aggregate of the
// transfers still in token_transfers.
//
// Other event types are acked without effect.
//
// Errors: a lost PostgreSQL connection (Unavailable without a SQLSTATE) is classified as a
// database error like every server error, so it pauses the partition for the database delay. A
// malformed payload is InvalidData (retried, then dead-lettered). A balance that would not fit
// NUMERIC(78,0) is InvalidData from the server (SQLSTATE 22003) and ends in the dead-letter
// destination too.
//
// Thread-safety: BalancesService is thread-safe (each call leases its own pool connection).
#pragma once

#include <atomic>
#include <string>

#include "events/bus.h"
#include "events/consumer.h"
#include "store/pg.h"

namespace gapless {

// Creates token_balances and applied_events if they do not exist, or adds the columns they lack
// (serialised by an advisory lock, so services starting together do not collide). When the schema
// is already complete (the catalog says so) it changes nothing and locks neither table, so a
// service can start beside running ones; when a column must be added, the tables are locked in
// the order the service's own transactions lock them, so the start may wait for running
// transactions but never deadlocks with them. Fails with the database's error.
Status EnsureBalancesSchema(PgConn& conn);

class BalancesService : public EventHandler {
 public:
  // `pool` is not owned and must outlive the service; size it to the consumer's concurrency.
  explicit BalancesService(PgPool* pool) : pool_(pool) {}

  Status Process(const ConsumedEvent& event) override;
  Result<bool> IsCompleted(const std::string& event_id) override;
  ErrorClass Classify(const Status& error) override;

  // Applies one token.transfer envelope's payload (what Process does for that type).
  Status ApplyTransfer(const std::string& event_id, std::string_view payload_json);
  // Reverts what a block.reverted envelope's payload retracts (what Process does for that type).
  Status RevertBlock(const std::string& event_id, std::string_view payload_json);

 private:
  PgPool* pool_;
};

// The aggregate of token_transfers as SQL that begins a WITH clause: it defines `expected(holder,
// token, token_id, balance)` (token_id -1 for ERC-20, the zero address excluded) and ends after
// that CTE, so a query appends further CTEs (", name AS (...)") or its SELECT.
extern const char kExpectedBalancesCte[];

// Checks token_balances against the indexer's token_transfers when both live in `conn`'s
// database: the aggregate of token_transfers (incoming minus outgoing per holder, token and id,
// the zero address excluded) compared with token_balances, both ways. `differing` counts the rows
// in one and not the other (0: equal); `expected` the aggregate's rows.
struct BalancesCheck {
  int64_t differing = 0;
  int64_t expected = 0;
};
Result<BalancesCheck> CheckBalancesAgainstTransfers(PgConn& conn);

struct BalancesOptions {
  std::string pg_url;     // the balances database
  std::string redis_url;  // where the processing keys live
  // Processing keys are "{redis_key_prefix}:processing:{event_id}"; one prefix per consumer group.
  std::string redis_key_prefix = "gapless:consumer:balances";
  // consumer.name defaults to "balances" when left at the framework's default.
  ConsumerOptions consumer;
};

// The entry point for `gapless consume balances`: opens the pool (consumer.concurrency
// connections), creates the schema, and consumes `subscriber` (subscribed by the caller to the
// token.transfer and block.reverted topics) until `stop`. Returns the first error of the setup
// (Unavailable, FailedPrecondition) or what EventConsumer::Run returns.
Status RunBalancesConsumer(const BalancesOptions& options, Subscriber* subscriber,
                           const std::atomic<bool>& stop);

}  // namespace gapless
