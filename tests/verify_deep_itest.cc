// `gapless verify --deep` against real PostgreSQL: real blocks indexed the production way (the
// indexer over replayed mainnet answers, the writer for the execution-apis chain, the CLI over
// the anvil devnet) verify from the stored rows alone; then one stored value at a time is
// changed with SQL (a log's data byte, a transaction's value, a header's gas_used, a dropped
// receipt or log, ...) and the report must name the block and the field, with kProblemsFound
// (exit 1 from the CLI).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <sstream>

#include "decode/decode.h"
#include "e2e_util.h"
#include "node/commands.h"
#include "testing/devnet_manifest.h"
#include "testing/pg_test_db.h"
#include "testing/replay_transport.h"
#include "verify/verify_test_util.h"

namespace gapless::e2e {
namespace {

const std::string kMainnet = std::string(GAPLESS_FIXTURES_DIR) + "/mainnet/17000000/";
constexpr uint64_t kBlock = 17000000;

struct VerifyRun {
  Outcome outcome = Outcome::kDone;
  std::string report;
};

VerifyRun DeepVerify(const std::string& db_url, uint64_t from, uint64_t to,
                     VerifyOptions options = {}) {
  VerifyCommand command;
  command.db = db_url;
  command.from = from;
  command.to = to;
  command.deep = true;
  command.verify = options;
  std::ostringstream out;
  Result<Outcome> outcome = RunVerify(command, out);
  EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
  return {outcome.ok() ? *outcome : Outcome::kDone, out.str()};
}

struct CliRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CliRun RunGapless(const std::string& args) {
  std::string cmd = std::string(GAPLESS_BINARY_DIR) + "/src/cli/gapless " + args + " 2>&1";
  CliRun run;
  FILE* pipe = popen(cmd.c_str(), "r");
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    run.output.append(buffer.data(), n);
  }
  int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// A fresh database holding mainnet block 17000000, indexed by the indexer from the recorded
// answers.
class MainnetBlock {
 public:
  MainnetBlock() {
    if (db_.skipped() || db_.failed()) return;
    pool_ = OpenPool(db_.url());
    if (!pool_) return;
    replay_.SetChainId(1);
    EXPECT_TRUE(
        replay_.AddFile("eth_getBlockByNumber", R"(["0x1036640",true])", kMainnet + "block.json")
            .ok());
    EXPECT_TRUE(
        replay_.AddFile("eth_getBlockReceipts", R"(["0x1036640"])", kMainnet + "receipts.json")
            .ok());
    Status st = IndexWith(&replay_, pool_.get(), kBlock, kBlock, 1);
    EXPECT_TRUE(st.ok()) << st.ToString();
    indexed_ = st.ok();
  }

  bool usable() const { return indexed_; }
  PgTestDb& db() { return db_; }

  // Runs `sql`, statements separated by ';'.
  void Sql(const std::string& sql) {
    auto conn = pool_->Acquire();
    std::istringstream statements(sql);
    std::string statement;
    while (std::getline(statements, statement, ';')) {
      auto res = conn->Query(statement);
      ASSERT_TRUE(res.ok()) << statement << ": " << res.status().ToString();
    }
  }

  std::string Value(const std::string& sql) {
    auto conn = pool_->Acquire();
    auto res = conn->Query(sql);
    EXPECT_TRUE(res.ok()) << sql << ": " << res.status().ToString();
    if (!res.ok() || res->rows() == 0) return "";
    return std::string(res->Get(0, 0));
  }

 private:
  PgTestDb db_;
  std::unique_ptr<PgPool> pool_;
  ReplayTransport replay_;
  bool indexed_ = false;
};

#define MAINNET_BLOCK_OR_SKIP(var)                                          \
  MainnetBlock var;                                                         \
  if (var.db().skipped()) GTEST_SKIP() << "GAPLESS_TEST_PG_URL is not set"; \
  ASSERT_FALSE(var.db().failed()) << var.db().error().ToString();           \
  ASSERT_TRUE(var.usable())

TEST(VerifyDeep, AnIndexedMainnetBlockVerifiesFromItsRows) {
  MAINNET_BLOCK_OR_SKIP(mainnet);
  VerifyRun run = DeepVerify(mainnet.db().url(), kBlock, kBlock, {.recover_senders = true});
  EXPECT_EQ(run.outcome, Outcome::kDone) << run.report;
  EXPECT_NE(run.report.find("deep: 1 block verified ("), std::string::npos) << run.report;
  EXPECT_NE(run.report.find("senders), 0 failed, 0 not verifiable\n"), std::string::npos)
      << run.report;
  EXPECT_EQ(run.report.substr(run.report.size() - 3), "OK\n") << run.report;
}

// A line of `report` that starts with `prefix` and contains `text`.
bool HasLine(const std::string& report, const std::string& prefix, const std::string& text) {
  std::istringstream lines(report);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) == 0 && line.find(text) != std::string::npos) return true;
  }
  return false;
}

