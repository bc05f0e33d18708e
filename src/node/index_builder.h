// IndexBuilder: the leader's duty that builds each partition's secondary indexes when it is due
// (store/partition_indexes.h; docs/schema.md "Indexes during a backfill").
//
// It runs on a thread of its own (Run), not on the leader's duty thread: a build takes minutes on
// a large partition, and the seeder, janitor and frontier must not wait for it. It acts only while
// the lease says this process leads (so a fleet builds each index once, in the leader), but the
// correctness of a build does not depend on that: builders serialise per partition on an advisory
// lock in PostgreSQL, and a build cut short is dropped and redone.
//
// Each step: the partitions that lack an index, the due ones among them (the job's frontier and
// target: a fixed `to`, or the head log's committed height when following; unknown: only finished
// partitions are due), built one after another, the highest first (the partition live indexing
// writes into is the one queries need soonest). A fixed range is done() when its frontier has
// passed `to` and no due partition lacks an index, so `index` and a fleet on a fixed range end
// with every partition they wrote indexed.
//
// Thread-safety: Run on one thread; done() and pending() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/status.h"
#include "node/duties.h"
#include "store/pg.h"

namespace gapless {

struct IndexBuilderOptions {
  // --index-near-head: a partition is indexed at once (not when finished) while the job's
  // frontier is within this many blocks of its target. UINT64_MAX: every partition at once.
  uint64_t near_head = 10'000;
  std::optional<uint64_t> to;  // a fixed range's last block; nullopt when following
  int64_t tick_ms = 2'000;
};

class IndexBuilder : public Duty {
 public:
  // `frontier` answers the job's frontier (the first block not committed); `lease` is borrowed.
  IndexBuilder(std::string db_url, PgConnectOptions connect, IndexBuilderOptions options,
               LeaderLease* lease, std::function<uint64_t()> frontier);
  ~IndexBuilder() override;

  const char* name() const override { return "indexes"; }
  Status Step(uint64_t epoch) override;
  Status Standby() override;
  bool done() const override { return done_.load(); }

  // Ticks until `stop` or done(); a build in flight when `stop` is set is cancelled (its invalid
  // index is dropped and built again by a later step or run).
  Status Run(const std::atomic<bool>& stop);

  // Partitions with a missing index that are due, as of the last step.
  uint64_t pending() const { return pending_.load(); }

 private:
  Status EnsureConnected();
  // A step: the due partitions found, one of them built when `build`.
  Status Check(bool build);
  void Cancel();

  std::string db_url_;
  PgConnectOptions connect_;
  IndexBuilderOptions options_;
  LeaderLease* lease_;
  std::function<uint64_t()> frontier_;
  std::unique_ptr<PgConn> conn_;
  uint64_t partition_blocks_ = 0;  // read once: the layout never changes under partitions
  std::atomic<bool> done_{false};
  std::atomic<bool> stopping_{false};  // Run's stop seen: no further build begins
  std::atomic<uint64_t> pending_{0};
  std::mutex mu_;  // guards canceller_
  std::unique_ptr<PgCanceller> canceller_;
};

}  // namespace gapless
