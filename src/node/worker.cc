// Worker (worker.h): Run and the series loop (fetch, write, complete, claim), a task's parts and
// their attempts (fetch, renew, write, retry with backoff), how a task ends (completed with the
// next claim, failed back to the queue, or dropped), the claim with its fence-floor check, and
// the keeper thread (renewals, heartbeats). The loop with prefetch: worker_prefetch.cc.
#include "node/worker.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <vector>

#include "coord/registry.h"
#include "core/failpoint.h"
#include "node/node_metrics.h"
#include "node/reconcile.h"
#include "node/worker_internal.h"
#include "store/decoded.h"
#include "store/state.h"

namespace gapless {

using worker_internal::AddCounts;
using worker_internal::AddSince;
using worker_internal::IsFenceRejection;
using worker_internal::IsReorgFenced;
using worker_internal::RetryLocally;

namespace {

constexpr int64_t kSliceMicros = 20'000;  // how often sleeping threads look at their flags

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
  write_options.contracts = options_.contracts;
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
  Status st =
      options_.events_filter.has_value()
          ? FetchEventsRange(source, *options_.events_filter, write->from_block, write->to_block,
                             batch, BlockChecks{options_.chain_id, options_.verify},
                             options_.limiter, task.abort.get(), &write->blocks,
                             &options_.check_blocks)
          : FetchAndDecodeRange(source, write->from_block, write->to_block, batch,
                                BlockChecks{options_.chain_id, options_.verify}, options_.limiter,
                                task.abort.get(), &write->blocks, &enrich, options_.memory_budget,
                                &options_.check_blocks, &write->datasets);
  write->sparse = options_.events_filter.has_value();
  // Events mode with factories asks every address by topic (store/decoded.h KeepMatching).
  if (st.ok() && write->sparse && options_.contracts != nullptr &&
      options_.contracts->has_factories()) {
    options_.contracts->KeepMatching(&write->blocks);
  }
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
