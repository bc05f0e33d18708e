// writer: commits a range of blocks (with their transactions, logs, token transfers, withdrawals)
// to PostgreSQL in one fenced transaction, idempotently.
//
// A range write is all or nothing: either every row of every block in [from_block, to_block] and
// the range's record in indexed_ranges commit together, or nothing does. Writing the same range
// again leaves the tables exactly as they were (both modes), so a worker that is unsure whether
// its commit happened (a connection lost during COMMIT) simply writes again.
//
// Fencing (Kleppmann): a write carrying a fence token first upserts the range's row in
// indexed_ranges, which also row-locks it, so writers of the same range serialise there; the write
// aborts with Aborted when a higher token is already recorded for this range or any range that
// overlaps it: a newer lease holder exists and this worker's lease is stale. An equal token passes
// only for the same fence_owner (the same lease retrying); another owner with an equal token is
// refused too (a coordination-Redis failover to a lagging replica rolls the counter back, so one
// token can be granted twice: the second holder must not write over the first). A write without
// a token (single-process mode) is not checked and keeps the highest token recorded; one without
// an owner does not restrict by owner. Rows the frontier passed are merged (store/state.h
// "Compaction": what this check refuses, it still refuses after a merge).
//
// Modes:
//  kStagingUpsert (default)  COPY every table's rows into session-local temporary staging tables
//                            (created once per connection, ON COMMIT DELETE ROWS), then
//                            INSERT INTO t SELECT ... FROM staging ON CONFLICT DO NOTHING.
//                            Rows already present are kept as they are.
//                            Fast path (WriteOptions.direct_copy_when_empty, on by default): when
//                            none of the tables holds a row of the range yet, which is every
//                            first write, the rows are COPied straight into the tables instead
//                            (ON CONFLICT's speculative insertion costs ~1.5x a plain insert;
//                            see bench/RESULTS.md). Same result: there was nothing to conflict
//                            with. A concurrent writer of an overlapping, differently cut range
//                            that commits the same keys first makes this write fail with Aborted
//                            (unique violation); the retry finds the rows and takes the staging
//                            path.
//  kReplaceRange             DELETE the range's rows from every table, then COPY straight into the
//                            tables. Safe because the fence gives the writer exclusive ownership of
//                            the range; rows already present are replaced by the new ones.
// Either mode COPies in PostgreSQL's binary format unless WriteOptions.copy_format says text
// (store/copy_rows.h); the stored rows are the same.
//
// Chain: the blocks of a range must chain (each one's parent hash is the previous one's hash:
// InvalidData otherwise, before anything is sent), and the range must join the stored blocks
// around it: block from_block - 1, when stored, must be the first block's parent, and block
// to_block + 1, when stored, must have the last block as its parent. Checked inside the
// transaction after the fence; a mismatch is Aborted with reason kParentMismatchReason and
// nothing is written: the chain re-orged between two writes, or a worker of the old fork commits
// late. Retrying fetches the blocks again (the node may be on the new fork by then); the re-org
// itself is rolled back by store/rollback.h.
//
// Re-org fence: a range whose last block is above the fork point of a recorded re-org
// (store/rollback.h) must carry a fence token above that re-org's floor; a lower token was granted
// before the rollback, to a worker that may hold the old fork, and is Aborted with reason
// kReorgFencedReason (nothing written). Retrying the same lease cannot succeed: the task must be
// claimed again (a new token). Writes without a token (`index`) are not fenced.
//
// Datasets (store/datasets.h): the range's indexed_ranges row lists the datasets the write holds
// (RangeWrite::datasets, and always "blocks"), set when the write commits. A write holding a
// dataset that a committed range overlapping it lacks is a backfill: it replaces the range's rows
// (as kReplaceRange does, whatever the mode), so they equal those of a run that held the dataset
// from the start (a staging upsert would keep the old contracts, numbered without the factories'
// ones). A longer row starting at from_block whose datasets differ (a range cut larger before, or
// rows compacted below the frontier) is cut at to_block first, the rest keeping its record, token
// and owner (recorded around rows written inside it since, so every block it covered stays
// covered); and a replacing write takes the datasets it lacks off the other rows overlapping it
// (they may then claim less than they hold: a later run writes them again, which is only work).
// So the record never claims a dataset the rows lack. Compaction must merge only rows with equal
// datasets.
//
// Input checks (InvalidData, naming the block and field, before anything is sent): the blocks are
// exactly from_block..to_block in order (a sparse write: some of them, ascending); every
// transaction, log and transfer carries its block's number; keys are strictly increasing within a
// block (transaction_index, log_index, (log_index, batch_index), withdrawal index); hex fields are
// 0x-hex; integers fit their columns (BIGINT, INTEGER, SMALLINT).
//
// Thread-safety: as for the PgConn (one thread at a time); different connections write in
// parallel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "store/copy_rows.h"
#include "store/datasets.h"
#include "store/pg.h"

