// coord_bench: what one task costs the coordination layer: no-op tasks claimed and completed per
// second on one Redis, through the real Queue, in one of two designs:
//   --mode one-trip   (default) Claim for a thread's first task, then CompleteAndClaim
//                     (queue_complete_claim.lua): one round trip per task, completing the previous
//                     task and claiming the next; the call that finds pending empty completes the
//                     thread's last task, so no separate Complete is needed at the end.
//   --mode two-trips  the earlier design: Claim (queue_claim.lua) then Complete
//                     (queue_complete.lua), two round trips per task.
// With --batch N (one-trip only; default 1) a thread claims N tasks at a time (ClaimBatch), and
// each CompleteAndClaimBatch completes the N it holds and claims the next N: one round trip per
// N tasks, each task still with a lease and a token of its own (coord/queue.h).
//
// It pushes --tasks no-op tasks ("i-i") with Queue::Push into a namespace of its own (Keys of a
// chain id no real chain uses, derived from the pid and the clock), then starts --concurrency
// threads, each with its own RedisConn and Queue, that loop until the queue is empty. The clock
// runs from the moment the threads are released (all connected, scripts loaded) to the last
// completion. Per-task latency is, in two-trips, the time from sending the Claim to the answer of
// the Complete; in one-trip, the time of the CompleteAndClaim that completes the task (which also
// brings the next lease; with --batch, the call that completes the task's batch). At the end it
// checks that every task was completed exactly once (accepted completions = completed set =
// --tasks, nothing pending or processing) and deletes the namespace's keys.
//
// Output: one JSON line on stdout, like bench/bullmq/noop.js, so bench/coord_bench.sh can put the
// two side by side:
//   {"mode":"one-trip","batch":B,"tasks":N,"concurrency":C,"seconds":S,"jobs_per_s":R,
//    "round_trips":T,"p50_us":..,"p99_us":..}
// (two-trips adds "claim_p50_us" and "complete_p50_us").
//
// Usage: coord_bench [--redis redis://127.0.0.1:56379] [--tasks 20000] [--concurrency 8]
//                    [--ttl-ms 60000] [--mode one-trip|two-trips] [--batch 1]
// The Redis must be one the caller owns (bench/coord_bench.sh starts one): the keys are deleted
// afterwards, but the benchmark loads the server fully while it runs.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "coord/keys.h"
#include "coord/queue.h"
#include "coord/redis.h"

namespace gapless {
namespace {

using bench::Check;
using bench::Die;

enum class Mode { kOneTrip, kTwoTrips };

struct Args {
  std::string redis = "redis://127.0.0.1:56379";
  int64_t tasks = 20'000;
  int concurrency = 8;
  int64_t ttl_ms = 60'000;  // far above a run's length: no lease may expire mid-benchmark
  Mode mode = Mode::kOneTrip;
  int64_t batch = 1;
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  bench::Flags()
      .Value("--redis", [&](const std::string& v) { a.redis = v; })
      .Value("--tasks", [&](const std::string& v) { a.tasks = std::stoll(v); })
      .Value("--concurrency", [&](const std::string& v) { a.concurrency = std::stoi(v); })
      .Value("--ttl-ms", [&](const std::string& v) { a.ttl_ms = std::stoll(v); })
      .Value("--mode",
             [&](const std::string& v) {
               if (v == "one-trip") {
                 a.mode = Mode::kOneTrip;
               } else if (v == "two-trips") {
                 a.mode = Mode::kTwoTrips;
               } else {
                 throw std::invalid_argument("want one-trip or two-trips");
               }
             })
      .Value("--batch", [&](const std::string& v) { a.batch = std::stoll(v); })
      .Parse(argc, argv);
  if (a.tasks <= 0 || a.concurrency <= 0 || a.ttl_ms <= 0)
    bench::Die("--tasks, --concurrency, --ttl-ms must be > 0");
  if (a.batch < 1 || a.batch > kMaxClaimBatch)
    bench::Die("--batch must be 1.." + std::to_string(kMaxClaimBatch));
  if (a.batch > 1 && a.mode != Mode::kOneTrip) bench::Die("--batch is for --mode one-trip");
  return a;
}

using Clock = std::chrono::steady_clock;

int64_t Micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
}

// Nearest-rank percentile of a sorted vector.
int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size()));
  return sorted[std::min(rank, sorted.size() - 1)];
}

// Every key of the namespace that the queue touches (Keys is the only place key shapes live).
std::vector<std::string> QueueKeys(const Keys& k) {
  return {k.pending(),  k.processing(), k.queued(),        k.leases(),    k.attempts(),
          k.expiries(), k.dlq(),        k.fence_counter(), k.completed(), k.frontier()};
}

