#include "store/rollback.h"

#include <fmt/format.h>

#include <cctype>

#include "store/decoded.h"
#include "store/retractions.h"

namespace gapless {
namespace {

// Reads an integer indexer_state value, `fallback` when absent.
Result<uint64_t> StateValue(PgConn& conn, const std::string& key, uint64_t fallback) {
  GAPLESS_ASSIGN_OR_RETURN(
      auto r, conn.Query("SELECT value::bigint FROM indexer_state WHERE key = $1", {key}));
  if (r.rows() == 0) return fallback;
  GAPLESS_ASSIGN_OR_RETURN(int64_t v, r.GetInt64(0, 0));
  return static_cast<uint64_t>(v);
}

Status SetState(PgConn& conn, const std::string& key, uint64_t value) {
  return conn
      .Query(
          "INSERT INTO indexer_state (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE "
          "SET value = EXCLUDED.value, updated_at = now()",
          {key, std::to_string(value)})
      .status();
}

bool IsHash(const std::string& h) {
  if (h.size() != 66 || h[0] != '0' || h[1] != 'x') return false;
  for (size_t i = 2; i < h.size(); ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(h[i]))) return false;
  }
  return true;
}

}  // namespace

Result<uint64_t> ReorgGeneration(PgConn& conn) { return StateValue(conn, "reorg_generation", 0); }

Result<uint64_t> HeadForkGeneration(PgConn& conn) {
  return StateValue(conn, "head_fork_generation", 0);
}

Result<std::optional<uint64_t>> ForkPointSince(PgConn& conn, uint64_t after_generation) {
  GAPLESS_ASSIGN_OR_RETURN(auto r, conn.Query("SELECT min(fork_point) FROM reorgs WHERE "
                                              "generation > $1",
                                              {std::to_string(after_generation)}));
  if (r.rows() == 0 || r.IsNull(0, 0)) return std::optional<uint64_t>();
  GAPLESS_ASSIGN_OR_RETURN(int64_t v, r.GetInt64(0, 0));
  return std::optional<uint64_t>(static_cast<uint64_t>(v));
}

