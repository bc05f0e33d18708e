#include "store/partitions.h"

#include <algorithm>
#include <charconv>

#include "store/copy_rows.h"
#include "store/decoded.h"

namespace gapless {
namespace {

// Arbitrary but fixed, and not the migration lock's (store/migrate.cc).
constexpr const char* kLockSql = "SELECT pg_advisory_xact_lock(7350693551146172770)";
constexpr std::string_view kLayoutFlag = "partition_layout=";
// ATTACH PARTITION's answer when the new partition overlaps an existing one.
constexpr std::string_view kInvalidObjectDefinition = "42P17";

std::string PartitionName(const char* table, uint64_t start) {
  return std::string(table) + "_p" + std::to_string(start);
}

std::string EnsuredFlag(uint64_t start) { return "partition_ensured=" + std::to_string(start); }

Result<uint64_t> StateNumber(PgConn& conn, const char* key) {
  GAPLESS_ASSIGN_OR_RETURN(auto res,
                           conn.Query("SELECT value FROM indexer_state WHERE key = $1", {key}));
  if (res.rows() == 0) {
    return FailedPrecondition(std::string("indexer_state has no ") + key +
                              ": the schema predates migration 011 (run a gapless that migrates)");
  }
  std::string_view text = res.Get(0, 0);
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return InvalidData(std::string("indexer_state ") + key +
                       " is not a number: " + std::string(text));
  }
  return value;
}

}  // namespace

Result<PartitionLayout> LoadPartitionLayout(PgConn& conn) {
  PartitionLayout layout;
  GAPLESS_ASSIGN_OR_RETURN(layout.blocks, StateNumber(conn, "partition_blocks"));
  GAPLESS_ASSIGN_OR_RETURN(layout.floor, StateNumber(conn, "partition_floor"));
  if (layout.blocks == 0) return InvalidData("indexer_state partition_blocks is 0");
  return layout;
}

Result<std::vector<uint64_t>> PartitionStarts(PgConn& conn) {
  // Named <blocks>_p<start>; the legacy partition is <blocks>_legacy.
  GAPLESS_ASSIGN_OR_RETURN(
      auto res,
      conn.Query("SELECT substr(c.relname, 9)::bigint FROM pg_inherits i"
                 " JOIN pg_class c ON c.oid = i.inhrelid"
                 " WHERE i.inhparent = 'blocks'::regclass AND c.relname ~ '^blocks_p[0-9]+$'"
                 " ORDER BY 1"));
  std::vector<uint64_t> out;
  for (int i = 0; i < res.rows(); ++i) {
    GAPLESS_ASSIGN_OR_RETURN(int64_t v, res.GetInt64(i, 0));
    out.push_back(static_cast<uint64_t>(v));
  }
  return out;
}

Status SetPartitionBlocks(PgConn& conn, uint64_t blocks) {
  if (blocks == 0) return FailedPrecondition("partition_blocks must be above 0");
  if (conn.in_transaction()) return Internal("SetPartitionBlocks inside a transaction");
  // Under the creators' lock: a partition created between the check and the update would be
  // sized by the old layout.
  PgTransaction txn(conn);
  GAPLESS_RETURN_IF_ERROR(txn.Begin());
  GAPLESS_RETURN_IF_ERROR(conn.Exec(kLockSql));
  GAPLESS_ASSIGN_OR_RETURN(PartitionLayout layout, LoadPartitionLayout(conn));
  if (layout.blocks == blocks) return txn.Commit();
  GAPLESS_ASSIGN_OR_RETURN(auto starts, PartitionStarts(conn));
  if (!starts.empty() || layout.floor > 0) {
    return FailedPrecondition("the data tables are already partitioned by " +
                              std::to_string(layout.blocks) + " blocks (" +
                              std::to_string(starts.size()) + " partitions, legacy below block " +
                              std::to_string(layout.floor) +
                              "): partition_blocks cannot change to " + std::to_string(blocks));
  }
  GAPLESS_RETURN_IF_ERROR(conn.Query("UPDATE indexer_state SET value = $1, updated_at = now() "
                                     "WHERE key = 'partition_blocks'",
                                     {std::to_string(blocks)})
                              .status());
  return txn.Commit();
}

