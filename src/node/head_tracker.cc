#include "node/head_tracker.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>

#include "node/node_metrics.h"
#include "store/rollback.h"

namespace gapless {
namespace {

// The DOM parser, like the decoder (docs/decisions.md: simdjson's DOM parser, not On-Demand).
Result<HeadEntry> ParseHeader(uint64_t height, const std::string& json) {
  if (json == "null") return NotFound(fmt::format("block {} not found", height));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) {
    return InvalidData(fmt::format("block {}: header is not JSON", height));
  }
  HeadEntry e;
  std::string_view number, hash, parent;
  if (doc["number"].get_string().get(number) != simdjson::SUCCESS ||
      doc["hash"].get_string().get(hash) != simdjson::SUCCESS ||
      doc["parentHash"].get_string().get(parent) != simdjson::SUCCESS) {
    return InvalidData(
        fmt::format("block {}: header lacks one of number, hash, parentHash", height));
  }
  GAPLESS_ASSIGN_OR_RETURN(e.height, ParseHexQuantity(number));
  if (e.height != height) {
    return InvalidData(fmt::format("block {}: the node answered block {}", height, e.height));
  }
  e.hash = std::string(hash);
  e.parent = std::string(parent);
  return e;
}

}  // namespace

Result<std::vector<HeadEntry>> FetchHeaders(JsonRpcClient& rpc, uint64_t first, uint64_t last) {
  std::vector<RpcRequest> calls;
  for (uint64_t h = first; h <= last; ++h) {
    calls.push_back(
        RpcRequest{"eth_getBlockByNumber", fmt::format(R"(["{}",false])", HexQuantity(h))});
  }
  GAPLESS_ASSIGN_OR_RETURN(auto answers, rpc.Batch(calls));
  std::vector<HeadEntry> out;
  for (size_t i = 0; i < answers.size(); ++i) {
    if (!answers[i].ok())
      return answers[i].status().WithContext(fmt::format("block {}", first + i));
    GAPLESS_ASSIGN_OR_RETURN(HeadEntry e, ParseHeader(first + i, *answers[i]));
    out.push_back(std::move(e));
  }
  return out;
}

HeadTracker::HeadTracker(std::unique_ptr<JsonRpcClient> rpc, std::string pg_url,
                         HeadTrackerOptions options)
    : rpc_(std::move(rpc)), pg_url_(std::move(pg_url)), options_(std::move(options)) {}

Result<uint64_t> HeadTracker::Bound() {
  if (options_.to.has_value()) {
    GAPLESS_ASSIGN_OR_RETURN(uint64_t latest, rpc_->BlockNumber());
    SetChainHeadMetric(latest);
    return std::min(*options_.to, latest);
  }
  GAPLESS_ASSIGN_OR_RETURN(uint64_t tip, rpc_->ResolveBlockTag(options_.tag));
  SetChainHeadMetric(tip);
  if (tip < options_.confirmations) return NotFound("the chain is shorter than the confirmations");
  return tip - options_.confirmations;
}

Status HeadTracker::CheckDatabase() {
  if (pg_url_.empty()) return Status::Ok();
  if (pg_ == nullptr) {
    PgConnectOptions options;
    options.connect_timeout_seconds = 2;
    GAPLESS_ASSIGN_OR_RETURN(pg_, PgConn::Connect(pg_url_, options));
  }
  Status st = pg_->Exec("SELECT 1");
  if (!st.ok()) pg_.reset();  // reconnect next time
  return st;
}

Result<HeadEntry> HeadTracker::FindForkPoint(uint64_t tip_height, uint64_t top) {
  if (election_ == nullptr) {
    return Unavailable(fmt::format(
        "the chain no longer holds the head log's block {}: a re-org, but this tracker cannot "
        "read the log to find the fork point",
        top));
  }
  const uint64_t depth = options_.max_reorg_depth;
  const uint64_t lo = std::max(options_.from, tip_height > depth ? tip_height - depth : 0);
  auto too_deep = [&](uint64_t highest) {
    return FailedPrecondition(
               fmt::format(
                   "the chain re-orged deeper than --max-reorg-depth {}: the node's blocks differ "
                   "from the head log's at every height from {} down to {} (fork point below {}). "
                   "Nothing was changed. Check the RPC node; if the chain really re-orged that "
                   "deep, restart with a larger --max-reorg-depth",
                   depth, highest, lo, lo))
        .WithReason(std::string(kReorgTooDeepReason));
  };
  // The node's chain differs at `top`, already below the bound's reach (a chain much shorter).
  if (top < lo) return too_deep(tip_height);
  GAPLESS_ASSIGN_OR_RETURN(auto committed, election_->Committed(lo, top));
  // No committed entry to compare with is not a deep re-org: the log is short of a quorum there
  // (a truncation that reached too few nodes, nodes that lost their data) until a repair.
  if (committed.empty()) {
    return Unavailable(fmt::format(
        "the chain no longer holds the head log's block {}, and the head log has no committed "
        "entry at heights {}..{} to find the fork point with; retrying",
        top, lo, top));
  }
  GAPLESS_ASSIGN_OR_RETURN(auto headers, FetchHeaders(*rpc_, lo, top));
  for (uint64_t h = top + 1; h-- > lo;) {
    auto it = committed.find(h);
    if (it != committed.end() && it->second.hash == headers[h - lo].hash) return it->second;
  }
  return too_deep(top);
}

