#include "node/duties.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "coord/queue.h"
#include "node/node_metrics.h"
#include "store/outbox.h"
#include "store/queries.h"
#include "store/state.h"

namespace gapless {
namespace {

constexpr int64_t kSliceMicros = 20'000;
constexpr int64_t kWakerSliceMs = 100;
constexpr int64_t kCoalesceMicros = 5'000;

}  // namespace

std::optional<uint64_t> ElectorLease::CommittedHeight() const {
  auto tip = elector_->committed_tip();
  if (!tip.has_value()) return std::nullopt;
  return tip->height;
}

std::optional<HeadFork> ElectorLease::ForksSince(uint64_t after) const {
  std::optional<HeadFork> applied = elector_->ForksSince(after);
  // Truncations this process did not write itself (a predecessor's, read at promotion): only the
  // newest is known, with its point.
  HeadFork current = elector_->fork();
  if (current.generation <= after) return applied;
  if (!applied.has_value()) return current;
  if (current.generation > applied->generation) {
    applied->generation = current.generation;
    applied->point = std::min(applied->point, current.point);
  }
  return applied;
}

Result<std::map<uint64_t, HeadEntry>> ElectorLease::HeadEntries(uint64_t from, uint64_t to) const {
  if (election_ == nullptr) return std::map<uint64_t, HeadEntry>{};
  return election_->Committed(from, to);
}

Status ElectorLease::Fatal() const {
  Status st = elector_->source_error();
  if (st.code() == Code::kFailedPrecondition) return st;
  return Status::Ok();
}

DutyHost::DutyHost(LeaderLease* lease, int64_t tick_ms, std::string name, Env* env)
    : lease_(lease), tick_ms_(tick_ms), name_(std::move(name)), env_(env) {}

Status DutyHost::Tick() {
  std::optional<uint64_t> epoch = lease_->Token();
  for (Duty* duty : duties_) {
    Status st = epoch.has_value() ? duty->Step(*epoch) : duty->Standby();
    if (st.ok()) continue;
    if (st.code() == Code::kFailedPrecondition || st.code() == Code::kDataLoss) return st;
    if (IsStaleLeaderEpoch(st) || st.reason() == kStaleRelayEpochReason) {
      // A newer leader has acted: our lease is gone too (or about to be); stand by.
      spdlog::warn("{}: {} deposed: {}", name_, duty->name(), st.message());
      Status standby = duty->Standby();
      if (!standby.ok()) spdlog::warn("{}: {}: {}", name_, duty->name(), standby.ToString());
      continue;
    }
    spdlog::warn("{}: {} failed: {}", name_, duty->name(), st.ToString());
  }
  return Status::Ok();
}

Status DutyHost::Run(const std::atomic<bool>& stop) {
  auto all_done = [&] {
    return !duties_.empty() &&
           std::all_of(duties_.begin(), duties_.end(), [](const Duty* d) { return d->done(); });
  };
  while (!stop.load()) {
    GAPLESS_RETURN_IF_ERROR(Tick());
    if (all_done()) break;
    if (waker_ != nullptr) {
      // Woken early by a notification; in slices, so that a stop is seen within one.
      for (int64_t left = tick_ms_; left > 0 && !stop.load(); left -= kWakerSliceMs) {
        if (waker_->Wait(std::min(left, kWakerSliceMs))) {
          // Let a burst of commits coalesce into one step.
          env_->SleepMicros(kCoalesceMicros);
          break;
        }
      }
      continue;
    }
    for (int64_t left = tick_ms_ * 1000; left > 0 && !stop.load(); left -= kSliceMicros) {
      env_->SleepMicros(std::min(left, kSliceMicros));
    }
  }
  return Status::Ok();
}

Status FrontierDuty::Step(uint64_t) {
  auto conn = pool_->Acquire();
  // From this job's frontier on: below it every block is committed already, and reading the rows
  // from `from_` each step would cost more with every part written (DESIGN: bookkeeping stays
  // bounded).
  const uint64_t at = std::max(from_, frontier_.load());
  if (at > to_) return Status::Ok();
  GAPLESS_ASSIGN_OR_RETURN(auto committed, CommittedRanges(*conn, at, to_));
  uint64_t prefix = at;
  if (!committed.empty() && committed.front().first == at) prefix = committed.front().second + 1;
  if (prefix <= at) return Status::Ok();
  // The database's frontier may stay lower than this job's (a hole below `from_`: it never
  // passes a missing block); this duty is done with its own range's committed prefix.
  GAPLESS_RETURN_IF_ERROR(PersistFrontier(*conn, from_, prefix).status());
  frontier_ = prefix;
  SetFrontierMetric(prefix);
  return Status::Ok();
}

}  // namespace gapless
