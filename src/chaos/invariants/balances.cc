// invariants/balances: each bus's balances consumers against the SQL aggregate of
// token_transfers (invariants.h), "balances (redis)" etc.; and what a failing check leaves for
// whoever looks into it: the differing rows with their transfers and events, the Redis group's
// state.
#include "events/balances.h"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <thread>

#include "chaos/invariants/invariants.h"
#include "events/event.h"

namespace gapless::chaos {
namespace {

// How long a balances check may take to hold after the fleet recovered (see CheckBalances).
constexpr int64_t kBalancesSettleMs = 60000;

// A reply as one line per leaf, indented by depth: for the state dumps of a failing seed.
void RenderReply(const RedisReply& r, int depth, std::ostream& out) {
  const std::string pad(static_cast<size_t>(depth) * 2, ' ');
  switch (r.type) {
    case RedisReply::Type::kNil:
      out << pad << "(nil)\n";
      return;
    case RedisReply::Type::kInteger:
      out << pad << r.integer << '\n';
      return;
    case RedisReply::Type::kString:
    case RedisReply::Type::kStatus:
      out << pad << (r.str.size() > 200 ? r.str.substr(0, 200) + "..." : r.str) << '\n';
      return;
    case RedisReply::Type::kArray:
      out << pad << "[" << r.elements.size() << "]\n";
      for (const RedisReply& e : r.elements) RenderReply(e, depth + 1, out);
      return;
  }
}

// A Redis bus's consumer groups, their consumers and every pending entry of `group` on
// `topics`, written to `path` (the state a group that lags for good leaves behind).
void DumpRedisGroups(const std::string& url, const std::string& group,
                     const std::vector<std::string>& topics, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  auto redis = RedisConn::Connect(url);
  if (!redis.ok()) {
    out << "cannot connect: " << redis.status().ToString() << '\n';
    return;
  }
  for (const std::string& topic : topics) {
    for (const std::vector<std::string>& argv :
         {std::vector<std::string>{"XINFO", "GROUPS", topic},
          std::vector<std::string>{"XINFO", "CONSUMERS", topic, group},
          std::vector<std::string>{"XPENDING", topic, group, "-", "+", "1000"},
          std::vector<std::string>{"XINFO", "STREAM", topic}}) {
      for (const std::string& a : argv) out << a << ' ';
      out << '\n';
      auto r = (*redis)->Command(argv);
      if (r.ok()) {
        RenderReply(*r, 1, out);
      } else {
        out << "  " << r.status().ToString() << '\n';
      }
    }
  }
}

// Writes what a failed balances check needs to be explained to `path`: each balance row that
// differs from the aggregate of token_transfers (expected and actual), every transfer of those
// (holder, token) pairs with its block hash and incarnation, and for each incarnation up to the
// current one the transfer's event id and its applied_events row in the group's schema (applied,
// reverted, or absent); then the retractions not pruned yet. `url` is the group's BalancesUrl.
void DumpBalances(const std::string& url, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  auto conn = PgConn::Connect(url);
  if (!conn.ok()) {
    out << "cannot connect: " << conn.status().ToString() << '\n';
    return;
  }
  auto query = [&](const std::string& sql,
                   std::vector<PgParam> params = {}) -> std::optional<PgResult> {
    auto r = (*conn)->Query(sql, params);
    if (!r.ok()) {
      out << "query failed: " << r.status().ToString() << '\n';
      return std::nullopt;
    }
    return std::move(*r);
  };
  static const std::string kDiffering = std::string(kExpectedBalancesCte) + R"sql(
SELECT encode(COALESCE(e.holder, a.holder), 'hex'), encode(COALESCE(e.token, a.token), 'hex'),
       COALESCE(e.token_id, a.token_id)::text, COALESCE(e.balance::text, '-'),
       COALESCE(a.balance::text, '-'), COALESCE(a.transfer_count::text, '-')
  FROM expected e FULL JOIN token_balances a
    ON a.holder = e.holder AND a.token = e.token AND a.token_id = e.token_id
 WHERE e.balance IS DISTINCT FROM a.balance
 ORDER BY 1, 2, 3
)sql";
  auto differing = query(kDiffering);
  if (!differing) return;
  out << "balances that differ (holder token token_id expected actual transfer_count):\n";
  for (int i = 0; i < differing->rows(); ++i) {
    out << ' ';
    for (int c = 0; c < 6; ++c) out << ' ' << differing->Get(i, c);
    out << '\n';
    auto transfers = query(
        "SELECT t.block_number, t.log_index, t.batch_index, '0x' || encode(b.hash, 'hex'), "
        "COALESCE(bi.incarnation, 0), encode(t.from_address, 'hex'), encode(t.to_address, 'hex'), "
        "t.value::text FROM token_transfers t JOIN blocks b ON b.number = t.block_number "
        "LEFT JOIN block_incarnations bi ON bi.block_hash = b.hash "
        "WHERE t.token_address = decode($2, 'hex') AND "
        "(t.from_address = decode($1, 'hex') OR t.to_address = decode($1, 'hex')) "
        "ORDER BY 1, 2, 3",
        {std::string(differing->Get(i, 0)), std::string(differing->Get(i, 1))});
    if (!transfers) continue;
    for (int t = 0; t < transfers->rows(); ++t) {
      auto number = transfers->GetInt64(t, 0);
      auto log_index = transfers->GetInt64(t, 1);
      auto batch_index = transfers->GetInt64(t, 2);
      auto incarnation = transfers->GetInt64(t, 4);
      if (!number.ok() || !log_index.ok() || !batch_index.ok() || !incarnation.ok()) continue;
      out << fmt::format("    block {} {} log {}.{} incarnation {}: {} -> {} value {}\n", *number,
                         transfers->Get(t, 3), *log_index, *batch_index, *incarnation,
                         transfers->Get(t, 5), transfers->Get(t, 6), transfers->Get(t, 7));
      for (int64_t n = 0; n <= *incarnation; ++n) {
        std::string id =
            TransferEventId(kChainId, transfers->Get(t, 3), static_cast<uint64_t>(*log_index),
                            static_cast<uint64_t>(*batch_index), static_cast<uint64_t>(n));
        auto applied = query(
            "SELECT applied_at::text, COALESCE(reverted_at::text, '-') FROM applied_events "
            "WHERE event_id = $1::uuid",
            {id});
        if (!applied) continue;
        out << fmt::format(
            "      #{} {}: {}\n", n, id,
            applied->rows() == 0
                ? std::string("not applied")
                : fmt::format("applied {}, reverted {}", applied->Get(0, 0), applied->Get(0, 1)));
      }
    }
  }
  auto retractions = query(
      "SELECT seq, generation, block_number, '0x' || encode(block_hash, 'hex'), incarnation, "
      "(SELECT count(*) FROM event_retraction_transfers t WHERE t.seq = r.seq), reverted_at::text "
      "FROM event_retractions r ORDER BY seq");
  if (!retractions) return;
  out << "retractions not pruned (seq generation block hash incarnation transfers reverted_at):\n";
  for (int i = 0; i < retractions->rows(); ++i) {
    out << ' ';
    for (int c = 0; c < 7; ++c) out << ' ' << retractions->Get(i, c);
    out << '\n';
  }
}

}  // namespace

