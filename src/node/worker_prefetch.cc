// Worker::RunPrefetching (worker.h "Prefetch", --prefetch on): the worker's loop that fetches and
// decodes a task's next part while the part before it is written, as a small state machine
// (Worker::PrefetchLoop) beside a writer thread (WriterThread) that writes one part at a time.
// What the states call (claims, a part's fetch and attempts, renewals, completion, the keeper)
// is in worker.cc, shared with the series loop.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "core/failpoint.h"
#include "node/worker.h"
#include "node/worker_internal.h"

namespace gapless {

using worker_internal::AddCounts;
using worker_internal::AddSince;
using worker_internal::IsFenceRejection;
using worker_internal::IsReorgFenced;
using worker_internal::RetryLocally;

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

}  // namespace

// The loop with prefetch, one state at a time. Its data: current_, the task whose next part is
// fetched; fetched_, that part once fetched (with how its fetch ended); writing_, the part on the
// writer thread (at most one); committed_, the last task committed, completed with the next claim.
//
//   kClaim    no task to fetch from: claim one, completing committed_ with the claim.
//             Claimed: kFetch. The claim failed or found nothing while a part is written: that
//             write is settled first (not idle: its end is the next thing to do), then the next
//             turn. Nothing claimed and no write: options.done() ends the loop (kDone), else an
//             idle sleep and the next turn. A claim failure that stops the worker: kDone.
//   kFetch    fetches and decodes current_'s next part into fetched_ while writing_ is written
//             (two parts held at once: each gets half of the budget's share): kHandOff.
//   kHandOff  settles writing_ (its own task only), then hands fetched_ to the writer once
//             current_'s lease is renewed; after current_'s last part the next turn claims. A
//             current_ that ended (settled by its own failed write, its fetch or renewal failed)
//             is let go and the next turn claims.
//   kDone     stop seen at a turn's start, options.done(), or an error that stops the worker.
//
// A turn starts at kClaim or kFetch (NextTurn) and only there is `stop` looked at: a task just
// claimed is fetched, and a part fetched is handed off or dropped, in the same turn. After kDone,
// Finish settles the write in flight, leaves a task fetched ahead to its lease expiry and
// completes committed_.
class Worker::PrefetchLoop {
 public:
  PrefetchLoop(Worker& worker, Queue& queue, BlockSource& source, RedisConn& redis,
               const std::atomic<bool>& stop);
  PrefetchLoop(const PrefetchLoop&) = delete;
  PrefetchLoop& operator=(const PrefetchLoop&) = delete;

  // Runs the states until kDone; returns what Worker::Run returns.
  Status Run();

 private:
  enum class State { kClaim, kFetch, kHandOff, kDone };

  // A part of a task's range, fetched and decoded; then written.
  struct Part {
    std::shared_ptr<Task> task;
    RangeWrite write;
    uint32_t batch = 1;
    int attempts = 0;   // local attempts spent on it so far
    bool last = false;  // the task's last part
  };

  State Claim();
  State Fetch();
  State HandOff();
  // The state a turn starts in: kDone once stopping, else kFetch with a task, kClaim without.
  State NextTurn() const;
  // kDone with `st` as the result (an error that stops the worker).
  State Stop(Status st);
  // Settles the write in flight, then the next turn.
  State SettleThenNextTurn();
  // Ends current_ without a commit (its fetch or its renewal failed), then the next turn.
  State EndCurrentThenNextTurn(const PartOutcome& out);
  // Waits for the write in flight and settles its part: a failed write is retried in series
  // (fetched again, then written) like any part's attempt; its task is dropped or failed if it
  // came to that, or committed after its last part. Only that part's own task is touched: a
  // task fetched meanwhile keeps its lease, its token and its own fate. Non-ok: stop the worker.
  Status SettleWrite();
  // Stopping (or a fatal error): see the class comment.
  void Finish();

  Worker& worker_;
  const WorkerOptions& options_;
  Queue& queue_;
  BlockSource& source_;
  RedisConn& redis_;
  const std::atomic<bool>& stop_;
  WriterThread writer_;
  MemoryBudget unlimited_{0, 1};
  MemoryBudget& budget_;

