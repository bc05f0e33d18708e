#include "coord/election.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <limits>
#include <map>

#include "coord/redis.h"
#include "core/env.h"

namespace gapless {
namespace {

int64_t SteadyMicros() { return Env::Default()->NowMicros(); }

uint64_t ToU64(std::string_view s) {
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// Element i of an array reply as text ("" when absent).
std::string Field(const RedisReply& r, size_t i) {
  if (r.type != RedisReply::Type::kArray || i >= r.elements.size()) return "";
  const RedisReply& e = r.elements[i];
  if (e.type == RedisReply::Type::kInteger) return std::to_string(e.integer);
  return e.str;
}

// Maps the scripts' {'STATUS', ...} replies (and failures) to a verdict.
NodeVerdict Classify(const Result<RedisReply>& r, std::string* detail) {
  if (!r.ok()) {
    *detail = r.status().message();
    return NodeVerdict::kFailed;
  }
  std::string status = Field(*r, 0);
  *detail = Field(*r, 1);
  if (status == "OK") return NodeVerdict::kOk;
  if (status == "LOCK_HELD") return NodeVerdict::kLockHeld;
  if (status == "NOT_OWNER") return NodeVerdict::kNotOwner;
  if (status == "STALE_EPOCH") return NodeVerdict::kStaleEpoch;
  if (status == "FORK_BEHIND") return NodeVerdict::kForkBehind;
  if (status == "CONFLICT") {
    *detail = Field(*r, 1) + " holds " + Field(*r, 2);
    return NodeVerdict::kConflict;
  }
  *detail = "unexpected reply '" + status + "'";
  return NodeVerdict::kFailed;
}

QuorumOutcome Tally(const std::vector<Result<RedisReply>>& replies, size_t quorum, int64_t started,
                    bool ok_epoch_in_detail) {
  QuorumOutcome out;
  out.elapsed_micros = SteadyMicros() - started;
  for (const auto& r : replies) {
    std::string detail;
    NodeVerdict v = Classify(r, &detail);
    if (v == NodeVerdict::kOk) {
      ++out.accepted;
      if (ok_epoch_in_detail) out.max_epoch = std::max(out.max_epoch, ToU64(detail));
    } else if (v == NodeVerdict::kStaleEpoch) {
      out.max_epoch = std::max(out.max_epoch, ToU64(detail));
    } else if (v == NodeVerdict::kForkBehind) {
      HeadFork f = HeadFork::Parse(detail);
      if (f.generation > out.newer_fork.generation) out.newer_fork = f;
    }
    out.verdicts.push_back(v);
    out.details.push_back(std::move(detail));
  }
  out.quorum = out.accepted >= quorum;
  return out;
}

}  // namespace

const char* VerdictName(NodeVerdict v) {
  switch (v) {
    case NodeVerdict::kOk:
      return "ok";
    case NodeVerdict::kLockHeld:
      return "lock held";
    case NodeVerdict::kNotOwner:
      return "not owner";
    case NodeVerdict::kStaleEpoch:
      return "stale epoch";
    case NodeVerdict::kConflict:
      return "conflict";
    case NodeVerdict::kForkBehind:
      return "newer fork";
    case NodeVerdict::kFailed:
      return "failed";
  }
  return "?";
}

bool QuorumOutcome::deposed() const {
  for (size_t i = 0; i < verdicts.size(); ++i) {
    if (verdicts[i] == NodeVerdict::kStaleEpoch) return true;
    if (verdicts[i] == NodeVerdict::kNotOwner && !details[i].empty()) return true;
  }
  return false;
}

std::string QuorumOutcome::Summary() const {
  std::string out = fmt::format("{}/{} (", accepted, verdicts.size());
  for (size_t i = 0; i < verdicts.size(); ++i) {
    if (i > 0) out += ", ";
    out += VerdictName(verdicts[i]);
    if (verdicts[i] != NodeVerdict::kOk && !details[i].empty()) out += ": " + details[i];
  }
  return out + ")";
}

std::string HeadFork::ToString() const { return fmt::format("{}:{}", generation, point); }

HeadFork HeadFork::Parse(std::string_view text) {
  HeadFork f;
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) return f;
  uint64_t gen = 0;
  int64_t point = -1;
  std::string_view g = text.substr(0, colon), p = text.substr(colon + 1);
  if (std::from_chars(g.data(), g.data() + g.size(), gen).ec != std::errc() ||
      std::from_chars(p.data(), p.data() + p.size(), point).ec != std::errc()) {
    return f;
  }
  f.generation = gen;
  f.point = gen == 0 ? -1 : point;
  return f;
}

HeadFork NewestFork(std::span<const HeadFork> forks) {
  HeadFork newest;
  for (const HeadFork& f : forks) {
    if (f.generation > newest.generation ||
        (f.generation == newest.generation && f.point < newest.point)) {
      newest = f;
    }
  }
  return newest;
}

int64_t VotesUpTo(uint64_t node_generation, const HeadFork& newest) {
  if (node_generation >= newest.generation) return std::numeric_limits<int64_t>::max();
  if (node_generation + 1 == newest.generation) return newest.point;
  return -1;
}

Election::Election(LockNodes* nodes, Keys keys, ElectionOptions options)
    : nodes_(nodes), keys_(std::move(keys)), options_(std::move(options)) {}

QuorumOutcome Election::Promote() const {
  int64_t started = SteadyMicros();
  const RedisScript& script = LoadScript("election_promote.lua");
  std::vector<std::string> keys = {keys_.election_lock(), keys_.election_epoch(),
                                   keys_.election_meta()};
  std::vector<std::string> args = {options_.owner, std::to_string(options_.ttl_ms)};
  auto replies = nodes_->All([&](RedisConn& c) { return c.Eval(script, keys, args); });
  QuorumOutcome out = Tally(replies, nodes_->quorum(), started, /*ok_epoch_in_detail=*/true);
  // Validity: a quorum that took longer than the TTL (minus drift) to gather is no quorum, the
  // first locks may already have expired.
  if (out.quorum && out.elapsed_micros / 1000 >= options_.ttl_ms - drift_ms()) out.quorum = false;
  if (!out.quorum && out.accepted > 0) (void)Release();
  return out;
}

QuorumOutcome Election::Renew(uint64_t token) const {
  int64_t started = SteadyMicros();
  const RedisScript& script = LoadScript("election_renew.lua");
  std::vector<std::string> keys = {keys_.election_lock(), keys_.election_epoch(),
                                   keys_.election_meta()};
  std::vector<std::string> args = {options_.owner, std::to_string(token),
                                   std::to_string(options_.ttl_ms)};
  auto replies = nodes_->All([&](RedisConn& c) { return c.Eval(script, keys, args); });
  return Tally(replies, nodes_->quorum(), started, /*ok_epoch_in_detail=*/false);
}

QuorumOutcome Election::Release() const {
  int64_t started = SteadyMicros();
  const RedisScript& script = LoadScript("election_release.lua");
  std::vector<std::string> keys = {keys_.election_lock()};
  std::vector<std::string> args = {options_.owner};
  auto replies =
      nodes_->All([&](RedisConn& c) { return c.Eval(script, keys, args, /*idempotent=*/true); });
  return Tally(replies, nodes_->quorum(), started, /*ok_epoch_in_detail=*/false);
}

QuorumOutcome Election::WriteHead(uint64_t token, std::span<const HeadEntry> entries,
                                  const HeadFork& fork) const {
  int64_t started = SteadyMicros();
  const RedisScript& script = LoadScript("election_write_head.lua");
  std::vector<std::string> keys = {
      keys_.election_lock(), keys_.election_epoch(),   keys_.head_log(), keys_.head_heights(),
      keys_.head_floor(),    keys_.head_incarnation(), keys_.head_fork()};
  std::vector<std::string> args = {options_.owner,
                                   std::to_string(token),
                                   std::to_string(options_.ttl_ms),
                                   std::to_string(options_.window),
                                   std::to_string(fork.generation),
                                   std::to_string(fork.generation == 0 ? -1 : fork.point)};
  for (const HeadEntry& e : entries) {
    args.push_back(std::to_string(e.height));
    args.push_back(e.hash);
    args.push_back(e.parent);
  }
  // Idempotent: a resent write finds its entries with the same hash (EXISTS) and renews again.
  auto replies =
      nodes_->All([&](RedisConn& c) { return c.Eval(script, keys, args, /*idempotent=*/true); });
  return Tally(replies, nodes_->quorum(), started, /*ok_epoch_in_detail=*/false);
}

std::vector<Election::NodeView> Election::Views() const {
  std::vector<std::string> lock_key = {keys_.election_lock()};
  auto replies = nodes_->All([&](RedisConn& c) -> Result<RedisReply> {
    RedisReply all;
    all.type = RedisReply::Type::kArray;
    for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
             {"GET", keys_.election_lock()},
             {"PTTL", keys_.election_lock()},
             {"GET", keys_.election_epoch()},
             {"HMGET", keys_.election_meta(), "owner", "since_ms"},
             {"ZCARD", keys_.head_heights()},
             {"ZRANGE", keys_.head_heights(), "-1", "-1", "WITHSCORES"}}) {
      GAPLESS_ASSIGN_OR_RETURN(RedisReply r, c.Command(argv));
      all.elements.push_back(std::move(r));
    }
    return all;
  });
  std::vector<NodeView> out;
  for (auto& r : replies) {
    NodeView v;
    if (!r.ok()) {
      v.error = r.status().message();
      out.push_back(std::move(v));
      continue;
    }
    v.reachable = true;
    const auto& e = r->elements;
    v.holder = e[0].str;
    v.lock_ttl_ms = e[1].integer;
    v.epoch = ToU64(e[2].str);
    if (e[3].elements.size() == 2 && e[3].elements[0].str == v.holder) {
      v.since_ms = ToU64(e[3].elements[1].str);
    }
    v.log_length = static_cast<uint64_t>(e[4].integer);
    if (e[5].elements.size() == 2) v.top_height = ToU64(e[5].elements[1].str);
    out.push_back(std::move(v));
  }
  return out;
}

