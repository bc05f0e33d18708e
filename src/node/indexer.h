// Indexer: the single-process data path. Fetches a block interval from a JSON-RPC node, decodes
// it and commits it to PostgreSQL range by range, with no gap and no duplicate.
//
// The interval is cut into aligned ranges (node/ranges.h); ranges already recorded as committed
// in PostgreSQL are skipped, so a killed run restarted with the same arguments continues where
// it stopped. `fetch_workers` threads each take the next range, fetch it in batches of
// `blocks_per_request` blocks (one JSON-RPC batch round trip each; so at most `fetch_workers`
// requests are in flight), decode it, and commit the whole range in one transaction through a
// pooled connection (or, under a memory budget smaller than a range needs, in parts of it, in
// order, each part committed whole: node/memory_budget.h). A failed fetch or write is retried with
// exponential backoff and jitter when the error is retriable; after `max_attempts` the run stops
// with the error, which names the block and field and keeps its code and reason(). A range is
// committed whole or not at all, so a stop or a crash never leaves a partial block behind.
//
// Datasets (store/datasets.h): a range counts as committed only when it is recorded with every
// dataset the run asks for (IndexerOptions::datasets). A committed range that lacks one (indexed
// before without --traces) is planned again, and its write replaces its rows with ones holding
// the dataset (a backfill, store/writer.h "Datasets").
//
// Run() blocks; Stop() may be called from any thread (e.g. a signal watcher).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/env.h"
#include "core/model.h"
#include "core/status.h"
#include "node/memory_budget.h"
#include "node/progress.h"
#include "node/range_job.h"
#include "node/ranges.h"
#include "rpc/json_rpc.h"
#include "store/pg.h"
#include "store/writer.h"

namespace gapless {

struct IndexerOptions {
  uint64_t from = 0;
  uint64_t to = 0;
  uint64_t range_size = 50;
  uint32_t blocks_per_request = 10;
  uint32_t fetch_workers = 4;
  int max_attempts = 5;
  int64_t retry_base_micros = 500'000;
  int64_t retry_cap_micros = 30'000'000;
  std::optional<uint64_t> chain_id;     // every transaction's chainId must match, when set
  std::optional<VerifyOptions> verify;  // --verify: each block proven against its header
  bool token_metadata = true;           // --token-metadata (node/enrich.h)
  // --contracts: decoded into their tables in each range's write (store/decoded.h). Not owned.
  const ContractTables* contracts = nullptr;
  // --data events: only the logs matching this filter and their blocks (FetchEventsRange), in
  // sparse writes, with --verify-complete proven complete; nullopt: every block whole.
  std::optional<EventsFetch> events_filter;
  // What the run asks for besides the blocks (traces with --traces, token_metadata with
  // --token-metadata): Plan() plans again the committed ranges that lack one.
  Datasets datasets;
  WriteMode write_mode = WriteMode::kStagingUpsert;
  CopyFormat copy_format = CopyFormat::kBinary;  // --copy-format (store/copy_rows.h)
  // --memory-budget for the process, bytes; 0: none. A range larger than a fetch thread's share
  // is fetched and committed in parts (node/memory_budget.h).
  uint64_t memory_budget_bytes = 0;
  Env* env = Env::Default();
};

class Indexer {
 public:
  Indexer(IndexerOptions options, RpcClientFactory rpc_factory, PgPool* pool);

  // Works out which ranges are still to do. Call before Run(); returns the number of blocks.
  Result<uint64_t> Plan();
  // Indexes the planned ranges. Returns OK when all are committed, the first fatal error
  // otherwise, or Interrupted() (node/range_job.h) after Stop().
  Status Run();
  void Stop();

  const IndexCounters& counters() const { return counters_; }
  const std::vector<BlockRange>& planned() const { return ranges_; }
  // The planned blocks that are committed already, without a dataset the run asks for.
  uint64_t planned_backfill() const { return backfill_blocks_; }

 private:
  void WorkerLoop();
  Status WriteRangeWithRetries(const RangeWrite& write);
  // A committed range that lacks only the contracts config's tables (full mode) is decoded from
  // its stored logs instead of fetched (store/decoded.h "Decoding stored logs"): *decoded then.
  Status DecodeStored(const BlockRange& range, bool* decoded);
  // Runs op until it succeeds, fails with a non-retriable error, runs out of attempts, or the
  // indexer is stopped. `what` names the unit of work in log lines.
  Status WithRetries(const std::string& what, const std::function<Status()>& op);
  void Fail(const Status& status);

  IndexerOptions options_;
  RpcClientFactory rpc_factory_;
  PgPool* pool_;
  std::vector<BlockRange> ranges_;
  uint64_t backfill_blocks_ = 0;
  std::atomic<size_t> next_range_{0};
  std::unique_ptr<MemoryBudget> budget_;  // made by Run for its threads
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  Status first_error_;
  IndexCounters counters_;
};

}  // namespace gapless
