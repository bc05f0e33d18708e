#include "store/retractions.h"

#include <string>

#include "core/model.h"
#include "store/decoded_events.h"
#include "store/outbox.h"
#include "store/row_reader.h"

namespace gapless {

using store_detail::H;
using store_detail::RowReader;

Status RetractOrphanedEvents(PgConn& conn, uint64_t fork_point, uint64_t generation) {
  GAPLESS_ASSIGN_OR_RETURN(std::optional<uint64_t> events_from, EventsFrom(conn));
  if (!events_from.has_value()) return Status::Ok();  // no events, no cursor: nothing to retract
  const std::string restart = std::to_string(fork_point + 1);
  // Lock every cursor first: a relay's advance in progress commits before the cursors are lowered
  // (and is lowered with them); one that comes later waits and sees what this commits.
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("SELECT bus FROM event_cursors ORDER BY bus FOR UPDATE").status());
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("UPDATE event_cursors SET next_block = $1 WHERE next_block > $1", {restart})
          .status());
  // One retraction per orphaned block, seq counting on from indexer_state 'retraction_seq' (a
  // counter, not max(seq): pruned seqs must never be given again), the highest block first.
  GAPLESS_RETURN_IF_ERROR(conn.Query(R"sql(
WITH base AS (
  SELECT COALESCE((SELECT value::bigint FROM indexer_state WHERE key = 'retraction_seq'), 0) AS b
), orphaned AS (
  INSERT INTO event_retractions (seq, generation, block_number, block_hash, transaction_hashes,
                                 incarnation)
  SELECT base.b + row_number() OVER (ORDER BY bl.number DESC), $3::bigint, bl.number, bl.hash,
         ARRAY(SELECT t.hash FROM transactions t WHERE t.block_number = bl.number
               ORDER BY t.transaction_index),
         COALESCE((SELECT i.incarnation FROM block_incarnations i WHERE i.block_hash = bl.hash), 0)
    FROM blocks bl, base
   WHERE bl.number > $1::bigint AND bl.number >= $2::bigint
  RETURNING seq, block_number, block_hash
), incarnations AS (
  INSERT INTO block_incarnations (block_hash, incarnation)
  SELECT block_hash, 1 FROM orphaned
  ON CONFLICT (block_hash) DO UPDATE SET incarnation = block_incarnations.incarnation + 1
), transfers AS (
  INSERT INTO event_retraction_transfers (seq, log_index, batch_index, transaction_hash,
      token_address, from_address, to_address, operator_address, token_id, value, token_standard)
  SELECT o.seq, t.log_index, t.batch_index, t.transaction_hash, t.token_address, t.from_address,
         t.to_address, t.operator_address, t.token_id, t.value, t.token_standard
    FROM orphaned o JOIN token_transfers t ON t.block_number = o.block_number
), internal AS (
  INSERT INTO event_retraction_traces (seq, transaction_hash, transaction_index, trace_address,
      trace_type, call_type, from_address, to_address, value)
  SELECT o.seq, t.transaction_hash, t.transaction_index, t.trace_address, t.trace_type,
         t.call_type, t.from_address, t.to_address, t.value
    FROM orphaned o JOIN traces t ON t.block_number = o.block_number
   WHERE )sql" + std::string(kInternalTransferSql) +
                                         R"sql(
)
INSERT INTO indexer_state (key, value)
SELECT 'retraction_seq', max(seq)::text FROM orphaned HAVING count(*) > 0
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
)sql",
                                     {std::to_string(fork_point), std::to_string(*events_from),
                                      std::to_string(generation)})
                              .status());
  // Then the orphaned blocks' decoded events (the contracts mode), while their rows are there.
  return RetractDecodedRows(conn, generation);
}