namespace {

// "height:hash:parent:epoch" (the height index's member) -> entry.
std::optional<HeadEntry> ParseMember(std::string_view m) {
  HeadEntry e;
  size_t a = m.find(':');
  size_t b = a == std::string_view::npos ? a : m.find(':', a + 1);
  size_t c = b == std::string_view::npos ? b : m.find(':', b + 1);
  if (c == std::string_view::npos) return std::nullopt;
  e.height = ToU64(m.substr(0, a));
  e.hash = std::string(m.substr(a + 1, b - a - 1));
  e.parent = std::string(m.substr(b + 1, c - b - 1));
  e.epoch = ToU64(m.substr(c + 1));
  return e;
}

}  // namespace

Result<std::optional<uint64_t>> Election::LowestHeight() const {
  auto replies = nodes_->All([&](RedisConn& c) -> Result<RedisReply> {
    return c.Command({"ZRANGE", keys_.head_heights(), "0", "0", "WITHSCORES"});
  });
  size_t answered = 0;
  std::optional<uint64_t> lowest;
  for (const auto& r : replies) {
    if (!r.ok()) continue;
    ++answered;
    if (r->elements.size() != 2) continue;  // an empty index
    uint64_t h = std::strtoull(r->elements[1].str.c_str(), nullptr, 10);
    lowest = lowest.has_value() ? std::min(*lowest, h) : h;
  }
  if (answered < nodes_->quorum()) {
    return Unavailable(fmt::format("head log: {} of {} lock nodes answered, {} needed", answered,
                                   nodes_->size(), nodes_->quorum()));
  }
  return lowest;
}

