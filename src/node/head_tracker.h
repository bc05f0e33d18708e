// HeadTracker: the leader's head source (coord/elector.h HeadSource) over JSON-RPC: the headers
// (height, hash, parent hash) of the blocks after the head log's tip, up to the bound — `to` for a
// fixed range (once the chain has it), else the block of `tag` minus `confirmations`. Each call is
// also the leader's health check: it fails, and so the lease is not renewed, when the RPC node or
// PostgreSQL cannot be reached (heartbeat through work, seed 001 §8.1).
//
// Where the log starts: a new (empty) log starts at max(from, bound - window + 1), so a backfill of
// old history does not walk millions of headers through the lock nodes; blocks below the log's
// start are not checked against it. Entries must chain (each parent hash is the previous hash,
// and the first one's is the tip's): a break is a re-org, reported as InvalidData naming the
// height and never written (re-org handling is the leader's next capability).
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
  uint64_t window = 4'096;  // the head log's window (where an empty log starts)
};

class HeadTracker : public HeadSource {
 public:
  // `pg_url` may be empty (no database health check). The client should fail fast (a short
  // timeout, few attempts): the lease waits on it.
  HeadTracker(std::unique_ptr<JsonRpcClient> rpc, std::string pg_url, HeadTrackerOptions options);

  Result<std::vector<HeadEntry>> Next(const std::optional<HeadEntry>& tip, size_t max) override;

 private:
  Result<uint64_t> Bound();
  Status CheckDatabase();

  std::unique_ptr<JsonRpcClient> rpc_;
  std::string pg_url_;
  std::unique_ptr<PgConn> pg_;
  HeadTrackerOptions options_;
};

// Fetches headers [first, last] with one eth_getBlockByNumber(n, false) batch.
Result<std::vector<HeadEntry>> FetchHeaders(JsonRpcClient& rpc, uint64_t first, uint64_t last);

// InvalidData (reason kHeadLogMismatchReason) naming the first block whose hash differs from the
// head log's committed entry at its height; Ok when all agree or have no entry. Unavailable when
// the lock nodes cannot be read on a quorum.
Status HeadLogCheck(const Election& election, const std::vector<BlockData>& blocks);

}  // namespace gapless