struct WorkerStats {
  std::vector<int64_t> cycle_us;     // per completed task (see the file comment)
  std::vector<int64_t> claim_us;     // two-trips only
  std::vector<int64_t> complete_us;  // two-trips only
  int64_t round_trips = 0;
  Clock::time_point last_complete;
  std::string error;  // empty when the worker finished cleanly
};

// The earlier design: Claim, then Complete; two round trips per task.
void RunTwoTrips(Queue& queue, const std::string& worker, const Args& args,
                 const std::atomic<bool>& failed, WorkerStats& s) {
  while (!failed.load(std::memory_order_relaxed)) {
    Clock::time_point t0 = Clock::now();
    auto lease = queue.Claim(worker, args.ttl_ms);
    ++s.round_trips;
    if (!lease.ok()) {
      s.error = "claim: " + lease.status().ToString();
      return;
    }
    if (!lease->has_value()) return;  // queue empty
    Clock::time_point t1 = Clock::now();
    Status st = queue.Complete((*lease)->task, worker, (*lease)->token);
    ++s.round_trips;
    Clock::time_point t2 = Clock::now();
    if (!st.ok()) {
      s.error = "complete: " + st.ToString();
      return;
    }
    s.claim_us.push_back(Micros(t0, t1));
    s.complete_us.push_back(Micros(t1, t2));
    s.cycle_us.push_back(Micros(t0, t2));
    s.last_complete = t2;
  }
}

// One round trip per task (per --batch tasks): Claim once, then CompleteAndClaim until it finds
// pending empty (that call completes the last tasks, so no Complete is left to send).
void RunOneTrip(Queue& queue, const std::string& worker, const Args& args,
                const std::atomic<bool>& failed, WorkerStats& s) {
  auto first = queue.ClaimBatch(worker, args.ttl_ms, args.batch);
  ++s.round_trips;
  if (!first.ok()) {
    s.error = "claim: " + first.status().ToString();
    return;
  }
  std::vector<Lease> held = std::move(*first);
  while (!held.empty() && !failed.load(std::memory_order_relaxed)) {
    Clock::time_point t0 = Clock::now();
    auto r = queue.CompleteAndClaimBatch(held, worker, args.ttl_ms, args.batch);
    ++s.round_trips;
    Clock::time_point t1 = Clock::now();
    if (!r.ok()) {
      s.error = "complete+claim: " + r.status().ToString();
      return;
    }
    for (const Status& completed : r->completed) {
      if (!completed.ok()) {
        s.error = "complete+claim: completion refused: " + completed.ToString();
        return;
      }
      s.cycle_us.push_back(Micros(t0, t1));
    }
    s.last_complete = t1;
    held = std::move(r->next);  // empty: the queue is empty and our last tasks are completed
  }
  // Stopped by another thread's failure while holding `held`: the run is void anyway.
}