struct Corruption {
  std::string name;
  std::string sql;                    // applied to the database of block 17000000
  std::vector<std::string> expected;  // each must appear in the report, after "block 17000000: "
  VerifyOptions options = {};
};

// The transaction at index 5 and the first log with data, by primary key.
const std::string kTx5 = " WHERE block_number = 17000000 AND transaction_index = 5";
const std::string kLogWithData =
    " WHERE block_number = 17000000 AND log_index = (SELECT min(log_index) FROM logs"
    "  WHERE block_number = 17000000 AND length(data) > 0)";

std::vector<Corruption> Corruptions() {
  return {
      {"a log's data byte",
       "UPDATE logs SET data = set_byte(data, 0, get_byte(data, 0) # 1)" + kLogWithData,
       {"receiptsRoot is "}},
      {"a transaction's value",
       "UPDATE transactions SET value = value + 1" + kTx5,
       {"transaction 5 (0x", "hash is 0x"}},
      {"the header's gas_used",
       "UPDATE blocks SET gas_used = gas_used - 1",
       {"hash is 0x", "gasUsed is "}},
      {"the header's receipts_root",
       "UPDATE blocks SET receipts_root = set_byte(receipts_root, 31, 0)",
       {"receiptsRoot is "}},
      {"the header's logs_bloom",
       "UPDATE blocks SET logs_bloom = set_byte(logs_bloom, 0, get_byte(logs_bloom, 0) # 128)",
       {"logsBloom does not match the block's 237 logs"}},
      {"a dropped receipt (its transaction row)",
       "DELETE FROM transactions WHERE block_number = 17000000 AND transaction_index = 101",
       {"transactionsRoot is "}},
      {"a dropped log",
       "DELETE FROM logs WHERE block_number = 17000000 AND log_index = (SELECT min(log_index)"
       " FROM logs WHERE block_number = 17000000 AND topic0 IS NOT NULL)",
       {"the receipt's logsBloom does not match its"}},
      {"two swapped transactions",
       "UPDATE transactions SET transaction_index = CASE transaction_index WHEN 0 THEN -1"
       " ELSE 0 END WHERE block_number = 17000000 AND transaction_index IN (0, 1);"
       "UPDATE transactions SET transaction_index = 1 WHERE block_number = 17000000 AND"
       " transaction_index = -1",
       {"transactionsRoot is "}},
      {"a transaction's gas_used",
       "UPDATE transactions SET gas_used = gas_used + 1" + kTx5,
       {"transaction 5 (0x", "gas_used is "}},
      {"a transaction's effective_gas_price",
       "UPDATE transactions SET effective_gas_price = effective_gas_price + 1" + kTx5,
       {"transaction 5 (0x", "effective_gas_price is "}},
      {"a token transfer's value",
       "UPDATE token_transfers SET value = value + 1 WHERE block_number = 17000000 AND"
       " log_index = (SELECT min(log_index) FROM token_transfers)",
       {"token_transfers: "}},
      {"a transaction's sender, with --verify-senders",
       "UPDATE transactions SET from_address = decode(repeat('11', 20), 'hex')" + kTx5,
       {"transaction 5 (0x",
        "from is 0x1111111111111111111111111111111111111111 but the "
        "signature gives 0x"},
       {.recover_senders = true}},
  };
}

TEST(VerifyDeep, EachChangedStoredValueIsNamedWithItsBlock) {
  for (const Corruption& c : Corruptions()) {
    SCOPED_TRACE(c.name);
    MAINNET_BLOCK_OR_SKIP(mainnet);
    mainnet.Sql(c.sql);
    VerifyRun run = DeepVerify(mainnet.db().url(), kBlock, kBlock, c.options);
    EXPECT_EQ(run.outcome, Outcome::kProblemsFound) << run.report;
    EXPECT_NE(run.report.find("deep: 0 blocks verified ("), std::string::npos) << run.report;
    EXPECT_NE(run.report.find("), 1 failed, 0 not verifiable\n"), std::string::npos) << run.report;
    for (const std::string& text : c.expected) {
      EXPECT_TRUE(HasLine(run.report, "block 17000000: ", text))
          << "expected a line \"block 17000000: ..." << text << "...\" in:\n"
          << run.report;
    }
    EXPECT_EQ(run.report.substr(run.report.size() - 7), "FAILED\n") << run.report;
  }
}

TEST(VerifyDeep, ASenderIsOnlyProvenWithVerifySenders) {
  MAINNET_BLOCK_OR_SKIP(mainnet);
  mainnet.Sql("UPDATE transactions SET from_address = decode(repeat('11', 20), 'hex')" + kTx5);
  EXPECT_EQ(DeepVerify(mainnet.db().url(), kBlock, kBlock).outcome, Outcome::kDone);
  EXPECT_EQ(DeepVerify(mainnet.db().url(), kBlock, kBlock, {.recover_senders = true}).outcome,
            Outcome::kProblemsFound);
}

