#include "node/worker.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <map>
#include <vector>

#include "coord/registry.h"
#include "core/failpoint.h"
#include "node/node_metrics.h"
#include "node/reconcile.h"
#include "store/state.h"

namespace gapless {
namespace {

constexpr int64_t kSliceMicros = 20'000;  // how often sleeping threads look at their flags

bool IsFenceRejection(const Status& st) {
  return st.code() == Code::kAborted && st.reason() == kStaleFenceReason;
}

bool IsReorgFenced(const Status& st) {
  return st.code() == Code::kAborted && st.reason() == kReorgFencedReason;
}

// Failures worth another local attempt of the same task.
bool RetryLocally(const Status& st) { return st.retriable() || st.code() == Code::kNotFound; }

// Adds the time since `start` to a timing counter (WorkerCounters).
void AddSince(Env* env, int64_t start, std::atomic<uint64_t>& counter) {
  int64_t now = env->NowMicros();
  if (now > start) counter += static_cast<uint64_t>(now - start);
}

}  // namespace

Worker::Worker(WorkerOptions options, BlockSourceFactory source_factory, std::string redis_url,
               Keys keys, PgPool* pool)
    : options_(std::move(options)),
      source_factory_(std::move(source_factory)),
      redis_url_(std::move(redis_url)),
      keys_(std::move(keys)),
      pool_(pool) {
  if (options_.env == nullptr) options_.env = Env::Default();
}

Worker::~Worker() = default;

Status Worker::Validate() const {
  if (options_.worker_id.empty()) return FailedPrecondition("worker: empty worker id");
  if (options_.lease_ttl_ms <= 0) return FailedPrecondition("worker: lease TTL must be > 0");
  if (options_.rpc_timeout_ms <= 0 || options_.rpc_timeout_ms >= options_.lease_ttl_ms) {
    return FailedPrecondition(fmt::format(
        "worker: the RPC timeout ({} ms) must be above 0 and below the lease TTL ({} ms), or a "
        "single slow request could outlive the lease",
        options_.rpc_timeout_ms, options_.lease_ttl_ms));
  }
  if (options_.local_attempts < 1 || options_.max_attempts < 1) {
    return FailedPrecondition("worker: attempts must be at least 1");
  }
  if (options_.idle_poll_ms <= 0 || options_.heartbeat_interval_ms <= 0) {
    return FailedPrecondition("worker: intervals must be > 0");
  }
  if (pool_ == nullptr || !source_factory_) {
    return FailedPrecondition("worker: no pool or block source");
  }
  return Status::Ok();
}

void Worker::SleepUnlessAborted(int64_t micros, const std::atomic<bool>& abort) {
  while (micros > 0 && !abort.load()) {
    int64_t slice = std::min(micros, kSliceMicros);
    options_.env->SleepMicros(slice);
    micros -= slice;
  }
}

Status Worker::EnsureFenceFloor(RedisConn& redis) {
  // Redis alone first: a PostgreSQL connection only when the counter is missing, so that the
  // claim does not wait for one that the writer thread holds (prefetch).
  GAPLESS_ASSIGN_OR_RETURN(bool missing, RedisStateMissing(redis, keys_));
  if (!missing) return Status::Ok();
  auto conn = pool_->Acquire();
  return gapless::EnsureFenceFloor(redis, keys_, *conn, "worker " + options_.worker_id);
}

Result<std::optional<Lease>> Worker::ClaimNext(Queue& queue, RedisConn& redis,
                                               std::optional<Committed>* committed) {
  for (;;) {
    int64_t claim_start = options_.env->NowMicros();
    Status floor = EnsureFenceFloor(redis);
    Result<std::optional<Lease>> claim = std::optional<Lease>();
    if (!floor.ok()) {
      claim = floor;
    } else if (committed->has_value()) {
      claim = CompleteAndClaimNext(queue, **committed);
      committed->reset();
    } else {
      claim = queue.Claim(options_.worker_id, options_.lease_ttl_ms);
    }
    AddSince(options_.env, claim_start, counters_.coord_micros);
    if (!claim.ok() && IsFenceDataSetRefusal(claim.status()) && !data_set_restored_) {
      // The coordination Redis is another data set than the one the counter was floored on (a
      // failover to a replica that may have lagged): restored, then claimed again at once. A
      // second refusal in a row waits like any failed claim.
      spdlog::warn("worker {}: {}", options_.worker_id, claim.status().ToString());
      Status restored;
      {
        auto conn = pool_->Acquire();
        restored = RestoreFenceOnNewDataSet(queue, *conn, "worker " + options_.worker_id);
      }
      data_set_restored_ = true;
      if (restored.ok()) continue;
      claim = restored;
    }
    data_set_restored_ = false;
    if (!claim.ok()) {
      // Redis or PostgreSQL away: the caller waits it out (a claim that ran but whose answer was
      // lost is a lease nobody renews; the janitor requeues it).
      spdlog::warn("worker {}: claim failed: {}", options_.worker_id, claim.status().ToString());
    }
    return claim;
  }
}

bool Worker::EndsAfterClaimFailure(const Status& failure, int64_t* failures) {
  if (failure.code() == Code::kFailedPrecondition) return true;
  int64_t delay = BackoffMicros(options_.env, static_cast<int>(std::min<int64_t>((*failures)++, 6)),
                                options_.idle_poll_ms * 1000, 5'000'000);
  int64_t sleep_start = options_.env->NowMicros();
  options_.env->SleepMicros(delay);
  AddSince(options_.env, sleep_start, counters_.coord_micros);
  return false;
}

Status Worker::Run(const std::atomic<bool>& stop) {
  GAPLESS_RETURN_IF_ERROR(Validate());
  RedisOptions redis_options;
  redis_options.env = options_.env;
  // Connected by the first command: the coordination Redis may be away as the worker starts (a
  // restart, a failover), which the loop below waits out as it does any time later.
  GAPLESS_ASSIGN_OR_RETURN(auto redis,
                           RedisConn::Connect(redis_url_, redis_options, /*connect_now=*/false));
  GAPLESS_ASSIGN_OR_RETURN(auto keeper_redis,
                           RedisConn::Connect(redis_url_, redis_options, /*connect_now=*/false));
  std::unique_ptr<BlockSource> source = source_factory_();
  Queue queue(redis.get(), keys_);

  stop_ = &stop;
  keeper_quit_.store(false);
  data_set_restored_ = false;
  std::thread keeper([this, conn = keeper_redis.get()] { KeeperLoop(conn); });

  Status result;
  if (options_.prefetch) {
    result = RunPrefetching(queue, *source, *redis, stop);
  } else {
    int64_t redis_failures = 0;
    std::optional<Committed> committed;  // the task just committed, completed with the next claim
    while (!stop.load()) {
      Result<std::optional<Lease>> claim = ClaimNext(queue, *redis, &committed);
      if (!claim.ok()) {
        if (EndsAfterClaimFailure(claim.status(), &redis_failures)) {
          result = claim.status();
          break;
        }
        continue;
      }
      redis_failures = 0;
      if (!claim->has_value()) {
        if (options_.done && options_.done()) break;
        int64_t idle_start = options_.env->NowMicros();
        options_.env->SleepMicros(options_.idle_poll_ms * 1000);
        AddSince(options_.env, idle_start, counters_.idle_micros);
        continue;
      }
      Status st = Process(queue, *source, **claim, &committed);
      if (!st.ok()) {
        result = st;
        break;
      }
    }
    if (committed.has_value()) CompleteCommitted(queue, *committed);
  }

  keeper_quit_.store(true);
  keeper.join();
  stop_ = nullptr;
  Registry registry(redis.get(), &keys_);
  (void)registry.Leave(options_.worker_id);
  return result;
}

namespace {

// One range write at a time on a thread of its own, so that the loop can fetch the next part
// meanwhile (Worker::RunPrefetching). The RangeWrite given to Start belongs to the caller and
// must stay untouched until Wait returns.
class WriterThread {
 public:
  explicit WriterThread(std::function<Status(RangeWrite&)> write) : write_(std::move(write)) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~WriterThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();  // after the write in flight, if any: a write is never cut short
  }
  WriterThread(const WriterThread&) = delete;
  WriterThread& operator=(const WriterThread&) = delete;