  std::shared_ptr<Task> current_;
  std::optional<Part> fetched_;
  PartOutcome fetch_outcome_;  // how fetched_'s fetch ended
  std::optional<Part> writing_;
  std::optional<Committed> committed_;
  int64_t redis_failures_ = 0;  // claims failed in a row (EndsAfterClaimFailure's backoff)
  Status result_;
};

Worker::PrefetchLoop::PrefetchLoop(Worker& worker, Queue& queue, BlockSource& source,
                                   RedisConn& redis, const std::atomic<bool>& stop)
    : worker_(worker),
      options_(worker.options_),
      queue_(queue),
      source_(source),
      redis_(redis),
      stop_(stop),
      writer_([&worker, write_options = worker.MakeWriteOptions()](RangeWrite& write) {
        int64_t start = worker.options_.env->NowMicros();
        Status st;
        {
          auto conn = worker.pool_->Acquire();
          st = WriteRange(*conn, write, write_options);
        }
        AddSince(worker.options_.env, start, worker.counters_.written_micros);
        return st;
      }),
      budget_(options_.memory_budget != nullptr ? *options_.memory_budget : unlimited_) {}

Status Worker::PrefetchLoop::Run() {
  for (State state = NextTurn(); state != State::kDone;) {
    switch (state) {
      case State::kClaim:
        state = Claim();
        break;
      case State::kFetch:
        state = Fetch();
        break;
      case State::kHandOff:
        state = HandOff();
        break;
      case State::kDone:
        break;
    }
  }
  Finish();
  return result_;
}

Worker::PrefetchLoop::State Worker::PrefetchLoop::NextTurn() const {
  if (stop_.load()) return State::kDone;
  return current_ != nullptr ? State::kFetch : State::kClaim;
}

Worker::PrefetchLoop::State Worker::PrefetchLoop::Stop(Status st) {
  result_ = std::move(st);
  return State::kDone;
}

Worker::PrefetchLoop::State Worker::PrefetchLoop::SettleThenNextTurn() {
  Status st = SettleWrite();
  if (!st.ok()) return Stop(std::move(st));
  return NextTurn();
}

Worker::PrefetchLoop::State Worker::PrefetchLoop::EndCurrentThenNextTurn(const PartOutcome& out) {
  current_->over = true;
  worker_.Release(*current_);
  Status st = worker_.EndUncommitted(queue_, *current_, out);
  current_ = nullptr;
  if (!st.ok()) return Stop(std::move(st));
  return NextTurn();
}

Worker::PrefetchLoop::State Worker::PrefetchLoop::Claim() {
  Result<std::optional<Lease>> claim = worker_.ClaimNext(queue_, redis_, &committed_);
  if (!claim.ok()) {
    // A write in flight: its result first; the claim is retried right after.
    if (writing_.has_value()) return SettleThenNextTurn();
    if (worker_.EndsAfterClaimFailure(claim.status(), &redis_failures_)) {
      return Stop(claim.status());
    }
    return NextTurn();
  }
  redis_failures_ = 0;
  if (!claim->has_value()) {
    if (writing_.has_value()) return SettleThenNextTurn();  // not idle: the write ends next
    if (options_.done && options_.done()) return State::kDone;
    int64_t idle_start = options_.env->NowMicros();
    options_.env->SleepMicros(options_.idle_poll_ms * 1000);
    AddSince(options_.env, idle_start, worker_.counters_.idle_micros);
    return NextTurn();
  }
  current_ = worker_.Hold(**claim);
  return State::kFetch;
}

Worker::PrefetchLoop::State Worker::PrefetchLoop::Fetch() {
  // The next part of current_, fetched while the last part (of this task or the one before) is
  // written. Two parts are held at once, so each gets half of the budget's share.
  const uint64_t to = static_cast<uint64_t>(current_->lease.task.to);
  Part& next = fetched_.emplace();
  next.task = current_;
  next.batch = budget_.BatchBlocks(options_.blocks_per_request);
  const uint64_t size = budget_.PartBlocks(to - current_->next_from + 1, next.batch, 2);
  next.write = worker_.NewWrite(*current_, current_->next_from, current_->next_from + size - 1);
  next.last = next.write.to_block == to;
  fetch_outcome_ = worker_.FetchPart(source_, *current_, &next.write, next.batch, &next.attempts);
  return State::kHandOff;
}

