// HeadTracker: the leader's head source (coord/elector.h HeadSource) over JSON-RPC: the headers
// (height, hash, parent hash) of the blocks after the head log's tip, up to the bound — `to` for a
// fixed range (once the chain has it), else the block of `tag` minus `confirmations`. Each call is
// also the leader's health check: it fails, and so the lease is not renewed, when the RPC node or
// PostgreSQL cannot be reached (heartbeat through work, seed 001 §8.1).
//
// Where the log starts: a new (empty) log starts at max(from, bound - window + 1), so a backfill of
// old history does not walk millions of headers through the lock nodes; blocks below the log's
// start are not checked against it. Entries must chain (each parent hash is the previous hash).
//
// Re-orgs (issue 10): every call first asks the node for its block at the log's tip (or at the
// bound, when the chain is now shorter than the log) and compares the hash with the log's. A
// difference, or a first new header whose parent is not the tip, is a re-org: the tracker walks
// down from there, comparing the node's headers with the log's committed entries (read from the
// lock nodes through `set_election`), to the fork point, the highest height where they agree, and
// returns it (HeadUpdate::fork) with the new fork's headers above it; the elector truncates the log
// there (coord/elector.h) and the leader's duties roll PostgreSQL back (node/leader.h). A fork
// point more than max_reorg_depth below the log's tip is FailedPrecondition with reason
// kReorgTooDeepReason (store/rollback.h), naming the heights and the flag: nothing is truncated,
// the lease is not renewed, and `run`/`leader` stop on it rather than rewriting deep history.
//
// HeadLogCheck: what a worker does with the log: every fetched block whose height has a
// committed entry must carry that entry's hash; a block that differs (a load-balanced RPC backend
// that disagrees with the one the leader read) is InvalidData with reason kHeadLogMismatchReason,
// retried and never committed.
//
// Thread-safety: HeadTracker is called from the elector's thread only; it owns its RPC client and
// PostgreSQL connection. HeadLogCheck is thread-safe (Election is).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "coord/election.h"
#include "coord/elector.h"
#include "core/model.h"
#include "core/status.h"
#include "rpc/json_rpc.h"
#include "store/pg.h"

namespace gapless {

inline constexpr char kHeadLogMismatchReason[] = "head-log-mismatch";

struct HeadTrackerOptions {
  uint64_t from = 0;
  std::optional<uint64_t> to;  // fixed range end; or follow `tag`
  std::string tag = "latest";
  uint64_t confirmations = 0;
  uint64_t window = 4'096;        // the head log's window (where an empty log starts)
  uint64_t max_reorg_depth = 64;  // --max-reorg-depth: blocks below the log's tip a fork may be
};

class HeadTracker : public HeadSource {
 public:
  // `pg_url` may be empty (no database health check). The client should fail fast (a short
  // timeout, few attempts): the lease waits on it.
  HeadTracker(std::unique_ptr<JsonRpcClient> rpc, std::string pg_url, HeadTrackerOptions options);

  // The head log's view for the fork-point walk (borrowed; without one a re-org is reported as
  // Unavailable and never written).
  void set_election(const Election* election) { election_ = election; }

  Result<HeadUpdate> Next(const std::optional<HeadEntry>& tip, size_t max) override;

 private:
  Result<uint64_t> Bound();
  Status CheckDatabase();
  // The fork point at or below `top` (the log's entry there), walking down at most
  // max_reorg_depth heights below `tip_height`.
  Result<HeadEntry> FindForkPoint(uint64_t tip_height, uint64_t top);

  std::unique_ptr<JsonRpcClient> rpc_;
  const Election* election_ = nullptr;
  std::string pg_url_;
  std::unique_ptr<PgConn> pg_;
  HeadTrackerOptions options_;
};

// Fetches headers [first, last] with one eth_getBlockByNumber(n, false) batch.
Result<std::vector<HeadEntry>> FetchHeaders(JsonRpcClient& rpc, uint64_t first, uint64_t last);

// InvalidData (reason kHeadLogMismatchReason) naming the first block whose hash differs from the
// head log's committed entry at its height, and *wrong (nullable) set to its index in `blocks`;
// Ok when all agree or have no entry. Unavailable when the lock nodes cannot be read on a quorum.
Status HeadLogCheck(const Election& election, std::span<const BlockData> blocks,
                    size_t* wrong = nullptr);

}  // namespace gapless
