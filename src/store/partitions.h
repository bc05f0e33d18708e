// partitions: the data tables' block-range partitions (migrations/011_partitions.sql,
// docs/schema.md "Partitions").
//
// Every table keyed by block (copy_rows.h kDataTables) is partitioned by RANGE on its block
// column into partitions of `partition_blocks` blocks, named <table>_p<first block>; blocks below
// `partition_floor` live in <table>_legacy (the rows a database held before migration 011). Both
// numbers are in indexer_state. A partition must exist before a row of its blocks is written (there
// is no default partition: a row outside every partition is an error, never a silent catch-all),
// so the writer ensures the partitions of its range before its transaction (store/writer.h) and
// the leader creates them ahead of the frontier.
//
// Creating one takes no lock a writer waits on: CREATE TABLE (LIKE parent), then ATTACH
// PARTITION, which holds SHARE UPDATE EXCLUSIVE on the parent (writers hold ROW EXCLUSIVE, readers
// ACCESS SHARE: neither conflicts) and builds the parent's indexes on the empty table at once.
// Creators serialise on a transaction-scoped advisory lock, so two processes ensuring the same
// partition create it once. SetPartitionBlocks changes the size under the same lock, so a creator
// reads the size only once it holds the lock: a size read before could be one another process is
// replacing, and a partition of the old size would overlap every partition of the new one (issue
// 35: blocks_p0 made for 1,000,000 blocks while a size of 40 committed, after which every write
// failed). What a connection has ensured is remembered for its session, the size too once a
// partition exists (it cannot change after that).
//
// Thread-safety: as for the PgConn passed in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/pg.h"

namespace gapless {

struct PartitionLayout {
  uint64_t blocks = 1'000'000;  // blocks per partition
  uint64_t floor = 0;           // blocks below it are in the legacy partitions
};

Result<PartitionLayout> LoadPartitionLayout(PgConn& conn);

// Sets partition_blocks (> 0) for a database without block partitions yet; FailedPrecondition
// naming the existing ones otherwise (a layout cannot change under stored rows).
Status SetPartitionBlocks(PgConn& conn, uint64_t blocks);

// Creates every missing partition that blocks from..to need, in all data tables. Must be called
// outside a transaction (it commits its own). Cheap when the session already ensured them.
// A new partition overlapping one of another size (which the lock above keeps from happening;
// one made by an older gapless or by hand) is Aborted with reason "sqlstate:42P17": the unit of
// work is redone, not failed as internal.
Status EnsurePartitions(PgConn& conn, uint64_t from, uint64_t to);

// For a caller making a partitioned table of its own (store/decoded.h) inside its transaction:
// takes the creators' lock, so no partition is created meanwhile, and gives every partition the
// new table needs to match the others: [0, floor) when there is a legacy partition, then one per
// existing start. The table then gets partitions with everyone else's (EnsurePartitions reads the
// registered decoded tables).
Status CreatePartitionsOf(PgConn& conn, const std::string& schema, const std::string& table);

// The first blocks of the block partitions that exist (the legacy one excluded), ascending.
Result<std::vector<uint64_t>> PartitionStarts(PgConn& conn);

}  // namespace gapless
