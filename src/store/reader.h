// reader: loads stored blocks back into the data model, every column, the inverse of the writer
// (or only the tables and columns a consumer asks for: ReadOptions).
//
// For consumers that need whole blocks again (event publishing from committed data, re-export,
// comparing two databases) and for the round-trip tests. Memory is proportional to the interval:
// read bounded intervals. Thread-safety: as for the PgConn.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "store/pg.h"

namespace gapless {

// The stored blocks in [from, to] with their transactions, logs, token transfers, withdrawals and
// traces,
// ascending (absent blocks are simply not in the result). Reads in one snapshot: the caller's
// transaction when one is open on `conn` (the relay reads its whole batch in one), else a
// REPEATABLE READ transaction of its own. Hex values come
// back lower-case; v, r and s come back as canonical quantities (no leading zeros).
// Tables a reader can leave out (their vectors stay empty): the event relay needs neither logs
// nor withdrawals, which are most of a block's rows.
struct ReadOptions {
  bool logs = true;
  bool withdrawals = true;
  bool traces = true;
  // BlockData::tokens: the stored metadata of every token the block's transfers move (for the
  // token.transfer events' symbol and decimals), not only the tokens first seen in it.
  bool tokens = true;
  // With traces: only the internal transfers (core/model.h IsInternalTransfer), what the events
  // need.
  bool internal_transfers_only = false;
  // Only the columns events carry (events/event.h BlockEvents: the payloads, the ids, and what
  // IsInternalTransfer reads), for the event relay; the other fields of blocks, transactions and
  // traces stay as a default-constructed one has them (transactions' input, for one, is most of
  // their bytes). BlockEvents gives the same events from such a read as from a full one.
  bool event_columns_only = false;
};
// What the event relay (node/relay.h) and `events replay` read: every table and column the events
// of a block need, nothing else.
inline constexpr ReadOptions kEventReadOptions = {.logs = false,
                                                  .withdrawals = false,
                                                  .traces = true,
                                                  .tokens = true,
                                                  .internal_transfers_only = true,
                                                  .event_columns_only = true};
Result<std::vector<BlockData>> ReadBlocks(PgConn& conn, uint64_t from, uint64_t to,
                                          const ReadOptions& options = {});

}  // namespace gapless