Result<std::vector<Retraction>> ReadRetractions(PgConn& conn, uint64_t after, size_t limit) {
  std::vector<Retraction> out;
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult r,
      conn.Query("SELECT seq, generation, extract(epoch FROM reverted_at)::bigint, incarnation, "
                 "block_number, " +
                     H("block_hash") +
                     ", (SELECT string_agg('0x' || encode(h, 'hex'), ',' ORDER BY i)"
                     "   FROM unnest(transaction_hashes) WITH ORDINALITY AS u(h, i))"
                     " FROM event_retractions WHERE seq > $1 ORDER BY seq LIMIT $2",
                 {std::to_string(after), std::to_string(limit)}));
  for (int i = 0; i < r.rows(); ++i) {
    RowReader row(r, i, "event_retractions");
    Retraction x;
    x.seq = row.U64();
    x.generation = row.U64();
    x.reverted_at = row.U64();
    x.incarnation = row.U64();
    Block& b = x.block.block;
    b.number = row.U64();
    b.hash = row.Str();
    std::vector<std::string> hashes = row.List();
    GAPLESS_RETURN_IF_ERROR(row.status());
    for (size_t t = 0; t < hashes.size(); ++t) {
      Transaction tx;
      tx.hash = std::move(hashes[t]);
      tx.block_number = b.number;
      tx.block_hash = b.hash;
      tx.transaction_index = static_cast<uint32_t>(t);
      x.block.transactions.push_back(std::move(tx));
    }
    b.transaction_count = static_cast<uint32_t>(x.block.transactions.size());
    out.push_back(std::move(x));
  }
  if (out.empty()) return out;
  GAPLESS_ASSIGN_OR_RETURN(auto decoded, ReadRetractedDecoded(conn, after, out.back().seq));
  for (Retraction& x : out) {
    auto it = decoded.find(x.seq);
    if (it != decoded.end()) x.decoded = std::move(it->second);
  }

  GAPLESS_ASSIGN_OR_RETURN(
      PgResult t, conn.Query("SELECT seq, " + store_detail::TransferColumns() +
                                 " FROM event_retraction_transfers WHERE seq > $1 AND seq <= $2"
                                 " ORDER BY seq, log_index, batch_index",
                             {std::to_string(after), std::to_string(out.back().seq)}));
  size_t at = 0;
  for (int i = 0; i < t.rows(); ++i) {
    RowReader row(t, i, "event_retraction_transfers");
    const uint64_t seq = row.U64();
    while (at < out.size() && out[at].seq < seq) ++at;
    if (at == out.size() || out[at].seq != seq) {
      return DataLoss("event_retraction_transfers: a row of retraction " + std::to_string(seq) +
                      ", which is not stored");
    }
    out[at].block.token_transfers.push_back(
        store_detail::ReadTransfer(row, out[at].block.block.number));
    GAPLESS_RETURN_IF_ERROR(row.status());
  }

  GAPLESS_ASSIGN_OR_RETURN(
      PgResult x, conn.Query("SELECT seq, " + H("transaction_hash") +
                                 ", transaction_index, array_to_string(trace_address, ','),"
                                 " trace_type, call_type, " +
                                 H("from_address") + ", " + H("to_address") +
                                 ", value FROM event_retraction_traces"
                                 " WHERE seq > $1 AND seq <= $2 ORDER BY seq, transaction_index,"
                                 " trace_address",
                             {std::to_string(after), std::to_string(out.back().seq)}));
  at = 0;
  for (int i = 0; i < x.rows(); ++i) {
    RowReader row(x, i, "event_retraction_traces");
    const uint64_t seq = row.U64();
    while (at < out.size() && out[at].seq < seq) ++at;
    if (at == out.size() || out[at].seq != seq) {
      return DataLoss("event_retraction_traces: a row of retraction " + std::to_string(seq) +
                      ", which is not stored");
    }
    Trace t;
    t.block_number = out[at].block.block.number;
    t.transaction_hash = row.Str();
    t.transaction_index = static_cast<uint32_t>(row.U64());
    for (const std::string& p : row.List()) {
      if (!p.empty()) t.trace_address.push_back(static_cast<uint32_t>(std::stoul(p)));
    }
    t.trace_type = row.Str();
    t.call_type = row.OptStr();
    t.from_address = row.OptStr();
    t.to_address = row.OptStr();
    t.value = row.OptDec();
    t.status = 1;  // only internal transfers are kept: successful by definition
    GAPLESS_RETURN_IF_ERROR(row.status());
    out[at].block.traces.push_back(std::move(t));
  }
  return out;
}

Result<std::map<std::string, uint64_t>> BlockIncarnations(PgConn& conn,
                                                          const std::vector<std::string>& hashes) {
  std::map<std::string, uint64_t> out;
  if (hashes.empty()) return out;
  std::string list = "{";
  for (const std::string& h : hashes) {
    if (list.size() > 1) list += ',';
    list += "\"\\\\x" + (h.size() > 2 ? h.substr(2) : h) + "\"";
  }
  list += "}";
  GAPLESS_ASSIGN_OR_RETURN(PgResult r,
                           conn.Query("SELECT '0x' || encode(block_hash, 'hex'), incarnation FROM "
                                      "block_incarnations WHERE block_hash = ANY($1::bytea[])",
                                      {list}));
  for (int i = 0; i < r.rows(); ++i) {
    GAPLESS_ASSIGN_OR_RETURN(int64_t n, r.GetInt64(i, 1));
    out[std::string(r.Get(i, 0))] = static_cast<uint64_t>(n);
  }
  return out;
}

}  // namespace gapless