  void Start(RangeWrite* write) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = write;
    }
    cv_.notify_all();
  }
  // The write's result, once it has ended.
  Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return job_ == nullptr; });
    return result_;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return quit_ || job_ != nullptr; });
      if (job_ == nullptr) return;
      RangeWrite* write = job_;
      lock.unlock();
      Status st = write_(*write);
      lock.lock();
      result_ = std::move(st);
      job_ = nullptr;
      cv_.notify_all();
    }
  }

  std::function<Status(RangeWrite&)> write_;
  std::mutex mu_;
  std::condition_variable cv_;
  RangeWrite* job_ = nullptr;
  Status result_;
  bool quit_ = false;
  std::thread thread_;
};

void AddCounts(uint64_t* blocks, uint64_t* transactions, uint64_t* logs, uint64_t* transfers,
               const std::vector<BlockData>& decoded) {
  *blocks += decoded.size();
  for (const auto& b : decoded) {
    *transactions += b.transactions.size();
    *logs += b.logs.size();
    *transfers += b.token_transfers.size();
  }
}

}  // namespace

Status Worker::RunPrefetching(Queue& queue, BlockSource& source, RedisConn& redis,
                              const std::atomic<bool>& stop) {
  const WriteOptions write_options = MakeWriteOptions();
  WriterThread writer([this, write_options](RangeWrite& write) {
    int64_t start = options_.env->NowMicros();
    Status st;
    {
      auto conn = pool_->Acquire();
      st = WriteRange(*conn, write, write_options);
    }
    AddSince(options_.env, start, counters_.written_micros);
    return st;
  });
  MemoryBudget unlimited(0, 1);
  MemoryBudget& budget = options_.memory_budget != nullptr ? *options_.memory_budget : unlimited;

  // A part of a task's range, fetched and decoded; then written.
  struct Part {
    std::shared_ptr<Task> task;
    RangeWrite write;
    uint32_t batch = 1;
    int attempts = 0;   // local attempts spent on it so far
    bool last = false;  // the task's last part
  };
  std::optional<Part> writing;         // handed to the writer thread
  std::shared_ptr<Task> current;       // the task whose next part is fetched
  std::optional<Committed> committed;  // committed, to be completed (with the next claim)
  Status result;
  int64_t redis_failures = 0;

  // Waits for the write in flight and settles its part: a failed write is retried in series
  // (fetched again, then written) like any part's attempt; its task is dropped or failed if it
  // came to that, or committed after its last part. Only that part's own task is touched: a
  // task fetched meanwhile keeps its lease, its token and its own fate. Non-ok: stop the worker.
  auto settle = [&]() -> Status {
    int64_t wait_start = options_.env->NowMicros();
    Status st = writer.Wait();
    AddSince(options_.env, wait_start, counters_.write_micros);
    Part part = std::move(*writing);
    writing.reset();
    Task& task = *part.task;
    PartOutcome out;
    out.status = st;
    if (!st.ok()) {
      AfterFenceRefusal(queue, task, st);
      if (IsFenceRejection(st)) {
        out.lost = true;
      } else if (!IsReorgFenced(st) && RetryLocally(st) &&
                 part.attempts < options_.local_attempts) {
        if (!BackoffBeforeRetry(task, part.attempts, st)) {
          out.abandoned = true;
        } else {
          out = ProcessPart(queue, source, task, &part.write, part.batch, part.attempts + 1);
        }
      }
    }
    if (out.lost || out.abandoned || !out.status.ok()) {
      task.over = true;
      Release(task);
      return EndUncommitted(queue, task, out);
    }
    AddCounts(&task.done.blocks, &task.done.transactions, &task.done.logs,
              &task.done.token_transfers, part.write.blocks);
    if (part.last) {
      task.over = true;
      Release(task);
      if (committed.has_value()) CompleteCommitted(queue, *committed);
      committed = task.done;
    }
    return Status::Ok();
  };
  // Ends `current` without a commit (its fetch or its renewal failed).
  auto end_current = [&](const PartOutcome& out) -> Status {
    current->over = true;
    Release(*current);
    Status st = EndUncommitted(queue, *current, out);
    current = nullptr;
    return st;
  };

  while (!stop.load()) {
    if (current == nullptr) {
      Result<std::optional<Lease>> claim = ClaimNext(queue, redis, &committed);
      if (!claim.ok()) {
        if (writing.has_value()) {  // its result first: the claim is retried right after
          Status st = settle();
          if (!st.ok()) {
            result = st;
            break;
          }
          continue;
        }
        if (EndsAfterClaimFailure(claim.status(), &redis_failures)) {
          result = claim.status();
          break;
        }
        continue;
      }
      redis_failures = 0;
      if (!claim->has_value()) {
        if (writing.has_value()) {  // not idle: the write's end is the next thing to do
          Status st = settle();
          if (!st.ok()) {
            result = st;
            break;
          }
          continue;
        }
        if (options_.done && options_.done()) break;
        int64_t idle_start = options_.env->NowMicros();
        options_.env->SleepMicros(options_.idle_poll_ms * 1000);
        AddSince(options_.env, idle_start, counters_.idle_micros);
        continue;
      }
      current = Hold(**claim);
    }

    // The next part of `current`, fetched while the last part (of this task or the one before)
    // is written. Two parts are held at once, so each gets half of the budget's share.
    const uint64_t to = static_cast<uint64_t>(current->lease.task.to);
    Part next;
    next.task = current;
    next.batch = budget.BatchBlocks(options_.blocks_per_request);
    const uint64_t size = budget.PartBlocks(to - current->next_from + 1, next.batch, 2);
    next.write = NewWrite(*current, current->next_from, current->next_from + size - 1);
    next.last = next.write.to_block == to;
    PartOutcome fetched = FetchPart(source, *current, &next.write, next.batch, &next.attempts);

    if (writing.has_value()) {
      Status st = settle();
      if (!st.ok()) {
        result = st;
        break;
      }
    }
    if (current->over) {  // the write just settled dropped or failed this very task
      current = nullptr;
      continue;
    }
    if (fetched.lost || fetched.abandoned || !fetched.status.ok()) {
      Status st = end_current(fetched);
      if (!st.ok()) {
        result = st;
        break;
      }
      continue;
    }
    PartOutcome renewed = RenewBeforeWrite(queue, *current);
    if (renewed.lost) {
      Status st = end_current(renewed);
      if (!st.ok()) {
        result = st;
        break;
      }
      continue;
    }
    // Test hook (core/failpoint.h): stop here, where only the fence can refuse the write.
    if (FailpointFiresOnce("worker-stop-before-write")) raise(SIGSTOP);
    current->next_from = next.write.to_block + 1;
    const bool last = next.last;
    writing = std::move(next);
    writer.Start(&writing->write);
    if (last) {
      current = nullptr;  // the writer has its last part; the next loop claims the next task
    } else if (committed.has_value()) {
      CompleteCommitted(queue, *committed);  // no claim comes next to complete it with
      committed.reset();
    }
  }

  // Stopping (or a fatal error): the write in flight ends and is settled; a task fetched ahead
  // is left to its lease expiry (the janitor requeues it), like any task abandoned at a stop.
  if (writing.has_value()) {
    Status st = settle();
    if (result.ok() && !st.ok()) result = st;
  }
  if (current != nullptr && !current->over) {
    current->over = true;
    Release(*current);
    spdlog::info("worker {}: stopping; task {} is left to its lease expiry", options_.worker_id,
                 current->lease.task.id());
  }
  if (committed.has_value()) CompleteCommitted(queue, *committed);
  return result;
}