Result<RollbackResult> RollBack(PgConn& conn, const RollbackRequest& request) {
  for (const std::string& h : request.new_hashes) {
    if (!IsHash(h)) return InvalidData("rollback: a new hash is not 0x + 64 hex digits: " + h);
  }
  const std::string fork = std::to_string(request.fork_point);
  PgTransaction txn(conn);
  GAPLESS_RETURN_IF_ERROR(txn.Begin());
  // First, wait for every range write in flight and keep new ones out until we commit (header).
  GAPLESS_RETURN_IF_ERROR(conn.Exec("LOCK TABLE indexed_ranges IN EXCLUSIVE MODE"));
  // Serialise with frontier writers and other rollbacks: the frontier row's lock.
  GAPLESS_RETURN_IF_ERROR(conn.Query("INSERT INTO indexer_state (key, value) VALUES ('frontier', "
                                     "'0') ON CONFLICT (key) DO NOTHING")
                              .status());
  GAPLESS_ASSIGN_OR_RETURN(
      auto frontier_row,
      conn.Query("SELECT value::bigint FROM indexer_state WHERE key = 'frontier' FOR UPDATE"));
  GAPLESS_ASSIGN_OR_RETURN(int64_t frontier, frontier_row.GetInt64(0, 0));

  // Every check before the first write.
  GAPLESS_ASSIGN_OR_RETURN(uint64_t last_epoch, StateValue(conn, "reorg_epoch", 0));
  if (request.leader_epoch < last_epoch) {
    return Aborted(fmt::format("rollback to block {} by leader epoch {} refused: epoch {} rolled "
                               "back since (a newer leader)",
                               request.fork_point, request.leader_epoch, last_epoch))
        .WithReason(std::string(kStaleReorgEpochReason));
  }
  GAPLESS_ASSIGN_OR_RETURN(
      auto orphaned,
      conn.Query("SELECT '0x' || encode(hash, 'hex') FROM blocks WHERE number > $1 ORDER BY number",
                 {fork}));
  RollbackResult result;
  result.depth = static_cast<uint64_t>(orphaned.rows());
  if (result.depth > request.max_depth) {
    return FailedPrecondition(
               fmt::format(
                   "a re-org from block {} (fork point {}) would roll back {} stored blocks, "
                   "more than --max-reorg-depth {}: nothing was changed. Check the node; if the "
                   "chain really re-orged that deep, start again with --max-reorg-depth {}",
                   request.fork_point + 1, request.fork_point, result.depth, request.max_depth,
                   result.depth))
        .WithReason(std::string(kReorgTooDeepReason));
  }
  GAPLESS_ASSIGN_OR_RETURN(result.generation, ReorgGeneration(conn));
  result.frontier = frontier > 0 ? static_cast<uint64_t>(frontier) : 0;
  GAPLESS_ASSIGN_OR_RETURN(uint64_t followed, HeadForkGeneration(conn));
  if (request.head_fork_generation > followed) {
    GAPLESS_RETURN_IF_ERROR(SetState(conn, "head_fork_generation", request.head_fork_generation));
  }
  if (result.depth == 0 && request.fence_floor == 0) {
    GAPLESS_RETURN_IF_ERROR(txn.Commit());
    return result;
  }
  for (int i = 0; i < orphaned.rows(); ++i) result.old_hashes.emplace_back(orphaned.Get(i, 0));

  GAPLESS_RETURN_IF_ERROR(RetractOrphanedEvents(conn, request.fork_point, result.generation + 1));
  // The rows, children first: the decoded tables (store/decoded.h) before the logs they come from.
  GAPLESS_ASSIGN_OR_RETURN(std::string decoded, DeleteDecodedAboveSql(conn, request.fork_point));
  GAPLESS_RETURN_IF_ERROR(conn.Exec(
      decoded +
      fmt::format(
          "DELETE FROM tokens WHERE block_number > {0};\n"
          "DELETE FROM contracts WHERE block_number > {0};\n"
          "DELETE FROM traces WHERE block_number > {0};\n"
          "DELETE FROM token_transfers WHERE block_number > {0};\n"
          "DELETE FROM logs WHERE block_number > {0};\n"
          "DELETE FROM transactions WHERE block_number > {0};\n"
          "DELETE FROM withdrawals WHERE block_number > {0};\n"
          "DELETE FROM blocks WHERE number > {0};\n"
          "DELETE FROM indexed_ranges WHERE from_block > {0};\n"
          "UPDATE indexed_ranges SET to_block = {0} WHERE from_block <= {0} AND to_block > {0};\n"
          // Events of orphaned blocks no bus has published yet must never go out.
          "DELETE FROM event_outbox WHERE block_number > {0};\n",
          fork)));
  if (static_cast<uint64_t>(frontier) > request.fork_point + 1) {
    result.frontier = request.fork_point + 1;
    GAPLESS_RETURN_IF_ERROR(conn.Query("UPDATE indexer_state SET value = $1, updated_at = now() "
                                       "WHERE key = 'frontier'",
                                       {std::to_string(result.frontier)})
                                .status());
  }
  result.generation += 1;
  GAPLESS_RETURN_IF_ERROR(SetState(conn, "reorg_generation", result.generation));
  GAPLESS_RETURN_IF_ERROR(SetState(conn, "reorg_epoch", request.leader_epoch));
  auto array = [](const std::vector<std::string>& hashes) {
    std::string out = "{";
    for (size_t i = 0; i < hashes.size(); ++i) out += (i ? "," : "") + hashes[i];
    return out + "}";
  };
  GAPLESS_RETURN_IF_ERROR(
      conn.Query("INSERT INTO reorgs (fork_point, depth, old_hashes, new_hashes, generation, "
                 "leader_epoch, fence_floor) VALUES ($1, $2, "
                 "ARRAY(SELECT decode(substr(h, 3), 'hex') FROM unnest($3::text[]) h), "
                 "ARRAY(SELECT decode(substr(h, 3), 'hex') FROM unnest($4::text[]) h), $5, $6, "
                 "$7)",
                 {fork, std::to_string(result.depth), array(result.old_hashes),
                  array(request.new_hashes), std::to_string(result.generation),
                  std::to_string(request.leader_epoch), std::to_string(request.fence_floor)})
          .status());
  GAPLESS_RETURN_IF_ERROR(txn.Commit());
  return result;
}

Result<ReorgSummary> LoadReorgSummary(PgConn& conn) {
  GAPLESS_ASSIGN_OR_RETURN(
      auto r, conn.Query("SELECT (SELECT count(*) FROM reorgs WHERE depth > 0), fork_point, depth, "
                         "to_char(detected_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') "
                         "FROM reorgs WHERE depth > 0 ORDER BY id DESC LIMIT 1"));
  ReorgSummary out;
  if (r.rows() == 0) return out;
  GAPLESS_ASSIGN_OR_RETURN(int64_t count, r.GetInt64(0, 0));
  GAPLESS_ASSIGN_OR_RETURN(int64_t fork, r.GetInt64(0, 1));
  GAPLESS_ASSIGN_OR_RETURN(int64_t depth, r.GetInt64(0, 2));
  out.count = static_cast<uint64_t>(count);
  out.fork_point = static_cast<uint64_t>(fork);
  out.depth = static_cast<uint64_t>(depth);
  out.detected_at = std::string(r.Get(0, 3));
  return out;
}

}  // namespace gapless
