// --verify-complete in the contracts mode's `events` data mode (node/events_complete.h), end to
// end on a private anvil running devnet/events.js:
//  - against anvil it completes, and the tables equal those of the events-mode run without it;
//  - behind a node that leaves one matching log out of its eth_getLogs answers (a proxy in front
//    of anvil), `--data events` alone stores the incomplete answer without noticing, while
//    `--verify-complete` refuses the range naming the block, and commits nothing of it;
//  - the receipts are fetched only for the blocks whose logsBloom admits the filter: with a
//    filter few blocks match, far fewer than the blocks checked (the count is in the log);
//  - the fleet (`run` + `worker`) dead-letters that range the same way (the run gives up naming
//    it), and against anvil stores what `index` stores;
//  - the flag is refused without --data events, and with --no-verify.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "contracts_util.h"
#include "devnet_util.h"
#include "e2e_util.h"
#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "testing/http_test_server.h"

namespace gapless::e2e {
namespace {

const std::string& kSource = kContractsSource;

// A JSON-RPC node in front of anvil that leaves the first log of block `victim` out of every
// eth_getLogs answer holding one (a provider's bug), and passes everything else through.
class LogDroppingNode {
 public:
  LogDroppingNode(const std::string& upstream, uint64_t victim)
      : needle_("\"blockNumber\":\"" + HexQuantity(victim) + "\""),
        upstream_(upstream),
        server_([this](const HttpTestServer::Request& r) { return Answer(r); }) {}

  std::string url() const { return server_.url(); }
  int dropped() const { return dropped_; }
  // How many logs of the victim block the last answer that held one had, before the drop.
  int victim_logs() const { return victim_logs_; }

 private:
  HttpTestServer::Response Answer(const HttpTestServer::Request& r) {
    std::string body;
    long status = 502;  // NOLINT(runtime/int): libcurl's type
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto answer = upstream_.Post(r.body);
      if (!answer.ok()) return HttpTestServer::Response::Json("anvil down", 502);
      body = answer->body;
      status = answer->status;
    }
    if (r.body.find("\"eth_getLogs\"") != std::string::npos) Drop(&body);
    return HttpTestServer::Response::Json(body, static_cast<int>(status));
  }

  // A log object holds no nested object (its topics are an array of strings): the braces around
  // the first victim log delimit it.
  void Drop(std::string* body) {
    size_t at = body->find(needle_);
    if (at == std::string::npos) return;
    int count = 0;
    for (size_t p = at; p != std::string::npos; p = body->find(needle_, p + 1)) ++count;
    size_t open = body->rfind('{', at);
    size_t close = body->find('}', at);
    if (open == std::string::npos || close == std::string::npos) return;
    if (close + 1 < body->size() && (*body)[close + 1] == ',') {
      ++close;
    } else if (open > 0 && (*body)[open - 1] == ',') {
      --open;
    }
    body->erase(open, close - open + 1);
    victim_logs_ = count;
    ++dropped_;
  }

