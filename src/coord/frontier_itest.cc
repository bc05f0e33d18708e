// The frontier against a real Redis: it advances only over the contiguous prefix of completed
// ranges, a gap holds it, duplicates and overlaps are harmless, it never decreases, consumed
// ranges are trimmed, corrupt state is refused without a write, and a burst of 10,000 ranges in
// random order (also from concurrent advancers) ends at the right frontier with an empty set.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "coord/frontier.h"
#include "coord/queue.h"
#include "testing/redis_test_db.h"

namespace gapless {
namespace {

class FrontierTest : public RedisTest {
 protected:
  // The keys of a chain id of this test's own (RedisTestDb), deleted after the test.
  void SetUp() override {
    RedisTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    conn_ = &conn();
    completed_ = keys().completed();
    frontier_key_ = keys().frontier();
  }

  Frontier Make(uint64_t start) { return Frontier(conn_, completed_, frontier_key_, start); }
  uint64_t MustAdvance(Frontier& f) {
    auto r = f.Advance();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : 0;
  }
  std::vector<std::string> Members() {
    auto reply = conn_->Command({"ZRANGE", completed_, "0", "-1"});
    EXPECT_TRUE(reply.ok());
    std::vector<std::string> out;
    if (reply.ok()) {
      for (const auto& e : reply->elements) out.push_back(e.str);
    }
    return out;
  }
  std::string StoredFrontier() {
    auto reply = conn_->Command({"GET", frontier_key_});
    EXPECT_TRUE(reply.ok());
    return reply.ok() && !reply->is_nil() ? reply->str : "(nil)";
  }