namespace gapless {

class ContractTables;  // store/decoded.h

enum class WriteMode { kStagingUpsert, kReplaceRange };

struct RangeWrite {
  uint64_t from_block = 0;        // inclusive
  uint64_t to_block = 0;          // inclusive
  std::vector<BlockData> blocks;  // exactly from_block..to_block, in order (unless sparse)
  std::optional<int64_t> fence_token;
  // Who holds the lease the token came with (the worker id); empty: unknown (see "Fencing").
  std::string fence_owner;
  // What the blocks hold besides "blocks" (always recorded): traces, token metadata, ... as the
  // fetch reports it (node/range_job.h FetchAndDecodeRange). See "Datasets".
  Datasets datasets{};  // {}: aggregate initialisers that stop before it stay warning-free
  // The contracts mode's `events` data mode (docs/contracts.md): `blocks` holds only the blocks
  // with matching logs (headers and those logs), ascending inside [from_block, to_block], maybe
  // none. Parent hashes are checked between adjacent blocks only, a stored neighbour is joined
  // only where the range's end block is held, and the write does not hold the "blocks" dataset.
  bool sparse = false;
  // The contracts mode's config change, full mode (store/decoded.h "Decoding stored logs"):
  // `blocks` are the range's stored blocks read back from this database (ReadStoredForDecoding),
  // and the write replaces only the range's decoded rows, recording `datasets` plus the config's
  // tables (the data tables, outbox and tokens are left as they are). Refused (Aborted, reason
  // kStoredRangeChangedReason: read it again) unless, inside the transaction, every block of the
  // range is still stored with its hash and every dataset of `datasets` is still held by every
  // block. Needs WriteOptions::contracts.
  bool decode_only = false;
};

struct WriteOptions {
  WriteMode mode = WriteMode::kStagingUpsert;
  // kStagingUpsert: COPY straight into the tables when the range has no rows yet.
  bool direct_copy_when_empty = true;
  // COPY data is sent in chunks of about this size while it is being serialised.
  size_t copy_chunk_bytes = 1 << 20;
  // The COPY format (store/copy_rows.h): binary unless asked otherwise (--copy-format).
  CopyFormat copy_format = CopyFormat::kBinary;
  // The contracts mode (store/decoded.h): the range's logs of these contracts are decoded into
  // their tables in the same transaction, and the write holds their datasets. Not owned.
  const ContractTables* contracts = nullptr;
};

// Status::reason() of the Aborted that WriteRange returns for a stale fence token: a newer lease
// holder exists, so retrying this unit of work can never succeed (unlike the other Aborted).
inline constexpr std::string_view kStaleFenceReason = "stale-fence-token";
// Status::reason() of the Aborted for a range that does not join the stored chain (see "Chain").
inline constexpr std::string_view kParentMismatchReason = "reorg:parent-mismatch";
// Status::reason() of the Aborted for a token granted before a re-org's rollback (see "Re-org
// fence").
inline constexpr std::string_view kReorgFencedReason = "reorg:fenced";

// Writes the range in one transaction. Errors: Aborted for a stale fence token (reason
// kStaleFenceReason), a serialization
// failure or deadlock, or a concurrent writer of an overlapping range; Unavailable
// when the connection is lost (the commit may or may not have happened: write again); InvalidData
// for rows that cannot be stored (nothing is committed). Retrying any of them is safe.
Status WriteRange(PgConn& conn, const RangeWrite& write, const WriteOptions& options = {});

// Records chain_id in indexer_state on first use; FailedPrecondition if the database already holds
// another chain.
Status EnsureChainId(PgConn& conn, uint64_t chain_id);

// The data mode a database holds (docs/contracts.md): "full" (every block, transaction, receipt
// and log) or "events" (the contracts mode's matching logs and their blocks only, sparse writes).
// Recorded on first use ("full" for a database that already holds ranges from before the record
// existed); FailedPrecondition when a run of the other mode starts on it: the two cannot share a
// database (a full run would take sparse ranges for whole ones).
Status EnsureDataMode(PgConn& conn, std::string_view mode);

// Records the hash of block 0 on first use and refuses a node whose block 0 differs afterwards:
// the chain id alone does not tell two devnets (or a chain and its fork) apart. FailedPrecondition
// on a mismatch.
Status EnsureGenesisHash(PgConn& conn, const std::string& genesis_hash);

}  // namespace gapless
