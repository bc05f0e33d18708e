// Elector: the HA leader's state machine over an Election (seed 001 §4.2), on a thread of its own
// so that nothing else a process does (seeding, the janitor, PostgreSQL, a slow RPC call of a
// worker) can delay a lease renewal.
//
//   FOLLOWER --lock free on a quorum--> PROMOTING --quorum promote + token persisted + repair-->
//   LEADER
//       ^                                   |                                                    |
//       +------- promotion failed ----------+<------- lease lost / deposed / stopped ------------+
//
// FOLLOWER keeps its HeadLogReader current (per-node cursors) and watches the lock: keyspace
// notifications of each node (expired / del events; checked at start, polling alone when a node
// has them off) wake it at once, and it polls every poll_ms + jitter, or at the lock's remaining
// PTTL if that comes first. PROMOTING runs Election::Promote; on a quorum it persists the token
// (Election::Renew on a quorum, before the token is used anywhere else), re-proposes the sub-quorum
// entries of the head log (repair: the highest-epoch entry of each height), and leads. A failed
// step releases what it took and goes back to FOLLOWER.
//
// LEADER: heartbeat through work. Every heartbeat_ms it asks the HeadSource for the entries after
// the log's committed tip and writes them with write-head, which renews the lease on every node
// that accepts (and retakes a free lock where no newer promotion came through); an idle chain
// re-writes the tip. A re-org's truncation that fell short of a quorum is written again, from the
// same fork point and generation, before the source is asked for a fork again (it may have
// landed unseen, and the log above the point would then mislead the search). After each write it
// repairs what sits below a quorum (a node back empty). A source that fails (RPC or PostgreSQL
// down) means no write and no renewal: the lease runs out and another candidate takes over. The lease's validity ends at (start of the last successful quorum
// write) + TTL - drift; past it, or when a node reports a newer leader, the elector steps down.
// LeaderToken() is how the rest of the process (node/leader.h's duties) asks "may I act as leader
// now, and with which epoch?".
//
// Stop() is the graceful stepdown: no more writes, release on every node (bounded by the node
// timeout), so a follower takes over without waiting for the TTL.
//
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "coord/election.h"
#include "core/env.h"
#include "core/status.h"

namespace gapless {

// What the head source gives the leader to write.
struct HeadUpdate {
  // A re-org: the chain no longer holds the log's tip. `fork` is the entry at the fork point (the
  // highest height where the log and the chain agree); the log is truncated above it (a new fork
  // generation, election.h HeadFork) and `entries` continue from fork->height + 1.
  std::optional<HeadEntry> fork;
  std::vector<HeadEntry> entries;
};

// Where the leader's head entries come from (node/ implements it over JSON-RPC and PostgreSQL).
class HeadSource {
 public:
  virtual ~HeadSource() = default;
  // The entries to append after `tip` (the head log's committed tip; nullopt while the log is
  // empty): heights ascending from tip->height + 1 (or from the fork point + 1 after a re-org),
  // at most `max`. Empty when there is nothing new (the leader then re-writes the tip to renew its
  // lease). An error when the chain or the database cannot be reached: no write, so no renewal.
  virtual Result<HeadUpdate> Next(const std::optional<HeadEntry>& tip, size_t max) = 0;
};

enum class Role { kFollower, kPromoting, kLeader };
const char* RoleName(Role role);

struct ElectorOptions {
  int64_t poll_ms = 500;         // follower's fallback poll
  int64_t poll_jitter_ms = 200;  // + uniform [0, jitter)
  int64_t retry_delay_ms = 200;  // after a failed promotion, + uniform [0, jitter / 2)
  int64_t heartbeat_ms = 0;      // leader's write cadence; 0 = TTL / 3
  size_t max_entries_per_write = 256;
  bool subscribe = true;  // keyspace notifications (polling alone when false)
  // A follower looks again when the lock's remaining TTL (PTTL) runs out, if that comes before
  // its next poll. Off: the seed's polling alone (the failover benchmark's baseline).
  bool wake_at_lock_expiry = true;
  // A follower that cannot reach a quorum of the lock nodes this long says so at warning level
  // (and again every 30 s while it lasts; info when the quorum answers again).
  int64_t quorum_warning_after_ms = 10'000;
  std::string name;    // for logs
  Env* env = nullptr;  // randomness for jitter; nullptr = Env::Default()
};

class Elector {
 public:
  // `election` and `source` are borrowed and must outlive the elector.
  Elector(const Election* election, HeadSource* source, ElectorOptions options = {});
  ~Elector();  // Stop()
  Elector(const Elector&) = delete;
  Elector& operator=(const Elector&) = delete;

