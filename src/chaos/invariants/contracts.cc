// invariants/contracts: the contracts mode's checks (invariants.h), against the node's final chain
// read with eth_getLogs by the harness itself and against the clean run:
//   decoded-equals-clean-run  every table of the config's schema (the events' tables, undecoded,
//                             children) holds the rows of a clean single-process run
//   decoded-canonical         no decoded or undecoded row of a block that is not the node's
//   decoded-complete          every log of the token on the final chain decoded exactly once into
//                             token_transfer and listed exactly once in undecoded for the misfit
//                             ABI, nothing else there; the children are exactly the factory's
//                             ChildCreated logs and pools_transfer exactly their logs
// In events mode, MatchingBlocks also gives the blocks the database must hold (canonical-chain).
#include <fmt/format.h>

#include <set>
#include <tuple>

#include "chaos/invariants/invariants.h"
#include "core/keccak.h"
#include "decode/decode.h"
#include "node/head_tracker.h"

namespace gapless::chaos {
namespace {

constexpr const char* kTransferTopic0 =
    "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

// (block number, log index, block hash): a log's place on the chain.
using LogKey = std::tuple<uint64_t, uint64_t, std::string>;

Result<std::vector<Log>> NodeLogs(Deployment& d, uint64_t tip, const std::string& addresses,
                                  const std::string& topic0) {
  std::string filter =
      fmt::format(R"({{"fromBlock":"0x0","toBlock":"0x{:x}","address":{})", tip, addresses);
  if (!topic0.empty()) filter += R"(,"topics":[")" + topic0 + R"("])";
  GAPLESS_ASSIGN_OR_RETURN(std::string answer, d.rpc_->Call("eth_getLogs", "[" + filter + "}]"));
  return DecodeLogsResult(answer);
}

std::string Table(const std::string& name) {
  return fmt::format("\"{}\".\"{}\"", kContractsSchema, name);
}

// The rows of a table of the schema as LogKeys; `where` narrows them.
Result<std::multiset<LogKey>> StoredKeys(Deployment& d, const std::string& table,
                                         const std::string& where = "") {
  auto conn = d.pool_->Acquire();
  GAPLESS_ASSIGN_OR_RETURN(
      auto r,
      conn->Query("SELECT block_number, log_index, '0x' || encode(block_hash, 'hex') FROM " +
                  Table(table) + (where.empty() ? "" : " WHERE " + where)));
  std::multiset<LogKey> out;
  for (int i = 0; i < r.rows(); ++i) {
    out.emplace(static_cast<uint64_t>(r.GetInt64(i, 0).value()),
                static_cast<uint64_t>(r.GetInt64(i, 1).value()), std::string(r.Get(i, 2)));
  }
  return out;
}

// "" when `stored` holds each of the node's logs once and nothing else.
std::string SameLogs(const std::string& what, const std::vector<Log>& node,
                     const std::multiset<LogKey>& stored) {
  std::multiset<LogKey> want;
  for (const Log& log : node) want.emplace(log.block_number, log.log_index, log.block_hash);
  for (const LogKey& k : want) {
    const size_t n = stored.count(k);
    if (n != 1) {
      return fmt::format("{}: the log {} of block {} ({}) is there {} times (the node has it)",
                         what, std::get<1>(k), std::get<0>(k), std::get<2>(k), n);
    }
  }
  for (const LogKey& k : stored) {
    if (want.count(k) == 0) {
      return fmt::format("{}: a row of log {} of block {} ({}) is not a log of the node's chain",
                         what, std::get<1>(k), std::get<0>(k), std::get<2>(k));
    }
  }
  return "";
}

std::string DecodedComplete(Deployment& d, uint64_t tip) {
  auto token = NodeLogs(d, tip, "\"" + d.emitter_ + "\"", "");
  if (!token.ok()) return "eth_getLogs: " + token.status().ToString();
  auto decoded = StoredKeys(d, "token_transfer");
  if (!decoded.ok()) return decoded.status().ToString();
  std::string problem = SameLogs("token_transfer", *token, *decoded);
  if (!problem.empty()) return problem;
  auto misfits = StoredKeys(d, "undecoded", "table_name = 'misfit_transfer'");
  if (!misfits.ok()) return misfits.status().ToString();
  problem = SameLogs("undecoded (misfit_transfer)", *token, *misfits);
  if (!problem.empty()) return problem;
  auto others = StoredKeys(d, "undecoded", "table_name <> 'misfit_transfer'");
  if (!others.ok()) return others.status().ToString();
  if (!others->empty()) {
    return fmt::format("{} logs listed in undecoded that fit their ABI", others->size());
  }
  auto misdecoded = StoredKeys(d, "misfit_transfer");
  if (!misdecoded.ok()) return misdecoded.status().ToString();
  if (!misdecoded->empty()) {
    return fmt::format("{} logs decoded into misfit_transfer (they do not fit it)",
                       misdecoded->size());
  }
  // The factory's children: exactly its ChildCreated logs, each child's transfers from there.
  auto created =
      NodeLogs(d, tip, "\"" + d.factory_ + "\"", ToHex(Keccak256(kChildCreatedSignature)));
  if (!created.ok()) return "eth_getLogs: " + created.status().ToString();
  std::set<std::pair<std::string, uint64_t>> want_children;
  std::string addresses;
  for (const Log& log : *created) {
    if (log.data.size() != 66) return "a ChildCreated log without its address: " + log.data;
    const std::string child = "0x" + log.data.substr(26);
    want_children.emplace(child, log.block_number);
    addresses += (addresses.empty() ? "\"" : ",\"") + child + "\"";
  }
  auto conn = d.pool_->Acquire();
  auto rows = conn->Query("SELECT '0x' || encode(address, 'hex'), block_number FROM " +
                          Table("children") + " WHERE contract = 'pools'");
  if (!rows.ok()) return rows.status().ToString();
  std::set<std::pair<std::string, uint64_t>> children;
  for (int i = 0; i < rows->rows(); ++i) {
    children.emplace(std::string(rows->Get(i, 0)),
                     static_cast<uint64_t>(rows->GetInt64(i, 1).value()));
  }
  if (children != want_children) {
    return fmt::format("children: {} stored, the factory created {} on the final chain",
                       children.size(), want_children.size());
  }
  std::vector<Log> child_logs;
  if (!addresses.empty()) {
    auto logs = NodeLogs(d, tip, "[" + addresses + "]", "");
    if (!logs.ok()) return "eth_getLogs: " + logs.status().ToString();
    child_logs = std::move(*logs);
  }
  auto pools = StoredKeys(d, "pools_transfer");
  if (!pools.ok()) return pools.status().ToString();
  d.Note(fmt::format("contracts: {} token logs on the final chain, {} children, {} of their logs",
                     token->size(), want_children.size(), child_logs.size()));
  return SameLogs(fmt::format("pools_transfer ({} children)", want_children.size()), child_logs,
                  *pools);
}

std::string DecodedCanonical(Deployment& d, uint64_t tip) {
  auto headers = FetchHeaders(*d.rpc_, 0, tip);
  if (!headers.ok()) return headers.status().ToString();
  std::map<uint64_t, std::string> chain;
  for (const HeadEntry& h : *headers) chain[h.height] = h.hash;
  for (const char* table : {"token_transfer", "misfit_transfer", "pools_transfer", "undecoded"}) {
    auto keys = StoredKeys(d, table);
    if (!keys.ok()) return keys.status().ToString();
    for (const auto& [number, index, hash] : *keys) {
      auto it = chain.find(number);
      if (it == chain.end() || it->second != hash) {
        return fmt::format("{}: log {} of block {} {}, not the node's block", table, index, number,
                           hash);
      }
    }
  }
  return "";
}

// Every table of the schema, the same rows as the clean run's (in any order: each row's md5,
// sorted, digested).
std::string DecodedEqualsCleanRun(Deployment& d) {
  auto clean = PgConn::Connect(d.clean_url_);
  if (!clean.ok()) return clean.status().ToString();
  auto ours = d.pool_->Acquire();
  auto list = [&](PgConn& conn) -> Result<std::vector<std::string>> {
    GAPLESS_ASSIGN_OR_RETURN(
        auto r, conn.Query("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = "
                           "c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND "
                           "NOT c.relispartition ORDER BY 1",
                           {kContractsSchema}));
    std::vector<std::string> out;
    for (int i = 0; i < r.rows(); ++i) out.emplace_back(r.Get(i, 0));
    return out;
  };
  auto a = list(*ours);
  auto b = list(**clean);
  if (!a.ok() || !b.ok()) return (!a.ok() ? a.status() : b.status()).ToString();
  if (*a != *b || a->empty()) {
    return fmt::format("the schema holds {} tables, the clean run's {}", a->size(), b->size());
  }
  for (const std::string& table : *a) {
    const std::string sql =
        "SELECT count(*), md5(coalesce(string_agg(md5(x::text), '' ORDER BY md5(x::text)), '')) "
        "FROM " +
        Table(table) + " x";
    auto x = ours->Query(sql);
    auto y = (*clean)->Query(sql);
    if (!x.ok() || !y.ok()) return (!x.ok() ? x.status() : y.status()).ToString();
    if (x->Get(0, 1) != y->Get(0, 1)) {
      return fmt::format("{} differs ({} rows, the clean run {})", table, x->Get(0, 0),
                         y->Get(0, 0));
    }
  }
  return "";
}

}  // namespace

Result<std::map<uint64_t, std::string>> MatchingBlocks(Deployment& d, uint64_t tip) {
  // With a factory, events mode asks every address for the selected events' and the factory's
  // topic 0s (Transfer, ChildCreated) and keeps the configured addresses', the factory's and any
  // Transfer (a child's, maybe found later): on this chain, every log of those topics.
  const std::string topics = "[\"0x" + std::string(kTransferTopic0) + "\",\"" +
                             ToHex(Keccak256(kChildCreatedSignature)) + "\"]";
  GAPLESS_ASSIGN_OR_RETURN(std::string answer,
                           d.rpc_->Call("eth_getLogs", fmt::format(R"([{{"fromBlock":"0x0",)"
                                                                   R"("toBlock":"0x{:x}",)"
                                                                   R"("topics":[{}]}}])",
                                                                   tip, topics)));
  GAPLESS_ASSIGN_OR_RETURN(std::vector<Log> logs, DecodeLogsResult(answer));
  std::map<uint64_t, std::string> out;
  for (const Log& log : logs) out[log.block_number] = log.block_hash;
  return out;
}

void CheckContracts(Deployment& d, uint64_t tip, SeedReport* report) {
  auto add = [&](const std::string& name, const std::string& problem) {
    report->invariants.push_back({name, problem.empty(), problem});
  };
  add("decoded-equals-clean-run", DecodedEqualsCleanRun(d));
  add("decoded-canonical", DecodedCanonical(d, tip));
  add("decoded-complete", DecodedComplete(d, tip));
}

}  // namespace gapless::chaos