int Main(int argc, char** argv) {
  bench::ProgramName() = "coord_bench";
  Args args = ParseArgs(argc, argv);

  // A chain id of our own: far above any real chain id, distinct per process and per run.
  const int64_t chain_id = 9'000'000'000'000LL + static_cast<int64_t>(getpid()) * 1'000'000 +
                           std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                                   .count() %
                               1'000'000;
  const Keys keys(chain_id);

  auto admin_or = RedisConn::Connect(args.redis);
  Check(admin_or.status(), "connect");
  RedisConn& admin = **admin_or;
  {
    std::vector<std::string> exists = {"EXISTS"};
    for (const std::string& k : QueueKeys(keys)) exists.push_back(k);
    auto r = admin.Command(exists);
    Check(r.status(), "exists");
    if (r->integer != 0) Die("namespace " + keys.prefix() + " is not empty");
  }

  // Push before the clock starts, as noop.js adds its jobs before starting its Worker.
  std::vector<TaskRange> tasks;
  tasks.reserve(static_cast<size_t>(args.tasks));
  for (int64_t i = 0; i < args.tasks; ++i) tasks.push_back({i, i});
  Queue admin_queue(&admin, keys);
  auto pushed = admin_queue.Push(tasks);
  Check(pushed.status(), "push");
  if (*pushed != args.tasks)
    Die("pushed " + std::to_string(*pushed) + " tasks, not " + std::to_string(args.tasks));

  // Connect every worker first and load the scripts, so that no connect and no NOSCRIPT round trip
  // lands inside the measurement. LoadScript: the scripts as Queue sends them (with
  // their libraries prepended), so their SHA1s are the ones Queue's EVALSHAs name.
  std::vector<std::unique_ptr<RedisConn>> conns;
  for (int w = 0; w < args.concurrency; ++w) {
    auto c = RedisConn::Connect(args.redis);
    Check(c.status(), "connect worker");
    conns.push_back(std::move(*c));
  }
  for (const char* file : {"queue_claim.lua", "queue_complete.lua", "queue_complete_claim.lua"}) {
    Check(admin.Command({"SCRIPT", "LOAD", LoadScript(file).source()}).status(), "script load");
  }

  std::vector<WorkerStats> stats(static_cast<size_t>(args.concurrency));
  std::barrier start_line(args.concurrency + 1);
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < args.concurrency; ++w) {
    threads.emplace_back([&, w] {
      WorkerStats& s = stats[static_cast<size_t>(w)];
      s.cycle_us.reserve(static_cast<size_t>(args.tasks / args.concurrency * 2 + 16));
      if (args.mode == Mode::kTwoTrips) {
        s.claim_us.reserve(s.cycle_us.capacity());
        s.complete_us.reserve(s.cycle_us.capacity());
      }
      Queue queue(conns[static_cast<size_t>(w)].get(), keys);
      const std::string worker = "bench-" + std::to_string(getpid()) + "-" + std::to_string(w);
      start_line.arrive_and_wait();
      if (args.mode == Mode::kOneTrip) {
        RunOneTrip(queue, worker, args, failed, s);
      } else {
        RunTwoTrips(queue, worker, args, failed, s);
      }
      if (!s.error.empty()) failed.store(true);
    });
  }
  Clock::time_point start = Clock::now();
  start_line.arrive_and_wait();
  for (std::thread& t : threads) t.join();

  Clock::time_point end = start;
  std::vector<int64_t> cycle, claim, complete;
  int64_t round_trips = 0;
  for (const WorkerStats& s : stats) {
    if (!s.error.empty()) Die(s.error);
    end = std::max(end, s.last_complete);
    round_trips += s.round_trips;
    cycle.insert(cycle.end(), s.cycle_us.begin(), s.cycle_us.end());
    claim.insert(claim.end(), s.claim_us.begin(), s.claim_us.end());
    complete.insert(complete.end(), s.complete_us.begin(), s.complete_us.end());
  }
  // Every task exactly once: as many accepted completions as tasks, all in the completed set,
  // none left over.
  auto zcard = admin.Command({"ZCARD", keys.completed()});
  Check(zcard.status(), "zcard");
  auto depths = admin_queue.Depths();
  Check(depths.status(), "depths");
  if (static_cast<int64_t>(cycle.size()) != args.tasks || zcard->integer != args.tasks ||
      depths->pending != 0 || depths->processing != 0) {
    Die("not every task completed once: completions " + std::to_string(cycle.size()) +
        ", completed set " + std::to_string(zcard->integer) + ", pending " +
        std::to_string(depths->pending) + ", processing " + std::to_string(depths->processing));
  }
  std::vector<std::string> del = {"DEL"};
  for (const std::string& k : QueueKeys(keys)) del.push_back(k);
  Check(admin.Command(del).status(), "delete keys");

  std::sort(cycle.begin(), cycle.end());
  std::sort(claim.begin(), claim.end());
  std::sort(complete.begin(), complete.end());
  double seconds = std::chrono::duration<double>(end - start).count();
  std::string per_step;
  if (args.mode == Mode::kTwoTrips) {
    per_step = ",\"claim_p50_us\":" + std::to_string(Percentile(claim, 50)) +
               ",\"complete_p50_us\":" + std::to_string(Percentile(complete, 50));
  }
  std::printf(
      "{\"mode\":\"%s\",\"batch\":%lld,\"tasks\":%lld,\"concurrency\":%d,\"seconds\":%.4f,"
      "\"jobs_per_s\":%.1f,\"round_trips\":%lld,\"p50_us\":%lld,\"p99_us\":%lld%s}\n",
      args.mode == Mode::kOneTrip ? "one-trip" : "two-trips", static_cast<long long>(args.batch),
      static_cast<long long>(args.tasks), args.concurrency, seconds,
      static_cast<double>(args.tasks) / seconds, static_cast<long long>(round_trips),
      static_cast<long long>(Percentile(cycle, 50)), static_cast<long long>(Percentile(cycle, 99)),
      per_step.c_str());
  return 0;
}

}  // namespace
}  // namespace gapless

int main(int argc, char** argv) { return gapless::Main(argc, argv); }
