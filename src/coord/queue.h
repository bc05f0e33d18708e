// Queue: the leased work queue of DESIGN.md "Coordination" (seed 002), on the coordination Redis.
//
// Tasks are block ranges "from-to". Each operation is one Lua script (src/coord/lua/queue_*.lua),
// so no crash between two commands can orphan or double a task:
//   Push      pending += tasks not already pending, processing, done or dead-lettered
//   Claim     pending head -> processing + lease {worker, token = INCR fence, expiry by TIME}
//   ClaimBatch  the same for up to n tasks at once, a lease and a token for each
//   Renew     extend the lease, owner only
//   Complete  owner only: drop from processing and lease, record the range in the frontier set
//   CompleteAndClaim  Complete then Claim in one script: one round trip per task instead of two
//   CompleteAndClaimBatch  the same for several tasks each way: one round trip per n tasks
//   Fail      owner only: attempts += 1; below max to the back of pending, at max to the DLQ
//   Janitor   requeue processing tasks whose lease is gone or expired; never a live one; the
//             max_expiries-th expiry of one task dead-letters it instead (a poison range)
//
// Ownership is (worker id, token). A refusal (the caller is no longer the owner: the janitor
// requeued the task and someone else claimed it) is Status Aborted: drop the unit of work. The
// fencing token also travels into PostgreSQL (DESIGN.md), which is what makes a stale worker's
// commit fail; these checks only keep Redis state consistent.
//
// Retries: Claim, Complete, CompleteAndClaim and Fail are not idempotent, so a transport failure
// during them returns Unavailable without resending (RedisConn). What that leaves behind is safe:
// a claim that ran but whose answer was lost is a lease nobody renews, which the janitor requeues
// after its TTL (counting one expiry of that task); a Complete whose answer was lost and that the
// caller retries is refused (Aborted) because the lease is gone, and the range is already in the
// completed set. CompleteAndClaim is both cases at once: after Unavailable the caller cannot tell
// whether it ran. If it did, the old task is completed and the new lease is one nobody renews
// (requeued by the janitor after ttl_ms, counting one expiry); if not, nothing changed. So the
// caller sends Complete for the old task (accepted if the first call did not run; refused if it
// did, or if the lease was lost meanwhile: drop the unit of work, as for any refusal) and then
// Claim. Re-sending CompleteAndClaim as is would be as safe (its completion refused, a second
// lease granted) but also leaves the first lease to the janitor.
//
// Batches (ClaimBatch, CompleteAndClaimBatch) are for short tasks, where the round trip is the
// task's largest cost (bench/coord_bench --batch): every task keeps its own lease and token, so
// completion, renewal, failure and the janitor treat each as if claimed alone. The worker claims
// one task at a time: a range task takes seconds, and a lease held in a batch behind it would
// wait for the ones before it while an idle worker could take it. A batch whose answer was lost
// (Unavailable) is n leases nobody renews: the janitor requeues each after its TTL.
//
// Scripts: queue_claim.lua, queue_complete.lua and queue_complete_claim.lua share their lease
// logic through queue_lib.lua, which LoadScript prepends to them (their "-- needs:" line; Redis
// scripts cannot include one another). Claim and ClaimBatch are one script (queue_claim.lua), as
// are CompleteAndClaim and CompleteAndClaimBatch (queue_complete_claim.lua).
//
// Thread-safety: a Queue uses one RedisConn and is not thread-safe; one per thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coord/keys.h"
#include "coord/redis.h"
#include "core/status.h"