Result<HeadUpdate> HeadTracker::Next(const std::optional<HeadEntry>& tip, size_t max) {
  GAPLESS_RETURN_IF_ERROR(CheckDatabase().WithContext("PostgreSQL"));
  auto bound = Bound();
  if (!bound.ok() && bound.status().code() == Code::kNotFound) return HeadUpdate{};
  if (!bound.ok()) return bound.status();
  HeadUpdate out;
  // Is the log's tip still on the chain? (Also when nothing is new: a re-org to a fork no longer
  // than the old one shows only here.)
  std::optional<HeadEntry> base = tip;
  if (tip.has_value() && *bound >= options_.from) {
    const uint64_t probe = std::min(tip->height, *bound);
    GAPLESS_ASSIGN_OR_RETURN(auto node, FetchHeaders(*rpc_, probe, probe));
    std::string logged = tip->hash;
    if (probe != tip->height && election_ != nullptr) {
      GAPLESS_ASSIGN_OR_RETURN(auto at, election_->Committed(probe, probe));
      logged = at.count(probe) > 0 ? at.at(probe).hash : node[0].hash;
    }
    if (node[0].hash != logged) {
      GAPLESS_ASSIGN_OR_RETURN(HeadEntry fork, FindForkPoint(tip->height, probe));
      out.fork = fork;
      base = fork;
    }
  }
  uint64_t start = options_.from;
  if (*bound >= options_.window && *bound - options_.window + 1 > start) {
    start = *bound - options_.window + 1;
  }
  uint64_t first = base.has_value() ? std::max(base->height + 1, start) : start;
  if (first > *bound || max == 0) return out;
  uint64_t last = std::min(*bound, first + max - 1);
  GAPLESS_ASSIGN_OR_RETURN(out.entries, FetchHeaders(*rpc_, first, last));
  const auto& entries = out.entries;
  // Entries chain: a break is the chain moving under us (a re-org between the calls, or a node
  // answering from two forks): nothing is written, the next call looks again.
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string* want = nullptr;
    if (i > 0) {
      want = &entries[i - 1].hash;
    } else if (base.has_value() && base->height + 1 == entries[0].height) {
      want = &base->hash;
    }
    if (want != nullptr && entries[i].parent != *want) {
      return Unavailable(fmt::format(
          "block {}: parent hash {} does not match {} at height {} (the chain moved during the "
          "call, or an RPC backend answers from another fork)",
          entries[i].height, entries[i].parent, *want, entries[i].height - 1));
    }
  }
  return out;
}

Status HeadLogCheck(const Election& election, std::span<const BlockData> blocks, size_t* wrong) {
  if (blocks.empty()) return Status::Ok();
  uint64_t from = blocks.front().block.number;
  uint64_t to = blocks.back().block.number;
  GAPLESS_ASSIGN_OR_RETURN(auto committed,
                           election.Committed(std::min(from, to), std::max(from, to)));
  for (size_t i = 0; i < blocks.size(); ++i) {
    const BlockData& b = blocks[i];
    auto it = committed.find(b.block.number);
    if (it == committed.end() || it->second.hash == b.block.hash) continue;
    if (wrong != nullptr) *wrong = i;
    return InvalidData(
               fmt::format("block {}: hash {} differs from the head log's {} at this height (the "
                           "RPC node answered from another fork or backend)",
                           b.block.number, b.block.hash, it->second.hash))
        .WithReason(kHeadLogMismatchReason);
  }
  return Status::Ok();
}

}  // namespace gapless
