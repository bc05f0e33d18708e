// The contracts mode (issue 36) end to end, `full` data mode: a private anvil runs
// devnet/events.js (contracts whose events carry every ABI type, logs that do not fit their ABI, a
// token whose Transfer indexes its value, pools a factory made), `gapless index --contracts`
// writes the decoded tables, and devnet/decode_check.js reads the same logs from the node with
// viem's decoder and compares every row and every undecoded log with a dump of the tables.
// Also: a write replayed over the same range changes nothing, a re-org's rollback deletes the
// decoded rows above the fork point, an ABI change of an existing table is refused unless
// --rebuild, and a contract added to the config of an indexed database gets its rows.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "contracts_util.h"
#include "devnet_util.h"
#include "store/decoded.h"
#include "store/rollback.h"

namespace gapless::e2e {
namespace {

const std::string& kSource = kContractsSource;

// The decoded tables as decode_check.js reads them (its header comment).
Result<std::string> DumpDecoded(PgConn& conn, const std::string& schema) {
  GAPLESS_ASSIGN_OR_RETURN(
      auto tables, conn.Query("SELECT table_name, contract, event_signature FROM decoded_tables"
                              " WHERE schema_name = $1 AND contract <> '' ORDER BY 1",
                              {schema}));
  std::string out = "{\"tables\": [";
  for (int i = 0; i < tables.rows(); ++i) {
    const std::string table(tables.Get(i, 0));
    GAPLESS_ASSIGN_OR_RETURN(
        auto cols, conn.Query("SELECT column_name, data_type FROM information_schema.columns"
                              " WHERE table_schema = $1 AND table_name = $2"
                              " ORDER BY ordinal_position OFFSET 7",
                              {schema, table}));
    std::string values;
    for (int c = 0; c < cols.rows(); ++c) {
      const std::string name = "\"" + std::string(cols.Get(c, 0)) + "\"";
      const std::string type(cols.Get(c, 1));
      if (c > 0) values += ", ";
      if (type == "bytea") {
        values += "'0x' || encode(" + name + ", 'hex')";
      } else if (type == "bigint" || type == "numeric") {
        values += name + "::text";
      } else {
        values += name;
      }
    }
    GAPLESS_ASSIGN_OR_RETURN(
        auto rows,
        conn.Query("SELECT coalesce(json_agg(json_build_object('block', block_number, 'log',"
                   " log_index, 'values', json_build_array(" +
                   values + ")) ORDER BY block_number, log_index), '[]')::text FROM \"" + schema +
                   "\".\"" + table + "\""));
    if (i > 0) out += ", ";
    out += "{\"contract\": \"" + std::string(tables.Get(i, 1)) + "\", \"signature\": \"" +
           std::string(tables.Get(i, 2)) + "\", \"rows\": " + std::string(rows.Get(0, 0)) + "}";
  }
  GAPLESS_ASSIGN_OR_RETURN(
      auto undecoded,
      conn.Query("SELECT coalesce(json_agg(json_build_object('block', u.block_number, 'log',"
                 " u.log_index, 'contract', d.contract, 'signature', d.event_signature)), '[]')"
                 "::text FROM \"" +
                     schema +
                     "\".undecoded u JOIN decoded_tables d ON d.schema_name = $1"
                     " AND d.table_name = u.table_name",
                 {schema}));
  return out + "], \"undecoded\": " + std::string(undecoded.Get(0, 0)) + "}";
}

class ContractsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    chain_ = StartPrivateChain(0, 1, "contracts-anvil").release();
    if (chain_ == nullptr) return;
    dir_ = ::testing::TempDir() + "contracts-" + std::to_string(getpid());
    const std::string problem =
        DeployContractsDevnet(chain_->url, dir_, 24, &last_, &pools_created_by_);
    ASSERT_EQ(problem, "");
  }
  static void TearDownTestSuite() {
    delete chain_;
    chain_ = nullptr;
  }

  void SetUp() override {
    if (chain_ == nullptr) GTEST_SKIP() << "GAPLESS_ANVIL not set";
    if (db_.skipped()) GTEST_SKIP() << "GAPLESS_TEST_PG_URL not set";
    ASSERT_FALSE(db_.failed()) << db_.error().ToString();
  }