Result<std::map<uint64_t, HeadEntry>> Election::Committed(uint64_t from, uint64_t to) const {
  auto replies = nodes_->All([&](RedisConn& c) -> Result<RedisReply> {
    RedisReply both;
    both.type = RedisReply::Type::kArray;
    GAPLESS_ASSIGN_OR_RETURN(RedisReply fork, c.Command({"GET", keys_.head_fork()}));
    GAPLESS_ASSIGN_OR_RETURN(RedisReply members,
                             c.Command({"ZRANGEBYSCORE", keys_.head_heights(), std::to_string(from),
                                        std::to_string(to)}));
    both.elements.push_back(std::move(fork));
    both.elements.push_back(std::move(members));
    return both;
  });
  size_t answered = 0;
  std::vector<HeadFork> forks;
  for (const auto& r : replies) {
    if (r.ok()) forks.push_back(HeadFork::Parse(r->elements[0].str));
  }
  const HeadFork newest = NewestFork(forks);
  // height -> hash -> (entry, count)
  std::map<uint64_t, std::map<std::string, std::pair<HeadEntry, size_t>>> seen;
  for (const auto& r : replies) {
    if (!r.ok()) continue;
    ++answered;
    // A node behind the newest truncation holds the old fork above its point: those entries
    // count for nothing until a write brings it up; below the point it still votes (VotesUpTo).
    const int64_t limit = VotesUpTo(HeadFork::Parse(r->elements[0].str).generation, newest);
    for (const RedisReply& m : r->elements[1].elements) {
      auto e = ParseMember(m.str);
      if (!e.has_value() || static_cast<int64_t>(e->height) > limit) continue;
      auto& slot = seen[e->height][e->hash];
      if (slot.second == 0 || e->epoch > slot.first.epoch) slot.first = *e;
      ++slot.second;
    }
  }
  if (answered < nodes_->quorum()) {
    return Unavailable(fmt::format("head log: {} of {} lock nodes answered, {} needed", answered,
                                   nodes_->size(), nodes_->quorum()));
  }
  std::map<uint64_t, HeadEntry> out;
  for (auto& [height, hashes] : seen) {
    for (auto& [hash, slot] : hashes) {
      if (slot.second >= nodes_->quorum()) out[height] = slot.first;
    }
  }
  return out;
}