RangeWrite Worker::NewWrite(const Task& task, uint64_t from, uint64_t to) const {
  RangeWrite write;
  write.from_block = from;
  write.to_block = to;
  write.fence_token = task.lease.token;
  write.fence_owner = options_.worker_id;
  return write;
}

WriteOptions Worker::MakeWriteOptions() const {
  WriteOptions write_options;
  write_options.mode = options_.write_mode;
  write_options.copy_format = options_.copy_format;
  return write_options;
}

std::shared_ptr<Worker::Task> Worker::Hold(const Lease& lease) {
  auto task = std::make_shared<Task>();
  task->lease = lease;
  task->next_from = static_cast<uint64_t>(lease.task.from);
  task->done.lease = lease;
  std::lock_guard<std::mutex> lock(mu_);
  task->seq = ++task_seq_;
  held_.push_back(task);
  return task;
}

void Worker::Release(Task& task) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(held_, [&](const std::shared_ptr<Task>& t) { return t->seq == task.seq; });
}

Status Worker::FetchAndCheck(BlockSource& source, const Task& task, RangeWrite* write,
                             uint32_t batch) {
  const EnrichOptions enrich = EnrichWithStore(options_.token_metadata, pool_);
  write->blocks.clear();
  int64_t fetch_start = options_.env->NowMicros();
  // A block the check refuses (not the head log's at its height) was served from another fork or
  // a lagging backend: FetchAndDecodeRange distrusts the endpoint that served it, and the retry
  // asks another (a pool's).
  Status st = FetchAndDecodeRange(source, write->from_block, write->to_block, batch,
                                  BlockChecks{options_.chain_id, options_.verify}, options_.limiter,
                                  task.abort.get(), &write->blocks, &enrich, options_.memory_budget,
                                  &options_.check_blocks, &write->datasets);
  AddSince(options_.env, fetch_start, counters_.fetch_micros);
  return st;
}

