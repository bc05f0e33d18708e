// Keccak-256 and the Merkle-Patricia trie root against published vectors (yellow paper, geth's
// trie tests), and the ordered-list root used for transactions, receipts and withdrawals.
#include "verify/trie.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "verify/keccak.h"
#include "verify/rlp.h"

namespace gapless::verify {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

TEST(Keccak, KnownDigests) {
  // keccak256(""): the pre-standard padding (SHA3-256("") would be 0xa7ffc6f8...).
  EXPECT_EQ(ToHex(Keccak256("")),
            "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470");
  // The empty ommers list hash every post-merge header carries as sha3Uncles.
  EXPECT_EQ(ToHex(Keccak256("\xc0")),
            "0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347");
  // The ERC-20 Transfer event topic.
  EXPECT_EQ(ToHex(Keccak256("Transfer(address,address,uint256)")),
            "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef");
}

TEST(Trie, EmptyRoot) {
  EXPECT_EQ(ToHex(TrieRoot({})), kEmptyTrieRootHex);
  EXPECT_EQ(ToHex(OrderedTrieRoot({})), kEmptyTrieRootHex);
  EXPECT_EQ(ToHex(Keccak256("\x80")), kEmptyTrieRootHex);
}

TEST(Trie, PublishedVectors) {
  // geth trie_test.go TestInsert.
  EXPECT_EQ(ToHex(TrieRoot({{"doe", "reindeer"}, {"dog", "puppy"}, {"dogglesworth", "cat"}})),
            "0x8aad789dff2f538bca5d8ea56e8abe10f4c7ba3a5dea95fea4cd6e7c3a1168d3");
  // A single leaf.
  EXPECT_EQ(ToHex(TrieRoot({{"A", std::string(50, 'a')}})),
            "0xd23786fb4a010da3ce639d66d5e904a11dbc02746d1ce25029e53290cabf28ab");
  // geth TestDelete's final content: "do" is a prefix of "dog" and "doge", so a branch holds a
  // value, and small nodes are inlined.
  EXPECT_EQ(
      ToHex(TrieRoot({{"do", "verb"}, {"horse", "stallion"}, {"doge", "coin"}, {"dog", "puppy"}})),
      "0x5991bb8c6514148a29db676a14ac506cd2cd5775ace63c30a4fe457715e9ac84");
}

TEST(Trie, RootDoesNotDependOnInsertionOrder) {
  Pairs pairs = {{"do", "verb"}, {"horse", "stallion"}, {"doge", "coin"}, {"dog", "puppy"}};
  std::string first = ToHex(TrieRoot(pairs));
  std::sort(pairs.begin(), pairs.end());
  do {
    EXPECT_EQ(ToHex(TrieRoot(pairs)), first);
  } while (std::next_permutation(pairs.begin(), pairs.end()));
}

TEST(Trie, OrderedRootIsTheTrieOfRlpIndexes) {
  // Enough items that keys 0x80 (index 0), 0x01..0x7f and 0x81xx (128+) all occur.
  std::vector<std::string> values;
  Pairs pairs;
  for (uint64_t i = 0; i < 300; ++i) {
    values.push_back("value " + std::to_string(i) + std::string(i % 40, 'x'));
    std::string key;
    RlpAppendUint(&key, i);
    pairs.emplace_back(key, values.back());
  }
  EXPECT_EQ(ToHex(OrderedTrieRoot(values)), ToHex(TrieRoot(pairs)));
  // Changing, dropping or swapping one item changes the root.
  std::string root = ToHex(OrderedTrieRoot(values));
  auto changed = values;
  changed[200] += "!";
  EXPECT_NE(ToHex(OrderedTrieRoot(changed)), root);
  auto dropped = values;
  dropped.pop_back();
  EXPECT_NE(ToHex(OrderedTrieRoot(dropped)), root);
  auto swapped = values;
  std::swap(swapped[3], swapped[4]);
  EXPECT_NE(ToHex(OrderedTrieRoot(swapped)), root);
}

TEST(Trie, HexPrefix) {
  // Yellow paper appendix C: flag nibble 0/1 extension even/odd, 2/3 leaf even/odd.
  EXPECT_EQ(ToHex(HexPrefix(std::string("\x01\x02\x03\x04\x05", 5), false)), "0x112345");
  EXPECT_EQ(ToHex(HexPrefix(std::string("\x00\x01\x02\x03\x04\x05", 6), false)), "0x00012345");
  EXPECT_EQ(ToHex(HexPrefix(std::string("\x0f\x01\x0c\x0b\x08", 5), true)), "0x3f1cb8");
  EXPECT_EQ(ToHex(HexPrefix(std::string("\x00\x0f\x01\x0c\x0b\x08", 6), true)), "0x200f1cb8");
  EXPECT_EQ(ToHex(HexPrefix("", true)), "0x20");
}

}  // namespace
}  // namespace gapless::verify