  const std::string needle_;
  std::mutex mu_;
  CurlTransport upstream_;
  std::atomic<int> dropped_{0};
  std::atomic<int> victim_logs_{0};
  HttpTestServer server_;
};

// The numbers of "fetched the receipts of X of Y blocks" in a run's output.
bool ReceiptsCount(const std::string& output, uint64_t* with_receipts, uint64_t* blocks) {
  const std::string key = "fetched the receipts of ";
  const size_t at = output.find(key);
  if (at == std::string::npos) return false;
  return std::sscanf(output.c_str() + at + key.size(), "%lu of %lu", with_receipts, blocks) == 2;
}

class CompleteTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    chain_ = StartPrivateChain(0, 1, "complete-anvil").release();
    if (chain_ == nullptr) return;
    dir_ = ::testing::TempDir() + "complete-" + std::to_string(getpid());
    const int rc = RunNode(
        {kSource + "/devnet/events.js", "--rpc", chain_->url, "--dir", dir_, "--rounds", "16"},
        dir_ + ".events.log");
    ASSERT_EQ(rc, 0) << ReadFile(dir_ + ".events.log");
    const std::string manifest = ReadFile(dir_ + "/manifest.json");
    const size_t at = manifest.find("\"last\":");
    ASSERT_NE(at, std::string::npos) << manifest;
    last_ = std::stoull(manifest.substr(at + 7));
    const size_t factory = manifest.find("\"factory\": \"");
    ASSERT_NE(factory, std::string::npos) << manifest;
    // A config few blocks match: the factory's PoolCreated events, in its first blocks only.
    std::ofstream(dir_ + "/factory-only.yaml")
        << "name: zoo\ncontracts:\n  - name: PoolFactory\n    abi: abis/DevPoolFactory.json\n"
        << "    address: \"" << manifest.substr(factory + 12, 42) << "\"\n";
  }
  static void TearDownTestSuite() {
    delete chain_;
    chain_ = nullptr;
  }

  void SetUp() override {
    if (chain_ == nullptr) GTEST_SKIP() << "GAPLESS_ANVIL not set";
    if (db_.skipped()) GTEST_SKIP() << "GAPLESS_TEST_PG_URL not set";
    ASSERT_FALSE(db_.failed()) << db_.error().ToString();
    ASSERT_FALSE(other_.failed()) << other_.error().ToString();
  }

  // `gapless index --data events` of blocks 0..last_ from `rpc` into `db`: its exit code, its
  // output in *output.
  int Index(const std::string& rpc, const PgTestDb& db, const std::string& config,
            std::vector<std::string> extra, std::string* output) {
    std::vector<std::string> args = {
        GaplessBinary(), "index",  "--rpc",      rpc,    "--db",
        db.url(),        "--from", "0",          "--to", std::to_string(last_),
        "--range-size",  "5",      "--progress", "off",  "--contracts",
        config,          "--data", "events"};
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string log = dir_ + ".index-" + std::to_string(++runs_) + ".log";
    const int rc = WaitForExit(Spawn(args, log), 300);
    *output = ReadFile(log);
    return rc;
  }

  static int64_t Count(const PgTestDb& db, const std::string& sql) {
    auto conn = db.Connect();
    EXPECT_TRUE(conn.ok());
    if (!conn.ok()) return -1;
    return QueryCount(**conn, sql);
  }

  // Every data table's checksum, and each decoded table's rows (their md5).
  static std::map<std::string, std::string> Tables(const PgTestDb& db) {
    auto pool = OpenPool(db.url());
    std::map<std::string, std::string> out = DataChecksums(pool.get(), 0, last_);
    auto conn = db.Connect();
    EXPECT_TRUE(conn.ok());
    auto tables =
        (*conn)->Query("SELECT schema_name || '.' || table_name FROM decoded_tables ORDER BY 1");
    EXPECT_TRUE(tables.ok()) << tables.status().ToString();
    for (int i = 0; tables.ok() && i < tables->rows(); ++i) {
      const std::string table(tables->Get(i, 0));
      const size_t dot = table.find('.');
      auto rows = (*conn)->Query(
          "SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY "
          "t::text)), '') || ' ' || count(*) FROM \"" +
          table.substr(0, dot) + "\".\"" + table.substr(dot + 1) + "\" t");
      EXPECT_TRUE(rows.ok()) << rows.status().ToString();
      if (rows.ok()) out[table] = std::string(rows->Get(0, 0));
    }
    return out;
  }

  static PrivateChain* chain_;
  static std::string dir_;
  static uint64_t last_;
  PgTestDb db_;
  PgTestDb other_;
  static inline int runs_ = 0;
};

PrivateChain* CompleteTest::chain_ = nullptr;
std::string CompleteTest::dir_;
uint64_t CompleteTest::last_ = 0;

TEST_F(CompleteTest, AgainstAnHonestNodeItCompletesAndStoresWhatTheRunWithoutItStores) {
  const std::string config = dir_ + "/contracts-by-address.yaml";
  std::string output;
  ASSERT_EQ(Index(chain_->url, db_, config, {"--verify-complete"}, &output), 0) << output;
  uint64_t with_receipts = 0, blocks = 0;
  ASSERT_TRUE(ReceiptsCount(output, &with_receipts, &blocks)) << output;
  EXPECT_EQ(blocks, last_ + 1) << output;  // every block's header checked
  const int64_t stored = Count(db_, "SELECT count(*) FROM blocks");
  EXPECT_GT(stored, 10);
  EXPECT_GE(static_cast<int64_t>(with_receipts), stored) << output;
  ASSERT_EQ(Index(chain_->url, other_, config, {}, &output), 0) << output;
  EXPECT_EQ(output.find("fetched the receipts of"), std::string::npos) << output;
  const auto complete = Tables(db_);
  EXPECT_GT(complete.size(), 5u);
  EXPECT_EQ(complete, Tables(other_));
}

TEST_F(CompleteTest, ANodeThatLeavesALogOutIsCaughtOnlyWithVerifyComplete) {
  const std::string config = dir_ + "/contracts-by-address.yaml";
  const uint64_t victim = last_ - 2;  // every block after the deployments holds the events' logs
  LogDroppingNode node(chain_->url, victim);
  const std::string at_victim =
      "SELECT count(*) FROM logs WHERE block_number = " + std::to_string(victim);

  // --verify (on by default) checks only that what eth_getLogs gave is in the block: the
  // incomplete answer is stored, silently.
  std::string output;
  ASSERT_EQ(Index(node.url(), other_, config, {}, &output), 0) << output;
  ASSERT_GT(node.dropped(), 0);
  ASSERT_GE(node.victim_logs(), 1);
  EXPECT_EQ(Count(other_, at_victim), node.victim_logs() - 1);

  // --verify-complete refuses the range, naming the block; the run fails after its attempts.
  EXPECT_NE(Index(node.url(), db_, config, {"--verify-complete", "--max-attempts", "2"}, &output),
            0);
  EXPECT_NE(output.find("block " + std::to_string(victim) + ": eth_getLogs left out 1 matching"),
            std::string::npos)
      << output;
  EXPECT_EQ(Count(db_, at_victim), 0);
  EXPECT_EQ(Count(db_, "SELECT count(*) FROM indexed_ranges WHERE " + std::to_string(victim) +
                           " BETWEEN from_block AND to_block"),
            0);

  // The same run against the honest node completes, with the log the other database lacks.
  ASSERT_EQ(Index(chain_->url, db_, config, {"--verify-complete"}, &output), 0) << output;
  EXPECT_EQ(Count(db_, at_victim), node.victim_logs());
}