bool Worker::BackoffBeforeRetry(const Task& task, int attempt, const Status& st) {
  int64_t delay = BackoffMicros(options_.env, attempt - 1, options_.retry_base_micros,
                                options_.retry_cap_micros);
  counters_.retries += 1;
  CountRangeEvent(RangeEvent::kRetried);
  RecordError(st);
  spdlog::warn("worker {}: task {} attempt {}/{} failed: {}; retrying in {:.1f} s",
               options_.worker_id, task.lease.task.id(), attempt, options_.local_attempts,
               st.ToString(), static_cast<double>(delay) / 1e6);
  int64_t backoff_start = options_.env->NowMicros();
  SleepUnlessAborted(delay, *task.abort);
  AddSince(options_.env, backoff_start, counters_.backoff_micros);
  return !task.abort->load();
}

Worker::PartOutcome Worker::RenewBeforeWrite(Queue& queue, const Task& task) {
  // A full TTL ahead of the write. Aborted: the task is someone else's now.
  PartOutcome out;
  int64_t renew_start = options_.env->NowMicros();
  auto renewed =
      queue.Renew(task.lease.task, options_.worker_id, task.lease.token, options_.lease_ttl_ms);
  AddSince(options_.env, renew_start, counters_.coord_micros);
  if (!renewed.ok() && renewed.status().code() == Code::kAborted) {
    out.status = renewed.status();
    out.lost = true;
  }
  return out;
}