  RedisConn* conn_ = nullptr;
  std::string completed_;
  std::string frontier_key_;
};

TEST_F(FrontierTest, StartsAtStartIncludingBlockZero) {
  Frontier f = Make(0);
  auto got = f.Get();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, 0u);
  EXPECT_EQ(MustAdvance(f), 0u);
  EXPECT_EQ(StoredFrontier(), "0");
  ASSERT_TRUE(f.Record(0, 9).ok());
  EXPECT_EQ(MustAdvance(f), 10u);
  EXPECT_EQ(*f.Get(), 10u);
}

TEST_F(FrontierTest, OutOfOrderCompletionsAdvanceOnlyOverTheContiguousPrefix) {
  Frontier f = Make(100);
  ASSERT_TRUE(f.Record(120, 129).ok());
  EXPECT_EQ(MustAdvance(f), 100u) << "block 100 is not complete";
  ASSERT_TRUE(f.Record(100, 109).ok());
  EXPECT_EQ(MustAdvance(f), 110u) << "gap 110-119 holds the frontier";
  EXPECT_EQ(Members(), std::vector<std::string>{"120-129"}) << "consumed range trimmed";
  ASSERT_TRUE(f.Record(140, 149).ok());
  ASSERT_TRUE(f.Record(110, 119).ok());
  EXPECT_EQ(MustAdvance(f), 130u) << "advances over 110-119 and 120-129, stops at gap 130";
  EXPECT_EQ(Members(), std::vector<std::string>{"140-149"});
  ASSERT_TRUE(f.Record(130, 139).ok());
  EXPECT_EQ(MustAdvance(f), 150u);
  EXPECT_TRUE(Members().empty());
  auto exists = conn_->Command({"EXISTS", completed_});
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ(exists->integer, 0) << "the set disappears when the frontier catches up";
  EXPECT_EQ(MustAdvance(f), 150u) << "idempotent";
}

TEST_F(FrontierTest, DuplicatesAndOverlapsAreHarmless) {
  Frontier f = Make(100);
  ASSERT_TRUE(f.Record(100, 109).ok());
  ASSERT_TRUE(f.Record(100, 109).ok());  // the same range twice (a retried completion)
  ASSERT_TRUE(f.Record(100, 104).ok());  // a shorter range with the same start
  EXPECT_EQ(MustAdvance(f), 110u);
  EXPECT_TRUE(Members().empty());
  ASSERT_TRUE(f.Record(105, 114).ok());  // starts below the frontier, ends above it
  EXPECT_EQ(MustAdvance(f), 115u);
  ASSERT_TRUE(f.Record(100, 103).ok());  // wholly below: removed, frontier unchanged
  ASSERT_TRUE(f.Record(112, 112).ok());
  EXPECT_EQ(MustAdvance(f), 115u);
  EXPECT_TRUE(Members().empty());
  // Overlapping ranges beyond a gap wait together, then all go.
  ASSERT_TRUE(f.Record(120, 129).ok());
  ASSERT_TRUE(f.Record(118, 122).ok());
  EXPECT_EQ(MustAdvance(f), 115u);
  ASSERT_TRUE(f.Record(115, 117).ok());
  EXPECT_EQ(MustAdvance(f), 130u);
  EXPECT_TRUE(Members().empty());
}

TEST_F(FrontierTest, NeverDecreases) {
  Frontier f = Make(100);
  ASSERT_TRUE(f.Record(100, 199).ok());
  EXPECT_EQ(MustAdvance(f), 200u);
  Frontier lower = Make(50);  // a process with an older idea of the start
  EXPECT_EQ(MustAdvance(lower), 200u);
  EXPECT_EQ(*lower.Get(), 200u);
  EXPECT_EQ(StoredFrontier(), "200");
  // A higher start acts as a floor (reconciliation passes the frontier found in PostgreSQL).
  Frontier floor = Make(300);
  EXPECT_EQ(*floor.Get(), 300u);
  EXPECT_EQ(MustAdvance(floor), 300u);
  EXPECT_EQ(MustAdvance(f), 300u);
}

// A deposed leader cannot move the frontier after its successor has (lua/leader_epoch_lib.lua).
TEST_F(FrontierTest, ADeposedLeadersAdvanceIsRefused) {
  Frontier f(conn_, completed_, frontier_key_, 100, keys().leader_epoch());
  ASSERT_TRUE(f.Record(100, 149).ok());
  auto current = f.Advance(/*leader_epoch=*/5);
  ASSERT_TRUE(current.ok()) << current.status().ToString();
  EXPECT_EQ(*current, 150u);
  ASSERT_TRUE(f.Record(150, 199).ok());
  auto stale = f.Advance(/*leader_epoch=*/4);
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(IsStaleLeaderEpoch(stale.status())) << stale.status().ToString();
  EXPECT_EQ(StoredFrontier(), "150");                         // not moved
  EXPECT_EQ(Members(), std::vector<std::string>{"150-199"});  // nothing trimmed
  EXPECT_EQ(*f.Advance(5), 200u);
}

TEST_F(FrontierTest, CorruptStateIsRefusedWithoutAWrite) {
  Frontier f = Make(0);
  ASSERT_TRUE(f.Record(10, 19).ok());
  ASSERT_TRUE(conn_->Command({"ZADD", completed_, "0", "garbage"}).ok());
  auto r = f.Advance();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDataLoss) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), RedisErrorReason(kCorruptStateError));
  EXPECT_NE(r.status().message().find("garbage"), std::string::npos);
  EXPECT_EQ(Members().size(), 2u) << "nothing removed";
  EXPECT_EQ(StoredFrontier(), "(nil)") << "nothing written";

  ASSERT_TRUE(conn_->Command({"DEL", completed_}).ok());
  ASSERT_TRUE(conn_->Command({"ZADD", completed_, "0", "5-9"}).ok());  // score != from
  r = f.Advance();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDataLoss);

  ASSERT_TRUE(conn_->Command({"DEL", completed_}).ok());
  ASSERT_TRUE(conn_->Command({"ZADD", completed_, "0", "9-5"}).ok());  // from > to
  EXPECT_EQ(f.Advance().status().code(), Code::kDataLoss);

  ASSERT_TRUE(conn_->Command({"DEL", completed_}).ok());
  ASSERT_TRUE(conn_->Command({"SET", frontier_key_, "12abc"}).ok());
  r = f.Advance();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDataLoss);
  EXPECT_EQ(f.Get().status().code(), Code::kDataLoss);
  EXPECT_EQ(f.Record(5, 4).code(), Code::kFailedPrecondition);
}