Worker::PrefetchLoop::State Worker::PrefetchLoop::HandOff() {
  // Taken out of fetched_: a part not handed to the writer is dropped when this state ends.
  Part next = std::move(*fetched_);
  fetched_.reset();
  if (writing_.has_value()) {
    Status st = SettleWrite();
    if (!st.ok()) return Stop(std::move(st));
  }
  if (current_->over) {  // the write just settled dropped or failed this very task
    current_ = nullptr;
    return NextTurn();
  }
  if (fetch_outcome_.lost || fetch_outcome_.abandoned || !fetch_outcome_.status.ok()) {
    return EndCurrentThenNextTurn(fetch_outcome_);
  }
  PartOutcome renewed = worker_.RenewBeforeWrite(queue_, *current_);
  if (renewed.lost) return EndCurrentThenNextTurn(renewed);
  // Test hook (core/failpoint.h): stop here, where only the fence can refuse the write.
  if (FailpointFiresOnce("worker-stop-before-write")) raise(SIGSTOP);
  current_->next_from = next.write.to_block + 1;
  const bool last = next.last;
  writing_ = std::move(next);
  writer_.Start(&writing_->write);
  if (last) {
    current_ = nullptr;  // the writer has its last part; the next turn claims the next task
  } else if (committed_.has_value()) {
    worker_.CompleteCommitted(queue_, *committed_);  // no claim comes next to complete it with
    committed_.reset();
  }
  return NextTurn();
}

Status Worker::PrefetchLoop::SettleWrite() {
  int64_t wait_start = options_.env->NowMicros();
  Status st = writer_.Wait();
  AddSince(options_.env, wait_start, worker_.counters_.write_micros);
  Part part = std::move(*writing_);
  writing_.reset();
  Task& task = *part.task;
  PartOutcome out;
  out.status = st;
  if (!st.ok()) {
    worker_.AfterFenceRefusal(queue_, task, st);
    if (IsFenceRejection(st)) {
      out.lost = true;
    } else if (!IsReorgFenced(st) && RetryLocally(st) && part.attempts < options_.local_attempts) {
      if (!worker_.BackoffBeforeRetry(task, part.attempts, st)) {
        out.abandoned = true;
      } else {
        out =
            worker_.ProcessPart(queue_, source_, task, &part.write, part.batch, part.attempts + 1);
      }
    }
  }
  if (out.lost || out.abandoned || !out.status.ok()) {
    task.over = true;
    worker_.Release(task);
    return worker_.EndUncommitted(queue_, task, out);
  }
  AddCounts(&task.done.blocks, &task.done.transactions, &task.done.logs, &task.done.token_transfers,
            part.write.blocks);
  if (part.last) {
    task.over = true;
    worker_.Release(task);
    if (committed_.has_value()) worker_.CompleteCommitted(queue_, *committed_);
    committed_ = task.done;
  }
  return Status::Ok();
}

void Worker::PrefetchLoop::Finish() {
  // The write in flight ends (a write is never cut short) and is settled; a task fetched ahead
  // is left to its lease expiry (the janitor requeues it), like any task abandoned at a stop.
  if (writing_.has_value()) {
    Status st = SettleWrite();
    if (result_.ok() && !st.ok()) result_ = st;
  }
  if (current_ != nullptr && !current_->over) {
    current_->over = true;
    worker_.Release(*current_);
    spdlog::info("worker {}: stopping; task {} is left to its lease expiry", options_.worker_id,
                 current_->lease.task.id());
  }
  if (committed_.has_value()) worker_.CompleteCommitted(queue_, *committed_);
}

Status Worker::RunPrefetching(Queue& queue, BlockSource& source, RedisConn& redis,
                              const std::atomic<bool>& stop) {
  PrefetchLoop loop(*this, queue, source, redis, stop);
  return loop.Run();
}

}  // namespace gapless
