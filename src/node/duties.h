// Duties: what the leader does while it leads — seeding, the janitor, the frontier, and later the
// event relay — run on one thread by a DutyHost under a LeaderLease (below), asked before
// every step, with the lease's epoch. The same host serves both modes, so a new duty is written
// once:
//  - the fleet (`run`, `leader`): an ElectorLease (the HA leader), duty Leader (seeder, janitor,
//    frontier through the coordination Redis);
//  - `index` (no Redis): a LocalLease, always held, duty FrontierDuty (the committed prefix of the
//    range persisted in PostgreSQL, which the fleet's leader persists too).
//
// Errors of a step: FailedPrecondition and DataLoss stop the host (a human must act, or an
// invariant broke); a deposed leader's epoch (IsStaleLeaderEpoch) puts the duty on standby until
// the lease says otherwise; anything else is logged and the step is tried again at the next tick.
//
// Thread-safety: a DutyHost and its duties run on the thread that calls Run. Duties may expose
// atomics (done()) to other threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coord/elector.h"
#include "core/env.h"
#include "core/status.h"
#include "store/notify.h"
#include "store/pg.h"

namespace gapless {

// "May this process act as leader now, and with which epoch?" Asked before every duty step.
class LeaderLease {
 public:
  virtual ~LeaderLease() = default;
  // The epoch while leading (>= 1), nullopt otherwise.
  virtual std::optional<uint64_t> Token() const = 0;
  // True when seeding must stop at the head log's committed height (CommittedHeight(); nullopt
  // there = nothing committed yet, seed nothing).
  virtual bool has_head_log() const = 0;
  virtual std::optional<uint64_t> CommittedHeight() const = 0;
  // Re-orgs (with a head log): the head log's truncations above fork generation `after`, as the
  // newest generation with the lowest fork point among them (nullopt: none).
  virtual std::optional<HeadFork> ForksSince(uint64_t after) const {
    (void)after;
    return std::nullopt;
  }
  // The head log's committed entries at heights [from, to] (only with a head log).
  virtual Result<std::map<uint64_t, HeadEntry>> HeadEntries(uint64_t from, uint64_t to) const {
    (void)from;
    (void)to;
    return std::map<uint64_t, HeadEntry>{};
  }
  // A condition the process must stop on (a re-org deeper than --max-reorg-depth); Ok otherwise.
  virtual Status Fatal() const { return Status::Ok(); }
};

// The HA leader's lease (the elector is borrowed).
// `election` (the elector's) answers HeadEntries; nullptr: none known.
class ElectorLease : public LeaderLease {
 public:
  explicit ElectorLease(const Elector* elector, const Election* election = nullptr)
      : elector_(elector), election_(election) {}
  std::optional<uint64_t> Token() const override { return elector_->LeaderToken(); }
  bool has_head_log() const override { return true; }
  std::optional<uint64_t> CommittedHeight() const override;
  std::optional<HeadFork> ForksSince(uint64_t after) const override;
  Result<std::map<uint64_t, HeadEntry>> HeadEntries(uint64_t from, uint64_t to) const override;
  Status Fatal() const override;

 private:
  const Elector* elector_;
  const Election* election_;
};

// A lease that is always held, for a process that is alone by construction (`index`).
class LocalLease : public LeaderLease {
 public:
  std::optional<uint64_t> Token() const override { return 1; }
  bool has_head_log() const override { return false; }
  std::optional<uint64_t> CommittedHeight() const override { return std::nullopt; }
};

class Duty {
 public:
  virtual ~Duty() = default;
  virtual const char* name() const = 0;
  // One step while leading with `epoch` (a new epoch means a new term).
  virtual Status Step(uint64_t epoch) = 0;
  // One tick while not leading (or deposed).
  virtual Status Standby() { return Status::Ok(); }
  // Nothing left to do (a fixed range is complete): the host ends when every duty is done.
  virtual bool done() const { return false; }
};

class DutyHost {
 public:
  // `lease` and the duties are borrowed and must outlive the host.
  DutyHost(LeaderLease* lease, int64_t tick_ms, std::string name, Env* env = Env::Default());
  const std::string& name() const { return name_; }
  void Add(Duty* duty) { duties_.push_back(duty); }
  // Between ticks, wait with `waker` (store/notify.h: a NOTIFY ends the wait early, so the next
  // tick comes at once) instead of sleeping. Borrowed; nullptr: sleep.
  void set_waker(PgWaker* waker) { waker_ = waker; }

  // Ticks every tick_ms until `stop`, or until every duty is done. Returns the error that
  // stopped it (see the file comment) or Ok.
  Status Run(const std::atomic<bool>& stop);
  // One tick of every duty (exposed for the final step of a finished run).
  Status Tick();

 private:
  LeaderLease* lease_;
  int64_t tick_ms_;
  std::string name_;
  Env* env_;
  std::vector<Duty*> duties_;
  PgWaker* waker_ = nullptr;
};

// `index`'s duty: persists the committed prefix of [from, to] (indexed_ranges) as the frontier in
// PostgreSQL, like the fleet's leader does, so status, and the relay that publishes only up to the
// frontier, see one thing in both modes. The database's frontier never passes a missing block
// (store/state.h), so it can stay below a job that starts above a hole; frontier() is this job's
// own: the committed prefix of [from, to].
class FrontierDuty : public Duty {
 public:
  // `pool` is borrowed.
  FrontierDuty(PgPool* pool, uint64_t from, uint64_t to) : pool_(pool), from_(from), to_(to) {}
  const char* name() const override { return "frontier"; }
  Status Step(uint64_t epoch) override;
  bool done() const override { return frontier_.load() > to_; }
  uint64_t frontier() const { return frontier_.load(); }

 private:
  PgPool* pool_;
  uint64_t from_, to_;
  std::atomic<uint64_t> frontier_{0};
};

}  // namespace gapless
