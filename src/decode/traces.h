// traces: a block's call trees, from either tracing API, as ethereum-etl's trace rows (issue 18).
//
//   trace_block(n)                                   Parity, OpenEthereum, Erigon, reth, anvil: a
//                                                    flat list of traces with traceAddress, plus
//                                                    the block and uncle rewards
//   debug_traceBlockByHash(h, {tracer: callTracer})   geth and most others: one call tree per
//   (or ..ByNumber(n, ..) on nodes without it)       transaction, in block order
//
// The mapping follows ethereum-etl's (its trace_mapper and geth_trace_to_traces), checked against
// its recorded answers and expected outputs in ../shared/fixtures/ethereum-etl (TRACES.md states
// the rules): addresses lower-cased, value/gas/gas_used exact, error verbatim, a geth
// SELFDESTRUCT as trace_type "suicide" (without input, as trace_block has none), CREATE2 kept as
// "create2" (from trace_block too where the node says so: action.creationMethod),
// CALL/CALLCODE/DELEGATECALL/STATICCALL as trace_type "call" with that call_type.
//
// status: 1, or 0 when the trace or any of its ancestors in the same transaction failed (a failure
// spreads to every descendant). trace_id: "<type>_<tx hash>_<trace_address joined by _>" ("call_
// 0xab.._" for a top frame); rewards "<type>_<block>_<i>", numbered per type after sorting by
// (reward_type, from, to, value). The Parity path always computes both; the geth path only when
// it is given the block's transaction hashes (ethereum-etl's geth export leaves transaction_hash,
// status and trace_id empty, and the fixture cases check that).
//
// Errors: InvalidData naming the block, the trace (its position, or the transaction index and
// trace address) and the field, for malformed JSON, a bad hex value, a missing required field, a
// trace of another block (its number, or its blockHash where the answer states one: the same
// height on another fork), a child whose parent is missing, or a tree deeper than 1024 frames.
// The geth answers state no block hash: the client asks for them by hash
// (debug_traceBlockByHash), and each entry's txHash must be the block's transaction's.
// Thread-safe (a parser per thread).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace gapless {

// `result` of trace_block(block_number): a JSON array ("null" is NotFound: no such block yet).
// block_hash (lower-case 0x-hex; empty: unchecked): every trace that states a blockHash must name
// it, else InvalidData ("a trace of block 0x..": another fork's block at this height, whose
// internal calls and rewards would be stored under this one).
Result<std::vector<Trace>> DecodeParityTraces(const std::string& result_json, uint64_t block_number,
                                              std::string_view block_hash = {});

// `result` of debug_traceBlockByHash(hash, {"tracer": "callTracer"}) (or ..ByNumber): one
// {"result": frame} (or {"txHash", "result"}) per transaction, in block order. tx_hashes: the
// block's transaction hashes in order, or empty; when given, there must be one per entry (and an
// entry's txHash, when present, must equal its hash), and transaction_hash, status and trace_id
// are filled.
Result<std::vector<Trace>> DecodeGethTraces(const std::string& result_json, uint64_t block_number,
                                            const std::vector<std::string>& tx_hashes = {});

// Checks data.traces against the block they were fetched for: every transaction has exactly one
// top-level trace and every trace names one of the block's transactions (rewards aside); a
// top-level trace agrees with its transaction (from, value, input; to, or for a creation the
// receipt's contractAddress) and with its receipt's status (failed exactly when the trace has an
// error). InvalidData naming the block, the transaction and the field otherwise: a tracer that
// disagrees with the block is a backend serving another fork or a broken node, and nothing of
// the block is written.
Status CheckTracesAgainstBlock(const BlockData& data);

// Sets status and trace_id on a block's traces as ethereum-etl does (see above). InvalidData when
// a trace's parent is missing. Exposed for tests.
Status ComputeTraceStatusAndIds(std::vector<Trace>* traces, uint64_t block_number);

}  // namespace gapless