namespace gapless {

// A block range task, inclusive bounds.
struct TaskRange {
  int64_t from = 0;
  int64_t to = 0;
  std::string id() const;  // "from-to"
  bool operator==(const TaskRange&) const = default;
};
// Parses "from-to" (decimal, from <= to). InvalidData otherwise.
Result<TaskRange> ParseTask(std::string_view id);
// Splits [from, to] into tasks of `size` blocks (the last may be shorter). size >= 1.
std::vector<TaskRange> SplitRange(int64_t from, int64_t to, int64_t size);

struct Lease {
  TaskRange task;
  int64_t token = 0;       // fencing token: higher than every earlier grant
  int64_t expires_ms = 0;  // Redis TIME milliseconds (for display; safety never uses it)
};

// A live lease as `gapless status` shows it.
struct LeaseInfo {
  TaskRange task;
  std::string worker;
  int64_t token = 0;
  int64_t expires_ms = 0;  // Redis TIME milliseconds
};

struct DeadLetter {
  TaskRange task;
  std::string error;
  int64_t attempts = 0;
  std::string worker;
  int64_t failed_at_ms = 0;  // Redis TIME milliseconds
};

enum class FailOutcome { kRequeued, kDeadLettered };
struct FailResult {
  FailOutcome outcome = FailOutcome::kRequeued;
  int64_t attempts = 0;  // failed attempts so far, this one included
};

// The most tasks ClaimBatch and CompleteAndClaimBatch take or complete in one call (the scripts'
// max_claim_batch, lua/queue_lib.lua).
inline constexpr int64_t kMaxClaimBatch = 1000;

// CompleteAndClaim's two answers, apart: the caller handles a refused completion (drop the old
// unit of work) independently of whether there is new work.
struct CompleteAndClaimResult {
  // Ok when the previous task was completed; Aborted, naming why (no lease any more, or the task
  // is leased to someone else), when the caller was no longer its owner.
  Status completed;
  // The new lease; nullopt when pending was empty (the completion counts all the same).
  std::optional<Lease> next;
};

// CompleteAndClaimBatch's answers: one verdict per task completed (as CompleteAndClaim's
// `completed`, in the order given), and the new leases (empty when pending was empty).
struct CompleteAndClaimBatchResult {
  std::vector<Status> completed;
  std::vector<Lease> next;
};

// Lease expiries after which the janitor dead-letters a task. Higher than the usual failure
// max_attempts (5): chaos tests and deploys kill workers on purpose, so an honest range may lose a
// few leases; a range that kills every worker that takes it loses them all.
inline constexpr int64_t kDefaultMaxLeaseExpiries = 10;

// One task the janitor took back from a lease that was gone or expired.
struct ExpiredTask {
  TaskRange task;
  FailOutcome outcome = FailOutcome::kRequeued;  // kDeadLettered at max_expiries
  int64_t expiries = 0;                          // expiries so far, this one included
  std::string worker;  // the last lease holder; empty when the lease was missing or corrupt
};

struct QueueDepths {
  int64_t pending = 0;
  int64_t processing = 0;
  int64_t dlq = 0;
};

// The first word of a leader-only script's refusal of a deposed leader (lua/leader_epoch_lib.lua):
// a newer leader has acted since. Queue::Push, Queue::Janitor and Frontier::Advance return it.
inline constexpr char kStaleLeaderEpochError[] = "STALE_LEADER_EPOCH";
bool IsStaleLeaderEpoch(const Status& status);

struct FenceFloorResult {
  int64_t counter = 0;   // the counter after the call
  bool floored = false;  // false: only_on_new_data_set found it floored on this data set already
};

class Queue {
 public:
  // `conn` must outlive the Queue.
  Queue(RedisConn* conn, const Keys& keys) : conn_(conn), keys_(keys) {}

  // Appends tasks not already pending, processing, completed (in the completed set or below the
  // frontier) or dead-lettered; returns how many were added. Idempotent: safe to repeat after a
  // failure. Sent in batches of 1000 tasks (each batch atomic). Leader-only: `leader_epoch` is the
  // caller's (0 = not a leader, unfenced); refused (IsStaleLeaderEpoch) below the highest seen.
  Result<int64_t> Push(const std::vector<TaskRange>& tasks, uint64_t leader_epoch = 0);

  // Claims the head of pending for `worker` with a lease of ttl_ms; nullopt when pending is empty.
  // ttl_ms must be 1..10^12 (about 31 years); the script refuses others before any write.
  // IsFenceDataSetRefusal (nothing claimed) when the fence counter must be floored again first:
  // it was floored on another Redis data set (a failover, a restart; FloorFenceCounter).
  Result<std::optional<Lease>> Claim(const std::string& worker, int64_t ttl_ms);

  // Claims up to max_tasks (1..kMaxClaimBatch) tasks from the head of pending in one script, each
  // with a lease of its own and its own token (ascending, in pending's order), exactly as that
  // many Claims would; fewer when pending holds fewer, none when it is empty. The data set is
  // checked once for the batch, atomically with its grants: IsFenceDataSetRefusal (nothing
  // claimed) as for Claim. Internal (a bug) for max_tasks out of range.
  Result<std::vector<Lease>> ClaimBatch(const std::string& worker, int64_t ttl_ms,
                                        int64_t max_tasks);