  // `gapless index` of blocks from..last_ with the config; its exit code (output in a log).
  int Index(const std::string& config, std::vector<std::string> extra = {},
            std::string* output = nullptr, uint64_t from = 0) {
    std::vector<std::string> args = {GaplessBinary(), "index",
                                     "--rpc",         chain_->url,
                                     "--db",          db_.url(),
                                     "--from",        std::to_string(from),
                                     "--to",          std::to_string(last_),
                                     "--range-size",  "5",
                                     "--progress",    "off",
                                     "--contracts",   config};
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string log = dir_ + ".index-" + std::to_string(++runs_) + ".log";
    const int rc = WaitForExit(Spawn(args, log), 300);
    if (output != nullptr) *output = ReadFile(log);
    if (rc != 0 && output == nullptr) ADD_FAILURE() << ReadFile(log);
    return rc;
  }

  // decode_check.js against the database's tables: its exit code, its output in *line.
  int Check(std::string* line, const std::string& only = "") {
    auto conn = db_.Connect();
    EXPECT_TRUE(conn.ok());
    auto dump = DumpDecoded(**conn, "zoo");
    EXPECT_TRUE(dump.ok()) << dump.status().ToString();
    const std::string path = dir_ + ".dump-" + std::to_string(++runs_) + ".json";
    std::ofstream(path) << *dump;
    const std::string log = path + ".log";
    std::vector<std::string> args = {kSource + "/devnet/decode_check.js",
                                     "--rpc",
                                     chain_->url,
                                     "--dir",
                                     dir_,
                                     "--dump",
                                     path,
                                     "--to",
                                     std::to_string(last_)};
    if (!only.empty()) args.insert(args.end(), {"--only", only});
    const int rc = RunNode(args, log);
    *line = ReadFile(log);
    return rc;
  }

  int64_t Count(const std::string& sql) {
    auto conn = db_.Connect();
    auto res = (*conn)->Query(sql);
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    return res.ok() ? std::stoll(std::string(res->Get(0, 0))) : -1;
  }

  static PrivateChain* chain_;
  static std::string dir_;
  static uint64_t last_;
  static uint64_t pools_created_by_;
  PgTestDb db_;
  static inline int runs_ = 0;
};

PrivateChain* ContractsTest::chain_ = nullptr;
std::string ContractsTest::dir_;
uint64_t ContractsTest::last_ = 0;
uint64_t ContractsTest::pools_created_by_ = 0;

TEST_F(ContractsTest, DecodedTablesEqualViemsReadingOfTheNodesLogs) {
  ASSERT_EQ(Index(dir_ + "/contracts.yaml"), 0);
  std::string line;
  EXPECT_EQ(Check(&line), 0) << line;
  EXPECT_NE(line.find("equal viem's reading"), std::string::npos) << line;
  // What the workload sent is there: every kind of row, the misfits listed, not skipped.
  EXPECT_GT(Count("SELECT count(*) FROM zoo.events_ints"), 24);
  EXPECT_EQ(Count("SELECT count(*) FROM zoo.events_ints WHERE neg < 0 AND i128 < 0 AND i8 = -128"
                  " AND big = "
                  "115792089237316195423570985008687907853269984665640564039457584007913129639935"),
            5);
  EXPECT_GT(Count("SELECT count(*) FROM zoo.undecoded WHERE reason <> ''"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM zoo.odd_token_transfer"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM zoo.undecoded WHERE table_name = 'odd_token_transfer'"),
            24);
  // Overloads get a table each.
  EXPECT_EQ(Count("SELECT count(*) FROM decoded_tables WHERE schema_name = 'zoo'"
                  " AND table_name LIKE 'events_overloaded_%'"),
            2);

  // Idempotent: the same range written again (replacing its rows) leaves every table equal.
  ASSERT_EQ(Index(dir_ + "/contracts.yaml", {"--write-mode", "replace"}), 0);
  EXPECT_EQ(Check(&line), 0) << line;
}

TEST_F(ContractsTest, ARollbackDeletesTheDecodedRowsAboveTheForkPoint) {
  ASSERT_EQ(Index(dir_ + "/contracts.yaml"), 0);
  const uint64_t fork = last_ - 5;
  ASSERT_GT(
      Count("SELECT count(*) FROM zoo.pools_swap WHERE block_number > " + std::to_string(fork)), 0);
  {
    auto conn = db_.Connect();
    ASSERT_TRUE(conn.ok());
    RollbackRequest request;
    request.fork_point = fork;
    request.max_depth = 1000;
    auto rolled = RollBack(**conn, request);
    ASSERT_TRUE(rolled.ok()) << rolled.status().ToString();
  }
  for (const char* table : {"events_ints", "events_strings", "pools_swap", "undecoded"}) {
    EXPECT_EQ(Count(std::string("SELECT count(*) FROM zoo.") + table + " WHERE block_number > " +
                    std::to_string(fork)),
              0)
        << table;
  }
  EXPECT_GT(Count("SELECT count(*) FROM zoo.events_ints"), 0);
  // Indexing again refills them: equal to the node's logs again.
  ASSERT_EQ(Index(dir_ + "/contracts.yaml"), 0);
  std::string line;
  EXPECT_EQ(Check(&line), 0) << line;
}