// --- HeadLogReader -----------------------------------------------------------------------------

HeadLogReader::HeadLogReader(const Election* election)
    : election_(election),
      cursors_(election->nodes().size(), "-"),
      incarnations_(election->nodes().size()),
      node_forks_(election->nodes().size(), 0) {}

Result<size_t> HeadLogReader::Sync(size_t max_per_node) {
  const Keys& keys = election_->keys();
  const RedisScript& script = LoadScript("election_read_log.lua");
  static constexpr size_t kPage = 1000;
  std::vector<size_t> read(cursors_.size(), 0);
  std::vector<bool> answered(cursors_.size(), false);
  size_t total = 0;
  for (;;) {
    auto replies = election_->nodes().Each([&](size_t i) -> LockNodes::Op {
      std::string cursor = cursors_[i];
      if (read[i] >= max_per_node || (read[i] > 0 && read[i] % kPage != 0)) {
        return [](RedisConn&) -> Result<RedisReply> { return RedisReply{}; };  // done
      }
      return [&script, &keys, cursor](RedisConn& c) {
        return c.Eval(script, {keys.head_log(), keys.head_incarnation(), keys.head_fork()},
                      {cursor, std::to_string(kPage)}, /*idempotent=*/true);
      };
    });
    bool more = false;
    // The newest truncation any node applied (a node that lost its data forgets the one it
    // applied; the reader keeps it). Nodes behind it vote only up to VotesUpTo (their entries
    // above its point are the old fork) and are re-read from the start once a write truncates
    // them (which gives them a new incarnation).
    std::vector<HeadFork> forks = {fork_};
    for (const auto& r : replies) {
      if (!r.ok() || r->type != RedisReply::Type::kArray || r->elements.size() != 3) continue;
      forks.push_back(HeadFork::Parse(r->elements[2].str));
    }
    if (HeadFork newest = NewestFork(forks); newest.generation > fork_.generation) fork_ = newest;
    for (size_t i = 0; i < replies.size(); ++i) {
      const auto& r = replies[i];
      if (!r.ok() || r->type != RedisReply::Type::kArray || r->elements.size() != 3) continue;
      answered[i] = true;
      node_forks_[i] = HeadFork::Parse(r->elements[2].str).generation;
      const int64_t limit = VotesUpTo(node_forks_[i], fork_);
      const uint64_t bit = uint64_t{1} << i;
      if (limit != std::numeric_limits<int64_t>::max()) {
        auto above =
            limit < 0 ? by_height_.begin() : by_height_.upper_bound(static_cast<uint64_t>(limit));
        for (; above != by_height_.end(); ++above) {
          for (Candidate& c : above->second) c.node_mask &= ~bit;
        }
      }
      const std::string& incarnation = r->elements[0].str;
      if (incarnation != incarnations_[i]) {
        // New (or first) incarnation: this node's earlier entries no longer count.
        if (!incarnations_[i].empty() || cursors_[i] != "-") {
          for (auto& [h, cands] : by_height_) {
            for (Candidate& c : cands) c.node_mask &= ~bit;
          }
          if (cursors_[i] != "-") {
            incarnations_[i] = incarnation;
            cursors_[i] = "-";
            more = true;
            continue;  // re-read it from the start
          }
        }
        incarnations_[i] = incarnation;
      }
      const auto& entries = r->elements[1].elements;
      for (const RedisReply& entry : entries) {
        if (entry.elements.size() != 2) continue;
        cursors_[i] = entry.elements[0].str;
        HeadEntry e;
        const auto& f = entry.elements[1].elements;
        for (size_t k = 0; k + 1 < f.size(); k += 2) {
          if (f[k].str == "height") e.height = ToU64(f[k + 1].str);
          if (f[k].str == "hash") e.hash = f[k + 1].str;
          if (f[k].str == "parent") e.parent = f[k + 1].str;
          if (f[k].str == "epoch") e.epoch = ToU64(f[k + 1].str);
        }
        if (static_cast<int64_t>(e.height) > limit) continue;  // the old fork: no vote
        auto& cands = by_height_[e.height];
        auto it = std::find_if(cands.begin(), cands.end(),
                               [&](const Candidate& c) { return c.entry.hash == e.hash; });
        if (it == cands.end()) {
          cands.push_back(Candidate{e, 0});
          it = cands.end() - 1;
        }
        it->entry.epoch = std::max(it->entry.epoch, e.epoch);
        it->node_mask |= bit;
      }
      read[i] += entries.size();
      total += entries.size();
      if (entries.size() == kPage && read[i] < max_per_node) more = true;
    }
    if (!more) break;
  }
  Prune();
  reachable_mask_ = 0;
  for (size_t i = 0; i < answered.size(); ++i) {
    if (answered[i]) reachable_mask_ |= uint64_t{1} << i;
  }
  size_t ok = static_cast<size_t>(std::count(answered.begin(), answered.end(), true));
  if (ok < election_->nodes().quorum()) {
    return Unavailable(fmt::format("head log: {} of {} lock nodes answered, {} needed", ok,
                                   answered.size(), election_->nodes().quorum()));
  }
  return total;
}

