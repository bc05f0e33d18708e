// failover_bench: how long the HA leader is gone when it dies or steps down (issue "The HA
// leader"), over real processes and three real lock nodes.
//
// Three private redis-servers are started (testing/redis_server.h, keyspace notifications on).
// Candidate processes are forked from this single-threaded parent; each runs an Elector whose head
// source is a chain that grows five blocks a second (all candidates agree on it), and reports on a
// shared pipe the first successful head-log write of each of its terms (CLOCK_MONOTONIC, which all
// processes share). Each round waits for a leader, waits a random part of a heartbeat (so the kill
// lands at a random phase of the lease), then:
//   crash      SIGKILL the leader: the lock must run out (TTL) before anyone takes over;
//   stepdown   SIGTERM the leader: it releases its lock on every node, a follower takes over at
//   once;
// and measures from the signal to the new leader's first head-log write. The killed candidate is
// replaced by a new one. The baseline, measured in the same run, is the seed's detection alone
// (jittered polling every 500 + 0..200 ms, no keyspace notifications, no wake-up at the lock's
// PTTL) on crash. Last, the latency of one head-log write (one entry) on 3 nodes against 1 node.
//
//   failover_bench [--rounds 50] [--baseline-rounds 20] [--ttl-ms 3000] [--writes 2000]
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "coord/election.h"
#include "coord/elector.h"
#include "coord/lock_nodes.h"
#include "testing/redis_server.h"

