// DeepVerifyBlock on mainnet block 17000000 (decoded from the fixture, as the reader would return
// it): it verifies as is; each stored column the roots do not cover but the proven ones determine
// (gas used, effective gas price, token transfers, the header's gasUsed) is caught when changed
// and named; a chain's non-Ethereum transaction type is "not verifiable", not a failure.
#include "node/deep_verify.h"

#include <gtest/gtest.h>

#include "verify/verify_test_util.h"

namespace gapless {
namespace {

using Kind = BlockVerdict::Kind;

std::string Joined(const BlockVerdict& verdict) {
  std::string out;
  for (const std::string& p : verdict.problems) out += p + "\n";
  return out;
}

class DeepVerifyBlockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = verify_testing::Mainnet17000000();
    ASSERT_EQ(data_.transactions.size(), 102u);
  }
  BlockData data_;
};

TEST_F(DeepVerifyBlockTest, TheStoredBlockVerifies) {
  BlockVerdict verdict = DeepVerifyBlock(data_, VerifyOptions{.recover_senders = true});
  EXPECT_EQ(verdict.kind, Kind::kVerified) << Joined(verdict);
  EXPECT_TRUE(verdict.problems.empty());
  // The fixture has type-2 transactions (the EIP-1559 price rule) and token transfers.
  EXPECT_FALSE(data_.token_transfers.empty());
}

TEST_F(DeepVerifyBlockTest, ATransactionsGasUsedIsCheckedAgainstTheCumulativeGas) {
  data_.transactions[7].gas_used += 1;
  BlockVerdict verdict = DeepVerifyBlock(data_, {});
  ASSERT_EQ(verdict.kind, Kind::kFailed);
  ASSERT_EQ(verdict.problems.size(), 1u) << Joined(verdict);
  EXPECT_NE(
      verdict.problems[0].find("transaction 7 (" + data_.transactions[7].hash + "): gas_used is"),
      std::string::npos)
      << verdict.problems[0];
}

TEST_F(DeepVerifyBlockTest, TheHeadersGasUsedIsNamedBesideTheBlockHash) {
  data_.block.gas_used -= 1;
  BlockVerdict verdict = DeepVerifyBlock(data_, {});
  ASSERT_EQ(verdict.kind, Kind::kFailed);
  EXPECT_NE(Joined(verdict).find("hash is " + data_.block.hash), std::string::npos)
      << Joined(verdict);
  EXPECT_NE(Joined(verdict).find("gasUsed is"), std::string::npos) << Joined(verdict);
}

TEST_F(DeepVerifyBlockTest, EffectiveGasPriceFollowsTheFeeRule) {
  size_t legacy = 0, dynamic = 0;
  for (size_t i = 0; i < data_.transactions.size(); ++i) {
    if (data_.transactions[i].transaction_type.value_or(0) == 0) legacy = i;
    if (data_.transactions[i].transaction_type == 2) dynamic = i;
  }
  ASSERT_NE(dynamic, 0u);
  for (size_t i : {legacy, dynamic}) {
    SCOPED_TRACE(i);
    BlockData changed = data_;
    changed.transactions[i].effective_gas_price =
        U256(changed.transactions[i].effective_gas_price->low64() + 1);
    BlockVerdict verdict = DeepVerifyBlock(changed, {});
    ASSERT_EQ(verdict.kind, Kind::kFailed);
    ASSERT_EQ(verdict.problems.size(), 1u) << Joined(verdict);
    EXPECT_NE(verdict.problems[0].find("transaction " + std::to_string(i) + " ("),
              std::string::npos);
    EXPECT_NE(verdict.problems[0].find("effective_gas_price is"), std::string::npos);
  }
  // A base fee change shows in every type-2 price (and the block hash): named once, counted.
  data_.block.base_fee_per_gas = U256(data_.block.base_fee_per_gas->low64() + 1);
  EXPECT_NE(Joined(DeepVerifyBlock(data_, {})).find("more transactions)"), std::string::npos);
}