TEST(VerifyDeep, ANonEthereumTransactionTypeIsCountedNotVerifiableNotFailed) {
  MAINNET_BLOCK_OR_SKIP(mainnet);
  mainnet.Sql("UPDATE transactions SET transaction_type = 126" + kTx5);  // OP's deposit, 0x7e
  VerifyRun run = DeepVerify(mainnet.db().url(), kBlock, kBlock);
  EXPECT_EQ(run.outcome, Outcome::kDone) << run.report;
  EXPECT_NE(run.report.find("deep: 0 blocks verified ("), std::string::npos) << run.report;
  EXPECT_NE(run.report.find("), 0 failed, 1 not verifiable\n"), std::string::npos) << run.report;
  EXPECT_NE(run.report.find("the first: block 17000000: transaction 5 ("), std::string::npos)
      << run.report;
  EXPECT_NE(run.report.find("0x7e"), std::string::npos) << run.report;
}

TEST(VerifyDeep, TheCliExitsOneAndPrintsTheReportOnAFailure) {
  MAINNET_BLOCK_OR_SKIP(mainnet);
  std::string args = "verify --deep --db " + mainnet.db().url() + " --from 17000000";
  CliRun ok = RunGapless(args);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("deep: 1 block verified"), std::string::npos) << ok.output;

  mainnet.Sql("UPDATE transactions SET value = value + 1" + kTx5);
  CliRun bad = RunGapless(args);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("block 17000000: transaction 5 (0x"), std::string::npos) << bad.output;
  // Plain verify cannot see it: the counts and cross-references still agree.
  CliRun plain = RunGapless("verify --db " + mainnet.db().url() + " --from 17000000");
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  // --verify-senders implies --deep.
  CliRun senders =
      RunGapless("verify --verify-senders --db " + mainnet.db().url() + " --from 17000000");
  EXPECT_EQ(senders.exit_code, 1) << senders.output;
  EXPECT_NE(senders.output.find("senders), 1 failed"), std::string::npos) << senders.output;
}

// `index --verify --max-attempts 2` over a node whose receipts were changed in transit: after
// the retries the run fails with the mismatch's typed reason, not only its code and message
// (callers tell a mismatch from a malformed field by reason(), verify/verify.h).
TEST(VerifyDeep, AMismatchKeepsItsReasonThroughTheIndexersRetries) {
  GAPLESS_PG_TEST_DB_OR_SKIP(db);
  std::unique_ptr<PgPool> pool = OpenPool(db.url());
  ASSERT_NE(pool, nullptr);
  {
    auto conn = pool->Acquire();
    ASSERT_TRUE(EnsureChainId(*conn, 1).ok());
  }
  std::string receipts = ReadFile(kMainnet + "receipts.json");
  const size_t data = receipts.find("\"data\": \"0x");
  ASSERT_NE(data, std::string::npos);
  const size_t digit = data + 12;
  receipts[digit] = receipts[digit] == '0' ? '1' : '0';
  ReplayTransport replay;
  replay.SetChainId(1);
  ASSERT_TRUE(
      replay.AddFile("eth_getBlockByNumber", R"(["0x1036640",true])", kMainnet + "block.json")
          .ok());
  ASSERT_TRUE(replay.Add("eth_getBlockReceipts", R"(["0x1036640"])", receipts).ok());
  IndexerOptions options;
  options.from = options.to = kBlock;
  options.chain_id = 1;
  options.verify = VerifyOptions{};
  options.max_attempts = 2;
  options.retry_base_micros = 1000;
  options.token_metadata = false;
  Indexer indexer(
      options, [&replay] { return std::make_unique<JsonRpcClient>(&replay); }, pool.get());
  ASSERT_TRUE(indexer.Plan().ok());
  Status st = indexer.Run();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kInvalidData) << st.ToString();
  EXPECT_EQ(st.reason(), kVerifyMismatchReason) << st.ToString();
  EXPECT_NE(st.message().find("gave up after 2 attempts"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("receiptsRoot"), std::string::npos) << st.ToString();
}

// The execution-apis chain: pre-Byzantium receipts (a state root instead of a status),
// contract creations, and a Prague header (requestsHash) round-trip through the writer and
// verify from the rows.
BlockData ApisBlock(const std::string& block_io, const std::string& receipts_json,
                    uint64_t number) {
  DecodeOptions options;
  options.expected_number = number;
  options.expected_chain_id = 0xc72dd9d5e883e;
  auto decoded = DecodeBlock(verify_testing::IoResult("execution-apis/tests/" + block_io),
                             receipts_json, options);
  EXPECT_TRUE(decoded.ok()) << decoded.status().ToString();
  return decoded.ok() ? std::move(decoded).value() : BlockData{};
}

