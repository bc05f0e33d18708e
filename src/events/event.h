// event: the envelope every gapless event travels in (seed 004), its deterministic id, and the
// events a committed block gives.
//
// Envelope (compact JSON, keys in this order):
//   {"event_type":"block.new","event_id":"<uuid>","timestamp":"2024-01-01T00:00:00Z",
//    "chain_id":1,"payload":{...},
//    "metadata":{"producer":"gapless","version":"1.0","phase":"backfill"}}
//
// metadata.phase (EventPhase) is "live" for the events of a block committed while a leader
// followed the chain tip (recorded with the block when it was written: store/outbox.h
// LiveBlocks, so a republished envelope is byte for byte the first), "backfill" for every other
// block; block.reverted, transaction.pending and other producers' events are "live".
//
// event_id is a name-based UUID (RFC 4122 version 5, SHA-1) in gapless's own namespace
// (kEventNamespace) of "{chain_id}/{event_type}/{identity}", so publishing the same object again
// (a retried publish, a crashed relay, `gapless events replay`) carries the same id:
//   block.new              identity = block hash
//   transaction.confirmed  identity = block hash "/" tx hash
//   token.transfer         identity = block hash "/" log index "/" batch index
//   block.reverted         identity = block hash "/" reorg generation
//   trace.internal_transfer identity = block hash "/" tx hash "/" trace address joined by "_"
//                          ("" for none: never, an internal transfer is below the top frame)
//   {schema}.{contract}.{event} (the contracts mode's decoded logs, docs/contracts.md)
//                          identity = block hash "/" log index
// The block hash is in every identity so that the same transaction in another fork's block (a
// re-org) is another event. A block whose hash was orphaned before and came back (a flip-flop
// re-org, A -> B -> A) is published under its incarnation n (how often it was orphaned,
// store/retractions.h): its block hash in every identity above becomes "hash#n", so the
// comeback's events are new events, which consumers apply again; n = 0, the common case, adds
// nothing (ids are as before). For block-derived events the envelope's timestamp is the block's
// time, so a re-published envelope is byte for byte the one sent before.
//
// Payloads carry what a consumer needs without a query: hashes and addresses as lower-case
// 0x-hex, 256-bit amounts as decimal strings, 64-bit numbers as JSON numbers.
//   block.new:              chain_id, block_number, hash, parent_hash, timestamp (ISO 8601 UTC),
//                           transaction_count, miner, gas_used, gas_limit, base_fee_per_gas
//   transaction.confirmed:  chain_id, hash, block_number, block_hash, transaction_index,
//                           from_address, to_address (null: creation), contract_address, value,
//                           status ("success" | "failed" | null before Byzantium), gas_used,
//                           effective_gas_price
//   token.transfer:         chain_id, token_address, token_standard ("erc20" | "erc721" |
//                           "erc1155"), token_symbol and token_decimals (the tokens table's,
//                           from BlockData::tokens; null when not known), from_address,
//                           to_address, amount, token_id (null for ERC-20), operator_address,
//                           transaction_hash, log_index, batch_index, block_number, block_hash
//   block.reverted:         chain_id, block_number, block_hash, reorg_generation,
//                           reverted_event_ids (every id the block's events had: block.new,
//                           transaction.confirmed by index, token.transfer by log and batch
//                           index, trace.internal_transfer, then the decoded events by log
//                           index), token_transfers (one object per reverted token.transfer: its
//                           "event_id" followed by that event's payload fields, token_symbol and
//                           token_decimals null: a retraction does not keep them). Its envelope's
//                           timestamp is the rollback's time. docs/events.md says what consumers
//                           do with it.
//   trace.internal_transfer: chain_id, block_number, block_hash, transaction_hash,
//                           transaction_index, trace_address (array of numbers), trace_type
//                           ("call" | "create" | "create2" | "suicide"), from_address, to_address,
//                           value (decimal): a frame below the top that moved value (core/model.h
//                           IsInternalTransfer), with --traces; reverted_event_ids of a
//                           block.reverted name them too
//   {schema}.{contract}.{event}: chain_id, block_number, block_hash, block_timestamp (unix
//                           seconds), transaction_hash, transaction_index, log_index, address,
//                           then the event's inputs by their column names (abi/tables.h), values
//                           as abi::ToJson renders them (store/decoded_events.h reads them back)
//   transaction.pending:    chain_id, hash (the mempool watcher, events/mempool.h)
//   contract.verified:      chain_id, address, verification_status, verified_at (published by
//                           other producers through PublishOne)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "events/bus.h"

