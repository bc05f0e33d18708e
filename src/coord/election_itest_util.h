// election_itest_util: what the HA leader's integration tests share (election_itest.cc,
// election_head_log_itest.cc): elector options, head entries of named forks, a fake chain that
// grows, fails and re-orgs on demand, and the ElectionTest fixture (three private redis-servers
// as lock nodes; candidates with their own connections; writes to one node alone). Header-only,
// test code.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "coord/election.h"
#include "coord/elector.h"
#include "coord/lock_nodes.h"
#include "testing/redis_server.h"
#include "testing/wait_for.h"

namespace gapless::election_testing {

inline ElectorOptions Opts(const std::string& name, int64_t poll_ms = 500) {
  ElectorOptions o;
  o.name = name;
  o.poll_ms = poll_ms;
  return o;
}

inline HeadEntry Block(uint64_t n, const std::string& fork = "a") {
  return HeadEntry{n, "0x" + fork + std::to_string(n), "0x" + fork + std::to_string(n - 1), 0};
}

// A chain that grows when the test says so; fails on demand (an unreachable RPC node).
// ReorgAbove(F) replaces every block above F with another fork's (a re-org); the source reports
// the fork point when the log's tip is no longer on the chain (what node/head_tracker.h finds by
// walking back).
class FakeChain : public HeadSource {
 public:
  Result<HeadUpdate> Next(const std::optional<HeadEntry>& tip, size_t max) override {
    if (down.load()) return Unavailable("fake chain: down");
    std::lock_guard lock(mu_);
    uint64_t head = height.load();
    HeadUpdate out;
    uint64_t next = tip.has_value() ? tip->height + 1 : 1;
    if (tip.has_value() && At(tip->height).hash != tip->hash) {
      uint64_t point = fork_point_;
      if (walk != nullptr) {
        // As node/head_tracker.h does: the highest height whose committed entry is the chain's.
        auto committed = walk->Committed(1, tip->height);
        if (!committed.ok()) return committed.status();
        point = 0;
        for (const auto& [h, e] : *committed) {
          if (e.hash == At(h).hash) point = h;
        }
      }
      out.fork = At(point);
      next = point + 1;
      if (on_fork) {
        on_fork();
        on_fork = nullptr;
      }
    }
    for (uint64_t h = next; h <= head && out.entries.size() < max; ++h) {
      out.entries.push_back(At(h));
    }
    return out;
  }
  void ReorgAbove(uint64_t fork_point, const std::string& name) {
    std::lock_guard lock(mu_);
    fork_point_ = fork_point;
    upper_ = name;
  }
  HeadEntry At(uint64_t h) const {
    if (h <= fork_point_) return Block(h);
    HeadEntry e = Block(h, upper_);
    if (h == fork_point_ + 1) e.parent = Block(fork_point_).hash;
    return e;
  }
  std::atomic<uint64_t> height{1};
  std::atomic<bool> down{false};
  // Set before the elector starts. walk: find the fork point in this election's committed log, as
  // the head tracker does (otherwise the ReorgAbove point is reported). on_fork: called once, when
  // a fork is first reported, before the elector writes it.
  const Election* walk = nullptr;
  std::function<void()> on_fork;