TEST_F(CompleteTest, ReceiptsAreFetchedOnlyForTheBlocksWhoseBloomAdmitsTheFilter) {
  std::string output;
  ASSERT_EQ(Index(chain_->url, db_, dir_ + "/factory-only.yaml", {"--verify-complete"}, &output), 0)
      << output;
  uint64_t with_receipts = 0, blocks = 0;
  ASSERT_TRUE(ReceiptsCount(output, &with_receipts, &blocks)) << output;
  const int64_t stored = Count(db_, "SELECT count(*) FROM blocks");
  EXPECT_GE(stored, 1);
  EXPECT_EQ(blocks, last_ + 1);
  EXPECT_GE(static_cast<int64_t>(with_receipts), stored);
  EXPECT_LT(with_receipts * 3, blocks) << output;  // the bloom spares most blocks' receipts
}

// The fleet (`run` and a `worker`) takes the flag through the same options: behind the node that
// drops a log, the range is dead-lettered with the error naming the block and the run gives up
// (nothing of the range committed); against anvil it completes with the tables of `index`.
TEST_F(CompleteTest, TheFleetRefusesTheIncompleteRangeAndCompletesAnHonestOne) {
  const char* redis = std::getenv("GAPLESS_TEST_REDIS_URL");
  if (redis == nullptr) GTEST_SKIP() << "GAPLESS_TEST_REDIS_URL not set";
  const std::string config = dir_ + "/contracts-by-address.yaml";
  const uint64_t victim = last_ - 2;
  LogDroppingNode node(chain_->url, victim);
  DevnetManifest manifest;
  manifest.chain_id = 31337;
  manifest.last_block = last_;
  FleetFlags flags;
  flags.range_size = "5";
  flags.workers = "2";
  flags.log_level = "warn";
  flags.extra = {"--contracts", config, "--data", "events", "--verify-complete"};
  auto fleet = [&](const std::string& rpc, const PgTestDb& db, const std::string& log) {
    ClearChainKeys(redis, manifest.chain_id);
    Devnet devnet{rpc, &manifest};
    pid_t run = Spawn(FleetCommand("run", devnet, db.url(), redis, last_, flags), log);
    pid_t worker = Spawn(FleetCommand("worker", devnet, db.url(), redis, last_, flags), log);
    const int rc = WaitForExit(run, 300);
    kill(worker, SIGTERM);
    WaitForExit(worker, 30);
    return rc;
  };

  const std::string lying_log = dir_ + ".fleet-lying.log";
  EXPECT_NE(fleet(node.url(), db_, lying_log), 0);
  EXPECT_NE(ReadFile(lying_log).find("block " + std::to_string(victim) +
                                     ": eth_getLogs left out 1 matching"),
            std::string::npos)
      << ReadFile(lying_log);
  EXPECT_NE(ReadFile(lying_log).find("is dead-lettered"), std::string::npos) << ReadFile(lying_log);
  EXPECT_EQ(Count(db_, "SELECT count(*) FROM logs WHERE block_number = " + std::to_string(victim)),
            0);

  const std::string honest_log = dir_ + ".fleet-honest.log";
  ASSERT_EQ(fleet(chain_->url, other_, honest_log), 0) << ReadFile(honest_log);
  PgTestDb reference;
  ASSERT_FALSE(reference.failed()) << reference.error().ToString();
  std::string output;
  ASSERT_EQ(Index(chain_->url, reference, config, {}, &output), 0) << output;
  EXPECT_EQ(Tables(other_), Tables(reference));
}

TEST_F(CompleteTest, TheFlagIsRefusedWithoutDataEventsAndWithNoVerify) {
  std::vector<std::string> args = {GaplessBinary(),
                                   "index",
                                   "--rpc",
                                   chain_->url,
                                   "--db",
                                   db_.url(),
                                   "--from",
                                   "0",
                                   "--to",
                                   "3",
                                   "--progress",
                                   "off",
                                   "--contracts",
                                   dir_ + "/contracts-by-address.yaml",
                                   "--verify-complete"};
  const std::string log = dir_ + ".refused.log";
  EXPECT_NE(WaitForExit(Spawn(args, log), 60), 0);
  EXPECT_NE(ReadFile(log).find("--verify-complete needs --data events"), std::string::npos)
      << ReadFile(log);
  args.insert(args.end(), {"--data", "events", "--no-verify"});
  EXPECT_NE(WaitForExit(Spawn(args, log), 60), 0);
  EXPECT_NE(ReadFile(log).find("not with --no-verify"), std::string::npos) << ReadFile(log);
  EXPECT_EQ(Count(db_,
                  "SELECT count(*) FROM information_schema.tables WHERE table_name = "
                  "'indexed_ranges'"),
            0);  // refused before anything was written
}

}  // namespace
}  // namespace gapless::e2e