// The error code decides, not the text: an argument the script refuses is the caller's bug
// (Internal), although its message names frontier_advance just as a corrupt-state refusal does.
TEST_F(FrontierTest, AStartTheScriptRefusesIsABugNotCorruptState) {
  Frontier f = Make(10'000'000'000'000'000);  // 17 digits: more than the script takes
  auto r = f.Advance();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal) << r.status().ToString();
  EXPECT_NE(r.status().reason(), RedisErrorReason(kCorruptStateError));
  EXPECT_EQ(StoredFrontier(), "(nil)");
}

// 10,000 ranges of 10 blocks in random order, advancing every 97 records: the frontier only
// grows, never passes a block whose range is missing, and ends at the last block + 1 with an
// empty set.
TEST_F(FrontierTest, BurstOfTenThousandRangesInRandomOrder) {
  constexpr uint64_t kStart = 1'000'000;
  constexpr uint64_t kRanges = 10'000;
  constexpr uint64_t kSize = 10;
  std::vector<uint64_t> order(kRanges);
  for (uint64_t i = 0; i < kRanges; ++i) order[i] = i;
  std::mt19937_64 rng(42);
  std::shuffle(order.begin(), order.end(), rng);

  Frontier f = Make(kStart);
  std::vector<bool> done(kRanges, false);
  uint64_t contiguous = 0;  // ranges [0, contiguous) are done
  uint64_t last = kStart;
  size_t max_set = 0;
  for (uint64_t i = 0; i < kRanges; ++i) {
    uint64_t r = order[i];
    ASSERT_TRUE(f.Record(kStart + r * kSize, kStart + r * kSize + kSize - 1).ok());
    done[r] = true;
    while (contiguous < kRanges && done[contiguous]) ++contiguous;
    if (i % 97 == 0 || i + 1 == kRanges) {
      uint64_t next = MustAdvance(f);
      ASSERT_GE(next, last) << "never decreases";
      ASSERT_EQ(next, kStart + contiguous * kSize) << "exactly the contiguous prefix";
      last = next;
      auto card = conn_->Command({"ZCARD", completed_});
      ASSERT_TRUE(card.ok());
      ASSERT_EQ(static_cast<uint64_t>(card->integer), i + 1 - contiguous) << "trimmed";
      max_set = std::max(max_set, static_cast<size_t>(card->integer));
    }
  }
  EXPECT_EQ(last, kStart + kRanges * kSize);
  EXPECT_TRUE(Members().empty());
  std::printf("10,000 ranges in random order: largest completed set %zu members\n", max_set);
}

// Several processes record and advance the same keys at once (each with its own connection).
TEST_F(FrontierTest, ConcurrentAdvancersAgree) {
  constexpr int kThreads = 4;
  constexpr uint64_t kRanges = 2'000;
  std::vector<uint64_t> order(kRanges);
  for (uint64_t i = 0; i < kRanges; ++i) order[i] = i;
  std::mt19937_64 rng(7);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto conn = NewConnection();
      if (conn == nullptr) return;
      Frontier f(conn.get(), completed_, frontier_key_, 0);
      uint64_t last = 0;
      for (uint64_t i = static_cast<uint64_t>(t); i < kRanges; i += kThreads) {
        uint64_t r = order[i];
        Status st = f.Record(r * 5, r * 5 + 4);
        if (!st.ok()) {
          ADD_FAILURE() << st.ToString();
          return;
        }
        auto next = f.Advance();
        if (!next.ok()) {
          ADD_FAILURE() << next.status().ToString();
          return;
        }
        if (*next < last) ADD_FAILURE() << "frontier went back from " << last << " to " << *next;
        last = *next;
      }
    });
  }
  for (auto& th : threads) th.join();
  Frontier f = Make(0);
  EXPECT_EQ(MustAdvance(f), kRanges * 5);
  EXPECT_TRUE(Members().empty());
}

}  // namespace
}  // namespace gapless