namespace gapless {
namespace {

using bench::Check;
using bench::Die;

int64_t MonoMicros() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

// Five blocks a second, the same for every candidate.
class ClockChain : public HeadSource {
 public:
  Result<HeadUpdate> Next(const std::optional<HeadEntry>& tip, size_t max) override {
    uint64_t head = static_cast<uint64_t>(MonoMicros() / 200'000);
    uint64_t first = tip.has_value() ? tip->height + 1 : (head > 100 ? head - 100 : 1);
    HeadUpdate out;
    for (uint64_t h = first; h <= head && out.entries.size() < max; ++h) {
      out.entries.push_back(
          HeadEntry{h, "0x" + std::to_string(h), "0x" + std::to_string(h - 1), 0});
    }
    return out;
  }
};

struct Mode {
  int64_t ttl_ms;
  bool fast_detection;  // keyspace notifications + wake at the lock's PTTL
};

const Keys kKeys(777001);

// A candidate process: runs until SIGTERM (graceful stepdown) or SIGKILL.
[[noreturn]] void Candidate(const std::vector<std::string>& urls, Mode mode, int fd) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread: sigwait below
  spdlog::set_level(spdlog::level::err);
  LockNodesOptions lo;
  lo.node_timeout_ms = 100;
  auto nodes = LockNodes::Open(urls, lo);
  if (!nodes.ok()) _exit(3);
  Election election(nodes->get(), kKeys,
                    ElectionOptions{"cand-" + std::to_string(getpid()), mode.ttl_ms, 1'000});
  ClockChain chain;
  ElectorOptions eo;
  eo.subscribe = mode.fast_detection;
  eo.wake_at_lock_expiry = mode.fast_detection;
  Elector elector(&election, &chain, eo);
  uint64_t reported = 0;
  elector.set_on_write([&](uint64_t token, const HeadEntry&) {
    if (token == reported) return;
    reported = token;
    dprintf(fd, "W %d %llu %lld\n", static_cast<int>(getpid()),
            static_cast<unsigned long long>(token), static_cast<long long>(MonoMicros()));
  });
  elector.Start();
  int sig = 0;
  sigwait(&set, &sig);
  elector.Stop();  // graceful stepdown: release on every node
  _exit(0);
}

struct Fleet {
  std::vector<std::string> urls;
  Mode mode{};
  int read_fd = -1, write_fd = -1;
  std::vector<pid_t> pids;
  std::string buffer;
  // The latest term seen: pid, epoch, time of its first write.
  pid_t leader = -1;
  uint64_t epoch = 0;
  int64_t first_write = 0;

  void Spawn() {
    pid_t pid = fork();
    if (pid < 0) Die("fork failed");
    if (pid == 0) {
      close(read_fd);
      Candidate(urls, mode, write_fd);
    }
    pids.push_back(pid);
  }

  // Reads reports for up to `ms`; returns true when a term newer than `after` was reported.
  bool ReadUntilNewTerm(uint64_t after, int64_t ms) {
    int64_t end = MonoMicros() + ms * 1000;
    while (epoch <= after) {
      int64_t left = (end - MonoMicros()) / 1000;
      if (left <= 0) return false;
      pollfd p{read_fd, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char chunk[4096];
      ssize_t n = read(read_fd, chunk, sizeof(chunk));
      if (n <= 0) continue;
      buffer.append(chunk, static_cast<size_t>(n));
      size_t nl;
      while ((nl = buffer.find('\n')) != std::string::npos) {
        int pid = 0;
        unsigned long long e = 0;
        long long t = 0;
        if (std::sscanf(buffer.c_str(), "W %d %llu %lld", &pid, &e, &t) == 3 && e > epoch) {
          leader = pid;
          epoch = e;
          first_write = t;
        }
        buffer.erase(0, nl + 1);
      }
    }
    return true;
  }

  void KillAll() {
    for (pid_t p : pids) kill(p, SIGKILL);
    for (pid_t p : pids) waitpid(p, nullptr, 0);
    pids.clear();
  }
};

struct Stats {
  std::vector<double> ms;
  double Pct(double p) const {
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    size_t i =
        std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())));
    return v[i];
  }
};

// `rounds` leader losses by `signal`; the gap from the signal to the next leader's first write.
Stats Failovers(const std::vector<std::string>& urls, Mode mode, int signal, int rounds,
                std::mt19937_64& rng, const char* label) {
  Fleet fleet;
  fleet.urls = urls;
  fleet.mode = mode;
  int fds[2];
  if (pipe(fds) != 0) Die("pipe failed");
  fleet.read_fd = fds[0];
  fleet.write_fd = fds[1];
  for (int i = 0; i < 3; ++i) fleet.Spawn();
  Stats stats;
  if (!fleet.ReadUntilNewTerm(0, 20'000)) Die(std::string(label) + ": no leader was elected");
  int64_t heartbeat_ms = mode.ttl_ms / 3;
  for (int round = 0; round < rounds; ++round) {
    // A random phase of the lease: the kill lands anywhere between two renewals.
    std::uniform_int_distribution<int64_t> phase(heartbeat_ms / 2, heartbeat_ms + heartbeat_ms / 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(phase(rng)));
    pid_t victim = fleet.leader;
    uint64_t old_epoch = fleet.epoch;
    int64_t t_signal = MonoMicros();
    kill(victim, signal);
    if (!fleet.ReadUntilNewTerm(old_epoch, mode.ttl_ms * 5)) {
      Die(std::string(label) + ": no new leader after round " + std::to_string(round));
    }
    stats.ms.push_back(static_cast<double>(fleet.first_write - t_signal) / 1000.0);
    waitpid(victim, nullptr, 0);
    fleet.pids.erase(std::remove(fleet.pids.begin(), fleet.pids.end(), victim), fleet.pids.end());
    fleet.Spawn();
  }
  fleet.KillAll();
  close(fds[0]);
  close(fds[1]);
  std::printf("%-34s rounds %3d  p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms\n", label, rounds,
              stats.Pct(50), stats.Pct(99), stats.Pct(100));
  std::fflush(stdout);
  return stats;
}

// One-entry head-log writes on `urls`: per-write latency.
Stats WriteLatency(const std::vector<std::string>& urls, int writes, const char* label) {
  auto nodes = LockNodes::Open(urls, LockNodesOptions{});
  Check(nodes.status(), "lock nodes");
  Keys keys(777002 + static_cast<int64_t>(urls.size()));
  Election election(nodes->get(), keys, ElectionOptions{"writer", 10'000, 1'000});
  QuorumOutcome p = election.Promote();
  if (!p.quorum || !election.Renew(p.max_epoch).quorum) Die("write bench: promotion failed");
  Stats stats;
  for (int i = 1; i <= writes; ++i) {
    HeadEntry e{static_cast<uint64_t>(i), "0xh" + std::to_string(i), "0xh" + std::to_string(i - 1),
                0};
    int64_t t0 = MonoMicros();
    QuorumOutcome w = election.WriteHead(p.max_epoch, std::vector<HeadEntry>{e});
    int64_t t1 = MonoMicros();
    if (!w.quorum) Die("write bench: " + w.Summary());
    stats.ms.push_back(static_cast<double>(t1 - t0) / 1000.0);
  }
  (void)election.Release();
  std::printf("%-34s writes %5d  p50 %6.3f ms  p99 %6.3f ms\n", label, writes, stats.Pct(50),
              stats.Pct(99));
  return stats;
}

}  // namespace
}  // namespace gapless

int main(int argc, char** argv) {
  using namespace gapless;
  bench::ProgramName() = "failover_bench";
  int rounds = 50, baseline_rounds = 20, writes = 2'000;
  int64_t ttl_ms = 3'000;
  bench::Flags()
      .Value("--rounds", [&](const std::string& v) { rounds = std::stoi(v); })
      .Value("--baseline-rounds", [&](const std::string& v) { baseline_rounds = std::stoi(v); })
      .Value("--ttl-ms", [&](const std::string& v) { ttl_ms = std::stoll(v); })
      .Value("--writes", [&](const std::string& v) { writes = std::stoi(v); })
      .Parse(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  std::vector<std::unique_ptr<RedisServer>> servers;
  std::vector<std::string> urls;
  for (int i = 0; i < 3; ++i) {
    auto s = RedisServer::Start();
    Check(s.status(), "redis-server");
    urls.push_back((*s)->url());
    servers.push_back(std::move(*s));
  }
  std::mt19937_64 rng(20261123);
  std::printf("failover_bench: 3 lock nodes, TTL %lld ms, 3 candidate processes\n",
              static_cast<long long>(ttl_ms));
  Stats crash = Failovers(urls, Mode{ttl_ms, true}, SIGKILL, rounds, rng, "crash (SIGKILL)");
  Stats stepdown = Failovers(urls, Mode{ttl_ms, true}, SIGTERM, rounds, rng, "stepdown (SIGTERM)");
  Stats baseline = Failovers(urls, Mode{ttl_ms, false}, SIGKILL, baseline_rounds, rng,
                             "baseline: crash, polling only");
  std::printf("crash p99 - TTL: %.1f ms (target <= 150); stepdown p99 %.1f ms (target < 100)\n",
              crash.Pct(99) - static_cast<double>(ttl_ms), stepdown.Pct(99));
  std::printf("crash p50 vs polling-only baseline: %.3f\n", crash.Pct(50) / baseline.Pct(50));
  Stats three = WriteLatency(urls, writes, "head-log write, 3 nodes");
  Stats one = WriteLatency({urls[0]}, writes, "head-log write, 1 node (baseline)");
  std::printf("3 nodes vs 1 node: p50 ratio %.2f, p99 ratio %.2f\n", three.Pct(50) / one.Pct(50),
              three.Pct(99) / one.Pct(99));
  return 0;
}