TEST(VerifyDeep, ExecutionApisBlocksOfEveryReceiptShapeVerifyFromTheirRows) {
  GAPLESS_PG_TEST_DB_OR_SKIP(db);
  auto conn = db.ConnectMigrated();
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  std::string apis = "execution-apis/tests/";
  BlockData genesis = ApisBlock("eth_getBlockByNumber/get-genesis.io", "[]", 0);
  BlockData first =
      ApisBlock("eth_getBlockByHash/get-block-by-hash.io",
                verify_testing::IoResult(apis + "eth_getBlockReceipts/get-block-receipts-n.io"), 1);
  BlockData head = ApisBlock(
      "eth_getBlockByNumber/get-latest.io",
      verify_testing::IoResult(apis + "eth_getBlockReceipts/get-block-receipts-latest.io"), 0x36);
  ASSERT_TRUE(first.transactions.at(0).root.has_value());
  ASSERT_TRUE(head.block.requests_hash.has_value());
  ASSERT_TRUE(WriteRange(**conn, RangeWrite{0, 1, {genesis, first}, std::nullopt, ""}).ok());
  ASSERT_TRUE(WriteRange(**conn, RangeWrite{0x36, 0x36, {head}, std::nullopt, ""}).ok());

  VerifyRun run = DeepVerify(db.url(), 0, 1, {.recover_senders = true});
  EXPECT_EQ(run.outcome, Outcome::kDone) << run.report;
  EXPECT_NE(run.report.find("deep: 2 blocks verified ("), std::string::npos) << run.report;
  run = DeepVerify(db.url(), 0x36, 0x36, {.recover_senders = true});
  EXPECT_EQ(run.outcome, Outcome::kDone) << run.report;
  EXPECT_NE(run.report.find("deep: 1 block verified ("), std::string::npos) << run.report;

  // The pre-Byzantium receipt's state root is under receiptsRoot.
  auto res = (*conn)->Query(
      "UPDATE transactions SET root = set_byte(root, 0, get_byte(root, 0) # 1)"
      " WHERE block_number = 1 AND transaction_index = 2");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  run = DeepVerify(db.url(), 0, 1);
  EXPECT_EQ(run.outcome, Outcome::kProblemsFound) << run.report;
  EXPECT_NE(run.report.find("\nblock 1: receiptsRoot is "), std::string::npos) << run.report;
}

// The anvil devnet (every transaction type, blob transactions included), indexed by the CLI as an
// operator would, verifies with --anvil-blob-roots; without it, exactly the blocks holding blob
// transactions fail on transactionsRoot and the report says --anvil-blob-roots would accept them.
TEST(VerifyDeep, TheAnvilDevnetVerifiesWithAnvilBlobRootsAndSaysSoWithout) {
  GAPLESS_PG_TEST_DB_OR_SKIP(db);
  auto manifest = LoadDevnetManifest(GAPLESS_TEST_DEVNET_MANIFEST);
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  std::string to = std::to_string((*manifest)->last_block);
  CliRun index = RunGapless("index --rpc " + std::string(GAPLESS_TEST_ANVIL_URL) + " --db " +
                            db.url() + " --from 0 --to " + to + " --progress off");
  ASSERT_EQ(index.exit_code, 0) << index.output;

  auto conn = db.Connect();
  ASSERT_TRUE(conn.ok());
  auto blob_blocks = (*conn)->Query(
      "SELECT count(DISTINCT block_number) FROM transactions WHERE transaction_type = 3");
  ASSERT_TRUE(blob_blocks.ok());
  std::string blobs(blob_blocks->Get(0, 0));
  ASSERT_NE(blobs, "0") << "the devnet has no blob transactions: the quirk is not exercised";

  std::string range = " --db " + db.url() + " --from 0 --to " + to;
  CliRun with = RunGapless("verify --deep --anvil-blob-roots --verify-senders" + range);
  EXPECT_EQ(with.exit_code, 0) << with.output;
  EXPECT_NE(
      with.output.find("deep: " + std::to_string((*manifest)->last_block + 1) + " blocks verified"),
      std::string::npos)
      << with.output;

  CliRun without = RunGapless("verify --deep" + range);
  EXPECT_EQ(without.exit_code, 1) << without.output;
  EXPECT_NE(without.output.find(", " + blobs + " failed, 0 not verifiable"), std::string::npos)
      << without.output;
  EXPECT_NE(without.output.find("note: " + blobs + " failed block"), std::string::npos)
      << without.output;
  EXPECT_NE(without.output.find("rerun with --anvil-blob-roots"), std::string::npos)
      << without.output;
}

}  // namespace
}  // namespace gapless::e2e
