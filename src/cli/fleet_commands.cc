#include "cli/fleet_commands.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "coord/frontier.h"
#include "coord/keys.h"
#include "coord/queue.h"
#include "coord/redis.h"
#include "coord/registry.h"
#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "store/migrate.h"
#include "store/pg.h"
#include "store/state.h"

namespace gapless {
namespace {

int Fail(const Status& st) {
  spdlog::error("{}", st.ToString());
  return st.code() == Code::kFailedPrecondition ? 2 : 1;
}

struct Fleet {
  std::unique_ptr<PgConn> pg;
  std::unique_ptr<RedisConn> redis;
  std::unique_ptr<Keys> keys;
  uint64_t chain_id = 0;
};

Result<Fleet> Open(const FleetArgs& args) {
  Fleet f;
  GAPLESS_ASSIGN_OR_RETURN(f.pg, PgConn::Connect(args.db));
  GAPLESS_RETURN_IF_ERROR(Migrate(*f.pg));
  f.chain_id = args.chain_id;
  if (f.chain_id == 0) {
    GAPLESS_ASSIGN_OR_RETURN(auto recorded, LoadChainId(*f.pg));
    if (!recorded.has_value()) {
      return FailedPrecondition("the database has no chain yet: pass --chain-id");
    }
    f.chain_id = *recorded;
  }
  GAPLESS_ASSIGN_OR_RETURN(f.redis, RedisConn::Connect(args.redis));
  GAPLESS_ASSIGN_OR_RETURN(std::string database_id, EnsureDatabaseId(*f.pg));
  f.keys = std::make_unique<Keys>(static_cast<int64_t>(f.chain_id), database_id);
  return f;
}

std::string Seconds(int64_t ms) { return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000); }

}  // namespace

int RunStatus(const FleetArgs& args) {
  auto fleet = Open(args);
  if (!fleet.ok()) return Fail(fleet.status());
  Fleet& f = *fleet;
  Queue queue(f.redis.get(), *f.keys);

  auto pg_frontier = LoadFrontier(*f.pg);
  if (!pg_frontier.ok()) return Fail(pg_frontier.status());
  auto redis_frontier = f.redis->Command({"GET", f.keys->frontier()});
  if (!redis_frontier.ok()) return Fail(redis_frontier.status());
  std::string head_text = "unknown (no --rpc)";
  std::optional<uint64_t> head;
  if (!args.rpc.empty()) {
    JsonRpcClient rpc(std::make_unique<CurlTransport>(args.rpc));
    auto n = rpc.BlockNumber();
    if (n.ok()) {
      head = *n;
      head_text = std::to_string(*n);
    } else {
      head_text = "unavailable: " + n.status().message();
    }
  }
  auto frontier_text = [](const std::optional<uint64_t>& next) {
    // The frontier is the next block not known to be committed: the last contiguous block is
    // one below it.
    if (!next.has_value()) return std::string("none");
    if (*next == 0) return std::string("nothing committed yet");
    return fmt::format("block {} (every block up to it is committed)", *next - 1);
  };
  std::cout << fmt::format("chain {}   (redis keys {}*)\n", f.chain_id, f.keys->prefix());
  std::optional<uint64_t> redis_next;
  if (!redis_frontier->is_nil()) redis_next = std::stoull(redis_frontier->str);
  std::cout << fmt::format("frontier (PostgreSQL)  {}\n", frontier_text(*pg_frontier));
  std::cout << fmt::format("frontier (Redis)       {}\n", frontier_text(redis_next));
  std::cout << fmt::format("chain head             {}", head_text);
  if (head.has_value() && pg_frontier->has_value()) {
    uint64_t done = **pg_frontier;
    std::cout << fmt::format(" (lag {} blocks)", *head + 1 > done ? *head + 1 - done : 0);
  }
  std::cout << "\n";

  auto depths = queue.Depths();
  if (!depths.ok()) return Fail(depths.status());
  std::cout << fmt::format("queue                  {} pending, {} processing, {} dead-lettered\n",
                           depths->pending, depths->processing, depths->dlq);

  int64_t now_ms = 0;
  auto leases = queue.Leases(&now_ms, 50);
  if (!leases.ok()) return Fail(leases.status());
  std::cout << fmt::format("leases ({})\n", leases->size());
  for (const auto& l : *leases) {
    int64_t left = l.expires_ms - now_ms;
    std::cout << fmt::format(
        "  {:<24} {:<32} token {:<8} {}\n", l.task.id(), l.worker, l.token,
        left >= 0 ? "expires in " + Seconds(left) : "expired " + Seconds(-left) + " ago");
  }

  Registry registry(f.redis.get(), f.keys.get());
  auto workers = registry.List();
  if (!workers.ok()) return Fail(workers.status());
  std::cout << fmt::format("live workers ({})\n", workers->size());
  for (const auto& w : *workers) {
    std::cout << fmt::format("  {:<32} {}:{:<8} {:<24} {:.1f} blocks/s, beat {} ago\n", w.worker,
                             w.host, w.pid, w.range.empty() ? "idle" : w.range, w.blocks_per_s,
                             Seconds(std::max<int64_t>(0, now_ms - w.updated_ms)));
  }
  return 0;
}

int RunDlq(const FleetArgs& args, const std::string& action, const std::string& task) {
  auto fleet = Open(args);
  if (!fleet.ok()) return Fail(fleet.status());
  Queue queue(fleet->redis.get(), *fleet->keys);
  if (action == "list") {
    auto dead = queue.DlqList();
    if (!dead.ok()) return Fail(dead.status());
    std::cout << fmt::format("{} dead-lettered ranges\n", dead->size());
    for (const auto& d : *dead) {
      std::cout << fmt::format("{:<24} attempts {:<3} worker {:<28} error: {}\n", d.task.id(),
                               d.attempts, d.worker, d.error);
    }
    return 0;
  }
  if (task == "all") {
    auto n = queue.DlqRetryAll();
    if (!n.ok()) return Fail(n.status());
    std::cout << fmt::format("re-queued {} ranges\n", *n);
    return 0;
  }
  auto range = ParseTask(task);
  if (!range.ok()) {
    return Fail(FailedPrecondition("dlq retry " + task + ": expected a range FROM-TO or all"));
  }
  auto moved = queue.DlqRetry(*range);
  if (!moved.ok()) return Fail(moved.status());
  if (!*moved) return Fail(FailedPrecondition("dlq retry " + task + ": not in the dead letters"));
  std::cout << fmt::format("re-queued {}\n", task);
  return 0;
}

}  // namespace gapless