void Worker::AfterFenceRefusal(Queue& queue, const Task& task, const Status& st) {
  if (!IsFenceRejection(st) && !IsReorgFenced(st)) return;
  // The counter may be behind PostgreSQL (node/reconcile.h): raised before the next claim.
  auto conn = pool_->Acquire();
  Status raised =
      RaiseFenceAfterRefusal(queue, *conn, task.lease.token, "worker " + options_.worker_id);
  if (!raised.ok()) {
    spdlog::warn("worker {}: could not raise the fence counter: {}", options_.worker_id,
                 raised.ToString());
  }
}

Worker::PartOutcome Worker::FetchPart(BlockSource& source, Task& task, RangeWrite* write,
                                      uint32_t batch, int* attempts_used) {
  PartOutcome out;
  for (int attempt = 1; attempt <= options_.local_attempts; ++attempt) {
    *attempts_used = attempt;
    out.status = FetchAndCheck(source, task, write, batch);
    if (task.abort->load()) {
      out.abandoned = true;
      return out;
    }
    if (out.status.ok() || !RetryLocally(out.status) || attempt == options_.local_attempts) {
      return out;
    }
    if (!BackoffBeforeRetry(task, attempt, out.status)) {
      out.abandoned = true;
      return out;
    }
  }
  return out;
}