TEST_F(DeepVerifyBlockTest, TokenTransfersMustBeWhatTheLogsGive) {
  BlockData changed = data_;
  changed.token_transfers[3].value = U256(12345);
  BlockVerdict verdict = DeepVerifyBlock(changed, {});
  ASSERT_EQ(verdict.kind, Kind::kFailed);
  ASSERT_EQ(verdict.problems.size(), 1u) << Joined(verdict);
  EXPECT_NE(verdict.problems[0].find("token_transfers:"), std::string::npos);
  EXPECT_NE(verdict.problems[0].find("log " + std::to_string(data_.token_transfers[3].log_index)),
            std::string::npos)
      << verdict.problems[0];

  changed = data_;
  changed.token_transfers.pop_back();
  verdict = DeepVerifyBlock(changed, {});
  ASSERT_EQ(verdict.kind, Kind::kFailed);
  EXPECT_NE(Joined(verdict).find("which is not stored"), std::string::npos) << Joined(verdict);
}

TEST_F(DeepVerifyBlockTest, AChangedLogByteFailsTheReceiptsRoot) {
  for (Log& log : data_.logs) {
    if (log.data.size() > 2) {
      log.data[2] = log.data[2] == '0' ? '1' : '0';
      break;
    }
  }
  BlockVerdict verdict = DeepVerifyBlock(data_, {});
  ASSERT_EQ(verdict.kind, Kind::kFailed);
  EXPECT_EQ(verdict.problems[0].rfind("receiptsRoot is", 0), 0u) << Joined(verdict);
  EXPECT_FALSE(verdict.passes_with_anvil_quirk);
}

TEST_F(DeepVerifyBlockTest, ANonEthereumTransactionTypeIsNotVerifiableNotFailed) {
  data_.transactions[0].transaction_type = 0x7e;  // OP's deposit transaction
  BlockVerdict verdict = DeepVerifyBlock(data_, {});
  EXPECT_EQ(verdict.kind, Kind::kNotVerifiable) << Joined(verdict);
  ASSERT_EQ(verdict.problems.size(), 1u);
  EXPECT_NE(verdict.problems[0].find("0x7e"), std::string::npos) << verdict.problems[0];
}

TEST_F(DeepVerifyBlockTest, ABlobBlockFailingOnlyItsTransactionsRootIsFlaggedForAnvil) {
  // Made a "blob block" by the type alone: transaction hashes are checked first, so give the
  // transaction a hash that matches its new encoding; then only transactionsRoot differs.
  Transaction& tx = data_.transactions[0];
  ASSERT_EQ(tx.transaction_type, 2);
  tx.transaction_type = 3;
  tx.max_fee_per_blob_gas = U256(1);
  tx.blob_versioned_hashes = {"0x01" + std::string(62, '0')};
  Result<std::string> hash = ComputeTransactionHash(tx);
  ASSERT_TRUE(hash.ok()) << hash.status().ToString();
  for (Log& log : data_.logs) {
    if (log.transaction_hash == tx.hash) log.transaction_hash = *hash;
  }
  for (TokenTransfer& transfer : data_.token_transfers) {
    if (transfer.transaction_hash == tx.hash) transfer.transaction_hash = *hash;
  }
  tx.hash = *hash;
  // The receipt of a type-3 transaction is encoded with its type: receiptsRoot differs too
  // unless it is rebuilt; rebuild it (and the header's hash) so only transactionsRoot is wrong.
  data_.block.receipts_root = *ComputeReceiptsRoot(data_);
  data_.block.hash = *ComputeBlockHash(data_.block);
  for (Transaction& t : data_.transactions) t.block_hash = data_.block.hash;
  for (Log& log : data_.logs) log.block_hash = data_.block.hash;

  BlockVerdict verdict = DeepVerifyBlock(data_, {});
  ASSERT_EQ(verdict.kind, Kind::kFailed);
  ASSERT_EQ(verdict.problems.size(), 1u) << Joined(verdict);
  EXPECT_EQ(verdict.problems[0].rfind("transactionsRoot is", 0), 0u) << verdict.problems[0];
  EXPECT_TRUE(verdict.passes_with_anvil_quirk);
  EXPECT_EQ(DeepVerifyBlock(data_, VerifyOptions{.anvil_blob_sidecar_quirk = true}).kind,
            Kind::kVerified);
}

}  // namespace
}  // namespace gapless
