// invariants/coordination: the leaders, the queue, the fences and the head log (invariants.h):
// one-leader-per-epoch (from the leaders' logs), dlq-empty, keys-bounded, head-log-unique,
// head-log-chained, lease-held (found by the stale-completion situation), no-stale-write (the
// audit trigger on indexed_ranges), tokens-unique, compacted.
#include <fmt/format.h>
#include <unistd.h>

#include <regex>
#include <set>

#include "chaos/invariants/invariants.h"
#include "coord/keys.h"
#include "coord/queue.h"
#include "events/event.h"
#include "events/open_bus.h"
#include "node/head_tracker.h"
#include "store/state.h"

namespace gapless::chaos {

std::string OneLeaderPerEpoch(Deployment& d) {
  // Every term start in the leaders' logs: "leader <holder>: term <n> (epoch <e>) started".
  std::map<uint64_t, std::set<std::string>> holders;
  std::regex term(R"(leader (\S+): term \d+ \(epoch (\d+)\) started)");
  for (const char* name : {"leader-a", "leader-b"}) {
    std::string text = ReadText(d.dir_ + "/" + name + ".log");
    for (std::sregex_iterator it(text.begin(), text.end(), term), end; it != end; ++it) {
      holders[std::stoull((*it)[2])].insert((*it)[1]);
    }
  }
  std::string two;
  for (const auto& [epoch, who] : holders) {
    if (who.size() > 1)
      two = fmt::format("epoch {} started a term in {} leaders", epoch, who.size());
  }
  return two;
}

std::string HeadLogProblem(Deployment& d, std::string* chained,
                           const std::map<uint64_t, std::string>* chain) {
  std::string problem;
  auto conn = d.pool_->Acquire();
  auto id = EnsureDatabaseId(*conn);
  const Keys keys(static_cast<int64_t>(kChainId), id.ok() ? *id : "");
  std::vector<std::pair<uint64_t, std::vector<std::string>>> nodes;  // (generation, members)
  uint64_t newest = 0;
  for (const auto& node : d.lock_nodes_) {
    auto redis = RedisConn::Connect(node->url());
    if (!redis.ok()) continue;
    auto fork = (*redis)->Command({"GET", keys.head_fork()});
    auto members = (*redis)->Command({"ZRANGE", keys.head_heights(), "0", "-1"});
    if (!fork.ok() || !members.ok()) continue;
    const uint64_t generation = fork->str.empty() ? 0 : std::stoull(fork->str);
    newest = std::max(newest, generation);
    std::vector<std::string> list;
    for (const auto& m : members->elements) list.push_back(m.str);
    nodes.emplace_back(generation, std::move(list));
  }
  std::map<uint64_t, std::map<std::string, int>> quorum;            // height -> hash -> nodes
  std::map<std::pair<uint64_t, std::string>, std::string> parents;  // (height, hash) -> parent
  for (size_t n = 0; n < nodes.size() && problem.empty(); ++n) {
    if (nodes[n].first != newest) continue;
    std::map<uint64_t, std::string> at;
    for (const std::string& m : nodes[n].second) {
      const size_t a = m.find(':'), b = m.find(':', a + 1);
      if (a == std::string::npos || b == std::string::npos) continue;
      const uint64_t height = std::stoull(m.substr(0, a));
      const std::string hash = m.substr(a + 1, b - a - 1);
      auto [it, fresh] = at.emplace(height, hash);
      if (!fresh && it->second != hash) {
        problem = fmt::format("a lock node holds two hashes at height {}", height);
      }
      if (fresh) {
        ++quorum[height][hash];
        const size_t c = m.find(':', b + 1);
        parents[{height, hash}] = m.substr(b + 1, c == std::string::npos ? c : c - b - 1);
      }
    }
  }
  std::optional<std::pair<uint64_t, std::string>> below;  // the committed entry below
  for (const auto& [height, hashes] : quorum) {
    int on_quorum = 0;
    for (const auto& [hash, count] : hashes) {
      if (count < 2) continue;
      ++on_quorum;
      // The committed log is one chain: each entry the child of the committed one below it.
      const std::string& parent = parents[{height, hash}];
      if (below.has_value() && below->first + 1 == height && parent != below->second &&
          chained->empty()) {
        *chained = fmt::format("the committed entry at height {} names parent {}, not {}", height,
                               parent, below->second);
      }
      below = std::make_pair(height, hash);
      if (chain != nullptr && chained->empty()) {
        auto on = chain->find(height);
        if (on != chain->end() && on->second != hash) {
          *chained = fmt::format("the committed entry at height {} is {}, not the chain's {}",
                                 height, hash, on->second);
        }
      }
    }
    if (on_quorum > 1 && problem.empty()) {
      problem = fmt::format("two hashes on a quorum at height {}", height);
    }
  }
  return problem;
}

void CheckQueueAndKeys(Deployment& d, SeedReport* report) {
  auto add = [&](const std::string& name, const std::string& problem) {
    report->invariants.push_back({name, problem.empty(), problem});
  };
  std::string problem;
  auto redis = RedisConn::Connect(d.coord_->url());
  auto conn = d.pool_->Acquire();
  auto id = EnsureDatabaseId(*conn);
  if (!redis.ok() || !id.ok()) {
    problem = "cannot read the coordination Redis";
    add("dlq-empty", problem);
  } else {
    Keys keys(static_cast<int64_t>(kChainId), *id);
    Queue queue(redis->get(), keys);
    auto depths = queue.Depths();
    std::string dlq;
    if (!depths.ok())
      dlq = depths.status().ToString();
    else if (depths->dlq > 0)
      dlq = fmt::format("{} tasks dead-lettered", depths->dlq);
    if (dlq.empty() && d.kafka_source_) {
      // The block stream's dead letters: the harness produces only valid blocks.
      SubscribeOptions sub;
      sub.group = fmt::format("chaos-dlq-{}", getpid());
      sub.transient = true;
      sub.topics = {std::string(kBlockTopic) + ".dlq"};
      auto subscriber = OpenSubscriber(d.kafka_->url(), sub);
      size_t dead = 0;
      // Up to 10 s: the group join takes a few polls before any delivery.
      for (int i = 0; subscriber.ok() && i < 10 && dead == 0; ++i) {
        auto batch = (*subscriber)->Poll(100, 1'000);
        if (batch.ok()) dead += batch->size();
      }
      if (!subscriber.ok()) {
        dlq = subscriber.status().ToString();
      } else if (dead > 0) {
        dlq = fmt::format("{} block messages dead-lettered to {}.dlq", dead, kBlockTopic);
      }
    }
    add("dlq-empty", dlq);
    const std::set<std::string> bounded = {keys.pending(),
                                           keys.processing(),
                                           keys.queued(),
                                           keys.leases(),
                                           keys.attempts(),
                                           keys.expiries(),
                                           keys.dlq(),
                                           keys.fence_counter(),
                                           keys.fence_dataset(),
                                           keys.completed(),
                                           keys.frontier(),
                                           keys.registry(),
                                           keys.registry_expiries(),
                                           keys.election_epoch(),
                                           keys.election_meta(),
                                           keys.head_log(),
                                           keys.head_heights(),
                                           keys.head_floor(),
                                           keys.head_incarnation(),
                                           keys.head_fork(),
                                           keys.leader_epoch(),
                                           keys.leader_term(),
                                           keys.reorg_generation(),
                                           keys.key_count_samples()};
    std::string cursor = "0";
    do {
      auto page = (*redis)->Command({"SCAN", cursor, "COUNT", "1000"});
      if (!page.ok()) break;
      cursor = page->elements[0].str;
      for (const auto& key : page->elements[1].elements) {
        auto ttl = (*redis)->Command({"PTTL", key.str});
        if (ttl.ok() && ttl->integer >= 0) continue;
        if (!bounded.count(key.str)) problem = "no TTL and no bound: " + key.str;
      }
    } while (cursor != "0" && problem.empty());
  }
  add("keys-bounded", problem);
}

void CheckHeadLog(Deployment& d, const RunRecord& run, uint64_t tip, SeedReport* report) {
  auto add = [&](const std::string& name, const std::string& problem) {
    report->invariants.push_back({name, problem.empty(), problem});
  };
  std::string chained;
  std::map<uint64_t, std::string> final_chain;
  if (auto headers = FetchHeaders(*d.rpc_, 0, tip); headers.ok()) {
    for (const HeadEntry& h : *headers) final_chain[h.height] = h.hash;
  }
  std::string problem = HeadLogProblem(d, &chained, &final_chain);
  if (!run.head_log_violation.empty()) problem = run.head_log_violation;
  if (!run.head_chain_violation.empty()) chained = run.head_chain_violation;
  add("head-log-unique", problem);
  add("head-log-chained", chained);
  add("lease-held", run.lease_violation);
}

std::string NoStaleWrite(Deployment& d) {
  std::string stale;
  auto conn = d.pool_->Acquire();
  auto r = conn->Query(
      "SELECT count(*), min(from_block), min(old_owner), min(new_owner) FROM chaos_stale_writes");
  if (!r.ok()) {
    stale = r.status().ToString();
  } else if (r->GetInt64(0, 0).value() > 0) {
    stale =
        fmt::format("{} writes with a token that did not grow, e.g. blocks from {} by {} over {}",
                    r->Get(0, 0), r->Get(0, 1), r->Get(0, 3), r->Get(0, 2));
  }
  return stale;
}

std::string TokensUnique(Deployment& d) {
  // tokens-unique: every grant's token is new, Redis losing its data and a failover to a
  // lagging replica included, so no two tasks carry one token. The rows of one token may only
  // be the parts of one task written under a memory budget (worker-3): one owner, inside one
  // task of kRangeSize blocks (a part's row can also widen a row the task's earlier, whole
  // write left: the writer keeps the larger to_block). (A Kafka worker writes a window's runs
  // under its one lock token.) On a compaction seed, a row the compaction merged spans tasks
  // and carries the highest token of the rows it took in, which a later part of that task may
  // carry too: only the rows inside one task are compared there.
  std::string twice;
  auto conn = d.pool_->Acquire();
  auto r =
      conn->Query(std::string("SELECT fence_token, count(*), min(from_block), max(from_block) FROM "
                              "indexed_ranges WHERE fence_token IS NOT NULL ") +
                      (d.compact_ ? "AND from_block / $1 = to_block / $1 " : "") +
                      "GROUP BY fence_token HAVING count(*) > 1 AND ("
                      " count(DISTINCT fence_owner) > 1 OR count(fence_owner) < count(*)"
                      " OR min(from_block) / $1 <> max(to_block) / $1) ORDER BY 1 LIMIT 3",
                  {std::to_string(kRangeSize)});
  if (!r.ok()) {
    twice = r.status().ToString();
  } else {
    for (int i = 0; i < r->rows(); ++i) {
      twice +=
          fmt::format("{}token {} on {} ranges (from blocks {} .. {})", twice.empty() ? "" : "; ",
                      r->Get(i, 0), r->Get(i, 1), r->Get(i, 2), r->Get(i, 3));
    }
  }
  return twice;
}

std::string Compacted(Deployment& d) {
  // compacted (a compaction seed): the leaders merged the rows below the frontier, so the run
  // met merged rows (store/state.h "Compaction"): a mark recorded, and fewer rows below it than
  // the tasks there. Rows holding other datasets, or whose tokens have two owners, stay apart.
  auto conn = d.pool_->Acquire();
  auto r = conn->Query(
      "SELECT (SELECT value::bigint FROM indexer_state WHERE key = 'ranges_compacted_to'), "
      "(SELECT count(*) FROM indexed_ranges WHERE to_block < (SELECT value::bigint FROM "
      "indexer_state WHERE key = 'ranges_compacted_to'))");
  if (!r.ok()) return r.status().ToString();
  if (r->IsNull(0, 0)) return "no compaction mark: indexed_ranges was never compacted";
  const int64_t mark = r->GetInt64(0, 0).value();
  const int64_t rows = r->GetInt64(0, 1).value();
  const int64_t tasks = (mark + static_cast<int64_t>(kRangeSize) - 1) / kRangeSize;
  if (mark <= 0 || rows >= tasks) {
    return fmt::format("compacted up to block {}, with {} rows below it for {} tasks: none merged",
                       mark, rows, tasks);
  }
  return "";
}

}  // namespace gapless::chaos