  // Starts the state machine's thread (and the notification subscribers). Idempotent.
  void Start();
  // Graceful stepdown and stop: a leader stops writing and releases its lock on every node.
  // Returns after the release (at most about the node timeout). Idempotent. With release false
  // the lock is left to expire, as if the process had died (tests of a crashed leader).
  void Stop(bool release = true);

  Role role() const;
  // The epoch while this process leads and its lease is valid; nullopt otherwise.
  std::optional<uint64_t> LeaderToken() const;
  // The head log's committed tip as this process last saw it.
  std::optional<HeadEntry> committed_tip() const;
  // The head log's re-org generation as this process last wrote or read it.
  HeadFork fork() const;
  // The lowest fork point among the re-orgs this process applied to the log above generation
  // `after` (nullopt: none): what the leader's duties must roll back to catch up with the log.
  std::optional<HeadFork> ForksSince(uint64_t after) const;
  // The error the head source last returned (Ok after a successful write): a FailedPrecondition
  // here (a re-org deeper than the bound) is for the process to stop on.
  Status source_error() const;

  struct Stats {
    uint64_t terms = 0;          // times it became leader
    uint64_t repaired = 0;       // sub-quorum entries re-proposed
    uint64_t notifications = 0;  // keyspace events received
  };
  Stats stats() const;

  // Called on the elector's thread after each successful head-log write, with the tip written.
  // Set before Start().
  void set_on_write(std::function<void(uint64_t token, const HeadEntry& tip)> f) {
    on_write_ = std::move(f);
  }

 private:
  void Loop();
  void Follow();
  void TryPromote();
  void Lead();
  // Re-proposes the head log's sub-quorum entries (the highest epoch of each height) under token.
  Status Repair(uint64_t token);
  // Takes `fork` as the log's generation (written or read), remembers it for ForksSince, and
  // forgets a tip above its point. mu_ held.
  void AdoptFork(const HeadFork& fork);
  // asked: the process stops (Stop), logged at info; otherwise a warning.
  void StepDown(const std::string& why, bool release, bool asked = false);
  void SetRole(Role role, uint64_t token);
  // Follow(): warns when fewer than a quorum of lock nodes answered for a while (options).
  void NoteQuorum(size_t answered);
  // Sleeps up to `ms`, or until woken (a notification, Stop()).
  void Wait(int64_t ms);
  void Wake();
  void Subscribe(size_t node);

  const Election* election_;
  HeadSource* source_;
  ElectorOptions options_;
  Env* env_;
  HeadLogReader reader_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
  std::atomic<bool> stop_{false};
  bool release_on_stop_ = true;
  bool started_ = false;
  Role role_ = Role::kFollower;
  uint64_t token_ = 0;
  int64_t valid_until_ = 0;  // steady micros
  std::optional<HeadEntry> tip_;
  HeadFork fork_;
  // A re-org's truncation written short of a quorum (it may have landed unseen): the next write
  // finishes it, from its fork point with its generation, before looking for a fork again.
  struct PendingFork {
    HeadFork fork;
    HeadEntry at;  // the entry at fork.point
  };
  std::optional<PendingFork> pending_fork_;
  std::vector<HeadFork> forks_applied_;  // re-orgs written or adopted here, oldest first
  Status source_error_;
  Stats stats_;
  // Follow(): since when fewer than a quorum of lock nodes answer (0: they do), and when that was
  // last said at warning level (0: not yet). The elector's thread only.
  int64_t quorum_lost_since_ = 0;
  int64_t quorum_warned_at_ = 0;
  std::function<void(uint64_t, const HeadEntry&)> on_write_;
  std::thread thread_;
  std::vector<std::thread> subscribers_;
};

}  // namespace gapless
