// The events-order invariant (BlockNewOrderViolation) on block.new streams as the buses delivered
// them: what a chain-following consumer must never see (a hole, a child before its re-announced
// parent) fails it; what at-least-once delivery and re-orgs legitimately produce passes, seed
// 269's late batch of a deposed relay among them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chaos/harness.h"

namespace gapless::chaos {
namespace {

// Block n of fork f: hash "f<n>", parent "f<n-1>" (a fork branches off "a" at `from`).
BlockNewSeen B(uint64_t n, const std::string& fork = "a", const std::string& parent_fork = "",
               int incarnation = 0) {
  const std::string pf = parent_fork.empty() ? fork : parent_fork;
  return {n, fork + std::to_string(n), pf + std::to_string(n - 1),
          fork + std::to_string(n) + "#" + std::to_string(incarnation)};
}

std::vector<BlockNewSeen> Chain(uint64_t from, uint64_t to) {
  std::vector<BlockNewSeen> out;
  for (uint64_t n = from; n <= to; ++n) out.push_back(B(n));
  return out;
}

TEST(BlockNewOrderTest, AContiguousStreamFromEventsFromHolds) {
  EXPECT_EQ(BlockNewOrderViolation(10, Chain(10, 40)), "");
}

TEST(BlockNewOrderTest, AHoleFailsNamingTheBlock) {
  auto s = Chain(10, 20);
  auto rest = Chain(22, 30);
  s.insert(s.end(), rest.begin(), rest.end());
  std::string v = BlockNewOrderViolation(10, s);
  EXPECT_NE(v.find("block 22"), std::string::npos) << v;
  EXPECT_NE(v.find("hole"), std::string::npos) << v;
}

TEST(BlockNewOrderTest, AStreamThatStartsAboveEventsFromFails) {
  EXPECT_NE(BlockNewOrderViolation(10, Chain(11, 20)), "");
}

// Seed 269 (Kafka): leader-b's relay produced 185..187 and was stopped (SIGSTOP) before its
// client sent them; leader-a's relay published 185..214 from the cursor; leader-b, resumed, got
// its batch written (same ids) and was refused at its cursor move; leader-a went on with 215.
TEST(BlockNewOrderTest, ADeposedRelaysLateBatchAfterItsSuccessorsHolds) {
  auto s = Chain(10, 214);
  auto late = Chain(185, 187);
  s.insert(s.end(), late.begin(), late.end());
  auto rest = Chain(215, 230);
  s.insert(s.end(), rest.begin(), rest.end());
  EXPECT_EQ(BlockNewOrderViolation(10, s), "");
}

TEST(BlockNewOrderTest, AReorgGoesBackToTheForkPointAndOnFromThere) {
  auto s = Chain(10, 30);
  for (uint64_t n = 26; n <= 35; ++n) s.push_back(B(n, "b", n == 26 ? "a" : "b"));
  EXPECT_EQ(BlockNewOrderViolation(10, s), "");
}

TEST(BlockNewOrderTest, ANewForkThatSkipsItsFirstBlockFails) {
  auto s = Chain(10, 30);
  // b26 (parent a25) is never announced; b27 names b26.
  for (uint64_t n = 27; n <= 35; ++n) s.push_back(B(n, "b"));
  EXPECT_NE(BlockNewOrderViolation(10, s), "");
}

// A flip-flop: fork a, then fork b, then fork a back with its exact hashes (new ids: another
// incarnation). Every block of a's return must be announced again, from the fork point up.
TEST(BlockNewOrderTest, AFlipFlopBackMustAnnounceEachBlockAgain) {
  auto s = Chain(10, 30);
  for (uint64_t n = 26; n <= 31; ++n) s.push_back(B(n, "b", n == 26 ? "a" : "b"));
  auto whole = s;
  for (uint64_t n = 26; n <= 32; ++n) whole.push_back(B(n, "a", "", 1));
  EXPECT_EQ(BlockNewOrderViolation(10, whole), "");
  // Without a26's second announcement, a27 comes when the latest block 26 is b26.
  auto skipped = s;
  for (uint64_t n = 27; n <= 32; ++n) skipped.push_back(B(n, "a", "", 1));
  std::string v = BlockNewOrderViolation(10, skipped);
  EXPECT_NE(v.find("block 27"), std::string::npos) << v;
  EXPECT_NE(v.find("b26"), std::string::npos) << v;
}

// A repeated id is a redelivery: it does not count as the latest at its height, so a stale
// duplicate of an orphaned block does not hide a new fork (nor make one look broken).
TEST(BlockNewOrderTest, ARepeatedDeliveryIsNotLookedAt) {
  auto s = Chain(10, 31);
  for (uint64_t n = 26; n <= 31; ++n) s.push_back(B(n, "b", n == 26 ? "a" : "b"));
  s.push_back(B(31));  // the orphaned a31 again, same id
  s.push_back(B(32, "b"));
  EXPECT_EQ(BlockNewOrderViolation(10, s), "");
}

}  // namespace
}  // namespace gapless::chaos
