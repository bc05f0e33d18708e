// queries: what the indexer and the operator ask of the stored data: which ranges are committed,
// the highest block, a consistency check of a block interval, and table checksums.
//
// All functions are read-only, run in the connection's current transaction state (autocommit when
// none is open), and are as thread-safe as the PgConn given (one thread at a time).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "store/datasets.h"
#include "store/pg.h"

namespace gapless {

// The recorded committed ranges (indexed_ranges) overlapping [from, to], merged into disjoint
// inclusive intervals, clipped to [from, to], ascending. Used to skip finished work on restart.
// With `holding`, only the ranges recorded with every one of those datasets (store/datasets.h):
// a range committed without one is work still to do (a backfill).
Result<std::vector<std::pair<uint64_t, uint64_t>>> CommittedRanges(
    PgConn& conn, uint64_t from, uint64_t to, const Datasets& holding = Datasets());

// The highest block number stored, nullopt for an empty database.
Result<std::optional<uint64_t>> MaxBlock(PgConn& conn);

// The block each of these token addresses (0x-hex, lower-case) is stored at in `tokens`; absent
// when not stored (node/enrich.h).
Result<std::map<std::string, uint64_t>> StoredTokenBlocks(
    PgConn& conn, const std::vector<std::string>& addresses);

// The result of Verify. Anomaly lists are capped (kMaxListed each); `truncated` says more exist.
struct VerifyReport {
  static constexpr size_t kMaxListed = 1000;

  struct Inconsistency {
    uint64_t block_number = 0;
    std::string what;  // "transaction_count is 3 but 2 transactions are stored"
  };

  uint64_t from = 0;
  uint64_t to = 0;
  uint64_t blocks_found = 0;
  // Blocks of [from, to] not stored, as inclusive intervals, ascending.
  std::vector<std::pair<uint64_t, uint64_t>> missing;
  // Blocks n (from <= n <= to) whose parent_hash differs from the stored hash of block n - 1
  // (checked wherever n - 1 is stored, including n - 1 = from - 1).
  std::vector<uint64_t> parent_breaks;
  // Count and cross-reference mismatches: blocks.transaction_count vs stored transactions,
  // transactions.log_count vs stored logs, rows whose block_hash differs from their block's hash,
  // logs/token transfers whose transaction_hash differs from the transaction they point at, and
  // rows whose block (or transaction) is not stored.
  std::vector<Inconsistency> inconsistencies;
  bool truncated = false;
  // Committed blocks lacking a dataset a run asked for over them (store/datasets.h
  // MissingRequestedDatasets): a run that stopped before its backfill was done.
  std::vector<DatasetGap> missing_datasets;

  // `verify --deep` (node/deep_verify.h): each stored block rebuilt from its rows and proven
  // against its own header. Absent without --deep.
  struct Deep {
    std::string checks;  // what was proven, for the report: "roots, blooms, hashes"
    uint64_t verified = 0;
    // Blocks that do not follow Ethereum's rules (OP deposit or Arbitrum transaction types, a
    // header without mixHash): counted, not failures. The first one's block and reason.
    uint64_t not_verifiable = 0;
    std::optional<Inconsistency> first_not_verifiable;
    // One entry per problem (a block can have several), capped at kMaxListed.
    std::vector<Inconsistency> failures;
    uint64_t failed_blocks = 0;
    // Failing blocks that hold a blob transaction and pass with anvil's quirk allowed
    // (VerifyOptions::anvil_blob_sidecar_quirk): the report suggests --anvil-blob-roots.
    uint64_t anvil_quirk_blocks = 0;
    bool truncated = false;
  };
  std::optional<Deep> deep;

  uint64_t missing_count() const;
  bool ok() const {
    return missing.empty() && parent_breaks.empty() && inconsistencies.empty() &&
           missing_datasets.empty() && (!deep || deep->failed_blocks == 0);
  }
  // A multi-line report ending in "OK" or "FAILED", for people.
  std::string Render() const;
};

// Checks [from, to]: every block present (exactly once is the primary key's guarantee), parent
// hashes chain, counts and hashes consistent, every dataset a run asked for present. In an
// events-mode database (store/writer.h EnsureDataMode) every block committed (a range covering
// it recorded), parent hashes chain between adjacent stored blocks, logs carry their block's hash. Scans every
// row of the interval (in chunks of blocks, so memory stays bounded); run it on bounded intervals
// of a large database.
Result<VerifyReport> Verify(PgConn& conn, uint64_t from, uint64_t to);

// md5 of the rows of `table` (blocks, withdrawals, transactions, logs, token_transfers, traces,
// contracts; tokens first seen in the blocks) in blocks [from, to], in primary-key order, every
// column included. Equal checksums mean equal rows: for
// idempotence tests and for comparing two databases. FailedPrecondition for another table name.
// Computed per chunk of `chunk_blocks` blocks (each row digested on the server, the chunks'
// digests combined), so it works at any size: two databases compare equal with the same chunk.
inline constexpr uint64_t kChecksumChunkBlocks = 5'000;
Result<std::string> TableChecksum(PgConn& conn, std::string_view table, uint64_t from, uint64_t to,
                                  uint64_t chunk_blocks = kChecksumChunkBlocks);

}  // namespace gapless