 private:
  mutable std::mutex mu_;
  uint64_t fork_point_ = UINT64_MAX - 1;
  std::string upper_ = "a";
};

class ElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      auto s = RedisServer::Start();
      if (!s.ok()) GTEST_SKIP() << s.status().ToString();
      servers_.push_back(std::move(*s));
    }
  }

  std::vector<std::string> Urls() const {
    std::vector<std::string> urls;
    for (const auto& s : servers_) urls.push_back(s->url());
    return urls;
  }

  // Lock nodes of one process (each candidate has its own connections, as separate processes do).
  LockNodes* Nodes() {
    LockNodesOptions options;
    options.node_timeout_ms = 300;  // sanitizer builds on 2 busy cores
    auto nodes = LockNodes::Open(Urls(), options);
    EXPECT_TRUE(nodes.ok()) << nodes.status().ToString();
    node_sets_.push_back(std::move(*nodes));
    return node_sets_.back().get();
  }

  Election Candidate(const std::string& owner, int64_t ttl_ms = 3'000) {
    return Election(Nodes(), keys_, ElectionOptions{owner, ttl_ms, 1'000});
  }

  // Redis command on node i directly.
  RedisReply On(size_t i, const std::vector<std::string>& argv) {
    auto conn = RedisConn::Connect(servers_[i]->url());
    EXPECT_TRUE(conn.ok());
    auto r = (*conn)->Command(argv);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : RedisReply{};
  }

  // Writes head entries to node i alone, as `owner` with `token` (a leader whose write reached
  // only that node).
  void WriteHeadOn(size_t i, const std::string& owner, uint64_t token,
                   const std::vector<HeadEntry>& entries) {
    auto conn = RedisConn::Connect(servers_[i]->url());
    ASSERT_TRUE(conn.ok());
    std::vector<std::string> argv = {owner, std::to_string(token), "400", "1000", "0", "-1"};
    for (const HeadEntry& e : entries) {
      argv.insert(argv.end(), {std::to_string(e.height), e.hash, e.parent});
    }
    auto r = (*conn)->Eval(
        LoadScript("election_write_head.lua"),
        {keys_.election_lock(), keys_.election_epoch(), keys_.head_log(), keys_.head_heights(),
         keys_.head_floor(), keys_.head_incarnation(), keys_.head_fork()},
        argv);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // Promotes `e` (token persisted) and commits blocks 1..6 of fork "a" on every node. Returns
  // the token, 0 when a step failed (reported).
  uint64_t CommitOldFork(const Election& e) {
    QuorumOutcome p = e.Promote();
    EXPECT_TRUE(p.quorum) << p.Summary();
    if (!p.quorum || !e.Renew(p.max_epoch).quorum) return 0;
    std::vector<HeadEntry> old_fork;
    for (uint64_t h = 1; h <= 6; ++h) old_fork.push_back(Block(h));
    QuorumOutcome w = e.WriteHead(p.max_epoch, old_fork);
    EXPECT_TRUE(w.quorum) << w.Summary();
    return w.quorum ? p.max_epoch : 0;
  }

  // The re-org's write of a leader over blocks 1..6: fork generation 1 above block 3, fork "b" at
  // heights 4 and 5, to node i alone, as `owner` with `token` (its lock renewed for `ttl_ms`).
  void TruncateOn(size_t i, const std::string& owner, uint64_t token, int64_t ttl_ms) {
    auto conn = RedisConn::Connect(servers_[i]->url());
    ASSERT_TRUE(conn.ok());
    auto r = (*conn)->Eval(
        LoadScript("election_write_head.lua"),
        {keys_.election_lock(), keys_.election_epoch(), keys_.head_log(), keys_.head_heights(),
         keys_.head_floor(), keys_.head_incarnation(), keys_.head_fork()},
        {owner, std::to_string(token), std::to_string(ttl_ms), "1000", "1", "3", "3", Block(3).hash,
         Block(3).parent, "4", Block(4, "b").hash, Block(3).hash, "5", Block(5, "b").hash,
         Block(4, "b").hash});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->elements[0].str, "OK") << "node " << i;
  }

  // Heights 1..top are committed, each the chain's block and the child of the one below.
  void ExpectCommittedIsTheChain(const Election& e, const FakeChain& chain, uint64_t top) {
    HeadLogReader reader(&e);
    ASSERT_TRUE(reader.Sync().ok());
    for (uint64_t h = 1; h <= top; ++h) {
      auto got = reader.CommittedAt(h);
      ASSERT_TRUE(got.has_value()) << "height " << h;
      EXPECT_EQ(got->hash, chain.At(h).hash) << "height " << h;
      if (h > 1) {
        EXPECT_EQ(got->parent, reader.CommittedAt(h - 1)->hash) << "height " << h;
      }
    }
  }

  Keys keys_{424242};
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<std::unique_ptr<LockNodes>> node_sets_;
};

}  // namespace gapless::election_testing
