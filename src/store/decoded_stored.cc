// decoded_stored: decoding a committed range's stored logs into the contracts mode's tables
// (decoded.h "Decoding stored logs"): the datasets a range holds throughout, the stored blocks
// read back as a decode-only write, and the check that write makes under its lock.
#include <fmt/format.h>

#include "store/decoded.h"
#include "store/reader.h"
#include "store/writer.h"

namespace gapless {

Result<Datasets> DatasetsHeldThroughout(PgConn& conn, uint64_t from, uint64_t to) {
  if (from > to) return Datasets();
  // Per dataset, the blocks of the range some covering row lists it for: all of them, or not.
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult r,
      conn.Query("SELECT d FROM (SELECT DISTINCT b.n, d FROM generate_series($1::bigint,"
                 " $2::bigint) b(n) JOIN indexed_ranges r ON r.blocks @> b.n"
                 " CROSS JOIN LATERAL unnest(r.datasets) d) x"
                 " GROUP BY d HAVING count(*) = $2::bigint - $1::bigint + 1",
                 {std::to_string(from), std::to_string(to)}));
  Datasets out;
  for (int i = 0; i < r.rows(); ++i) out.Add(r.Get(i, 0));
  return out;
}

Result<bool> ReadStoredForDecoding(PgConn& conn, const ContractTables& tables,
                                   const Datasets& asked, RangeWrite* w) {
  GAPLESS_ASSIGN_OR_RETURN(Datasets held, DatasetsHeldThroughout(conn, w->from_block, w->to_block));
  if (!held.Has(kBlocksDataset)) return false;
  const Datasets missing = asked.Minus(held);
  if (missing.empty() || !tables.datasets().Contains(missing)) return false;
  ReadOptions read;
  read.withdrawals = false;
  read.traces = false;
  read.tokens = false;
  read.event_columns_only = true;
  GAPLESS_ASSIGN_OR_RETURN(std::vector<BlockData> blocks,
                           ReadBlocks(conn, w->from_block, w->to_block, read));
  // A rollback between the two reads: fetched instead (the next plan sees what is committed).
  if (blocks.size() != w->to_block - w->from_block + 1) return false;
  w->blocks = std::move(blocks);
  // What the blocks hold besides decoded tables: the write records these and the config's tables
  // (store/writer.h Held). A decoded dataset of another definition or config is not claimed again:
  // this write may have replaced its table's rows (claiming less is only work for a later run).
  w->datasets = Datasets();
  for (const std::string& name : held.names()) {
    if (!name.starts_with(DecodedDataset(""))) w->datasets.Add(name);
  }
  w->decode_only = true;
  w->sparse = false;
  return true;
}

Status CheckStoredForDecoding(PgConn& conn, const RangeWrite& w) {
  GAPLESS_RETURN_IF_ERROR(conn.Exec("LOCK TABLE indexed_ranges IN ROW EXCLUSIVE MODE"));
  GAPLESS_ASSIGN_OR_RETURN(PgResult r,
                           conn.Query("SELECT number, '0x' || encode(hash, 'hex') FROM blocks"
                                      " WHERE number BETWEEN $1 AND $2 ORDER BY number",
                                      {std::to_string(w.from_block), std::to_string(w.to_block)}));
  bool same = static_cast<size_t>(r.rows()) == w.blocks.size();
  for (int i = 0; same && i < r.rows(); ++i) {
    same = r.Get(i, 0) == std::to_string(w.blocks[i].block.number) &&
           r.Get(i, 1) == w.blocks[i].block.hash;
  }
  if (same) {
    GAPLESS_ASSIGN_OR_RETURN(Datasets held, DatasetsHeldThroughout(conn, w.from_block, w.to_block));
    same = held.Contains(w.datasets);
  }
  if (same) return Status::Ok();
  return Aborted(fmt::format("blocks {}-{} changed since they were read to be decoded (a rollback "
                             "or another write): read again",
                             w.from_block, w.to_block))
      .WithReason(std::string(kStoredRangeChangedReason));
}

}  // namespace gapless
