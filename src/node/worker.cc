#include "node/worker.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

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

void Worker::SleepUnlessAborted(int64_t micros) {
  while (micros > 0 && !abort_.load()) {
    int64_t slice = std::min(micros, kSliceMicros);
    options_.env->SleepMicros(slice);
    micros -= slice;
  }
}

Status Worker::EnsureFenceFloor(RedisConn& redis) {
  auto conn = pool_->Acquire();
  return gapless::EnsureFenceFloor(redis, keys_, *conn, "worker " + options_.worker_id);
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
  std::thread keeper([this, conn = keeper_redis.get()] { KeeperLoop(conn); });

  Status result;
  int64_t redis_failures = 0;
  std::optional<Committed> committed;  // the task just committed, completed with the next claim
  bool data_set_restored = false;      // the last claim was refused (IsFenceDataSetRefusal)
  while (!stop.load()) {
    int64_t claim_start = options_.env->NowMicros();
    Status floor = EnsureFenceFloor(*redis);
    Result<std::optional<Lease>> claim = std::optional<Lease>();
    if (!floor.ok()) {
      claim = floor;
    } else if (committed.has_value()) {
      // Test hook (core/failpoint.h): stop between the write and the completion.
      if (FailpointFiresOnce("worker-stop-before-complete")) raise(SIGSTOP);
      claim = CompleteAndClaimNext(queue, *committed);
      committed.reset();
    } else {
      claim = queue.Claim(options_.worker_id, options_.lease_ttl_ms);
    }
    AddSince(options_.env, claim_start, counters_.coord_micros);
    if (!claim.ok() && IsFenceDataSetRefusal(claim.status()) && !data_set_restored) {
      // The coordination Redis is another data set than the one the counter was floored on (a
      // failover to a replica that may have lagged): restored, then claimed again at once. A
      // second refusal in a row waits like any failed claim.
      spdlog::warn("worker {}: {}", options_.worker_id, claim.status().ToString());
      Status restored;
      {
        auto conn = pool_->Acquire();
        restored = RestoreFenceOnNewDataSet(queue, *conn, "worker " + options_.worker_id);
      }
      data_set_restored = true;
      if (restored.ok()) continue;
      claim = restored;
    }
    data_set_restored = false;
    if (!claim.ok()) {
      // Redis or PostgreSQL away: wait it out (a claim that ran but whose answer was lost is a
      // lease nobody renews; the janitor requeues it).
      spdlog::warn("worker {}: claim failed: {}", options_.worker_id, claim.status().ToString());
      if (claim.status().code() == Code::kFailedPrecondition) {
        result = claim.status();
        break;
      }
      int64_t delay =
          BackoffMicros(options_.env, static_cast<int>(std::min<int64_t>(redis_failures++, 6)),
                        options_.idle_poll_ms * 1000, 5'000'000);
      int64_t sleep_start = options_.env->NowMicros();
      options_.env->SleepMicros(delay);
      AddSince(options_.env, sleep_start, counters_.coord_micros);
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

  keeper_quit_.store(true);
  keeper.join();
  stop_ = nullptr;
  Registry registry(redis.get(), &keys_);
  (void)registry.Leave(options_.worker_id);
  return result;
}

Status Worker::Process(Queue& queue, BlockSource& source, const Lease& lease,
                       std::optional<Committed>* committed) {
  const TaskRange& task = lease.task;
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = true;
    ++task_seq_;
    lease_ = lease;
    abort_.store(false);
  }
  auto finish = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = false;
  };

  RangeWrite write;
  write.from_block = static_cast<uint64_t>(task.from);
  write.to_block = static_cast<uint64_t>(task.to);
  write.fence_token = lease.token;
  write.fence_owner = options_.worker_id;
  WriteOptions write_options;
  write_options.mode = options_.write_mode;
  write_options.copy_format = options_.copy_format;

  const EnrichOptions enrich = EnrichWithStore(options_.token_metadata, pool_);
  Status st;
  bool lost = false;       // renewal refused or fenced off: the task is someone else's
  bool abandoned = false;  // abort_ seen: the keeper saw the lease refused, or we are stopping
  Committed done;
  done.lease = lease;
  // The range in parts of what the memory budget lets this thread hold (node/memory_budget.h),
  // in order, each part a fenced write of its own with the lease's token; one part without one.
  MemoryBudget unlimited(0, 1);
  MemoryBudget& budget = options_.memory_budget != nullptr ? *options_.memory_budget : unlimited;
  for (uint64_t part_from = write.from_block; part_from <= static_cast<uint64_t>(task.to);) {
    const uint32_t batch = budget.BatchBlocks(options_.blocks_per_request);
    const uint64_t part = budget.PartBlocks(static_cast<uint64_t>(task.to) - part_from + 1, batch);
    write.from_block = part_from;
    write.to_block = part_from + part - 1;
    for (int attempt = 1; attempt <= options_.local_attempts; ++attempt) {
      write.blocks.clear();
      int64_t fetch_start = options_.env->NowMicros();
      st = FetchAndDecodeRange(source, write.from_block, write.to_block, batch,
                               BlockChecks{options_.chain_id, options_.verify}, options_.limiter,
                               &abort_, &write.blocks, &enrich, options_.memory_budget);
      if (st.ok() && options_.check_blocks) {
        st = options_.check_blocks(write.blocks);
        // A block the head log does not have at its height: the endpoint that served it answered
        // from another fork or a lagging backend; the retry asks another (a pool's).
        if (!st.ok() && st.code() == Code::kInvalidData) source.Distrust();
      }
      AddSince(options_.env, fetch_start, counters_.fetch_micros);
      if (abort_.load()) {
        abandoned = true;
        break;
      }
      if (st.ok()) {
        // A full TTL ahead of the write. Aborted: the task is someone else's now.
        int64_t renew_start = options_.env->NowMicros();
        auto renewed = queue.Renew(task, options_.worker_id, lease.token, options_.lease_ttl_ms);
        AddSince(options_.env, renew_start, counters_.coord_micros);
        if (!renewed.ok() && renewed.status().code() == Code::kAborted) {
          st = renewed.status();
          lost = true;
          break;
        }
        // Test hook (core/failpoint.h): stop here, where only the fence can refuse the write.
        if (FailpointFiresOnce("worker-stop-before-write")) raise(SIGSTOP);
        int64_t write_start = options_.env->NowMicros();
        {
          auto conn = pool_->Acquire();
          st = WriteRange(*conn, write, write_options);
        }
        AddSince(options_.env, write_start, counters_.write_micros);
        if (st.ok()) break;
        if (IsFenceRejection(st) || IsReorgFenced(st)) {
          // The counter may be behind PostgreSQL (node/reconcile.h): raised before the next claim.
          auto conn = pool_->Acquire();
          Status raised =
              RaiseFenceAfterRefusal(queue, *conn, lease.token, "worker " + options_.worker_id);
          if (!raised.ok()) {
            spdlog::warn("worker {}: could not raise the fence counter: {}", options_.worker_id,
                         raised.ToString());
          }
        }
        if (IsFenceRejection(st)) {
          lost = true;
          break;
        }
        // Granted before a re-org's rollback: this token can never write above the fork point.
        // Fail the task now (requeued: the next claim brings a new token and a fresh fetch).
        if (IsReorgFenced(st)) break;
      }
      if (!RetryLocally(st) || attempt == options_.local_attempts) break;
      int64_t delay = BackoffMicros(options_.env, attempt - 1, options_.retry_base_micros,
                                    options_.retry_cap_micros);
      counters_.retries += 1;
      CountRangeEvent(RangeEvent::kRetried);
      RecordError(st);
      spdlog::warn("worker {}: task {} attempt {}/{} failed: {}; retrying in {:.1f} s",
                   options_.worker_id, task.id(), attempt, options_.local_attempts, st.ToString(),
                   static_cast<double>(delay) / 1e6);
      int64_t backoff_start = options_.env->NowMicros();
      SleepUnlessAborted(delay);
      AddSince(options_.env, backoff_start, counters_.backoff_micros);
      if (abort_.load()) {
        abandoned = true;
        break;
      }
    }

    if (lost || abandoned || !st.ok()) break;
    done.blocks += write.blocks.size();
    for (const auto& b : write.blocks) {
      done.transactions += b.transactions.size();
      done.logs += b.logs.size();
      done.token_transfers += b.token_transfers.size();
    }
    part_from = write.to_block + 1;
  }

  if (lost || abandoned) {
    finish();
    bool stopping = stop_ != nullptr && stop_->load();
    if (!stopping || lost) {
      counters_.leases_lost += 1;
      CountRangeEvent(RangeEvent::kLeaseLost);
      spdlog::warn("worker {}: lease of task {} (token {}) lost, dropping it: {}",
                   options_.worker_id, task.id(), lease.token,
                   lost ? st.ToString() : "renewal refused");
    } else {
      spdlog::info("worker {}: stopping; task {} is left to its lease expiry", options_.worker_id,
                   task.id());
    }
    return Status::Ok();
  }

  if (st.ok()) {
    // Committed. The task is completed together with the next claim (Run), one round trip.
    finish();
    *committed = done;
    return Status::Ok();
  }

  int64_t fail_start = options_.env->NowMicros();
  auto failed =
      queue.Fail(task, options_.worker_id, lease.token, st.ToString(), options_.max_attempts);
  AddSince(options_.env, fail_start, counters_.coord_micros);
  finish();
  counters_.failed += 1;
  CountRangeEvent(RangeEvent::kFailed);
  RecordError(st);
  if (!failed.ok()) {
    // Not the owner any more (Aborted) or Redis away: the lease expires and the janitor requeues.
    spdlog::warn("worker {}: task {} failed ({}) and Fail was refused: {}", options_.worker_id,
                 task.id(), st.ToString(), failed.status().ToString());
  } else if (failed->outcome == FailOutcome::kDeadLettered) {
    counters_.dead_lettered += 1;
    CountRangeEvent(RangeEvent::kDeadLettered);
    spdlog::error("worker {}: task {} dead-lettered after {} attempts: {}", options_.worker_id,
                  task.id(), failed->attempts, st.ToString());
  } else {
    spdlog::warn("worker {}: task {} failed (attempt {} of {}), requeued: {}", options_.worker_id,
                 task.id(), failed->attempts, options_.max_attempts, st.ToString());
  }
  if (st.code() == Code::kFailedPrecondition) return st.WithContext("task " + task.id());
  return Status::Ok();
}

