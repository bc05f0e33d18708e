// decoded_events: the contracts mode's decoded rows (store/decoded.h) as bus events (issue 36,
// docs/events.md "Decoded events"): their event type, their payloads read back from the typed
// tables, their share of an outbox row's event count, and what a rollback's retraction keeps of
// them.
//
// A decoded row's event: type "{schema}.{snake(contract)}.{event}", where {event} is the table
// name without the contract's prefix (snake(event), with the "_" + 4 bytes of topic 0 of an
// overloaded event, as the table has it: "zoo.pools.swap_c42079f9"); identity block hash "/" log
// index (events/event.h DecodedEventId). Its payload, after chain_id: block_number, block_hash,
// block_timestamp, transaction_hash, transaction_index, log_index, address, then one member per
// input column, named as the column, valued as abi::ToJson renders the input (integers of 48 bits
// or fewer as numbers, wider ones as decimal strings, bytes and addresses as 0x-hex, strings as
// JSON strings or null where the column is NULL, arrays and tuples as JSON with tuple members in
// ABI order), so a payload is built from the table alone, the same bytes whenever it is read.
//
// Functions take a connection; they are as thread-safe as it is (one thread at a time).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "store/decoded.h"
#include "store/pg.h"

namespace gapless {

// "{schema}.{snake(contract)}.{table without snake(contract) + "_"}".
std::string DecodedEventType(std::string_view schema, std::string_view contract,
                             std::string_view table);

struct DecodedRow {
  uint64_t block_number = 0;
  std::string block_hash;  // 0x-hex
  uint64_t block_timestamp = 0;
  uint64_t log_index = 0;
  std::string event_type;
  std::string fields_json;  // the payload's members after chain_id, without braces
};
// The rows of `tables` in blocks [from, to], ordered by block, log index, then the config's table
// order. InvalidData naming the table, block and log for a value that does not fit its column's
// type (a table changed behind the registry's back).
Result<std::vector<DecodedRow>> ReadDecodedRows(PgConn& conn, const ContractTables& tables,
                                                uint64_t from, uint64_t to);

// The first block of [from, to] that no committed range holding every table's dataset covers
// (its decoded rows may be missing: the table was added to the config after the block was
// written, and the range is to be written again by `index`); nullopt when there is none.
Result<std::optional<uint64_t>> FirstBlockWithoutDecoded(PgConn& conn, const ContractTables& tables,
                                                         uint64_t from, uint64_t to);

// An SQL expression: how many rows the tables hold for the block `block_sql` (an SQL expression
// of the block number): the decoded events of an outbox row's block. "0" without tables.
std::string DecodedCountSql(const ContractTables* tables, std::string_view block_sql);

// Inside a rollback, after RetractOrphanedEvents recorded the retractions of `generation`: records
// each orphaned block's rows of every registered decoded table (configured or not: a consumer
// ignores the ids it never saw) as (event type, log index), in event_retraction_decoded
// (migration 016), so the block.reverted events name their ids once the rows are gone.
Status RetractDecodedRows(PgConn& conn, uint64_t generation);

// The decoded events of the retractions with seq in (after, through]: (event type, log index)
// by seq, ordered by log index then type.
Result<std::map<uint64_t, std::vector<std::pair<std::string, uint64_t>>>> ReadRetractedDecoded(
    PgConn& conn, uint64_t after, uint64_t through);

}  // namespace gapless