TEST_F(ContractsTest, AnAbiChangeOfAnExistingTableIsRefusedUnlessRebuilt) {
  ASSERT_EQ(Index(dir_ + "/contracts.yaml"), 0);
  // The same config, with DevPool's Mint calling its liquidity "amount": the same signature (the
  // same logs), another table.
  const std::string changed = dir_ + "-changed";
  std::filesystem::create_directories(changed + "/abis");
  for (const char* abi : {"DevEvents", "DevPoolFactory", "ERC20"}) {
    std::filesystem::copy_file(dir_ + "/abis/" + abi + ".json", changed + "/abis/" + abi + ".json",
                               std::filesystem::copy_options::overwrite_existing);
  }
  std::string pool = ReadFile(dir_ + "/abis/DevPool.json");
  int replaced = 0;
  for (size_t at = pool.find("\"liquidity\""); at != std::string::npos;
       at = pool.find("\"liquidity\"", at)) {
    pool.replace(at, 11, "\"amount\"");
    ++replaced;
  }
  ASSERT_GT(replaced, 0);
  std::ofstream(changed + "/abis/DevPool.json") << pool;
  std::filesystem::copy_file(dir_ + "/contracts.yaml", changed + "/contracts.yaml",
                             std::filesystem::copy_options::overwrite_existing);

  std::string output;
  EXPECT_NE(Index(changed + "/contracts.yaml", {}, &output), 0);
  EXPECT_NE(output.find("zoo.pools_mint"), std::string::npos) << output;
  EXPECT_NE(output.find("--rebuild"), std::string::npos) << output;
  EXPECT_EQ(Count("SELECT count(*) FROM information_schema.columns WHERE table_schema = 'zoo'"
                  " AND table_name = 'pools_mint' AND column_name = 'amount'"),
            0);

  ASSERT_EQ(Index(changed + "/contracts.yaml", {"--rebuild", "zoo.pools_mint"}, &output), 0)
      << output;
  EXPECT_GT(Count("SELECT count(*) FROM zoo.pools_mint WHERE amount > 0"), 0);
}

