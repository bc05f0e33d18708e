// partition_indexes: the data tables' secondary indexes, built partition by partition when a
// partition is due (migrations/013_partition_indexes.sql, docs/schema.md "Indexes during a
// backfill").
//
// A partition is made with its primary key only (store/partitions.h): the key is the uniqueness
// the idempotent range write depends on (store/writer.h), so it is there before the first row and
// at all times. The secondary indexes (kSecondaryIndexes: lookups by hash, address, token) serve
// queries, not the writer, and keeping them up to date row by row is what slows a backfill down as
// a partition grows past memory (bench/RESULTS.md, growth: 0.36x of the first million after 20M
// transactions in one partition). So they are built when the partition is due:
//   - finished: the frontier (the first block not committed) has passed its last block; or
//   - near the head: the frontier is within `near_head` blocks of the target (the end of a fixed
//     range, or the chain head when following) and the partition starts at or below the target,
//     so the partitions that live indexing writes into get their indexes at once.
// A partition far behind the head is filled at the rate of a table with its primary key alone,
// then indexed once, in one sorted pass per index, which is several times cheaper than the same
// index maintained row by row.
//
// A build is CREATE INDEX CONCURRENTLY on the partition: writers, re-org rollbacks and readers of
// the partition go on while it runs. One builder at a time works on a partition (a session
// advisory lock per partition; another builder skips it), and a build cut short (the process
// killed, the connection lost, Cancel) leaves an invalid index that the next build drops and
// builds again. Until a partition is indexed, a query by hash or address reads it whole: correct,
// slower.
//
// Thread-safety: as for the PgConn passed in.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/copy_rows.h"
#include "store/pg.h"

namespace gapless {

struct SecondaryIndex {
  DataTable table;
  const char* suffix;   // the index is named <partition>_<suffix>
  const char* columns;  // "hash", "address,block_number": the columns, in order, no spaces
};

// Every data table's secondary indexes (those migration 011 defined on the partitioned tables).
std::span<const SecondaryIndex> SecondaryIndexes();

// A partition's [start, start + blocks) secondary indexes are due (see the file comment).
// `frontier`: the first block not committed; `target`: the last block the run indexes (UINT64_MAX
// when unknown: then only finished partitions are due).
bool PartitionIndexesDue(uint64_t start, uint64_t blocks, uint64_t frontier, uint64_t target,
                         uint64_t near_head);

struct PartitionIndexState {
  uint64_t start = 0;  // the partition's first block
  int missing = 0;     // secondary indexes it lacks (invalid ones included)
};

// The block partitions (the legacy one excluded) that lack a valid secondary index, by start.
Result<std::vector<PartitionIndexState>> PartitionsMissingIndexes(PgConn& conn);

// Builds the secondary indexes the partition at `start` lacks, in every data table, dropping an
// invalid leftover of a build cut short first. Returns false (and builds nothing) when another
// builder holds the partition. Must be called outside a transaction.
Result<bool> BuildPartitionIndexes(PgConn& conn, uint64_t start);

}  // namespace gapless