std::string CheckBalances(Deployment& d, const Bus& bus) {
  std::string problem;
  // `recovered` cannot see every event still to be applied: on RabbitMQ the group's lag counts
  // the ready messages only, not the deliveries a consumer holds unacked while they wait for a
  // retry (5 s after a database error, more after a second one). So the balances must match
  // within kBalancesSettleMs of the first look, not at once; a lost event never matches.
  Result<BalancesCheck> check = Unavailable("not checked");
  const Clock::time_point first_look = Clock::now();
  while (true) {
    auto conn = PgConn::Connect(d.BalancesUrl(bus.name));
    check =
        conn.ok() ? CheckBalancesAgainstTransfers(**conn) : Result<BalancesCheck>(conn.status());
    if ((check.ok() && check->differing == 0) || MillisSince(first_look) >= kBalancesSettleMs) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (check.ok() && check->differing == 0 && MillisSince(first_look) >= 1000) {
    d.Note(fmt::format("balances ({}) matched {} ms after the first look", bus.name,
                       MillisSince(first_look)));
  }
  if (!check.ok()) {
    problem = check.status().ToString();
  } else if (check->differing != 0) {
    problem = fmt::format("{} balances differ from the transfers", check->differing);
  }
  if (!problem.empty()) {
    const std::string path = d.dir_ + "/balances-" + bus.name + ".txt";
    DumpBalances(d.BalancesUrl(bus.name), path);
    problem += " (the rows and their events: " + path + ")";
  }
  if (!problem.empty() && bus.name == "redis") {
    const std::string path = d.dir_ + "/groups-redis.txt";
    DumpRedisGroups(bus.url, "balances-" + bus.name,
                    {EventTopic(kTokenTransfer, kChainId), EventTopic(kBlockReverted, kChainId)},
                    path);
    problem += " (the group's state: " + path + ")";
  }
  return problem;
}

}  // namespace gapless::chaos