Worker::PartOutcome Worker::ProcessPart(Queue& queue, BlockSource& source, Task& task,
                                        RangeWrite* write, uint32_t batch, int first_attempt) {
  PartOutcome out;
  out.status = Internal("worker: no attempt left for the part");
  const WriteOptions write_options = MakeWriteOptions();
  for (int attempt = first_attempt; attempt <= options_.local_attempts; ++attempt) {
    out.status = FetchAndCheck(source, task, write, batch);
    if (task.abort->load()) {
      out.abandoned = true;
      return out;
    }
    if (out.status.ok()) {
      PartOutcome renewed = RenewBeforeWrite(queue, task);
      if (renewed.lost) return renewed;
      // Test hook (core/failpoint.h): stop here, where only the fence can refuse the write.
      if (FailpointFiresOnce("worker-stop-before-write")) raise(SIGSTOP);
      int64_t write_start = options_.env->NowMicros();
      {
        auto conn = pool_->Acquire();
        out.status = WriteRange(*conn, *write, write_options);
      }
      AddSince(options_.env, write_start, counters_.write_micros);
      AddSince(options_.env, write_start, counters_.written_micros);
      if (out.status.ok()) return out;
      AfterFenceRefusal(queue, task, out.status);
      if (IsFenceRejection(out.status)) {
        out.lost = true;
        return out;
      }
      // Granted before a re-org's rollback: this token can never write above the fork point.
      // Fail the task now (requeued: the next claim brings a new token and a fresh fetch).
      if (IsReorgFenced(out.status)) return out;
    }
    if (!RetryLocally(out.status) || attempt == options_.local_attempts) return out;
    if (!BackoffBeforeRetry(task, attempt, out.status)) {
      out.abandoned = true;
      return out;
    }
  }
  return out;
}

Status Worker::Process(Queue& queue, BlockSource& source, const Lease& lease,
                       std::optional<Committed>* committed) {
  std::shared_ptr<Task> task = Hold(lease);
  const uint64_t to = static_cast<uint64_t>(lease.task.to);
  // The range in parts of what the memory budget lets this thread hold (node/memory_budget.h),
  // in order, each part a fenced write of its own with the lease's token; one part without one.
  MemoryBudget unlimited(0, 1);
  MemoryBudget& budget = options_.memory_budget != nullptr ? *options_.memory_budget : unlimited;
  PartOutcome out;
  while (task->next_from <= to) {
    const uint32_t batch = budget.BatchBlocks(options_.blocks_per_request);
    const uint64_t part = budget.PartBlocks(to - task->next_from + 1, batch);
    RangeWrite write = NewWrite(*task, task->next_from, task->next_from + part - 1);
    out = ProcessPart(queue, source, *task, &write, batch, 1);
    if (out.lost || out.abandoned || !out.status.ok()) break;
    AddCounts(&task->done.blocks, &task->done.transactions, &task->done.logs,
              &task->done.token_transfers, write.blocks);
    task->next_from = write.to_block + 1;
  }
  task->over = true;
  Release(*task);
  if (!out.lost && !out.abandoned && out.status.ok()) {
    // Committed. The task is completed together with the next claim (Run), one round trip.
    *committed = task->done;
    return Status::Ok();
  }
  return EndUncommitted(queue, *task, out);
}

