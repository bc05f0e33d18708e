#include "node/kafka_worker.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <set>
#include <thread>

#include "coord/frontier.h"
#include "coord/range_lock.h"
#include "coord/registry.h"
#include "core/failpoint.h"
#include "events/open_bus.h"
#include "node/node_metrics.h"
#include "node/range_job.h"
#include "node/ranges.h"
#include "node/reconcile.h"
#include "source/block_message.h"
#include "store/queries.h"

namespace gapless {
namespace {

constexpr int64_t kSliceMicros = 20'000;
constexpr int64_t kPollTimeoutMs = 100;
constexpr size_t kPollMax = 500;
// How soon a window whose lock another worker holds is looked at again.
constexpr int64_t kLockWaitMicros = 200'000;

std::string PartitionName(const std::string& topic, int32_t partition) {
  return topic + "[" + std::to_string(partition) + "]";
}

std::string Where(const Delivery& d) {
  return fmt::format("{}@{}", PartitionName(d.topic, d.partition), d.position);
}

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

KafkaWorker::KafkaWorker(KafkaWorkerOptions options, std::string redis_url, Keys keys, PgPool* pool)
    : options_(std::move(options)),
      redis_url_(std::move(redis_url)),
      keys_(std::move(keys)),
      pool_(pool) {
  if (options_.env == nullptr) options_.env = Env::Default();
}

KafkaWorker::~KafkaWorker() = default;

Status KafkaWorker::Validate() const {
  if (options_.worker_id.empty()) return FailedPrecondition("kafka worker: empty worker id");
  if (options_.topic.empty()) return FailedPrecondition("--topic must not be empty");
  if (options_.group.empty()) return FailedPrecondition("--group must not be empty");
  if (options_.range_size == 0) return FailedPrecondition("--range-size must be at least 1");
  if (options_.lock_ttl_ms < 300) return FailedPrecondition("the range lock TTL must be >= 300 ms");
  if (options_.to.has_value() && *options_.to < options_.from) {
    return FailedPrecondition(
        fmt::format("--from {} is above --to {}", options_.from, *options_.to));
  }
  if (pool_ == nullptr) return FailedPrecondition("kafka worker: no database");
  return Status::Ok();
}

Status KafkaWorker::Run(const std::atomic<bool>& stop) {
  GAPLESS_RETURN_IF_ERROR(Validate());
  RedisOptions redis_options;
  redis_options.env = options_.env;
  // Connected by the first command: the coordination Redis (or PostgreSQL) may be away as the
  // worker starts (a restart, a failover); it is waited for, as the loop below waits for the bus.
  GAPLESS_ASSIGN_OR_RETURN(redis_,
                           RedisConn::Connect(redis_url_, redis_options, /*connect_now=*/false));
  GAPLESS_ASSIGN_OR_RETURN(keeper_redis_,
                           RedisConn::Connect(redis_url_, redis_options, /*connect_now=*/false));
  for (int64_t failures = 0;; ++failures) {
    Status floored;
    {
      auto conn = pool_->Acquire();
      floored = EnsureFenceFloor(*redis_, keys_, *conn, "kafka worker " + options_.worker_id);
    }
    if (floored.ok()) break;
    if (floored.code() != Code::kUnavailable) return floored;
    if (stop.load()) return Status::Ok();
    spdlog::warn("kafka worker {}: waiting for the coordination state: {}", options_.worker_id,
                 floored.ToString());
    options_.env->SleepMicros(BackoffMicros(
        options_.env, static_cast<int>(std::min<int64_t>(failures, 5)), 200'000, 5'000'000));
  }
  if (options_.open_subscriber) {
    GAPLESS_ASSIGN_OR_RETURN(subscriber_, options_.open_subscriber());
  } else {
    SubscribeOptions subscribe;
    subscribe.group = options_.group;
    subscribe.topics = {options_.topic};
    subscribe.from_beginning = true;
    subscribe.consumer_name = options_.worker_id;
    if (options_.memory_budget != nullptr) {
      subscribe.max_queue_bytes = options_.memory_budget->StreamQueueBytes();
    }
    Result<std::unique_ptr<Subscriber>> opened = OpenSubscriber(options_.bus_url, subscribe);
    if (!opened.ok()) return opened.status().WithContext("--brokers");
    subscriber_ = std::move(opened).value();
  }
  held_limit_ = options_.memory_budget != nullptr ? options_.memory_budget->StreamHeldBytes()
                                                  : std::numeric_limits<uint64_t>::max();
  if (options_.fallback) fallback_ = options_.fallback();
  held_ = std::make_unique<HeldBlockSource>("kafka topic " + options_.topic, fallback_.get());

  keeper_quit_.store(false);
  std::thread keeper([this] { KeeperLoop(); });

  Status result;
  int64_t poll_failures = 0;
  Frontier frontier(redis_.get(), keys_.completed(), keys_.frontier(), options_.from,
                    keys_.leader_epoch());
  while (!stop.load()) {
    // No more messages than fit in the room left under the budget's share for held text, each
    // counted as the largest block seen, the average, or a heavy mainnet block, whichever is
    // largest: blocks grow without warning (a devnet's genesis, then a deployment).
    size_t poll_max = kPollMax;
    if (options_.memory_budget != nullptr) {
      const uint64_t held = held_->bytes();
      const uint64_t room = held < held_limit_ ? held_limit_ - held : 0;
      const uint64_t per_block =
          std::max<uint64_t>({options_.memory_budget->json_bytes_per_block(), largest_block_bytes_,
                              MemoryBudget::kInitialJsonBytesPerBlock});
      poll_max = static_cast<size_t>(std::clamp<uint64_t>(room / per_block, 1, kPollMax));
    }
    if (stuck_) poll_max = 1;  // each message handed back is its partition's lowest not taken
    Result<std::vector<Delivery>> polled = subscriber_->Poll(poll_max, kPollTimeoutMs);
    if (polled.ok() && stuck_) {
      // Above the share and nothing held could be written at the last pass: what comes is handed
      // back (it comes again, in order), not held. Polling goes on: the group membership stays.
      std::vector<Delivery> kept;
      for (Delivery& d : *polled) {
        Status st = subscriber_->HandBack(d);
        if (!st.ok()) {
          // Not handed back: held after all (the share is exceeded by it, never a message lost).
          spdlog::warn("kafka worker {}: {}", options_.worker_id, st.ToString());
          kept.push_back(std::move(d));
          continue;
        }
        handed_back_ += 1;
        CountKafkaHandedBack(options_.worker_id, 1);
      }
      *polled = std::move(kept);
    }
    if (!polled.ok()) {
      spdlog::warn("kafka worker {}: {}", options_.worker_id, polled.status().ToString());
      options_.env->SleepMicros(
          BackoffMicros(options_.env, static_cast<int>(std::min<int64_t>(poll_failures++, 5)),
                        200'000, 5'000'000));
      continue;
    }
    poll_failures = 0;
    const bool idle = polled->empty();
    uint64_t taken_blocks = 0, taken_bytes = 0;
    for (Delivery& d : *polled) {
      const uint64_t bytes = Take(std::move(d));
      taken_blocks += bytes > 0 ? 1 : 0;
      taken_bytes += bytes;
      largest_block_bytes_ = std::max(largest_block_bytes_, bytes);
    }
    if (options_.memory_budget != nullptr) {
      options_.memory_budget->Observe(taken_blocks, taken_bytes);
    }
    if (held_->bytes() > held_peak_bytes_.load()) held_peak_bytes_.store(held_->bytes());
    DropRevoked();
    for (uint64_t start : ReadyWindows()) {
      if (stop.load()) break;
      Status st = ProcessWindow(start);
      if (!st.ok()) {
        result = st;
        break;
      }
    }
    if (result.ok()) result = FlushOverBudget(stop);
    if (!result.ok()) break;
    // Above the share after the flush: nothing held can be written now. Until a later pass
    // writes some, what comes is handed back.
    const bool was_stuck = stuck_;
    stuck_ = OverBudget();
    SetKafkaHeldBytes(options_.worker_id, held_->bytes());
    if (stuck_ && !was_stuck) SayStuck();
    if (idle && windows_.empty() && options_.to.has_value() && options_.stop_when_done) {
      Result<uint64_t> at = frontier.Get();
      if (at.ok() && *at > *options_.to) {
        done_.store(true);
        break;
      }
    }
  }

  keeper_quit_.store(true);
  keeper.join();
  Registry registry(redis_.get(), &keys_);
  (void)registry.Leave(options_.worker_id);
  subscriber_.reset();  // commits what was acknowledged, leaves the group
  return result;
}

uint64_t KafkaWorker::Take(Delivery delivery) {
  const std::string where = Where(delivery);
  Result<RawBlock> raw = ParseBlockMessage(delivery.body, "", where);
  if (!raw.ok()) {
    // Not a block at all: nothing to retry. Kept in the dead-letter topic, never skipped silently.
    spdlog::error("kafka worker {}: dead-lettering message {}: {}", options_.worker_id, where,
                  raw.status().ToString());
    Status dlq = subscriber_->DeadLetter(delivery, raw.status().ToString());
    if (!dlq.ok()) {
      // Not acknowledged either: the message comes again after a restart or rebalance.
      spdlog::error("kafka worker {}: dead letter of {} failed: {}", options_.worker_id, where,
                    dlq.ToString());
      return 0;
    }
    counters_.dead_lettered += 1;
    CountRangeEvent(RangeEvent::kDeadLettered);
    (void)subscriber_->Ack(delivery);
    return 0;
  }
  const uint64_t n = raw->number;
  if (n < options_.from || (options_.to.has_value() && n > *options_.to)) {
    (void)subscriber_->Ack(delivery);
    return 0;
  }
  const uint64_t size = options_.range_size;
  const uint64_t start = std::max(options_.from, n / size * size);
  uint64_t end = n / size * size + (size - 1);
  if (options_.to.has_value()) end = std::min(end, *options_.to);
  Window& w = windows_[start];
  w.start = start;
  w.end = end;
  // A second message for a height: the later one is held (a re-org's new fork comes after the
  // old one; a redelivery of the same block changes nothing). Step 1 sorts out which is canonical.
  w.blocks[n] = raw->hash;
  const uint64_t bytes = RawBlockBytes(*raw);
  held_->Put(std::move(raw).value());
  delivery.body.clear();  // the block holds the text; DeadLetter restores it
  w.deliveries.emplace_back(n, std::move(delivery));
  w.last_added_micros = options_.env->NowMicros();
  return bytes;
}

void KafkaWorker::DropRevoked() {
  std::vector<std::string> assignment = subscriber_->Assignment();
  std::set<std::string> assigned(assignment.begin(), assignment.end());
  for (auto it = windows_.begin(); it != windows_.end();) {
    Window& w = it->second;
    std::erase_if(w.deliveries, [&](const auto& entry) {
      return assigned.count(PartitionName(entry.second.topic, entry.second.partition)) == 0;
    });
    std::set<uint64_t> kept;
    for (const auto& [n, d] : w.deliveries) kept.insert(n);
    for (auto b = w.blocks.begin(); b != w.blocks.end();) {
      if (kept.count(b->first) == 0) {
        held_->Drop(b->first);
        b = w.blocks.erase(b);
      } else {
        ++b;
      }
    }
    it = w.blocks.empty() ? windows_.erase(it) : std::next(it);
  }
}

std::vector<uint64_t> KafkaWorker::ReadyWindows() {
  const int64_t now = options_.env->NowMicros();
  std::vector<uint64_t> ready;
  for (const auto& [start, w] : windows_) {
    if (now < w.not_before_micros) continue;
    const bool whole = w.blocks.size() + w.written >= w.end - w.start + 1;
    const bool quiet = now - w.last_added_micros >= options_.flush_after_ms * 1000;
    if (whole || quiet) ready.push_back(start);
  }
  return ready;
}

bool KafkaWorker::OverBudget() const {
  return held_->bytes() > held_limit_ || held_->size() > options_.max_held_blocks;
}

Status KafkaWorker::FlushOverBudget(const std::atomic<bool>& stop) {
  if (!OverBudget()) return Status::Ok();
  const int64_t now = options_.env->NowMicros();
  std::vector<uint64_t> starts;
  for (const auto& [start, w] : windows_) {
    if (now >= w.not_before_micros) starts.push_back(start);
  }
  for (uint64_t start : starts) {
    if (stop.load() || !OverBudget()) break;
    GAPLESS_RETURN_IF_ERROR(ProcessWindow(start));
  }
  return Status::Ok();
}

void KafkaWorker::SayStuck() {
  // Said once at info (a budget below the worker's needs makes it common), then at debug.
  static std::atomic<bool> said{false};
  const std::string limit =
      held_->bytes() > held_limit_
          ? fmt::format("its share of --memory-budget, {} KiB", held_limit_ / 1024)
          : fmt::format("{} blocks", options_.max_held_blocks);
  const std::string what = fmt::format(
      "kafka worker {}: {} blocks ({} KiB) held, above {}, and none can be written now: new "
      "messages are handed back to the stream until some are",
      options_.worker_id, held_->size(), held_->bytes() / 1024, limit);
  if (!said.exchange(true)) {
    spdlog::info("{}", what);
  } else {
    spdlog::debug("{}", what);
  }
}

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
  Frontier frontier(redis_.get(), keys_.completed(), keys_.frontier(), options_.from,
                    keys_.leader_epoch());
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
  auto release = [&] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      locked_.reset();
    }
    (void)locks.Release(window, options_.worker_id);
  };
  // Again under the lock (and after the token: see the header): the holder before us may have
  // committed, the head log may have moved. Now nobody else can write, so what is left is ours.
  if (Status st = Classify(w, generation, &todo, &waiting); !st.ok()) {
    release();
    return fail(st);
  }
  if (todo.empty()) {
    release();
    if (waiting) return Outcome::kRetry;
    skipped_ += 1;
    return Outcome::kDone;
  }

  // 3. Decode and write each run, fenced by the token, in parts of what the budget lets this
  // worker hold decoded; each part released once written (the window keeps what is left).
  WriteOptions write_options;
  write_options.mode = options_.write_mode;
  write_options.copy_format = options_.copy_format;
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
      write.fence_token = **token;
      write.fence_owner = options_.worker_id;
      int64_t fetch_start = options_.env->NowMicros();
      Status st = FetchAndDecodeRange(
          *held_, part_from, part_to, batch, BlockChecks{options_.chain_id, options_.verify},
          nullptr, nullptr, &write.blocks, &enrich, options_.memory_budget, &write.datasets);
      if (!st.ok() && st.code() == Code::kInvalidData && fallback_ != nullptr) {
        spdlog::warn("kafka worker {}: {}; fetching blocks {}..{} from {} instead",
                     options_.worker_id, st.ToString(), part_from, part_to, fallback_->Describe());
        write.blocks.clear();
        st = FetchAndDecodeRange(*fallback_, part_from, part_to, std::min<uint32_t>(batch, 10),
                                 BlockChecks{options_.chain_id, options_.verify}, nullptr, nullptr,
                                 &write.blocks, &enrich, options_.memory_budget, &write.datasets);
      }
      counters_.fetch_micros += static_cast<uint64_t>(options_.env->NowMicros() - fetch_start);
      if (!st.ok()) {
        release();
        *error = st;
        if (st.code() == Code::kInvalidData) {
          return ++w.attempts >= options_.max_attempts ? Outcome::kDeadLetter : Outcome::kRetry;
        }
        return Outcome::kRetry;
      }
      // A full TTL ahead of the write; lost (expired while paused, taken over): start again.
      Result<bool> extended = locks.Extend(window, options_.worker_id, options_.lock_ttl_ms);
      if (!extended.ok() || !*extended || lock_lost_.load()) {
        if (extended.ok()) {  // refused (not a Redis failure): the lock is someone else's
          counters_.leases_lost += 1;
          CountRangeEvent(RangeEvent::kLeaseLost);
        }
        release();
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
        release();
        if (IsFenceRejection(st)) {
          counters_.leases_lost += 1;
          CountRangeEvent(RangeEvent::kLeaseLost);
        }
        if (IsFenceRejection(st) || st.reason() == kReorgFencedReason) {
          // The counter may be behind PostgreSQL (node/reconcile.h): raised before the next token.
          Queue queue(redis_.get(), keys_);
          auto conn = pool_->Acquire();
          Status raised =
              RaiseFenceAfterRefusal(queue, *conn, **token, "kafka worker " + options_.worker_id);
          if (!raised.ok()) {
            spdlog::warn("kafka worker {}: could not raise the fence counter: {}",
                         options_.worker_id, raised.ToString());
          }
        }
        *error = st;
        if (st.code() == Code::kInvalidData) {
          return ++w.attempts >= options_.max_attempts ? Outcome::kDeadLetter : Outcome::kRetry;
        }
        return Outcome::kRetry;
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
  release();
  counters_.tasks += 1;
  // Blocks the head log has not reached (or whose rollback is pending) keep the window, and every
  // message of it, until they are written or found to be of another fork.
  if (waiting) return Outcome::kRetry;
  // Test hook: die after the commit and before the offsets are committed.
  if (FailpointFiresOnce("kafka-worker-exit-before-ack")) raise(SIGKILL);
  return Outcome::kDone;
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

void KafkaWorker::KeeperLoop() {
  RangeLocks locks(keeper_redis_.get(), keys_);
  Registry registry(keeper_redis_.get(), &keys_);
  Env* env = options_.env;
  const int64_t extend_every = std::max<int64_t>(1, options_.lock_ttl_ms / 3) * 1000;
  const int64_t beat_every = options_.heartbeat_interval_ms * 1000;
  const std::string host = HostName();
  int64_t next_beat = env->NowMicros();
  int64_t next_extend = 0;
  std::optional<TaskRange> extended_for;
  uint64_t last_blocks = 0;
  int64_t last_beat = next_beat;
  while (!keeper_quit_.load()) {
    int64_t now = env->NowMicros();
    std::optional<TaskRange> locked;
    {
      std::lock_guard<std::mutex> lock(mu_);
      locked = locked_;
    }
    if (locked != extended_for) {  // a new holding: its acquire granted a full TTL
      extended_for = locked;
      next_extend = now + extend_every;
    }
    if (locked.has_value() && now >= next_extend) {
      Result<bool> ok = locks.Extend(*locked, options_.worker_id, options_.lock_ttl_ms);
      next_extend = now + extend_every;
      if (ok.ok() && !*ok) {
        std::lock_guard<std::mutex> lock(mu_);
        if (locked_ == locked) lock_lost_.store(true);
      } else if (!ok.ok()) {
        next_extend = now + extend_every / 4;
      }
    }
    if (now >= next_beat) {
      uint64_t blocks = counters_.blocks.load();
      WorkerInfo info;
      info.worker = options_.worker_id;
      info.host = host;
      info.pid = static_cast<int64_t>(getpid());
      info.range = locked.has_value() ? locked->id() : "";
      info.blocks_per_s = static_cast<double>(blocks - last_blocks) /
                          (static_cast<double>(std::max<int64_t>(1, now - last_beat)) / 1e6);
      last_blocks = blocks;
      last_beat = now;
      Status beat = registry.Beat(info, 3 * options_.heartbeat_interval_ms);
      if (!beat.ok()) {
        spdlog::warn("kafka worker {}: heartbeat failed: {}", options_.worker_id, beat.ToString());
      }
      next_beat = now + beat_every;
    }
    env->SleepMicros(kSliceMicros);
  }
}

}  // namespace gapless
