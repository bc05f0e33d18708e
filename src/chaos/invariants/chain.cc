// invariants/chain: the stored chain against the node's (invariants.h): canonical-chain,
// frontier-not-ahead, partitions-indexed, no-orphan-rows, traces-whole, equals-clean-run (a clean
// single-process index of the final chain), verify-deep; and the recovery wait's test.
#include <fmt/format.h>

#include "chaos/invariants/invariants.h"
#include "events/open_bus.h"
#include "node/head_tracker.h"
#include "node/indexer.h"
#include "store/migrate.h"
#include "store/partition_indexes.h"
#include "store/queries.h"
#include "store/state.h"
#include "store/writer.h"
#include "testing/child_process.h"

namespace gapless::chaos {

std::string DifferenceFromChain(Deployment& d, uint64_t tip) {
  // Events mode: the blocks holding the contracts' logs, no other (docs/contracts.md).
  std::vector<HeadEntry> matching;
  if (d.events_mode_) {
    auto blocks = MatchingBlocks(d, tip);
    if (!blocks.ok()) return blocks.status().ToString();
    for (const auto& [number, hash] : *blocks) matching.push_back({number, hash, ""});
  }
  auto headers = d.events_mode_ ? Result<std::vector<HeadEntry>>(std::move(matching))
                                : FetchHeaders(*d.rpc_, 0, tip);
  if (!headers.ok()) return headers.status().ToString();
  auto conn = d.pool_->Acquire();
  auto r = conn->Query("SELECT number, '0x' || encode(hash, 'hex') FROM blocks ORDER BY number");
  if (!r.ok()) return r.status().ToString();
  std::map<uint64_t, std::string> stored;
  for (int i = 0; i < r->rows(); ++i) {
    uint64_t n = static_cast<uint64_t>(r->GetInt64(i, 0).value());
    if (stored.count(n)) return fmt::format("block {} is stored twice", n);
    stored[n] = std::string(r->Get(i, 1));
  }
  for (const HeadEntry& h : *headers) {
    auto it = stored.find(h.height);
    if (it == stored.end()) return fmt::format("block {} is not stored", h.height);
    if (it->second != h.hash) {
      return fmt::format("block {} is {}, the node has {}", h.height, it->second, h.hash);
    }
  }
  if (!stored.empty() && stored.rbegin()->first > tip) {
    return fmt::format("block {} is stored above the tip {}", stored.rbegin()->first, tip);
  }
  if (stored.size() != headers->size()) {
    // Events mode: a block without the contracts' logs is not stored.
    return fmt::format("{} blocks stored, {} hold the contracts' logs", stored.size(),
                       headers->size());
  }
  return "";
}

std::string FrontierAhead(Deployment& d) {
  auto conn = d.pool_->Acquire();
  if (d.events_mode_) {
    // Events mode stores only the blocks with the contracts' logs: every block below the
    // frontier is in a committed range instead.
    auto r = conn->Query(
        "WITH f AS (SELECT value::bigint AS v FROM indexer_state WHERE key = 'frontier') "
        "SELECT f.v, f.v = 0 OR int8range(0, f.v) <@ (SELECT range_agg(blocks) FROM "
        "indexed_ranges) FROM f");
    if (!r.ok() || r->rows() == 0 || r->Get(0, 1) != "f") return "";
    return fmt::format("frontier {} but the committed ranges below it have a hole", r->Get(0, 0));
  }
  // One snapshot: a rollback lowering the frontier and deleting rows commits wholly.
  auto r = conn->Query(
      "WITH f AS (SELECT value::bigint AS v FROM indexer_state WHERE key = 'frontier') "
      "SELECT f.v, (SELECT count(*) FROM blocks WHERE number < f.v) FROM f");
  if (!r.ok() || r->rows() == 0) return "";
  const int64_t frontier = r->GetInt64(0, 0).value();
  const int64_t stored = r->GetInt64(0, 1).value();
  if (stored < frontier) {
    return fmt::format("frontier {} but only {} blocks below it are stored", frontier, stored);
  }
  return "";
}

std::string UnindexedPartitions(PgConn& conn) {
  auto missing = PartitionsMissingIndexes(conn);
  if (!missing.ok()) return "partition indexes: " + missing.status().ToString();
  if (missing->empty()) return "";
  std::string out = "partitions without all their indexes:";
  for (const PartitionIndexState& p : *missing) {
    out += fmt::format(" {} ({} missing)", p.start, p.missing);
  }
  return out;
}

std::string PartitionsIndexed(Deployment& d) {
  auto conn = d.pool_->Acquire();
  return UnindexedPartitions(*conn);
}

std::string NoOrphanRows(Deployment& d) {
  std::string orphans;
  auto conn = d.pool_->Acquire();
  for (const char* table : {"transactions", "logs"}) {
    auto r = conn->Query(std::string("SELECT count(*) FROM ") + table +
                         " t WHERE NOT EXISTS (SELECT 1 FROM blocks b WHERE b.number = "
                         "t.block_number AND b.hash = t.block_hash)");
    if (r.ok() && r->GetInt64(0, 0).value() > 0) {
      orphans = fmt::format("{} rows of {} without their block", r->Get(0, 0), table);
    }
  }
  for (const char* table : {"token_transfers", "withdrawals", "traces"}) {
    auto r = conn->Query(std::string("SELECT count(*) FROM ") + table +
                         " t WHERE NOT EXISTS (SELECT 1 FROM blocks b WHERE b.number = "
                         "t.block_number)");
    if (r.ok() && r->GetInt64(0, 0).value() > 0) {
      orphans = fmt::format("{} rows of {} without their block", r->Get(0, 0), table);
    }
  }
  return orphans;
}

std::string TracesWhole(Deployment& d) {
  // traces-whole: every stored transaction has its one top-level trace, and every trace of a
  // transaction belongs to one stored in the same block (none left from an orphaned fork).
  std::string problem;
  auto conn = d.pool_->Acquire();
  auto missing = conn->Query(
      "SELECT count(*) FROM transactions x WHERE NOT EXISTS (SELECT 1 FROM traces t WHERE "
      "t.block_number = x.block_number AND t.transaction_hash = x.hash AND t.trace_address = "
      "'{}')");
  auto foreign = conn->Query(
      "SELECT count(*) FROM traces t WHERE t.transaction_hash IS NOT NULL AND NOT EXISTS "
      "(SELECT 1 FROM transactions x WHERE x.block_number = t.block_number AND x.hash = "
      "t.transaction_hash)");
  if (!missing.ok() || !foreign.ok()) {
    problem = (!missing.ok() ? missing.status() : foreign.status()).ToString();
  } else if (missing->GetInt64(0, 0).value() > 0) {
    problem = fmt::format("{} transactions without their top-level trace", missing->Get(0, 0));
  } else if (foreign->GetInt64(0, 0).value() > 0) {
    problem =
        fmt::format("{} traces of transactions not stored in their block", foreign->Get(0, 0));
  }
  return problem;
}

// The contracts mode's clean run: `gapless index` with the fleet's --contracts (and --data).
std::string CleanRunProcess(Deployment& d, uint64_t tip) {
  std::vector<std::string> args = {
      d.options_.gapless_bin, "index",  "--rpc",      d.anvil_url_, "--db",
      d.clean_url_,           "--from", "0",          "--to",       std::to_string(tip),
      "--range-size",         "20",     "--progress", "off"};
  if (!d.kafka_source_ && !d.events_mode_) args.push_back("--traces");
  d.AddContracts(&args);
  const std::string log = d.dir_ + "/clean-run.log";
  const int code = WaitForExit(SpawnChild(args, log), 600);
  return code == 0 ? "" : fmt::format("clean run: exit {} (see {})", code, log);
}

std::string EqualsCleanRun(Deployment& d, uint64_t tip) {
  // A clean single-process index of the final chain into another database.
  std::string problem;
  if (d.contracts_) {
    problem = CleanRunProcess(d, tip);
    auto clean = PgPool::Open(d.clean_url_, 3);
    if (!clean.ok()) return clean.status().ToString();
    auto ours = d.pool_->Acquire();
    auto theirs = (*clean)->Acquire();
    for (const char* table : {"blocks", "withdrawals", "transactions", "logs", "token_transfers",
                              "traces", "contracts", "tokens"}) {
      if (!problem.empty()) break;
      auto a = TableChecksum(*ours, table, 0, tip);
      auto b = TableChecksum(*theirs, table, 0, tip);
      if (!a.ok() || !b.ok() || *a != *b) problem = std::string(table) + " differs";
    }
    return problem;
  }
  auto clean = PgPool::Open(d.clean_url_, 3);
  if (!clean.ok()) {
    problem = clean.status().ToString();
  } else {
    {
      auto conn = (*clean)->Acquire();
      Status st = Migrate(*conn);
      if (st.ok()) st = EnsureChainId(*conn, kChainId);
      if (!st.ok()) problem = st.ToString();
    }
    IndexerOptions o;
    o.from = 0;
    o.to = tip;
    o.range_size = 20;
    o.fetch_workers = 2;
    o.chain_id = kChainId;
    const std::string url = d.anvil_url_;
    const bool traces = !d.kafka_source_;
    Indexer indexer(
        o, [url, traces] { return Rpc(url, traces); }, clean->get());
    Status st = problem.empty() ? indexer.Plan().status() : Status::Ok();
    if (st.ok() && problem.empty()) st = indexer.Run();
    if (!st.ok()) problem = "clean run: " + st.ToString();
    auto ours = d.pool_->Acquire();
    auto theirs = (*clean)->Acquire();
    for (const char* table : {"blocks", "withdrawals", "transactions", "logs", "token_transfers",
                              "traces", "contracts", "tokens"}) {
      if (!problem.empty()) break;
      if (d.kafka_source_ && std::string(table) == "traces") continue;
      auto a = TableChecksum(*ours, table, 0, tip);
      auto b = TableChecksum(*theirs, table, 0, tip);
      if (!a.ok() || !b.ok() || *a != *b) problem = std::string(table) + " differs";
    }
  }
  return problem;
}

std::string VerifyDeep(Deployment& d, uint64_t tip) {
  const std::string log = d.dir_ + "/verify.log";
  std::vector<std::string> args = {
      d.options_.gapless_bin, "verify", "--db", d.db_url_, "--from", "0", "--to",
      std::to_string(tip)};
  // Events mode keeps no receipts or transactions to prove (`verify` checks the ranges' logs and
  // blocks).
  if (!d.events_mode_) args.insert(args.end(), {"--deep", "--anvil-blob-roots"});
  pid_t pid = SpawnChild(args, log);
  int code = WaitForExit(pid, 600);
  return code == 0 ? "" : fmt::format("exit {} (see {})", code, log);
}

bool Recovered(Deployment& d, uint64_t tip, std::string* why) {
  *why = DifferenceFromChain(d, tip);
  if (!why->empty()) return false;
  auto frontier = [&] {
    auto conn = d.pool_->Acquire();
    return LoadFrontier(*conn);
  }();
  if (!frontier.ok() || !frontier->has_value() || **frontier != tip + 1) {
    *why = fmt::format("persisted frontier {} (tip {})",
                       frontier.ok() && frontier->has_value() ? std::to_string(**frontier) : "none",
                       tip);
    return false;
  }
  auto conn = d.pool_->Acquire();
  if (std::string unindexed = UnindexedPartitions(*conn); !unindexed.empty()) {
    *why = unindexed;
    return false;
  }
  if (d.buses_.empty()) return true;  // no events published (events mode)
  auto cursor = conn->Query("SELECT min(next_block) FROM event_cursors");
  if (!cursor.ok() || cursor->rows() == 0 || cursor->IsNull(0, 0) ||
      static_cast<uint64_t>(cursor->GetInt64(0, 0).value()) != tip + 1) {
    *why = "the relay has not published up to the tip";
    return false;
  }
  auto pending = conn->Query(
      "SELECT count(*) FROM event_retractions r WHERE r.seq > (SELECT coalesce(min("
      "retracted_through), 0) FROM event_cursors)");
  if (pending.ok() && pending->GetInt64(0, 0).value() > 0) {
    *why = "retractions not published yet";
    return false;
  }
  for (const Bus& bus : d.buses_) {
    SubscribeOptions sub;
    sub.group = "balances-" + bus.name;
    sub.topics = {EventTopic(kTokenTransfer, kChainId), EventTopic(kBlockReverted, kChainId)};
    auto lag = GroupLag(bus.url, sub);
    if (!lag.ok() || *lag != 0) {
      *why = fmt::format("the balances consumers on {} lag ({})", bus.name,
                         lag.ok() ? std::to_string(*lag) : lag.status().ToString());
      return false;
    }
  }
  return true;
}

}  // namespace gapless::chaos