TEST_F(ContractsTest, AContractAddedToTheConfigLaterGetsItsRowsForTheCommittedRanges) {
  // First without the events contract.
  std::string yaml = ReadFile(dir_ + "/contracts.yaml");
  const size_t start = yaml.find("  - name: events\n");
  const size_t end = yaml.find("  - name: pools\n");
  ASSERT_NE(start, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string without = dir_ + "/without-events.yaml";
  std::ofstream(without) << yaml.substr(0, start) + yaml.substr(end);
  ASSERT_EQ(Index(without), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM decoded_tables WHERE table_name = 'events_ints'"), 0);
  // The rows' versions (xmin) and places (ctid): a range written again has new ones.
  const std::string versions =
      "SELECT md5(string_agg(t::text, ',')) FROM (SELECT xmin::text || ctid::text AS t FROM"
      " blocks UNION ALL SELECT xmin::text || ctid::text FROM transactions UNION ALL SELECT"
      " xmin::text || ctid::text FROM logs ORDER BY 1) x";
  auto conn = db_.Connect();
  ASSERT_TRUE(conn.ok());
  auto before = (*conn)->Query(versions);
  ASSERT_TRUE(before.ok()) << before.status().ToString();

  // The contract added: its tables decoded from the stored logs, nothing fetched or rewritten.
  std::string output;
  ASSERT_EQ(Index(dir_ + "/contracts.yaml", {}, &output), 0) << output;
  EXPECT_NE(output.find("decoded from their stored logs"), std::string::npos) << output;
  auto after = (*conn)->Query(versions);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(before->Get(0, 0), after->Get(0, 0)) << "the data tables were written again";
  std::string line;
  EXPECT_EQ(Check(&line), 0) << line;
  // Every range holds the new tables now: a third run has nothing to do.
  ASSERT_EQ(Index(dir_ + "/contracts.yaml", {}, &output), 0) << output;
  EXPECT_NE(output.find(" 0 to do"), std::string::npos) << output;

  // `gapless status`: each table's cursor, the added contract's too.
  const char* redis = std::getenv("GAPLESS_TEST_REDIS_URL");
  if (redis == nullptr || *redis == 0) GTEST_SKIP() << "GAPLESS_TEST_REDIS_URL not set";
  const std::string log = dir_ + ".status.log";
  ASSERT_EQ(
      WaitForExit(
          Spawn({GaplessBinary(), "status", "--db", db_.url(), "--redis", redis, "--json"}, log),
          60),
      0)
      << ReadFile(log);
  const std::string status = ReadFile(log);
  for (const char* table : {"zoo.events_ints", "zoo.odd_token_transfer"}) {
    EXPECT_NE(status.find(fmt::format(R"({{"table":"{}","from":0,"through":{}}})", table, last_)),
              std::string::npos)
        << table << " in " << status;
  }
}

TEST_F(ContractsTest, AChildThatIsAlsoAnotherContractsAddressIsDecodedOnceForEach) {
  // The first pool is both a child of `pools` and, by address, the contract `first_pool`: the
  // backfill of the child (its creation committed after its swaps) must not decode it again for
  // `first_pool`, whose rows the writes above it already hold.
  const std::string manifest = ReadFile(dir_ + "/manifest.json");
  const size_t at = manifest.find("\"pools\": [");
  ASSERT_NE(at, std::string::npos) << manifest;
  const size_t quote = manifest.find('"', at + 10);
  const std::string first_pool = manifest.substr(quote + 1, 42);
  const std::string config = dir_ + "/with-first-pool.yaml";
  std::ofstream(config) << ReadFile(dir_ + "/contracts.yaml") +
                               "  - name: first_pool\n    abi: abis/DevPool.json\n    address: \"" +
                               first_pool + "\"\n";
  ASSERT_EQ(Index(config, {}, nullptr, pools_created_by_ + 1), 0);
  ASSERT_EQ(Index(config), 0);
  const std::string where = " WHERE address = decode('" + first_pool.substr(2) + "', 'hex')";
  const int64_t direct = Count("SELECT count(*) FROM zoo.first_pool_swap");
  EXPECT_GT(direct, 0);
  EXPECT_EQ(Count("SELECT count(*) FROM zoo.pools_swap" + where), direct);
}

TEST_F(ContractsTest, FactoryChildrenFoundAfterTheBlocksAboveThemCommittedAreBackfilled) {
  // The blocks above the pools' creation first: their swaps belong to children nobody knows yet.
  ASSERT_EQ(Index(dir_ + "/contracts.yaml", {}, nullptr, pools_created_by_ + 1), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM zoo.pools_swap"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM zoo.children"), 0);
  // Then the rest: the range holding the creations finds the children and decodes their logs of
  // every committed block above it.
  ASSERT_EQ(Index(dir_ + "/contracts.yaml"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM zoo.children"), 3);
  EXPECT_GT(Count("SELECT count(*) FROM zoo.pools_swap"), 24);
  std::string line;
  EXPECT_EQ(Check(&line), 0) << line;
}

TEST_F(ContractsTest, EventsModeStoresOnlyTheMatchingLogsAndTheirBlocksAndDecodesThemAlike) {
  ASSERT_EQ(Index(dir_ + "/contracts-by-address.yaml", {"--data", "events", "--verify"}), 0);
  std::string line;
  EXPECT_EQ(Check(&line), 0) << line;
  EXPECT_NE(line.find("equal viem's reading"), std::string::npos) << line;
  // The blocks stored are exactly those holding a matching log; no transaction is stored.
  EXPECT_EQ(Count("SELECT count(*) FROM blocks b WHERE NOT EXISTS"
                  " (SELECT 1 FROM logs l WHERE l.block_number = b.number)"),
            0);
  EXPECT_GT(Count("SELECT count(*) FROM blocks"), 20);
  EXPECT_LT(Count("SELECT count(*) FROM blocks"), static_cast<int64_t>(last_));
  EXPECT_EQ(Count("SELECT count(*) FROM transactions"), 0);
  // The whole range is committed: the frontier passed it although most blocks are not stored.
  EXPECT_EQ(Count("SELECT coalesce(sum(to_block - from_block + 1), 0) FROM indexed_ranges"),
            static_cast<int64_t>(last_) + 1);
  // A second run finds everything committed (a sparse range holds no "blocks" dataset, and is
  // not taken for one lacking it).
  std::string output;
  ASSERT_EQ(Index(dir_ + "/contracts-by-address.yaml", {"--data", "events"}, &output), 0) << output;
  EXPECT_NE(output.find(": 0 to do"), std::string::npos) << output;
  // verify and export know an events database: blocks without matching logs are not gaps.
  const std::string verify_log = dir_ + ".verify-events.log";
  EXPECT_EQ(WaitForExit(Spawn({GaplessBinary(), "verify", "--db", db_.url(), "--from", "0", "--to",
                               std::to_string(last_)},
                              verify_log),
                        120),
            0)
      << ReadFile(verify_log);
  const std::string export_log = dir_ + ".export-events.log";
  EXPECT_EQ(WaitForExit(Spawn({GaplessBinary(), "export", "--db", db_.url(), "--table",
                               "zoo.events_ints", "--from", "0", "--to", std::to_string(last_),
                               "--output", dir_ + ".events_ints.csv"},
                              export_log),
                        120),
            0)
      << ReadFile(export_log);
  EXPECT_NE(ReadFile(dir_ + ".events_ints.csv").find("block_number,block_hash"), std::string::npos);
  // A full-mode run cannot share the database.
  EXPECT_NE(Index(dir_ + "/contracts-by-address.yaml", {}, &output), 0);
  EXPECT_NE(output.find("--data events"), std::string::npos) << output;
}

TEST_F(ContractsTest, EventsModeWithAFactoryDecodesChildrenFoundLateAlike) {
  // The config without its contract of anonymous events: with a factory, events mode asks every
  // address by topic 0, and an anonymous event has none.
  std::string yaml = ReadFile(dir_ + "/contracts.yaml");
  const size_t start = yaml.find("  - name: events\n");
  const size_t end = yaml.find("  - name: pools\n");
  ASSERT_NE(start, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string named = dir_ + "/named-events.yaml";
  std::ofstream(named) << yaml.substr(0, start) + yaml.substr(end);
  // The blocks above the pools' creation first: their swaps belong to children nobody knows yet,
  // stored because any address's Swap may be a child's.
  // --verify-complete too: the receipts of every block whose bloom admits the topics prove the
  // any-address answers whole.
  ASSERT_EQ(Index(named, {"--data", "events", "--verify-complete"}, nullptr, pools_created_by_ + 1),
            0);
  EXPECT_EQ(Count("SELECT count(*) FROM zoo.children"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM zoo.pools_swap"), 0);
  // Then the rest: the range holding the creations finds the children and decodes their stored
  // logs of every committed block above it.
  ASSERT_EQ(Index(named, {"--data", "events", "--verify-complete"}), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM zoo.children"), 3);
  EXPECT_GT(Count("SELECT count(*) FROM zoo.pools_swap"), 24);
  EXPECT_EQ(Count("SELECT count(*) FROM transactions"), 0);
  std::string line;
  EXPECT_EQ(Check(&line, "pools,PoolFactory,odd_token"), 0) << line;
  EXPECT_NE(line.find("equal viem's reading"), std::string::npos) << line;
}

TEST_F(ContractsTest, EventsModeRefusesAnAnonymousEventWithAFactoryAndBusEvents) {
  std::string output;
  EXPECT_NE(Index(dir_ + "/contracts.yaml", {"--data", "events"}, &output), 0);
  EXPECT_NE(output.find("anonymous event"), std::string::npos) << output;
  // Refused before anything was written: the database was not even migrated.
  EXPECT_EQ(Count("SELECT count(*) FROM pg_tables WHERE tablename = 'indexed_ranges'"), 0);
  // Events on the buses are built from whole blocks: not with --data events yet.
  EXPECT_NE(Index(dir_ + "/contracts-by-address.yaml",
                  {"--data", "events", "--events", "redis://127.0.0.1:1"}, &output),
            0);
  EXPECT_NE(output.find("--events: not with --data events"), std::string::npos) << output;
  EXPECT_EQ(Count("SELECT count(*) FROM pg_tables WHERE tablename = 'indexed_ranges'"), 0);
}

// A factory with 1,000 children and a fleet whose ranges commit out of order: the blocks above the
// children's creation are committed first (by `index`, knowing no child), then a fleet of three
// workers in two processes indexes the rest in ranges of 10 blocks, each range holding creations
// decoding its children's logs of the committed blocks above it. The tables equal viem's reading.
class FactoryFleetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* anvil = std::getenv("GAPLESS_ANVIL");
    if (anvil == nullptr || *anvil == 0) return;
    // A chain id of its own: the fleet's Redis keys are per chain, and other tests' devnets run
    // at the same time (docs/decisions.md).
    const int port = FreePort();
    url_ = "http://127.0.0.1:" + std::to_string(port);
    pid_ = Spawn({anvil, "--port", std::to_string(port), "--chain-id", "31344", "--silent",
                  "--gas-limit", "100000000"},
                 ::testing::TempDir() + "factory-fleet-anvil.log");
    auto rpc = ClientsFor(url_)();
    ASSERT_TRUE(testing_util::WaitFor([&] { return rpc->ChainId().ok(); }, 30'000));
    dir_ = ::testing::TempDir() + "factory-fleet-" + std::to_string(getpid());
    ASSERT_EQ(RunNode({kSource + "/devnet/events.js", "--rpc", url_, "--dir", dir_, "--rounds", "2",
                       "--pools", "1000"},
                      dir_ + ".events.log"),
              0)
        << ReadFile(dir_ + ".events.log");
    const std::string manifest = ReadFile(dir_ + "/manifest.json");
    last_ = std::stoull(manifest.substr(manifest.find("\"last\":") + 7));
    pools_created_by_ = std::stoull(manifest.substr(manifest.find("\"poolsCreatedBy\":") + 17));
  }
  static void TearDownTestSuite() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      WaitForExit(pid_, 10);
    }
  }
  void SetUp() override {
    if (pid_ <= 0) GTEST_SKIP() << "GAPLESS_ANVIL not set";
    if (db_.skipped()) GTEST_SKIP() << "GAPLESS_TEST_PG_URL not set";
    const char* redis = std::getenv("GAPLESS_TEST_REDIS_URL");
    if (redis == nullptr) GTEST_SKIP() << "GAPLESS_TEST_REDIS_URL not set";
    redis_url_ = redis;
    ASSERT_FALSE(db_.failed()) << db_.error().ToString();
  }

  static inline pid_t pid_ = -1;
  static inline std::string url_;
  static inline std::string dir_;
  static inline uint64_t last_ = 0;
  static inline uint64_t pools_created_by_ = 0;
  PgTestDb db_;
  std::string redis_url_;
};

TEST_F(FactoryFleetTest, AThousandChildrenFoundAfterTheBlocksAboveThemAreDecodedAlike) {
  const std::string config = dir_ + "/contracts.yaml";
  const std::string log = dir_ + ".run.log";
  ASSERT_EQ(WaitForExit(Spawn({GaplessBinary(), "index", "--rpc", url_, "--db", db_.url(), "--from",
                               std::to_string(pools_created_by_ + 1), "--to", std::to_string(last_),
                               "--progress", "off", "--contracts", config},
                              log),
                        300),
            0)
      << ReadFile(log);
  ClearChainKeys(redis_url_, 31344);
  Devnet devnet{url_, nullptr};
  DevnetManifest manifest;
  manifest.chain_id = 31344;
  manifest.last_block = last_;
  devnet.manifest = &manifest;
  FleetFlags flags;
  flags.range_size = "10";
  flags.workers = "2";
  flags.extra = {"--contracts", config};
  pid_t run = Spawn(FleetCommand("run", devnet, db_.url(), redis_url_, last_, flags), log);
  pid_t worker = Spawn(FleetCommand("worker", devnet, db_.url(), redis_url_, last_, flags), log);
  const int rc = WaitForExit(run, 400);
  kill(worker, SIGTERM);
  WaitForExit(worker, 30);
  ASSERT_EQ(rc, 0) << ReadFile(log);

  auto conn = db_.Connect();
  ASSERT_TRUE(conn.ok());
  auto children = (*conn)->Query("SELECT count(*) FROM zoo.children");
  ASSERT_TRUE(children.ok()) << children.status().ToString();
  EXPECT_EQ(std::string(children->Get(0, 0)), "1000");
  auto dump = DumpDecoded(**conn, "zoo");
  ASSERT_TRUE(dump.ok()) << dump.status().ToString();
  const std::string path = dir_ + ".fleet-dump.json";
  std::ofstream(path) << *dump;
  const int checked = RunNode({kSource + "/devnet/decode_check.js", "--rpc", url_, "--dir", dir_,
                               "--dump", path, "--to", std::to_string(last_)},
                              path + ".log");
  EXPECT_EQ(checked, 0) << ReadFile(path + ".log");
  EXPECT_NE(ReadFile(path + ".log").find("equal viem's reading"), std::string::npos);
}

}  // namespace
}  // namespace gapless::e2e