Result<std::optional<Lease>> Worker::CompleteAndClaimNext(Queue& queue, const Committed& done) {
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
  uint64_t renewed_seq = 0;
  int64_t next_renew = 0;

  while (!keeper_quit_.load()) {
    if (stop_ != nullptr && stop_->load()) abort_.store(true);
    int64_t now = env->NowMicros();

    bool active;
    uint64_t seq;
    Lease lease;
    {
      std::lock_guard<std::mutex> lock(mu_);
      active = active_;
      seq = task_seq_;
      lease = lease_;
    }
    if (active && seq != renewed_seq) {  // a new task: its claim just granted a full TTL
      renewed_seq = seq;
      next_renew = now + renew_every;
    }
    if (active && now >= next_renew) {
      auto renewed =
          queue.Renew(lease.task, options_.worker_id, lease.token, options_.lease_ttl_ms);
      next_renew = now + renew_every;
      if (!renewed.ok()) {
        if (renewed.status().code() == Code::kAborted) {
          std::lock_guard<std::mutex> lock(mu_);
          if (active_ && task_seq_ == seq) abort_.store(true);  // only the task it was about
        } else {
          // Redis away: the lease still has 2/3 of its TTL; try again sooner.
          next_renew = now + renew_every / 4;
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
      info.range = active ? lease.task.id() : "";
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