Status Worker::EndUncommitted(Queue& queue, const Task& task, const PartOutcome& outcome) {
  const TaskRange& range = task.lease.task;
  const Status& st = outcome.status;
  if (outcome.lost || outcome.abandoned) {
    bool stopping = stop_ != nullptr && stop_->load();
    if (!stopping || outcome.lost) {
      counters_.leases_lost += 1;
      CountRangeEvent(RangeEvent::kLeaseLost);
      spdlog::warn("worker {}: lease of task {} (token {}) lost, dropping it: {}",
                   options_.worker_id, range.id(), task.lease.token,
                   outcome.lost ? st.ToString() : "renewal refused");
    } else {
      spdlog::info("worker {}: stopping; task {} is left to its lease expiry", options_.worker_id,
                   range.id());
    }
    return Status::Ok();
  }

  int64_t fail_start = options_.env->NowMicros();
  auto failed =
      queue.Fail(range, options_.worker_id, task.lease.token, st.ToString(), options_.max_attempts);
  AddSince(options_.env, fail_start, counters_.coord_micros);
  counters_.failed += 1;
  CountRangeEvent(RangeEvent::kFailed);
  RecordError(st);
  if (!failed.ok()) {
    // Not the owner any more (Aborted) or Redis away: the lease expires and the janitor requeues.
    spdlog::warn("worker {}: task {} failed ({}) and Fail was refused: {}", options_.worker_id,
                 range.id(), st.ToString(), failed.status().ToString());
  } else if (failed->outcome == FailOutcome::kDeadLettered) {
    counters_.dead_lettered += 1;
    CountRangeEvent(RangeEvent::kDeadLettered);
    spdlog::error("worker {}: task {} dead-lettered after {} attempts: {}", options_.worker_id,
                  range.id(), failed->attempts, st.ToString());
  } else {
    spdlog::warn("worker {}: task {} failed (attempt {} of {}), requeued: {}", options_.worker_id,
                 range.id(), failed->attempts, options_.max_attempts, st.ToString());
  }
  if (st.code() == Code::kFailedPrecondition) return st.WithContext("task " + range.id());
  return Status::Ok();
}

Result<std::optional<Lease>> Worker::CompleteAndClaimNext(Queue& queue, const Committed& done) {
  // Test hook (core/failpoint.h): stop between the write and the completion.
  if (FailpointFiresOnce("worker-stop-before-complete")) raise(SIGSTOP);
  auto r = queue.CompleteAndClaim(done.lease.task, options_.worker_id, done.lease.token,
                                  options_.lease_ttl_ms);
  if (r.ok()) {
    RecordCompletion(done, r->completed);
    return std::move(r->next);
  }
  // The answer is lost (or the call failed): whether it ran is unknown. Complete the task on its
  // own (refused if the first call ran; a lease it granted is requeued by the janitor), and let
  // the caller claim again as after any failed claim.
  CompleteCommitted(queue, done);
  return r.status();
}

