#include "store/partition_indexes.h"

#include <array>
#include <charconv>
#include <map>
#include <set>
#include <utility>

namespace gapless {
namespace {

constexpr std::array<SecondaryIndex, 7> kIndexes = {{
    {DataTable::kTransactions, "hash_idx", "hash"},
    {DataTable::kLogs, "address_idx", "address,block_number"},
    {DataTable::kTokenTransfers, "token_idx", "token_address,block_number"},
    {DataTable::kTraces, "transaction_idx", "transaction_hash"},
    {DataTable::kTraces, "to_idx", "to_address,block_number"},
    {DataTable::kTraces, "from_idx", "from_address,block_number"},
    {DataTable::kContracts, "address_idx", "address"},
}};

// One builder per partition: a session advisory lock in the two-key space (the migration and
// partition-creation locks use the one-key space, so they never collide), the partition's start
// split over both keys.
constexpr int32_t kLockClass = 735069355;

std::pair<int32_t, int32_t> LockKeys(uint64_t start) {
  return {kLockClass + static_cast<int32_t>(start >> 31), static_cast<int32_t>(start & 0x7fffffff)};
}

// The secondary (non-primary) indexes of the data tables' block partitions: partition's parent,
// its start, the index's name, its columns ("a,b") and whether it is valid. A partition with none
// has one row with a NULL index.
constexpr const char* kIndexesSql =
    "SELECT p.relname, substring(c.relname FROM '_p([0-9]+)$'), ic.relname,"
    " (SELECT string_agg(a.attname, ',' ORDER BY k.n)"
    "    FROM unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)"
    "    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum),"
    " x.indisvalid"
    " FROM pg_inherits i"
    " JOIN pg_class p ON p.oid = i.inhparent"
    " JOIN pg_class c ON c.oid = i.inhrelid"
    " LEFT JOIN pg_index x ON x.indrelid = c.oid AND NOT x.indisprimary"
    " LEFT JOIN pg_class ic ON ic.oid = x.indexrelid"
    " WHERE p.relname IN ('blocks', 'withdrawals', 'transactions', 'logs', 'token_transfers',"
    " 'traces', 'contracts') AND p.relnamespace = current_schema()::regnamespace"
    " AND c.relname ~ '_p[0-9]+$'";

struct IndexRow {
  std::string parent;
  uint64_t start = 0;
  std::string name;  // "" when the partition has no secondary index
  std::string columns;
  bool valid = false;
};

Result<std::vector<IndexRow>> ReadIndexes(PgConn& conn, const std::string& extra_where,
                                          const std::vector<PgParam>& params) {
  GAPLESS_ASSIGN_OR_RETURN(auto res, conn.Query(std::string(kIndexesSql) + extra_where, params));
  std::vector<IndexRow> out;
  out.reserve(static_cast<size_t>(res.rows()));
  for (int i = 0; i < res.rows(); ++i) {
    IndexRow row;
    row.parent = std::string(res.Get(i, 0));
    std::string_view start = res.Get(i, 1);
    std::from_chars(start.data(), start.data() + start.size(), row.start);
    if (!res.IsNull(i, 2)) {
      row.name = std::string(res.Get(i, 2));
      row.columns = std::string(res.Get(i, 3));
      row.valid = res.Get(i, 4) == "t";
    }
    out.push_back(std::move(row));
  }
  return out;
}

std::string PartitionName(const char* table, uint64_t start) {
  return std::string(table) + "_p" + std::to_string(start);
}

}  // namespace

std::span<const SecondaryIndex> SecondaryIndexes() { return kIndexes; }

bool PartitionIndexesDue(uint64_t start, uint64_t blocks, uint64_t frontier, uint64_t target,
                         uint64_t near_head) {
  const uint64_t end = start + blocks;  // exclusive
  if (frontier >= end) return true;     // finished
  if (target == UINT64_MAX) return false;
  const bool near = target <= frontier || target - frontier <= near_head;
  return near && start <= target;
}

Result<std::vector<PartitionIndexState>> PartitionsMissingIndexes(PgConn& conn) {
  GAPLESS_ASSIGN_OR_RETURN(std::vector<IndexRow> rows, ReadIndexes(conn, "", {}));
  // (parent, start) -> the column lists of its valid secondary indexes.
  std::map<std::pair<std::string, uint64_t>, std::set<std::string>> valid;
  std::set<uint64_t> starts;
  for (const IndexRow& row : rows) {
    auto& set = valid[{row.parent, row.start}];
    if (row.valid) set.insert(row.columns);
    starts.insert(row.start);
  }
  std::vector<PartitionIndexState> out;
  for (uint64_t start : starts) {
    PartitionIndexState state{start, 0};
    for (const SecondaryIndex& index : kIndexes) {
      auto it = valid.find({TableInfo(index.table).name, start});
      // A table's partition not there at all (a creator cut short) is the writer's to make.
      if (it != valid.end() && it->second.count(index.columns) == 0) ++state.missing;
    }
    if (state.missing > 0) out.push_back(state);
  }
  return out;
}

Result<bool> BuildPartitionIndexes(PgConn& conn, uint64_t start) {
  if (conn.in_transaction()) return Internal("BuildPartitionIndexes inside a transaction");
  auto [k1, k2] = LockKeys(start);
  GAPLESS_ASSIGN_OR_RETURN(auto locked, conn.Query("SELECT pg_try_advisory_lock($1, $2)",
                                                   {std::to_string(k1), std::to_string(k2)}));
  if (locked.Get(0, 0) != "t") return false;
  auto build = [&]() -> Status {
    GAPLESS_ASSIGN_OR_RETURN(
        std::vector<IndexRow> rows,
        ReadIndexes(conn, " AND substring(c.relname FROM '_p([0-9]+)$')::bigint = $1",
                    {std::to_string(start)}));
    for (const SecondaryIndex& index : kIndexes) {
      const char* table = TableInfo(index.table).name;
      bool partition_exists = false;
      bool have = false;
      for (const IndexRow& row : rows) {
        if (row.parent != table) continue;
        partition_exists = true;
        if (row.columns != index.columns) continue;
        if (row.valid) {
          have = true;
        } else {
          // A build cut short (we hold the partition's lock, so no build of it is running).
          GAPLESS_RETURN_IF_ERROR(conn.Exec("DROP INDEX CONCURRENTLY IF EXISTS " + row.name)
                                      .WithContext("dropping the invalid index " + row.name));
        }
      }
      if (!partition_exists || have) continue;
      const std::string partition = PartitionName(table, start);
      const std::string name = partition + "_" + index.suffix;
      GAPLESS_RETURN_IF_ERROR(conn.Exec("CREATE INDEX CONCURRENTLY IF NOT EXISTS " + name + " ON " +
                                        partition + " (" + index.columns + ")")
                                  .WithContext("building index " + name));
    }
    return Status::Ok();
  };
  Status st = build();
  // The lock goes with the session if the connection broke; otherwise it is released here.
  Status unlocked =
      conn.Query("SELECT pg_advisory_unlock($1, $2)", {std::to_string(k1), std::to_string(k2)})
          .status();
  GAPLESS_RETURN_IF_ERROR(st);
  GAPLESS_RETURN_IF_ERROR(unlocked);
  return true;
}

}  // namespace gapless
