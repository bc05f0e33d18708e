// kafka_worker_window: the steps that write one window of a KafkaWorker (node/kafka_worker.h
// states them, 0-5, and why their order is safe): which held blocks are still to write
// (Classify), the window's lock and the fenced writes under it (WriteWindow, WriteLocked), and
// what becomes of the window's messages after (Acknowledge, Release, DeadLetter).
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "coord/frontier.h"
#include "coord/range_lock.h"
#include "core/failpoint.h"
#include "node/kafka_worker.h"
#include "node/node_metrics.h"
#include "node/range_job.h"
#include "node/ranges.h"
#include "node/reconcile.h"

namespace gapless {
namespace {

// How soon a window whose lock another worker holds is looked at again.
constexpr int64_t kLockWaitMicros = 200'000;

bool IsFenceRejection(const Status& st) {
  return st.code() == Code::kAborted && st.reason() == kStaleFenceReason;
}

// Contiguous runs of block numbers (ascending).
std::vector<BlockRange> Runs(const std::vector<uint64_t>& numbers) {
  std::vector<BlockRange> runs;
  for (uint64_t n : numbers) {
    if (!runs.empty() && runs.back().to + 1 == n) {
      runs.back().to = n;
    } else {
      runs.push_back(BlockRange{n, n});
    }
  }
  return runs;
}

}  // namespace

Status KafkaWorker::ProcessWindow(uint64_t start) {
  auto it = windows_.find(start);
  if (it == windows_.end()) return Status::Ok();
  Window& w = it->second;
  Status error;
  Outcome outcome = WriteWindow(w, &error);
  if (outcome == Outcome::kDone) {
    Acknowledge(w);
    windows_.erase(it);
    return Status::Ok();
  }
  if (outcome == Outcome::kDeadLetter) {
    DeadLetter(w, error);
    windows_.erase(it);
    return Status::Ok();
  }
  if (error.code() == Code::kFailedPrecondition) {
    return error.WithContext(fmt::format("blocks {}..{}", w.start, w.end));
  }
  if (!error.ok()) {
    counters_.retries += 1;
    CountRangeEvent(RangeEvent::kRetried);
    w.not_before_micros = options_.env->NowMicros() +
                          BackoffMicros(options_.env, std::min(w.attempts, 5),
                                        options_.retry_base_micros, options_.retry_cap_micros);
    spdlog::warn("kafka worker {}: blocks {}..{}: {}; retrying", options_.worker_id, w.start, w.end,
                 error.ToString());
  } else {
    w.not_before_micros = options_.env->NowMicros() + kLockWaitMicros;
  }
  return Status::Ok();
}

Status KafkaWorker::Classify(Window& w, uint64_t generation, std::vector<BlockRange>* todo,
                             bool* waiting) {
  todo->clear();
  *waiting = false;
  std::map<uint64_t, std::string> stored;
  {
    auto conn = pool_->Acquire();
    GAPLESS_ASSIGN_OR_RETURN(
        PgResult rows,
        conn->Query("SELECT number, '0x' || encode(hash, 'hex') FROM blocks WHERE number BETWEEN "
                    "$1 AND $2",
                    {std::to_string(w.start), std::to_string(w.end)}));
    for (int i = 0; i < rows.rows(); ++i) {
      GAPLESS_ASSIGN_OR_RETURN(int64_t n, rows.GetInt64(i, 0));
      stored[static_cast<uint64_t>(n)] = std::string(rows.Get(i, 1));
    }
  }
  KafkaWorkerOptions::HeadLogView log_view;
  if (options_.head_log) {
    GAPLESS_ASSIGN_OR_RETURN(log_view, options_.head_log(w.start, w.end));
  }
  const std::map<uint64_t, std::string>& logged = log_view.hashes;
  std::vector<uint64_t> done, open;
  for (auto it = w.blocks.begin(); it != w.blocks.end();) {
    const uint64_t n = it->first;
    const std::string& hash = it->second;
    auto at = stored.find(n);
    if (at != stored.end() && at->second == hash) {
      done.push_back(n);
    } else if (options_.head_log) {
      auto log = logged.find(n);
      if (log == logged.end() && log_view.lowest.has_value() && n < *log_view.lowest) {
        open.push_back(n);  // history below the log's window
      } else if (log == logged.end()) {
        *waiting = true;  // the head log has not committed this height yet
      } else if (log->second != hash) {
        spdlog::warn(
            "kafka worker {}: block {} of the stream is {} but the head log has {}: another fork, "
            "dropped",
            options_.worker_id, n, hash.empty() ? "(no hash)" : hash, log->second);
        held_->Drop(n);
        it = w.blocks.erase(it);
        continue;
      } else if (at != stored.end()) {
        *waiting = true;  // PostgreSQL still stores the old fork here: the rollback is pending
      } else {
        open.push_back(n);
      }
    } else {
      open.push_back(n);
    }
    ++it;
  }
  for (const BlockRange& run : Runs(done)) {
    GAPLESS_ASSIGN_OR_RETURN(
        bool recorded, Frontier(redis_.get(), keys_.completed(), keys_.frontier(), options_.from,
                                keys_.leader_epoch())
                           .RecordFenced(run.from, run.to, keys_.reorg_generation(), generation));
    (void)recorded;  // refused: a re-org was followed since; the leader's catch-up decides
    Release(w, run.from, run.to);
  }
  *todo = Runs(open);
  return Status::Ok();
}

KafkaWorker::Outcome KafkaWorker::WriteWindow(Window& w, Status* error) {
  const TaskRange window{static_cast<int64_t>(w.start), static_cast<int64_t>(w.end)};
  RangeLocks locks(redis_.get(), keys_);
  auto fail = [&](Status st) {
    *error = std::move(st);
    return Outcome::kRetry;
  };

  // 0. The re-org generation Redis has followed, before anything this step looks at or records.
  Result<RedisReply> gen_reply = redis_->Command({"GET", keys_.reorg_generation()});
  if (!gen_reply.ok()) return fail(gen_reply.status());
  const uint64_t generation =
      gen_reply->str.empty() ? 0 : std::strtoull(gen_reply->str.c_str(), nullptr, 10);

  // 1. Completion, by hash.
  std::vector<BlockRange> todo;
  bool waiting = false;
  if (Status st = Classify(w, generation, &todo, &waiting); !st.ok()) return fail(st);
  if (todo.empty()) {
    if (waiting) return Outcome::kRetry;  // looked at again soon
    skipped_ += 1;
    return Outcome::kDone;
  }

  // 2. The window's lock, with a fresh fencing token.
  Result<std::optional<int64_t>> token =
      locks.Acquire(window, options_.worker_id, options_.lock_ttl_ms);
  if (!token.ok() && IsFenceDataSetRefusal(token.status())) {
    // The counter was floored on another Redis data set (a failover): restored before the retry.
    Queue queue(redis_.get(), keys_);
    auto conn = pool_->Acquire();
    Status restored = RestoreFenceOnNewDataSet(queue, *conn, "kafka worker " + options_.worker_id);
    if (!restored.ok()) return fail(restored);
  }
  if (!token.ok()) return fail(token.status());
  if (!token->has_value()) return Outcome::kRetry;  // another worker writes it: look again soon
  {
    std::lock_guard<std::mutex> lock(mu_);
    locked_ = window;
    lock_lost_.store(false);
  }
  // Steps 2 (again) to 4, under the lock. Whichever way they end, this is where the lock is
  // released; what WriteLocked leaves to be done after the release follows it.
  const LockedWrite locked = WriteLocked(w, window, generation, **token, locks, error);
  {
    std::lock_guard<std::mutex> lock(mu_);
    locked_.reset();
  }
  (void)locks.Release(window, options_.worker_id);
  switch (locked.then) {
    case LockedWrite::Then::kNothing:
      break;
    case LockedWrite::Then::kSkip:
      skipped_ += 1;
      break;
    case LockedWrite::Then::kRaiseFence:
      if (IsFenceRejection(*error)) {
        counters_.leases_lost += 1;
        CountRangeEvent(RangeEvent::kLeaseLost);
      }
      if (IsFenceRejection(*error) || error->reason() == kReorgFencedReason) {
        // The counter may be behind PostgreSQL (node/reconcile.h): raised before the next token.
        Queue queue(redis_.get(), keys_);
        auto conn = pool_->Acquire();
        Status raised =
            RaiseFenceAfterRefusal(queue, *conn, **token, "kafka worker " + options_.worker_id);
        if (!raised.ok()) {
          spdlog::warn("kafka worker {}: could not raise the fence counter: {}", options_.worker_id,
                       raised.ToString());
        }
      }
      break;
    case LockedWrite::Then::kCountWritten:
      counters_.tasks += 1;
      // Test hook: die after the commit and before the offsets are committed.
      if (locked.outcome == Outcome::kDone && FailpointFiresOnce("kafka-worker-exit-before-ack")) {
        raise(SIGKILL);
      }
      break;
  }
  return locked.outcome;
}

KafkaWorker::LockedWrite KafkaWorker::WriteLocked(Window& w, const TaskRange& window,
                                                  uint64_t generation, int64_t token,
                                                  RangeLocks& locks, Status* error) {
  Frontier frontier(redis_.get(), keys_.completed(), keys_.frontier(), options_.from,
                    keys_.leader_epoch());
  auto fail = [&](Status st) {
    *error = std::move(st);
    return LockedWrite{Outcome::kRetry};
  };
  // Again under the lock (and after the token: see the header): the holder before us may have
  // committed, the head log may have moved. Now nobody else can write, so what is left is ours.
  std::vector<BlockRange> todo;
  bool waiting = false;
  if (Status st = Classify(w, generation, &todo, &waiting); !st.ok()) return fail(st);
  if (todo.empty()) {
    if (waiting) return LockedWrite{Outcome::kRetry};
    return LockedWrite{Outcome::kDone, LockedWrite::Then::kSkip};
  }

  // 3. Decode and write each run, fenced by the token, in parts of what the budget lets this
  // worker hold decoded; each part released once written (the window keeps what is left).
  WriteOptions write_options;
  write_options.mode = options_.write_mode;
  write_options.copy_format = options_.copy_format;
  write_options.contracts = options_.contracts;
  MemoryBudget unlimited(0, 1);
  MemoryBudget& budget = options_.memory_budget != nullptr ? *options_.memory_budget : unlimited;
  const EnrichOptions enrich = EnrichWithStore(options_.token_metadata, pool_);
  for (const BlockRange& run : todo) {
    for (uint64_t part_from = run.from; part_from <= run.to;) {
      const uint32_t batch = budget.StreamBatchBlocks(100);
      const uint64_t part_to = part_from + budget.StreamPartBlocks(run.to - part_from + 1) - 1;
      RangeWrite write;
      write.from_block = part_from;
      write.to_block = part_to;
      write.fence_token = token;
      write.fence_owner = options_.worker_id;
      int64_t fetch_start = options_.env->NowMicros();
      Status st = FetchAndDecodeRange(*held_, part_from, part_to, batch,
                                      BlockChecks{options_.chain_id, options_.verify}, nullptr,
                                      nullptr, &write.blocks, &enrich, options_.memory_budget,
                                      nullptr, &write.datasets);
      if (!st.ok() && st.code() == Code::kInvalidData && fallback_ != nullptr) {
        spdlog::warn("kafka worker {}: {}; fetching blocks {}..{} from {} instead",
                     options_.worker_id, st.ToString(), part_from, part_to, fallback_->Describe());
        write.blocks.clear();
        st = FetchAndDecodeRange(*fallback_, part_from, part_to, std::min<uint32_t>(batch, 10),
                                 BlockChecks{options_.chain_id, options_.verify}, nullptr, nullptr,
                                 &write.blocks, &enrich, options_.memory_budget, nullptr,
                                 &write.datasets);
      }
      counters_.fetch_micros += static_cast<uint64_t>(options_.env->NowMicros() - fetch_start);
      if (!st.ok()) {
        *error = st;
        if (st.code() == Code::kInvalidData) {
          return LockedWrite{++w.attempts >= options_.max_attempts ? Outcome::kDeadLetter
                                                                   : Outcome::kRetry};
        }
        return LockedWrite{Outcome::kRetry};
      }
      // A full TTL ahead of the write; lost (expired while paused, taken over): start again.
      Result<bool> extended = locks.Extend(window, options_.worker_id, options_.lock_ttl_ms);
      if (!extended.ok() || !*extended || lock_lost_.load()) {
        if (extended.ok()) {  // refused (not a Redis failure): the lock is someone else's
          counters_.leases_lost += 1;
          CountRangeEvent(RangeEvent::kLeaseLost);
        }
        return fail(extended.ok() ? Aborted("the range lock was lost before the write")
                                  : extended.status());
      }
      if (FailpointFiresOnce("kafka-worker-stop-before-write")) raise(SIGSTOP);
      int64_t write_start = options_.env->NowMicros();
      {
        auto conn = pool_->Acquire();
        st = WriteRange(*conn, write, write_options);
      }
      counters_.write_micros += static_cast<uint64_t>(options_.env->NowMicros() - write_start);
      if (!st.ok()) {
        // The fence counter is raised (when the refusal says so) after the release.
        *error = st;
        LockedWrite refused{Outcome::kRetry, LockedWrite::Then::kRaiseFence};
        if (st.code() == Code::kInvalidData) {
          refused.outcome =
              ++w.attempts >= options_.max_attempts ? Outcome::kDeadLetter : Outcome::kRetry;
        }
        return refused;
      }
      // 4. Recorded for the frontier, fenced by the generation read in step 0 (a failure here is
      // repaired by step 1 on redelivery, and by the leader's PostgreSQL catch-up).
      Result<bool> recorded =
          frontier.RecordFenced(part_from, part_to, keys_.reorg_generation(), generation);
      if (!recorded.ok()) {
        spdlog::warn("kafka worker {}: blocks {}..{} committed, not recorded in Redis: {}",
                     options_.worker_id, part_from, part_to, recorded.status().ToString());
      } else if (!*recorded) {
        spdlog::info(
            "kafka worker {}: blocks {}..{} committed, but a re-org was followed meanwhile: not "
            "recorded for the frontier (the leader checks PostgreSQL)",
            options_.worker_id, part_from, part_to);
      }
      counters_.blocks += write.blocks.size();
      for (const BlockData& b : write.blocks) {
        counters_.transactions += b.transactions.size();
        counters_.logs += b.logs.size();
        counters_.token_transfers += b.token_transfers.size();
      }
      // 5. for this part: its messages acknowledged, its text dropped.
      Release(w, part_from, part_to);
      part_from = part_to + 1;
    }
  }
  // Blocks the head log has not reached (or whose rollback is pending) keep the window, and every
  // message of it, until they are written or found to be of another fork.
  return LockedWrite{waiting ? Outcome::kRetry : Outcome::kDone, LockedWrite::Then::kCountWritten};
}

void KafkaWorker::Acknowledge(Window& w) {
  std::vector<Delivery> all;
  all.reserve(w.deliveries.size());
  for (const auto& [n, d] : w.deliveries) all.push_back(d);
  // One offset commit for the window. A failed commit loses nothing: the messages come again
  // after a restart or rebalance, and the completion check skips them.
  Status st = subscriber_->AckAll(all);
  if (!st.ok()) {
    spdlog::warn("kafka worker {}: acknowledging blocks {}..{} failed: {}", options_.worker_id,
                 w.start, w.end, st.ToString());
  }
  for (const auto& [n, unused] : w.blocks) held_->Drop(n);
}

void KafkaWorker::Release(Window& w, uint64_t from, uint64_t to) {
  auto first = std::stable_partition(
      w.deliveries.begin(), w.deliveries.end(),
      [&](const auto& entry) { return entry.first < from || entry.first > to; });
  std::vector<Delivery> done;
  for (auto it = first; it != w.deliveries.end(); ++it) done.push_back(std::move(it->second));
  w.deliveries.erase(first, w.deliveries.end());
  if (!done.empty()) {
    // As for a whole window (Acknowledge): a failed commit loses nothing.
    Status st = subscriber_->AckAll(done);
    if (!st.ok()) {
      spdlog::warn("kafka worker {}: acknowledging blocks {}..{} failed: {}", options_.worker_id,
                   from, to, st.ToString());
    }
  }
  for (auto it = w.blocks.lower_bound(from); it != w.blocks.end() && it->first <= to;) {
    held_->Drop(it->first);
    it = w.blocks.erase(it);
    w.written += 1;
  }
}

void KafkaWorker::DeadLetter(Window& w, const Status& error) {
  spdlog::error("kafka worker {}: blocks {}..{} dead-lettered to {}.dlq after {} attempts: {}",
                options_.worker_id, w.start, w.end, options_.topic, w.attempts, error.ToString());
  for (auto& [n, d] : w.deliveries) {
    Result<std::vector<RawBlock>> raw = held_->Fetch(n, 1);
    // The held block text is the message as it arrived.
    if (raw.ok() && !raw->empty()) d.body = std::move(raw->front().block_json);
    Status st = subscriber_->DeadLetter(d, error.ToString());
    if (!st.ok()) {
      spdlog::error("kafka worker {}: dead letter of {} failed: {}", options_.worker_id, Where(d),
                    st.ToString());
      continue;  // not acknowledged: it comes again after a restart or rebalance
    }
    counters_.dead_lettered += 1;
    CountRangeEvent(RangeEvent::kDeadLettered);
    (void)subscriber_->Ack(d);
  }
  for (const auto& [n, unused] : w.blocks) held_->Drop(n);
}

}  // namespace gapless
