#include "node/index_builder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "node/node_metrics.h"
#include "store/notify.h"
#include "store/partition_indexes.h"
#include "store/partitions.h"

namespace gapless {

IndexBuilder::IndexBuilder(std::string db_url, PgConnectOptions connect,
                           IndexBuilderOptions options, LeaderLease* lease,
                           std::function<uint64_t()> frontier)
    : db_url_(std::move(db_url)),
      connect_(std::move(connect)),
      options_(options),
      lease_(lease),
      frontier_(std::move(frontier)) {}

IndexBuilder::~IndexBuilder() = default;

Status IndexBuilder::EnsureConnected() {
  if (conn_ != nullptr) return Status::Ok();
  GAPLESS_ASSIGN_OR_RETURN(conn_, PgConn::Connect(db_url_, connect_));
  return Status::Ok();
}

void IndexBuilder::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (canceller_ != nullptr) canceller_->Cancel();
}

Status IndexBuilder::Step(uint64_t) { return Check(/*build=*/true); }

// A standby builds nothing but still knows when a fixed range is done (the leader's builds
// included), so it ends with the leader.
Status IndexBuilder::Standby() { return Check(/*build=*/false); }

Status IndexBuilder::Check(bool build) {
  GAPLESS_RETURN_IF_ERROR(EnsureConnected());
  // Which partitions are due decides only when an index is built, never what it holds: a build
  // indexes every row committed before it and maintains those written after.
  const uint64_t frontier = frontier_();
  uint64_t target = UINT64_MAX;
  if (options_.to.has_value()) {
    target = *options_.to;
  } else if (std::optional<uint64_t> head = lease_->CommittedHeight(); head.has_value()) {
    target = *head;
  }
  GAPLESS_ASSIGN_OR_RETURN(std::vector<PartitionIndexState> missing,
                           PartitionsMissingIndexes(*conn_));
  std::vector<uint64_t> due;
  if (!missing.empty()) {
    if (partition_blocks_ == 0) {
      GAPLESS_ASSIGN_OR_RETURN(PartitionLayout layout, LoadPartitionLayout(*conn_));
      partition_blocks_ = layout.blocks;
    }
    for (const PartitionIndexState& p : missing) {
      if (PartitionIndexesDue(p.start, partition_blocks_, frontier, target, options_.near_head)) {
        due.push_back(p.start);
      }
    }
  }
  pending_ = due.size();
  SetPartitionsAwaitingIndexes(due.size());
  if (due.empty()) {
    done_ = options_.to.has_value() && frontier > *options_.to;
    return Status::Ok();
  }
  if (!build) return Status::Ok();
  // The newest first: the partition live indexing writes into is the one queries need soonest.
  std::sort(due.rbegin(), due.rend());
  for (uint64_t start : due) {
    // A deposed leader stops after the build in hand (a second builder would only skip it).
    if (stopping_.load() || !lease_->Token().has_value()) break;
    // A round trip first: a session the server ended since the last statement is reconnected by
    // it (store/pg.h), so the canceller addresses the session the build runs in.
    GAPLESS_RETURN_IF_ERROR(conn_->Exec("SELECT 1"));
    {
      std::lock_guard<std::mutex> lock(mu_);
      canceller_ = conn_->MakeCanceller();
    }
    const auto began = std::chrono::steady_clock::now();
    Result<bool> built = BuildPartitionIndexes(*conn_, start);
    {
      std::lock_guard<std::mutex> lock(mu_);
      canceller_.reset();
    }
    GAPLESS_RETURN_IF_ERROR(built.status().WithContext(
        "building the indexes of the partitions of block " + std::to_string(start)));
    if (*built) {
      pending_ = pending_.load() - 1;
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      SetPartitionsAwaitingIndexes(pending_.load());
      CountPartitionIndexBuild(seconds);
      spdlog::info("indexes: the partitions of block {} are indexed ({:.2f} s; {} more due)", start,
                   seconds, pending_.load());
    }
  }
  // Everything due built, and a fixed range committed whole: nothing can become due any more.
  done_ = pending_.load() == 0 && options_.to.has_value() && frontier > *options_.to;
  return Status::Ok();
}

Status IndexBuilder::Run(const std::atomic<bool>& stop) {
  DutyHost host(lease_, options_.tick_ms, "indexes");
  host.Add(this);
  // A step as soon as the frontier moves (a partition may have finished), not a tick later.
  Result<std::unique_ptr<PgWaker>> waker =
      PgWaker::Open(db_url_, {std::string(kFrontierChannel)}, connect_);
  if (waker.ok()) host.set_waker(waker->get());
  std::atomic<bool> over{false};
  std::thread watch([&] {
    // Again and again: a step may begin a build just after the stop was set.
    while (!over.load()) {
      if (stop.load()) {
        stopping_ = true;
        Cancel();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  Status st = host.Run(stop);
  over = true;
  watch.join();
  // A build cancelled by the stop is not an error: a later step or run does it again.
  if (stop.load() && !st.ok()) {
    spdlog::info("indexes: stopped: {}", st.ToString());
    return Status::Ok();
  }
  return st;
}

}  // namespace gapless