  // Extends the lease to now + ttl_ms (Redis TIME); returns the new expiry. Aborted when
  // (worker, token) does not own the task any more.
  Result<int64_t> Renew(const TaskRange& task, const std::string& worker, int64_t token,
                        int64_t ttl_ms);

  // Completes the task and records it for the frontier. Aborted when not the owner.
  Status Complete(const TaskRange& task, const std::string& worker, int64_t token);

  // Completes `done` (owner only, exactly as Complete) and claims the head of pending for
  // `worker` with a lease of ttl_ms (exactly as Claim), in one script and one round trip. A
  // refused completion is reported in the result's `completed` (Aborted) and does not prevent
  // the claim. The call itself fails (nothing written) on a bad argument or a corrupt lease
  // (Internal), and with Unavailable when the answer was lost (see the file comment: the
  // completion and the claim may or may not have happened).
  Result<CompleteAndClaimResult> CompleteAndClaim(const TaskRange& done, const std::string& worker,
                                                  int64_t token, int64_t ttl_ms);

  // CompleteAndClaim for several tasks each way, in one script: completes each of `done` (owner
  // only: `worker` with that lease's token; each refusal reported apart, as CompleteAndClaim's)
  // and claims up to max_tasks as ClaimBatch does. IsFenceDataSetRefusal before any write:
  // neither the completions nor the claim happen (the caller completes with Complete). Internal
  // for a corrupt lease, Internal (a bug) for an empty `done`, more than kMaxClaimBatch of them or
  // max_tasks out of range; Unavailable as for CompleteAndClaim.
  Result<CompleteAndClaimBatchResult> CompleteAndClaimBatch(const std::vector<Lease>& done,
                                                            const std::string& worker,
                                                            int64_t ttl_ms, int64_t max_tasks);

  // Records a failed attempt (error is truncated to 2000 bytes). Aborted when not the owner.
  Result<FailResult> Fail(const TaskRange& task, const std::string& worker, int64_t token,
                          const std::string& error, int64_t max_attempts);

  // Requeues (to the head of pending) processing tasks whose lease is gone or expired, looking
  // at no more than `limit` tasks, and counts each such expiry per task; the expiry that reaches
  // max_expiries sends the task to the DLQ instead (error "lease expired N times ...", attempts
  // N, worker the last holder). Returns what it did, per task, in processing order. Safe to run
  // from any number of processes at once, and to re-send (an expiry is counted as its task
  // leaves processing, so never twice); normally the leader runs it every few seconds, with its
  // epoch (fenced like Push).
  Result<std::vector<ExpiredTask>> Janitor(int64_t limit = 100,
                                           int64_t max_expiries = kDefaultMaxLeaseExpiries,
                                           uint64_t leader_epoch = 0);

  // The dead letters, sorted by task.
  Result<std::vector<DeadLetter>> DlqList();
  // The live leases (at most `limit`), sorted by task; *now_ms gets Redis TIME in milliseconds.
  Result<std::vector<LeaseInfo>> Leases(int64_t* now_ms, int64_t limit = 1000);
  // Re-queues one dead-lettered task with fresh attempt and expiry counts; false if it is not in
  // the DLQ.
  Result<bool> DlqRetry(const TaskRange& task);
  // Re-queues up to `limit` dead-lettered tasks; returns how many.
  Result<int64_t> DlqRetryAll(int64_t limit = 10'000);

  // Raises the fencing-token counter to at least `floor` (never lowers it) and records the data
  // set (the server's replication id) it is valid on, so grants there are no longer refused with
  // IsFenceDataSetRefusal. After Redis loses its data the counter restarts at 0, and after a
  // failover to a replica that lagged it is behind grants of the old primary: reconciliation calls
  // this with a floor above every token granted before (node/reconcile.h) before any claim.
  // only_on_new_data_set: nothing is done when the counter exists and was floored on this data
  // set already (floored is false then).
  Result<FenceFloorResult> FloorFenceCounter(int64_t floor, bool only_on_new_data_set = false);
  // The fencing-token counter, nullopt when Redis does not have it.
  Result<std::optional<int64_t>> FenceCounter();
  // True when the counter exists and was floored on this server's data set (its replication id
  // is the one recorded); false also when INFO is refused (nothing can be told then).
  Result<bool> FenceFlooredOnThisDataSet();

  Result<QueueDepths> Depths();

  const Keys& keys() const { return keys_; }

 private:
  RedisConn* conn_;
  Keys keys_;
};

}  // namespace gapless
