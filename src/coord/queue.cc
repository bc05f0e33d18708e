#include "coord/queue.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <deque>

namespace gapless {
namespace {

constexpr size_t kPushBatch = 1000;
constexpr size_t kMaxErrorBytes = 2000;

Status BadReply(const RedisScript& script, const RedisReply& reply) {
  return Internal("script " + script.name() + ": unexpected reply (type " +
                  std::to_string(static_cast<int>(reply.type)) + ", " +
                  std::to_string(reply.elements.size()) + " elements)");
}

// Scripts that check ownership answer {1|2, value, ...} on success and {0, reason, ...} when
// refused. The verdict from those first two elements (the caller has checked `code` is an integer).
Status Verdict(const RedisReply& code, const RedisReply& reason, const TaskRange& task) {
  if (code.integer == 0) return Aborted("lease of task " + task.id() + " lost: " + reason.str);
  return Status::Ok();
}

Status CheckOwned(const RedisScript& script, const RedisReply& reply, const TaskRange& task) {
  if (reply.type != RedisReply::Type::kArray || reply.elements.size() != 2 ||
      reply.elements[0].type != RedisReply::Type::kInteger) {
    return BadReply(script, reply);
  }
  return Verdict(reply.elements[0], reply.elements[1], task);
}

// {task, token, expires_ms} starting at reply.elements[first] -> Lease.
Result<Lease> ParseLease(const RedisScript& script, const RedisReply& reply, size_t first) {
  if (reply.elements.size() < first + 3 ||
      reply.elements[first + 1].type != RedisReply::Type::kInteger ||
      reply.elements[first + 2].type != RedisReply::Type::kInteger) {
    return BadReply(script, reply);
  }
  Lease lease;
  GAPLESS_ASSIGN_OR_RETURN(lease.task, ParseTask(reply.elements[first].str));
  lease.token = reply.elements[first + 1].integer;
  lease.expires_ms = reply.elements[first + 2].integer;
  return lease;
}

// The leases {task, token, expires_ms, ...} from reply.elements[first] to the end: at most
// max_tasks of them (an empty Lua table comes back as an empty array or nil).
Result<std::vector<Lease>> ParseLeases(const RedisScript& script, const RedisReply& reply,
                                       size_t first, int64_t max_tasks) {
  std::vector<Lease> out;
  if (reply.is_nil()) return out;
  if (reply.type != RedisReply::Type::kArray || reply.elements.size() < first ||
      (reply.elements.size() - first) % 3 != 0 ||
      (reply.elements.size() - first) / 3 > static_cast<size_t>(max_tasks)) {
    return BadReply(script, reply);
  }
  out.reserve((reply.elements.size() - first) / 3);
  for (size_t i = first; i < reply.elements.size(); i += 3) {
    GAPLESS_ASSIGN_OR_RETURN(Lease lease, ParseLease(script, reply, i));
    out.push_back(lease);
  }
  return out;
}

Status CheckBatchSize(int64_t n, std::string_view what) {
  if (n < 1 || n > kMaxClaimBatch) {
    return Internal(fmt::format("{} must be 1..{}, not {}", what, kMaxClaimBatch, n));
  }
  return Status::Ok();
}

Result<std::vector<TaskRange>> TaskList(const RedisScript& script, const RedisReply& reply) {
  std::vector<TaskRange> out;
  if (reply.is_nil()) return out;  // an empty Lua table comes back as an empty array or nil
  if (reply.type != RedisReply::Type::kArray) return BadReply(script, reply);
  for (const RedisReply& e : reply.elements) {
    GAPLESS_ASSIGN_OR_RETURN(TaskRange t, ParseTask(e.str));
    out.push_back(t);
  }
  return out;
}

}  // namespace

std::string TaskRange::id() const { return std::to_string(from) + "-" + std::to_string(to); }

Result<TaskRange> ParseTask(std::string_view id) {
  size_t dash = id.find('-');
  TaskRange t;
  auto parse = [](std::string_view s, int64_t* v) {
    if (s.empty() || s.size() > 15) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && p == s.data() + s.size() && *v >= 0;
  };
  if (dash == std::string_view::npos || !parse(id.substr(0, dash), &t.from) ||
      !parse(id.substr(dash + 1), &t.to) || t.from > t.to) {
    return InvalidData("malformed task id '" + std::string(id) + "' (want from-to)");
  }
  return t;
}

std::vector<TaskRange> SplitRange(int64_t from, int64_t to, int64_t size) {
  std::vector<TaskRange> out;
  if (size < 1 || from > to) return out;
  for (int64_t b = from; b <= to; b += size) out.push_back({b, std::min(to, b + size - 1)});
  return out;
}

Result<int64_t> Queue::Push(const std::vector<TaskRange>& tasks, uint64_t leader_epoch) {
  static const RedisScript& script = LoadScript("queue_push.lua");
  int64_t added = 0;
  for (size_t i = 0; i < tasks.size(); i += kPushBatch) {
    std::vector<std::string> args = {std::to_string(leader_epoch)};
    for (size_t j = i; j < std::min(tasks.size(), i + kPushBatch); ++j) {
      args.push_back(tasks[j].id());
    }
    // Idempotent: a task already queued is skipped, so resending after a lost answer is safe.
    GAPLESS_ASSIGN_OR_RETURN(RedisReply r,
                             conn_->Eval(script,
                                         {keys_.pending(), keys_.queued(), keys_.completed(),
                                          keys_.frontier(), keys_.dlq(), keys_.leader_epoch()},
                                         args, /*idempotent=*/true));
    if (r.type != RedisReply::Type::kInteger) return BadReply(script, r);
    added += r.integer;
  }
  return added;
}

Result<std::optional<Lease>> Queue::Claim(const std::string& worker, int64_t ttl_ms) {
  GAPLESS_ASSIGN_OR_RETURN(std::vector<Lease> leases, ClaimBatch(worker, ttl_ms, 1));
  if (leases.empty()) return std::optional<Lease>();
  return std::optional<Lease>(leases.front());
}

Result<std::vector<Lease>> Queue::ClaimBatch(const std::string& worker, int64_t ttl_ms,
                                             int64_t max_tasks) {
  static const RedisScript& script = LoadScript("queue_claim.lua");
  GAPLESS_RETURN_IF_ERROR(CheckBatchSize(max_tasks, "max_tasks"));
  GAPLESS_ASSIGN_OR_RETURN(
      RedisReply r, conn_->Eval(script,
                                {keys_.pending(), keys_.processing(), keys_.leases(),
                                 keys_.fence_counter(), keys_.fence_dataset()},
                                {worker, std::to_string(ttl_ms), std::to_string(max_tasks)}));
  return ParseLeases(script, r, 0, max_tasks);
}

Result<int64_t> Queue::Renew(const TaskRange& task, const std::string& worker, int64_t token,
                             int64_t ttl_ms) {
  static const RedisScript& script = LoadScript("queue_renew.lua");
  // Idempotent: renewing twice only moves the expiry to the later of two nearby instants.
  GAPLESS_ASSIGN_OR_RETURN(
      RedisReply r, conn_->Eval(script, {keys_.leases()},
                                {task.id(), worker, std::to_string(token), std::to_string(ttl_ms)},
                                /*idempotent=*/true));
  GAPLESS_RETURN_IF_ERROR(CheckOwned(script, r, task));
  return r.elements[1].integer;
}

Status Queue::Complete(const TaskRange& task, const std::string& worker, int64_t token) {
  static const RedisScript& script = LoadScript("queue_complete.lua");
  GAPLESS_ASSIGN_OR_RETURN(RedisReply r,
                           conn_->Eval(script,
                                       {keys_.processing(), keys_.leases(), keys_.queued(),
                                        keys_.attempts(), keys_.completed(), keys_.expiries()},
                                       {task.id(), worker, std::to_string(token)}));
  return CheckOwned(script, r, task);
}

Result<CompleteAndClaimResult> Queue::CompleteAndClaim(const TaskRange& done,
                                                       const std::string& worker, int64_t token,
                                                       int64_t ttl_ms) {
  GAPLESS_ASSIGN_OR_RETURN(
      CompleteAndClaimBatchResult batch,
      CompleteAndClaimBatch({Lease{.task = done, .token = token}}, worker, ttl_ms, 1));
  CompleteAndClaimResult out;
  out.completed = std::move(batch.completed.front());
  if (!batch.next.empty()) out.next = batch.next.front();
  return out;
}

Result<CompleteAndClaimBatchResult> Queue::CompleteAndClaimBatch(const std::vector<Lease>& done,
                                                                 const std::string& worker,
                                                                 int64_t ttl_ms,
                                                                 int64_t max_tasks) {
  static const RedisScript& script = LoadScript("queue_complete_claim.lua");
  GAPLESS_RETURN_IF_ERROR(CheckBatchSize(max_tasks, "max_tasks"));
  GAPLESS_RETURN_IF_ERROR(CheckBatchSize(static_cast<int64_t>(done.size()), "tasks to complete"));
  std::vector<std::string> args = {worker, std::to_string(ttl_ms), std::to_string(max_tasks)};
  args.reserve(3 + 2 * done.size());
  for (const Lease& lease : done) {
    args.push_back(lease.task.id());
    args.push_back(std::to_string(lease.token));
  }
  GAPLESS_ASSIGN_OR_RETURN(
      RedisReply r, conn_->Eval(script,
                                {keys_.pending(), keys_.processing(), keys_.leases(),
                                 keys_.queued(), keys_.attempts(), keys_.completed(),
                                 keys_.expiries(), keys_.fence_counter(), keys_.fence_dataset()},
                                args));
  // {completed, reason} per task of `done`, then {task, token, expires_ms} per new lease.
  const size_t verdicts = 2 * done.size();
  if (r.type != RedisReply::Type::kArray || r.elements.size() < verdicts) {
    return BadReply(script, r);
  }
  CompleteAndClaimBatchResult out;
  for (size_t i = 0; i < done.size(); ++i) {
    const RedisReply& code = r.elements[2 * i];
    if (code.type != RedisReply::Type::kInteger) return BadReply(script, r);
    out.completed.push_back(Verdict(code, r.elements[2 * i + 1], done[i].task));
  }
  GAPLESS_ASSIGN_OR_RETURN(out.next, ParseLeases(script, r, verdicts, max_tasks));
  return out;
}

Result<FailResult> Queue::Fail(const TaskRange& task, const std::string& worker, int64_t token,
                               const std::string& error, int64_t max_attempts) {
  static const RedisScript& script = LoadScript("queue_fail.lua");
  std::string bounded = error.size() > kMaxErrorBytes ? error.substr(0, kMaxErrorBytes) : error;
  GAPLESS_ASSIGN_OR_RETURN(
      RedisReply r, conn_->Eval(script,
                                {keys_.pending(), keys_.processing(), keys_.leases(),
                                 keys_.queued(), keys_.attempts(), keys_.dlq(), keys_.expiries()},
                                {task.id(), worker, std::to_string(token), bounded,
                                 std::to_string(max_attempts)}));
  GAPLESS_RETURN_IF_ERROR(CheckOwned(script, r, task));
  FailResult out;
  out.outcome = r.elements[0].integer == 2 ? FailOutcome::kDeadLettered : FailOutcome::kRequeued;
  out.attempts = r.elements[1].integer;
  return out;
}

Result<std::vector<ExpiredTask>> Queue::Janitor(int64_t limit, int64_t max_expiries,
                                                uint64_t leader_epoch) {
  static const RedisScript& script = LoadScript("queue_janitor.lua");
  // Idempotent: it only takes back what is expired at the time it runs, and counts an expiry as
  // the task leaves processing, so a re-sent call cannot count one twice. A lost answer loses
  // only the caller's log lines (the DLQ keeps its own record).
  GAPLESS_ASSIGN_OR_RETURN(
      RedisReply r,
      conn_->Eval(
          script,
          {keys_.pending(), keys_.processing(), keys_.leases(), keys_.queued(), keys_.attempts(),
           keys_.expiries(), keys_.dlq(), keys_.leader_epoch()},
          {std::to_string(limit), std::to_string(max_expiries), std::to_string(leader_epoch)},
          /*idempotent=*/true));
  std::vector<ExpiredTask> out;
  if (r.is_nil()) return out;  // an empty Lua table comes back as an empty array or nil
  if (r.type != RedisReply::Type::kArray || r.elements.size() % 4 != 0) {
    return BadReply(script, r);
  }
  for (size_t i = 0; i < r.elements.size(); i += 4) {
    ExpiredTask e;
    GAPLESS_ASSIGN_OR_RETURN(e.task, ParseTask(r.elements[i].str));
    e.outcome =
        r.elements[i + 1].integer == 2 ? FailOutcome::kDeadLettered : FailOutcome::kRequeued;
    e.expiries = r.elements[i + 2].integer;
    e.worker = r.elements[i + 3].str;
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<DeadLetter>> Queue::DlqList() {
  static const RedisScript& script = LoadScript("queue_dlq_list.lua");
  GAPLESS_ASSIGN_OR_RETURN(RedisReply r, conn_->Eval(script, {keys_.dlq()}, {"100000"},
                                                     /*idempotent=*/true));
  std::vector<DeadLetter> out;
  if (r.is_nil()) return out;
  if (r.type != RedisReply::Type::kArray || r.elements.size() % 5 != 0) {
    return BadReply(script, r);
  }
  for (size_t i = 0; i < r.elements.size(); i += 5) {
    DeadLetter d;
    GAPLESS_ASSIGN_OR_RETURN(d.task, ParseTask(r.elements[i].str));
    d.error = r.elements[i + 1].str;
    d.attempts = r.elements[i + 2].integer;
    d.worker = r.elements[i + 3].str;
    d.failed_at_ms = r.elements[i + 4].integer;
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::vector<LeaseInfo>> Queue::Leases(int64_t* now_ms, int64_t limit) {
  static const RedisScript& script = LoadScript("queue_leases.lua");
  GAPLESS_ASSIGN_OR_RETURN(RedisReply r, conn_->Eval(script, {keys_.leases()},
                                                     {std::to_string(limit)}, /*idempotent=*/true));
  if (r.type != RedisReply::Type::kArray || r.elements.empty() ||
      (r.elements.size() - 1) % 4 != 0) {
    return BadReply(script, r);
  }
  *now_ms = r.elements[0].integer;
  std::vector<LeaseInfo> out;
  for (size_t i = 1; i < r.elements.size(); i += 4) {
    LeaseInfo l;
    GAPLESS_ASSIGN_OR_RETURN(l.task, ParseTask(r.elements[i].str));
    l.worker = r.elements[i + 1].str;
    l.token = r.elements[i + 2].integer;
    l.expires_ms = r.elements[i + 3].integer;
    out.push_back(std::move(l));
  }
  return out;
}

Result<bool> Queue::DlqRetry(const TaskRange& task) {
  static const RedisScript& script = LoadScript("queue_dlq_retry.lua");
  GAPLESS_ASSIGN_OR_RETURN(RedisReply r, conn_->Eval(script,
                                                     {keys_.dlq(), keys_.pending(), keys_.queued(),
                                                      keys_.attempts(), keys_.expiries()},
                                                     {task.id(), "1"}, /*idempotent=*/true));
  GAPLESS_ASSIGN_OR_RETURN(auto moved, TaskList(script, r));
  return !moved.empty();
}

Result<int64_t> Queue::DlqRetryAll(int64_t limit) {
  static const RedisScript& script = LoadScript("queue_dlq_retry.lua");
  GAPLESS_ASSIGN_OR_RETURN(
      RedisReply r, conn_->Eval(script,
                                {keys_.dlq(), keys_.pending(), keys_.queued(), keys_.attempts(),
                                 keys_.expiries()},
                                {"*", std::to_string(limit)}, /*idempotent=*/true));
  GAPLESS_ASSIGN_OR_RETURN(auto moved, TaskList(script, r));
  return static_cast<int64_t>(moved.size());
}

Result<FenceFloorResult> Queue::FloorFenceCounter(int64_t floor, bool only_on_new_data_set) {
  static const RedisScript& script = LoadScript("queue_fence_floor.lua");
  GAPLESS_ASSIGN_OR_RETURN(
      RedisReply r,
      conn_->Eval(script, {keys_.fence_counter(), keys_.fence_dataset()},
                  {std::to_string(floor), only_on_new_data_set ? "new-data-set" : "always"},
                  /*idempotent=*/true));
  if (r.type != RedisReply::Type::kArray || r.elements.size() != 2 ||
      r.elements[0].type != RedisReply::Type::kInteger) {
    return BadReply(script, r);
  }
  return FenceFloorResult{.counter = r.elements[0].integer, .floored = r.elements[1].integer == 1};
}

Result<std::optional<int64_t>> Queue::FenceCounter() {
  GAPLESS_ASSIGN_OR_RETURN(RedisReply r, conn_->Command({"GET", keys_.fence_counter()}));
  if (r.is_nil()) return std::optional<int64_t>();
  int64_t value = 0;
  auto [end, ec] = std::from_chars(r.str.data(), r.str.data() + r.str.size(), value);
  if (r.type != RedisReply::Type::kString || ec != std::errc() ||
      end != r.str.data() + r.str.size()) {
    return DataLoss(fmt::format("{} holds '{}', not a counter", keys_.fence_counter(), r.str));
  }
  return std::optional<int64_t>(value);
}

Result<bool> Queue::FenceFlooredOnThisDataSet() {
  const std::string replid = ReplicationId(*conn_);
  if (replid.empty()) return false;
  GAPLESS_ASSIGN_OR_RETURN(RedisReply recorded, conn_->Command({"GET", keys_.fence_dataset()}));
  if (recorded.str != replid) return false;
  GAPLESS_ASSIGN_OR_RETURN(std::optional<int64_t> counter, FenceCounter());
  return counter.has_value();
}

Result<QueueDepths> Queue::Depths() {
  QueueDepths d;
  GAPLESS_ASSIGN_OR_RETURN(RedisReply p, conn_->Command({"LLEN", keys_.pending()}));
  GAPLESS_ASSIGN_OR_RETURN(RedisReply q, conn_->Command({"LLEN", keys_.processing()}));
  GAPLESS_ASSIGN_OR_RETURN(RedisReply l, conn_->Command({"HLEN", keys_.dlq()}));
  d.pending = p.integer;
  d.processing = q.integer;
  d.dlq = l.integer;
  return d;
}

bool IsStaleLeaderEpoch(const Status& status) {
  return status.reason() == RedisErrorReason(kStaleLeaderEpochError);
}

}  // namespace gapless