namespace gapless {

inline constexpr std::string_view kBlockNew = "block.new";
inline constexpr std::string_view kTransactionConfirmed = "transaction.confirmed";
inline constexpr std::string_view kTokenTransfer = "token.transfer";
inline constexpr std::string_view kTransactionPending = "transaction.pending";
inline constexpr std::string_view kContractVerified = "contract.verified";
inline constexpr std::string_view kBlockReverted = "block.reverted";
inline constexpr std::string_view kInternalTransfer = "trace.internal_transfer";
// Every type gapless knows, in the order above.
const std::vector<std::string_view>& EventTypes();
// True for the shape of a decoded log's type, "{schema}.{contract}.{event}": three non-empty
// parts of [a-z0-9_] (the contracts mode's names, abi/tables.h); EventTypes() has two parts each.
bool IsDecodedEventType(std::string_view type);

inline constexpr std::string_view kEventProducer = "gapless";
inline constexpr std::string_view kEventVersion = "1.0";

// metadata.phase (the file comment).
enum class EventPhase { kBackfill, kLive };
// "backfill" | "live".
std::string_view PhaseName(EventPhase phase);

// "{event_type}.{chain_id}": the Kafka topic, AMQP routing key and Redis stream of the type.
std::string EventTopic(std::string_view event_type, uint64_t chain_id);

// RFC 4122 version-5 UUID of `name` in `namespace_uuid` (both canonical text, lower case).
std::string NameBasedUuid(std::string_view namespace_uuid, std::string_view name);
// gapless's namespace for event ids.
inline constexpr std::string_view kEventNamespace = "5b6f0c1e-6a3d-4f0e-9d57-3c8e2f4a9b10";
// NameBasedUuid(kEventNamespace, "{chain_id}/{event_type}/{identity}").
std::string EventId(uint64_t chain_id, std::string_view event_type, std::string_view identity);

// Unix seconds as "2024-01-01T00:00:00Z".
std::string IsoTime(uint64_t unix_seconds);

// Builds the envelope around `payload_json` (a JSON object) and the OutgoingEvent that carries it.
// metadata.phase is `phase`.
OutgoingEvent MakeEvent(uint64_t chain_id, std::string_view event_type, std::string event_id,
                        std::string_view timestamp, std::string_view payload_json,
                        EventPhase phase = EventPhase::kLive);

// An event of another producer (a verification service, a script through `gapless events
// publish`), in the same envelope: event_id = EventId(chain_id, type, identity), so publishing the
// same object twice gives one id. FailedPrecondition naming the problem when the type is not one
// of EventTypes() or payload_json is not a JSON object; the payload gets "chain_id" added first
// when it has none.
Result<OutgoingEvent> ProducerEvent(uint64_t chain_id, std::string_view event_type,
                                    std::string_view identity, std::string_view payload_json,
                                    uint64_t unix_seconds);
// contract.verified: identity = the address (lower-cased) and the verification time.
OutgoingEvent ContractVerifiedEvent(uint64_t chain_id, std::string_view address,
                                    std::string_view verification_status, uint64_t verified_at);

// The ids of a block's events (the identities above); BlockEvents and BlockRevertedEvent use
// these, so a retraction names exactly the ids that were published.
// `incarnation` as above (0: the block's first publication).
std::string BlockNewEventId(uint64_t chain_id, std::string_view block_hash,
                            uint64_t incarnation = 0);
std::string TransactionEventId(uint64_t chain_id, std::string_view block_hash,
                               std::string_view transaction_hash, uint64_t incarnation = 0);
std::string TransferEventId(uint64_t chain_id, std::string_view block_hash, uint64_t log_index,
                            uint64_t batch_index, uint64_t incarnation = 0);
std::string InternalTransferEventId(uint64_t chain_id, std::string_view block_hash,
                                    const Trace& trace, uint64_t incarnation = 0);
// A decoded log's event: `event_type` is "{schema}.{contract}.{event}".
std::string DecodedEventId(uint64_t chain_id, std::string_view event_type,
                           std::string_view block_hash, uint64_t log_index,
                           uint64_t incarnation = 0);

// The events of one committed block, in order: block.new, then transaction.confirmed by
// transaction index, then token.transfer by (log index, batch index), then
// trace.internal_transfer in the order of data.traces; ids of `incarnation`, metadata.phase
// `phase`. The contracts mode's decoded events of the block follow them (DecodedLogEvent, built
// by the relay from the decoded tables).
std::vector<OutgoingEvent> BlockEvents(uint64_t chain_id, const BlockData& data,
                                       uint64_t incarnation = 0,
                                       EventPhase phase = EventPhase::kBackfill);

// The event of one decoded log (a row of a contracts-mode table): `fields_json` is the payload's
// members after chain_id, without braces ("\"block_number\":5,...", store/decoded_events.h); the
// envelope's timestamp is the block's.
OutgoingEvent DecodedLogEvent(uint64_t chain_id, std::string_view event_type,
                              std::string_view block_hash, uint64_t log_index,
                              uint64_t block_timestamp, std::string_view fields_json,
                              uint64_t incarnation, EventPhase phase);

// The block.reverted event of an orphaned block: `orphaned` needs block.number, block.hash, each
// transaction's hash, the complete token transfers and its internal transfers' traces
// (transaction hash, trace address, and what IsInternalTransfer reads; store/retractions.h gives
// that);
// `generation` is the rollback's reorg generation, `reverted_at` its time (unix seconds),
// `incarnation` the one the retracted events were published with (their ids); `decoded`: the
// block's decoded events as (event type, log index), whose ids close reverted_event_ids.
// metadata.phase is "live": a rollback is news of the chain tip.
OutgoingEvent BlockRevertedEvent(uint64_t chain_id, const BlockData& orphaned, uint64_t generation,
                                 uint64_t reverted_at, uint64_t incarnation = 0,
                                 const std::vector<std::pair<std::string, uint64_t>>& decoded = {});

// A received envelope, parsed. payload_json is the payload object's JSON text.
struct Envelope {
  std::string event_type;
  std::string event_id;
  std::string timestamp;
  uint64_t chain_id = 0;
  std::string payload_json;
  std::string producer;
  std::string version;
  // metadata.phase: "backfill" | "live"; "" when absent (a producer from before it existed).
  std::string phase;
};
// InvalidData naming the missing or malformed field.
Result<Envelope> ParseEnvelope(std::string_view json);

// A token.transfer payload, parsed (the balances consumer's input).
struct TransferEvent {
  std::string token_address;
  std::string token_standard;  // "erc20" | "erc721" | "erc1155"
  std::string from_address;
  std::string to_address;
  std::string amount;                   // decimal
  std::optional<std::string> token_id;  // decimal
  std::optional<std::string> token_symbol;
  std::optional<uint64_t> token_decimals;
  std::string transaction_hash;
  uint64_t log_index = 0;
  uint64_t batch_index = 0;
  uint64_t block_number = 0;
  std::string block_hash;
};
Result<TransferEvent> ParseTransferPayload(std::string_view payload_json);

// A block.reverted payload, parsed (the balances consumer's input).
struct RevertedBlock {
  uint64_t block_number = 0;
  std::string block_hash;
  uint64_t reorg_generation = 0;
  std::vector<std::string> reverted_event_ids;
  // (event id, the reverted token.transfer), by log and batch index.
  std::vector<std::pair<std::string, TransferEvent>> token_transfers;
};
// InvalidData naming the missing or malformed field.
Result<RevertedBlock> ParseBlockRevertedPayload(std::string_view payload_json);

// Appends `s` as a JSON string literal (quotes and escapes included).
void AppendJsonString(std::string& out, std::string_view s);

}  // namespace gapless
