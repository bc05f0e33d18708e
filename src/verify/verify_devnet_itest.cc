// Every block of the anvil devnet (tests/devnet_fixture.sh: ETH transfers, token contracts,
// transaction types 0-4 including blob and EIP-7702 ones, reverting transactions, empty blocks),
// fetched with FetchBlocks and decoded with DecodeBlock as the indexer does, verifies against its
// header, senders included.
//
// One anvil quirk (verify.h anvil_blob_sidecar_quirk): anvil computes transactionsRoot over a blob
// transaction's network form with its sidecar. The test runs with the quirk option and, for every
// block holding a blob transaction, shows that the header's root is exactly the root of that
// form (traffic.js sends one all-zero blob whose commitment and proof are the point at
// infinity), and that without the option VerifyBlock names transactionsRoot.
#include <gtest/gtest.h>

#include <map>

#include "decode/decode.h"
#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "testing/devnet_manifest.h"
#include "verify/encode.h"
#include "verify/keccak.h"
#include "verify/rlp.h"
#include "verify/trie.h"
#include "verify/verify.h"

namespace gapless {
namespace {

const std::string kAnvilUrl = GAPLESS_TEST_ANVIL_URL;
const std::string kManifest = GAPLESS_TEST_DEVNET_MANIFEST;

// The transactions root anvil computes: blob transactions in the network form
// 0x03 || RLP([tx fields..., [blob], [commitment], [proof]]) with traffic.js's all-zero blob.
std::string AnvilTransactionsRoot(const std::vector<Transaction>& transactions) {
  std::vector<std::string> encoded(transactions.size());
  for (size_t i = 0; i < transactions.size(); ++i) {
    EXPECT_TRUE(verify::EncodeTransaction(transactions[i], &encoded[i]).ok());
    if (transactions[i].transaction_type != 3) continue;
    EXPECT_EQ(transactions[i].blob_versioned_hashes.size(), 1u);
    std::string infinity(48, '\0');
    infinity[0] = static_cast<char>(0xc0);
    std::string blobs, commitments, proofs;
    verify::RlpAppendBytes(&blobs, std::string(131072, '\0'));
    verify::RlpAppendBytes(&commitments, infinity);
    verify::RlpAppendBytes(&proofs, infinity);
    std::string payload = encoded[i].substr(1);  // the transaction's own list
    verify::RlpAppendList(&payload, blobs);
    verify::RlpAppendList(&payload, commitments);
    verify::RlpAppendList(&payload, proofs);
    encoded[i] = std::string(1, 3) + verify::RlpWrapList(payload);
  }
  return verify::ToHex(verify::OrderedTrieRoot(encoded));
}

TEST(VerifyDevnet, EveryBlockVerifies) {
  auto manifest = LoadDevnetManifest(kManifest);
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  const uint64_t last = (*manifest)->last_block;
  ASSERT_GT(last, 0u);
  JsonRpcClient rpc(std::make_unique<CurlTransport>(kAnvilUrl));

  std::map<int, int> types;  // transaction type -> count
  uint64_t transactions = 0, logs = 0, failed = 0, withdrawal_roots = 0, blob_blocks = 0;
  constexpr uint64_t kBatch = 50;
  for (uint64_t first = 0; first <= last; first += kBatch) {
    uint64_t count = std::min(kBatch, last - first + 1);
    auto raw = rpc.FetchBlocks(first, count);
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    for (const RawBlock& block : *raw) {
      DecodeOptions options;
      options.expected_number = block.number;
      options.expected_chain_id = (*manifest)->chain_id;
      auto data = DecodeBlock(block.block_json, block.receipts_json, options);
      ASSERT_TRUE(data.ok()) << data.status().ToString();
      Status st = VerifyBlock(
          *data, VerifyOptions{.recover_senders = true, .anvil_blob_sidecar_quirk = true});
      ASSERT_TRUE(st.ok()) << st.ToString();
      bool has_blobs = false;
      for (const Transaction& tx : data->transactions) has_blobs |= tx.transaction_type == 3;
      if (has_blobs) {
        ++blob_blocks;
        EXPECT_EQ(AnvilTransactionsRoot(data->transactions), data->block.transactions_root)
            << "block " << block.number;
        st = VerifyBlock(*data);
        EXPECT_EQ(st.reason(), kVerifyMismatchReason) << st.ToString();
        EXPECT_NE(st.message().find("transactionsRoot is"), std::string::npos) << st.ToString();
      } else {
        st = VerifyBlock(*data);  // the plain options: nothing skipped
        EXPECT_TRUE(st.ok()) << st.ToString();
      }
      for (const Transaction& tx : data->transactions) {
        ++types[tx.transaction_type.value_or(0)];
        failed += tx.status == 0;
      }
      transactions += data->transactions.size();
      logs += data->logs.size();
      withdrawal_roots += data->block.withdrawals_root.has_value();
    }
  }
  std::printf(
      "verified %llu blocks (%llu with blob transactions), %llu transactions, %llu logs; "
      "by type:",
      static_cast<unsigned long long>(last + 1), static_cast<unsigned long long>(blob_blocks),
      static_cast<unsigned long long>(transactions), static_cast<unsigned long long>(logs));
  for (auto [type, n] : types) std::printf(" %d:%d", type, n);
  std::printf("\n");
  // The devnet's traffic covers every type, so each encoding was exercised, and reverting ones.
  for (int type = 0; type <= 4; ++type) EXPECT_GT(types[type], 0) << "no type " << type;
  EXPECT_EQ(failed, (*manifest)->failed);
  EXPECT_GT(blob_blocks, 0u);
  EXPECT_EQ(withdrawal_roots, last + 1);  // anvil runs the latest fork from genesis
}

}  // namespace
}  // namespace gapless