void HeadLogReader::Prune() {
  if (by_height_.empty()) return;
  uint64_t top = by_height_.rbegin()->first;
  uint64_t window = election_->options().window;
  if (top <= window) return;
  by_height_.erase(by_height_.begin(), by_height_.lower_bound(top - window + 1));
}

std::optional<HeadEntry> HeadLogReader::CommittedAt(uint64_t height) const {
  auto it = by_height_.find(height);
  if (it == by_height_.end()) return std::nullopt;
  for (const Candidate& c : it->second) {
    if (static_cast<size_t>(__builtin_popcountll(c.node_mask)) >= election_->nodes().quorum()) {
      return c.entry;
    }
  }
  return std::nullopt;
}

std::optional<HeadEntry> HeadLogReader::CommittedTip() const {
  for (auto it = by_height_.rbegin(); it != by_height_.rend(); ++it) {
    if (auto e = CommittedAt(it->first)) return e;
  }
  return std::nullopt;
}

std::vector<HeadEntry> HeadLogReader::SubQuorum() const {
  // What is re-proposed must be one chain, the one the log stands for. A leader whose heads
  // reached different nodes before and after a re-org leaves one fork's entries on some nodes
  // and the other's on others, at the same heights and epoch; a node that restarts empty can
  // then leave both below a quorum. Picked height by height, a repair commits a log that mixes
  // the forks (found by the chaos harness, twice). So: the committed tip's ancestors, by parent
  // links, as far down as the log holds them; above the tip, the entries that chain onto it
  // (a leader that died mid-write), the highest epoch first and, between equal epochs, the one
  // whose chain reaches highest (the later of one leader's two writes). Entries off that chain
  // are left alone: the leader's next write, from the node's chain, settles their heights.
  const size_t quorum = election_->nodes().quorum();
  auto held = [&](const Candidate& c) {
    return static_cast<size_t>(__builtin_popcountll(c.node_mask & reachable_mask_)) >= quorum;
  };
  // How high a chain of entries from each one goes.
  std::map<std::pair<uint64_t, std::string>, uint64_t> reach;
  for (auto it = by_height_.rbegin(); it != by_height_.rend(); ++it) {
    const auto& [height, cands] = *it;
    auto up = by_height_.find(height + 1);
    for (const Candidate& c : cands) {
      if (c.node_mask == 0) continue;
      uint64_t r = height;
      if (up != by_height_.end()) {
        for (const Candidate& child : up->second) {
          if (child.node_mask == 0 || child.entry.parent != c.entry.hash) continue;
          r = std::max(r, reach[{height + 1, child.entry.hash}]);
        }
      }
      reach[{height, c.entry.hash}] = r;
    }
  }
  // The committed tip: the highest height one hash holds on a quorum.
  const Candidate* top = nullptr;
  uint64_t top_height = 0;
  for (auto it = by_height_.rbegin(); it != by_height_.rend() && top == nullptr; ++it) {
    for (const Candidate& c : it->second) {
      if (held(c)) {
        top = &c;
        top_height = it->first;
        break;
      }
    }
  }
  std::vector<HeadEntry> out;
  if (top != nullptr) {
    std::string want = top->entry.parent;
    for (uint64_t h = top_height; h > by_height_.begin()->first;) {
      --h;
      auto it = by_height_.find(h);
      if (it == by_height_.end()) break;
      const Candidate* on = nullptr;
      for (const Candidate& c : it->second) {
        if (c.node_mask != 0 && c.entry.hash == want) on = &c;
      }
      if (on == nullptr) break;
      if (!held(*on)) out.push_back(on->entry);
      want = on->entry.parent;
    }
    std::reverse(out.begin(), out.end());
  }
  auto it = top != nullptr ? by_height_.upper_bound(top_height) : by_height_.begin();
  const std::string* below = top != nullptr ? &top->entry.hash : nullptr;
  for (uint64_t expect = it == by_height_.end() ? 0 : it->first;
       it != by_height_.end() && it->first == expect; ++it, ++expect) {
    const Candidate* best = nullptr;
    for (const Candidate& c : it->second) {
      if (c.node_mask == 0) continue;
      if (below != nullptr && c.entry.parent != *below) continue;
      if (best == nullptr || c.entry.epoch > best->entry.epoch ||
          (c.entry.epoch == best->entry.epoch &&
           reach[{it->first, c.entry.hash}] > reach[{it->first, best->entry.hash}])) {
        best = &c;
      }
    }
    if (best == nullptr) break;
    out.push_back(best->entry);
    below = &best->entry.hash;
  }
  return out;
}

}  // namespace gapless