void Worker::CompleteCommitted(Queue& queue, const Committed& done) {
  if (FailpointFiresOnce("worker-stop-before-complete")) raise(SIGSTOP);
  // Complete is owner-only, so retrying it after a lost answer is safe (refused).
  Status st;
  for (int i = 0; i < 3; ++i) {
    st = queue.Complete(done.lease.task, options_.worker_id, done.lease.token);
    if (st.code() != Code::kUnavailable) break;
    options_.env->SleepMicros(BackoffMicros(options_.env, i, 100'000, 1'000'000));
  }
  RecordCompletion(done, st);
}

void Worker::RecordCompletion(const Committed& done, const Status& completed) {
  if (!completed.ok()) {
    // The rows are committed either way; the next owner rewrites them idempotently.
    spdlog::warn("worker {}: task {} committed but not completed: {}", options_.worker_id,
                 done.lease.task.id(), completed.ToString());
    if (completed.code() == Code::kAborted) {
      counters_.leases_lost += 1;
      CountRangeEvent(RangeEvent::kLeaseLost);
    }
    return;
  }
  counters_.transactions += done.transactions;
  counters_.logs += done.logs;
  counters_.token_transfers += done.token_transfers;
  counters_.blocks += done.blocks;
  counters_.tasks += 1;
}

void Worker::KeeperLoop(RedisConn* redis) {
  Queue queue(redis, keys_);
  Registry registry(redis, &keys_);
  Env* env = options_.env;
  const int64_t renew_every = std::max<int64_t>(1, options_.lease_ttl_ms / 3) * 1000;
  const int64_t beat_every = options_.heartbeat_interval_ms * 1000;
  const std::string host = HostName();
  int64_t next_beat = env->NowMicros();
  int64_t last_beat = next_beat;
  uint64_t last_blocks = counters_.blocks.load();
  std::map<uint64_t, int64_t> next_renew;  // by task seq: when its lease is renewed next

  while (!keeper_quit_.load()) {
    const bool stopping = stop_ != nullptr && stop_->load();
    int64_t now = env->NowMicros();

    // Every task held: with prefetch also the one fetched ahead, which may wait behind the write
    // for longer than a TTL and must keep its lease meanwhile.
    std::vector<std::shared_ptr<Task>> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held = held_;
    }
    std::erase_if(next_renew, [&](const auto& entry) {
      return std::none_of(held.begin(), held.end(),
                          [&](const auto& t) { return t->seq == entry.first; });
    });
    for (const std::shared_ptr<Task>& task : held) {
      if (stopping) task->abort->store(true);
      // A new task: its claim just granted a full TTL.
      auto [due, fresh] = next_renew.try_emplace(task->seq, now + renew_every);
      if (fresh || now < due->second) continue;
      const Lease& lease = task->lease;
      auto renewed =
          queue.Renew(lease.task, options_.worker_id, lease.token, options_.lease_ttl_ms);
      due->second = now + renew_every;
      if (!renewed.ok()) {
        if (renewed.status().code() == Code::kAborted) {
          task->abort->store(true);  // only the task it was about
        } else {
          // Redis away: the lease still has 2/3 of its TTL; try again sooner.
          due->second = now + renew_every / 4;
          spdlog::warn("worker {}: lease renewal of {} failed: {}", options_.worker_id,
                       lease.task.id(), renewed.status().ToString());
        }
      }
    }
    if (now >= next_beat) {
      uint64_t blocks = counters_.blocks.load();
      double elapsed = static_cast<double>(std::max<int64_t>(1, now - last_beat)) / 1e6;
      WorkerInfo info;
      info.worker = options_.worker_id;
      info.host = host;
      info.pid = static_cast<int64_t>(getpid());
      info.range = held.empty() ? "" : held.front()->lease.task.id();  // the oldest: being written
      info.blocks_per_s = static_cast<double>(blocks - last_blocks) / elapsed;
      if (now > last_beat) {
        last_beat = now;
        last_blocks = blocks;
      }
      Status beat = registry.Beat(info, 3 * options_.heartbeat_interval_ms);
      if (!beat.ok()) {
        spdlog::warn("worker {}: heartbeat failed: {}", options_.worker_id, beat.ToString());
      }
      next_beat = now + beat_every;
    }
    env->SleepMicros(kSliceMicros);
  }
}

std::string Worker::last_error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return last_error_;
}

void Worker::RecordError(const Status& st) {
  std::lock_guard<std::mutex> lock(error_mu_);
  last_error_ = st.ToString();
}

}  // namespace gapless