namespace {

// "dex"."weth_deposit" -> "dex"."weth_deposit_p100": the names of decoded tables are quoted
// identifiers of [a-z0-9_] (store/decoded.h).
std::string DecodedPartitionName(const std::string& qualified, uint64_t start) {
  return qualified.substr(0, qualified.size() - 1) + "_p" + std::to_string(start) + "\"";
}

// Creates `name` as the partition of `parent` for blocks [start, start + size), unless it exists.
Status AttachPartition(PgConn& conn, const std::string& parent, const std::string& name,
                       uint64_t start, uint64_t size) {
  GAPLESS_ASSIGN_OR_RETURN(auto exists, conn.Query("SELECT to_regclass($1) IS NOT NULL", {name}));
  if (exists.Get(0, 0) == "t") return Status::Ok();
  return conn
      .Exec("CREATE TABLE " + name + " (LIKE " + parent +
            " INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING COMPRESSION);\n"
            "ALTER TABLE " +
            parent + " ATTACH PARTITION " + name + " FOR VALUES FROM (" + std::to_string(start) +
            ") TO (" + std::to_string(start + size) + ")")
      .WithContext("partition " + name + " of " + std::to_string(size) + " blocks");
}

// The partition starts of [from, to] under `layout` that this session has not ensured yet.
std::vector<uint64_t> Missing(PgConn& conn, const PartitionLayout& layout, uint64_t from,
                              uint64_t to) {
  std::vector<uint64_t> missing;
  for (uint64_t start = std::max(layout.floor, from / layout.blocks * layout.blocks); start <= to;
       start += layout.blocks) {
    if (!conn.session_flag(EnsuredFlag(start))) missing.push_back(start);
  }
  return missing;
}

// Takes the creators' lock, then reads the layout (under it: partitions.h), then creates every
// missing partition, and commits. Remembers the layout for the session once it is fixed.
Status EnsureUnderLock(PgConn& conn, uint64_t from, uint64_t to) {
  PgTransaction txn(conn);
  GAPLESS_RETURN_IF_ERROR(txn.Begin());
  GAPLESS_RETURN_IF_ERROR(conn.Exec(kLockSql));
  GAPLESS_ASSIGN_OR_RETURN(PartitionLayout layout, LoadPartitionLayout(conn));
  std::vector<uint64_t> missing = Missing(conn, layout, from, to);
  std::vector<std::string> decoded;
  if (!missing.empty()) {
    GAPLESS_ASSIGN_OR_RETURN(decoded, RegisteredDecodedTables(conn));
  }
  for (uint64_t start : missing) {
    for (DataTable t : kDataTables) {
      const char* parent = TableInfo(t).name;
      GAPLESS_RETURN_IF_ERROR(
          AttachPartition(conn, parent, PartitionName(parent, start), start, layout.blocks));
    }
    for (const std::string& qualified : decoded) {
      GAPLESS_RETURN_IF_ERROR(AttachPartition(
          conn, qualified, DecodedPartitionName(qualified, start), start, layout.blocks));
    }
  }
  GAPLESS_RETURN_IF_ERROR(txn.Commit());
  for (uint64_t start : missing) conn.set_session_flag(EnsuredFlag(start));
  // Now a partition exists (or every block asked for is below the floor, which is above 0): the
  // layout can no longer change (SetPartitionBlocks), so the session may keep it.
  conn.set_session_flag(std::string(kLayoutFlag) + std::to_string(layout.blocks) + "/" +
                        std::to_string(layout.floor));
  return Status::Ok();
}

}  // namespace

Status CreatePartitionsOf(PgConn& conn, const std::string& schema, const std::string& table) {
  if (!conn.in_transaction()) return Internal("CreatePartitionsOf outside a transaction");
  GAPLESS_RETURN_IF_ERROR(conn.Exec(kLockSql));
  GAPLESS_ASSIGN_OR_RETURN(PartitionLayout layout, LoadPartitionLayout(conn));
  const std::string qualified = "\"" + schema + "\".\"" + table + "\"";
  if (layout.floor > 0) {
    GAPLESS_RETURN_IF_ERROR(AttachPartition(
        conn, qualified, "\"" + schema + "\".\"" + table + "_legacy\"", 0, layout.floor));
  }
  GAPLESS_ASSIGN_OR_RETURN(auto starts, PartitionStarts(conn));
  for (uint64_t start : starts) {
    GAPLESS_RETURN_IF_ERROR(AttachPartition(conn, qualified, DecodedPartitionName(qualified, start),
                                            start, layout.blocks));
  }
  return Status::Ok();
}

Status EnsurePartitions(PgConn& conn, uint64_t from, uint64_t to) {
  if (from > to) return Status::Ok();
  if (conn.in_transaction()) return Internal("EnsurePartitions inside a transaction");
  if (std::string_view cached = conn.session_flag_with_prefix(kLayoutFlag); !cached.empty()) {
    PartitionLayout layout;
    cached.remove_prefix(kLayoutFlag.size());
    size_t slash = cached.find('/');
    std::from_chars(cached.data(), cached.data() + slash, layout.blocks);
    std::from_chars(cached.data() + slash + 1, cached.data() + cached.size(), layout.floor);
    if (Missing(conn, layout, from, to).empty()) return Status::Ok();
  }
  Status st = EnsureUnderLock(conn, from, to);
  if (st.reason() != PgSqlStateReason(kInvalidObjectDefinition)) return st;
  // A partition of another size overlaps, although the layout was read under the lock: one made
  // by a gapless that read it outside (issue 35), or by hand. Aborted, so the unit of work is
  // redone (it reads the layout again) rather than dead-lettered as an internal error.
  return Aborted(st.message()).WithReason(st.reason());
}

}  // namespace gapless
