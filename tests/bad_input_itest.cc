// Bad input loses nothing: a malformed answer makes the indexer retry the block, then stop with an
// error naming the block and field, with nothing of the failing range committed; once the node
// answers correctly the same run completes. And the CLI's one-line errors for a config typo, an
// unreachable node or database, a wrong chain: non-zero exit, nothing written. Bad input of every
// kind exits 2 at once; waits on a server that is away are bounded; verify and export only read.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "e2e_util.h"
#include "fake_node.h"
#include "node/app.h"
#include "rpc/curl_transport.h"
#include "store/partitions.h"
#include "testing/child_process.h"
#include "testing/free_port.h"
#include "testing/pg_test_db.h"
#include "testing/replay_transport.h"
#include "testing/wait_for.h"

namespace gapless::e2e {
namespace {

const std::string kMainnet = std::string(GAPLESS_FIXTURES_DIR) + "/mainnet/17000000/";

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (db_.skipped()) {
      GTEST_SKIP() << "GAPLESS_TEST_PG_URL not set";
    }
    ASSERT_FALSE(db_.failed()) << db_.error().ToString();
    pool_ = OpenPool(db_.url());
    ASSERT_NE(pool_, nullptr);
  }
  int64_t Count(const std::string& table) {
    auto conn = pool_->Acquire();
    auto r = conn->Query("SELECT count(*) FROM " + table);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->GetInt64(0, 0).value() : -1;
  }
  PgTestDb db_;
  std::unique_ptr<PgPool> pool_;
};

TEST_F(BadInputTest, MalformedAnswerIsRetriedThenStopsNamingBlockAndFieldAndCommitsNothing) {
  std::string receipts = ReadFile(kMainnet + "receipts.json");
  // Corrupt one log's data in the receipts: the decoder must reject it.
  size_t at = receipts.find("\"data\": \"0x");
  ASSERT_NE(at, std::string::npos);
  std::string corrupted = receipts;
  corrupted.replace(at, std::string("\"data\": \"0x").size(), "\"data\": \"0xzz");

  ReplayTransport replay;
  replay.SetChainId(1);
  ASSERT_TRUE(
      replay.AddFile("eth_getBlockByNumber", R"(["0x1036640",true])", kMainnet + "block.json")
          .ok());
  ASSERT_TRUE(replay.Add("eth_getBlockReceipts", R"(["0x1036640"])", corrupted).ok());

  Status st = IndexWith(&replay, pool_.get(), 17000000, 17000000, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kInvalidData) << st.ToString();
  EXPECT_NE(st.message().find("17000000"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("data"), std::string::npos) << st.message();
  // IndexWith allows 2 attempts per range: the block was fetched twice.
  EXPECT_EQ(replay.calls("eth_getBlockByNumber"), 2);
  EXPECT_EQ(Count("blocks"), 0);
  EXPECT_EQ(Count("transactions"), 0);
  EXPECT_EQ(Count("logs"), 0);
  EXPECT_EQ(Count("indexed_ranges"), 0);

  // The node heals: the same command completes.
  ASSERT_TRUE(replay.Add("eth_getBlockReceipts", R"(["0x1036640"])", receipts).ok());
  st = IndexWith(&replay, pool_.get(), 17000000, 17000000, 1);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Count("blocks"), 1);
  EXPECT_EQ(Count("transactions"), 102);
  EXPECT_EQ(Count("logs"), 237);
}

TEST_F(BadInputTest, WrongChainIdInTransactionsStopsAtOnce) {
  ReplayTransport replay;
  replay.SetChainId(5);
  ASSERT_TRUE(
      replay.AddFile("eth_getBlockByNumber", R"(["0x1036640",true])", kMainnet + "block.json")
          .ok());
  ASSERT_TRUE(
      replay.AddFile("eth_getBlockReceipts", R"(["0x1036640"])", kMainnet + "receipts.json").ok());
  // Transactions of block 17000000 carry chainId 1; the database is for chain 5.
  Status st = IndexWith(&replay, pool_.get(), 17000000, 17000000, 5);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_EQ(replay.calls("eth_getBlockByNumber"), 1) << "a wrong chain is not retried";
  EXPECT_EQ(Count("blocks"), 0);
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
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    run.output.append(buffer.data(), n);
  int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST_F(BadInputTest, CliConfigTypoIsOneLineNamingTheKeyAndWritesNothing) {
  std::string path = std::string(GAPLESS_BINARY_DIR) + "/bad_input_itest.conf";
  FILE* f = fopen(path.c_str(), "w");
  fputs("rpc = http://127.0.0.1:1\nconcurency = 4\n", f);
  fclose(f);
  CliRun run = RunGapless("index --config " + path + " --db " + db_.url());
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("unknown key `concurency`"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("line 2"), std::string::npos) << run.output;
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
  auto conn = pool_->Acquire();
  auto r = conn->Query("SELECT count(*) FROM blocks");
  EXPECT_EQ(r->GetInt64(0, 0).value(), 0);

  CliRun bad_value = RunGapless("index --rpc http://x --db " + db_.url() + " --range-size zero");
  EXPECT_NE(bad_value.exit_code, 0);
  EXPECT_NE(bad_value.output.find("--range-size"), std::string::npos) << bad_value.output;
}

TEST_F(BadInputTest, CliUnreachableNodeNamesTheAddressAndTouchesNoDatabase) {
  // A fresh database with no tables: the node is checked before migrations run.
  PgTestDb empty;
  ASSERT_FALSE(empty.failed());
  CliRun run = RunGapless("index --rpc http://127.0.0.1:9 --max-attempts 1 --db " + empty.url());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.output.find("127.0.0.1"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("eth_chainId"), std::string::npos) << run.output;
  auto conn = empty.Connect();
  ASSERT_TRUE(conn.ok());
  auto tables = (*conn)->Query(
      "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'");
  ASSERT_TRUE(tables.ok());
  EXPECT_EQ(tables->GetInt64(0, 0).value(), 0) << "nothing may be written";
}

TEST_F(BadInputTest, CliUnreachableDatabaseNamesTheAddress) {
  CliRun run = RunGapless("verify --db postgresql://gapless:secret@127.0.0.1:9/nodb");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find("127.0.0.1:9"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("secret"), std::string::npos) << "the password must not be printed";
}

// --partition-blocks: accepted for a database without block partitions (and again when it is the
// same), refused with the layout the database has once rows made partitions.
TEST_F(BadInputTest, APartitionSizeThatContradictsTheDatabaseIsRefusedNamingBoth) {
  auto first = OpenDatabase(db_.url(), 1, 10);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  {
    auto conn = (*first)->Acquire();
    ASSERT_TRUE(EnsurePartitions(*conn, 0, 25).ok());
  }
  auto other = OpenDatabase(db_.url(), 1, 20);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("--partition-blocks 20"), std::string::npos)
      << other.status().ToString();
  EXPECT_NE(other.status().message().find("already partitioned by 10 blocks"), std::string::npos)
      << other.status().ToString();
  EXPECT_TRUE(OpenDatabase(db_.url(), 1, 10).ok());
  EXPECT_TRUE(OpenDatabase(db_.url(), 1).ok());  // no flag: the database's layout
}

// A private anvil (GAPLESS_ANVIL) of its own chain id and genesis time, blocks 0..3; killed with
// the object. url is empty when GAPLESS_ANVIL is not set.
struct ChainNode {
  pid_t pid = -1;
  std::string url;
  std::string genesis;  // block 0's hash
  ChainNode(uint64_t chain_id, uint64_t genesis_time) {
    const char* anvil = std::getenv("GAPLESS_ANVIL");
    if (anvil == nullptr || *anvil == 0) return;
    const int port = FreePort();
    pid = SpawnChild({anvil, "--port", std::to_string(port), "--chain-id", std::to_string(chain_id),
                      "--timestamp", std::to_string(genesis_time), "--silent"},
                     ::testing::TempDir() + "chain-" + std::to_string(chain_id) + ".log");
    url = "http://127.0.0.1:" + std::to_string(port) + "/";
    JsonRpcClient rpc(std::make_unique<CurlTransport>(url));
    EXPECT_TRUE(testing_util::WaitFor([&] { return rpc.ChainId().ok(); }, 30'000)) << url;
    EXPECT_TRUE(rpc.Call("anvil_mine", R"(["0x3"])").ok());
    genesis = Hash(rpc, 0);
  }
  ~ChainNode() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      WaitForExit(pid, 10);
    }
  }
  static std::string Hash(JsonRpcClient& rpc, uint64_t n) {
    auto block = rpc.Call("eth_getBlockByNumber", "[\"" + HexQuantity(n) + "\",false]");
    if (!block.ok()) return block.status().ToString();
    size_t at = block->find("\"hash\":\"");
    return at == std::string::npos ? *block : block->substr(at + 8, 66);
  }
};

// A pool whose endpoints serve two chains (issue 35 item 9): A on 31337, B on 999. Before, blocks
// of 31337 were committed under chain 999's id with 31337's genesis hash (the chain id from one
// endpoint, block 0 from the other), and verify passed. Each endpoint's chain is checked as it
// joins: B is taken out and named, A serves every block, and the database is bound to A's chain.
TEST_F(BadInputTest, APoolMixingTwoChainsIndexesTheFirstEndpointsChainAndNamesTheOther) {
  ChainNode a(31337, 1'700'000'000), b(999, 1'600'000'000);
  if (a.url.empty()) GTEST_SKIP() << "GAPLESS_ANVIL not set";
  ASSERT_NE(a.genesis, b.genesis);
  CliRun run = RunGapless("index --rpc '" + a.url + ", " + b.url + "' --db " + db_.url() +
                          " --from 0 --to 3 --range-size 1 --progress off");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(b.url + " serves chain 999"), std::string::npos) << run.output;
  auto conn = pool_->Acquire();
  auto state = conn->Query(
      "SELECT (SELECT value FROM indexer_state WHERE key = 'chain_id'), "
      "(SELECT value FROM indexer_state WHERE key = 'genesis_hash')");
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(std::string(state->Get(0, 0)), "31337");
  EXPECT_EQ(std::string(state->Get(0, 1)), a.genesis);
  JsonRpcClient rpc_a(std::make_unique<CurlTransport>(a.url));
  for (uint64_t n = 0; n <= 3; ++n) {
    auto stored = conn->Query("SELECT '0x' || encode(hash, 'hex') FROM blocks WHERE number = $1",
                              {std::to_string(n)});
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    ASSERT_EQ(stored->rows(), 1) << "block " << n;
    EXPECT_EQ(std::string(stored->Get(0, 0)), ChainNode::Hash(rpc_a, n)) << "block " << n;
  }
}

// Issue 35, item 12: input that cannot be right is refused at once, with the one exit code for bad
// input (2), naming the option and where its value came from; never retried as an outage.
TEST_F(BadInputTest, BadInputIsRefusedAtOnceWithOneExitCode) {
  const std::string dir = std::string(GAPLESS_BINARY_DIR) + "/bad_input_itest-refused";
  ASSERT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  std::ofstream(dir + "/range.conf") << "rpc = http://127.0.0.1:9\nrange-size = zero\n";
  std::ofstream(dir + "/to.conf") << "# the last block\nto = abc\n";
  const std::string db = db_.url();
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::string names;
  };
  const std::vector<Case> cases = {
      {{"index", "--rpc", "http://127.0.0.1:9", "--db", db, "--rpc-timeout", "0"},
       {},
       "--rpc-timeout"},
      {{"index", "--rpc", "http://127.0.0.1:9", "--db", db, "--rpc-timeout", "-5"},
       {},
       "--rpc-timeout"},
      {{"index", "--rpc", "http://127.0.0.1:9", "--db", db, "--memory-budget", "-1"},
       {},
       "--memory-budget -1"},
      {{"index", "--rpc", "ws://127.0.0.1:9", "--db", db}, {}, "WebSocket"},
      {{"index", "--rpc", "http://127.0.0.1:70000", "--db", db}, {}, "65535"},
      {{"index", "--rpc", "http//127.0.0.1:9", "--db", db}, {}, "no scheme"},
      {{"index", "--rpc", "http://127.0.0.1:9", "--db", "mysql://root@127.0.0.1:9/x"},
       {},
       "mysql://"},
      {{"index", "--db", db, "--config", dir + "/range.conf"}, {}, "range.conf line 2"},
      {{"index", "--rpc", "http://127.0.0.1:9", "--db", db},
       {"GAPLESS_BATCH=ten"},
       "GAPLESS_BATCH"},
      {{"index", "--rpc", "http://127.0.0.1:9", "--db", db, "--range-size", "0"},
       {},
       "--range-size"},
      {{"index", "--rpc", "http://127.0.0.1:9"}, {}, "--db is required"},
      {{"index", "--rpc", "http://127.0.0.1:9", "--db", db, "surplus"}, {}, "surplus"},
      // A block bound says where it came from, like every other option.
      {{"index", "--rpc", "http://127.0.0.1:9", "--db", db},
       {"GAPLESS_TO=abc"},
       "--to abc: expected a block number or latest|safe|finalized (from GAPLESS_TO)"},
      {{"index", "--rpc", "http://127.0.0.1:9", "--db", db},
       {"GAPLESS_FROM=x1"},
       "--from x1: expected a block number or latest|safe|finalized (from GAPLESS_FROM)"},
      {{"verify", "--db", db, "--config", dir + "/to.conf"},
       {},
       "--to abc: expected a block number (from config file " + dir + "/to.conf line 2)"},
  };
  for (const Case& c : cases) {
    auto [code, output] = RunAll(c.args, 10'000, c.env);
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find(c.names), std::string::npos) << output;
    EXPECT_EQ(output.find("retrying"), std::string::npos) << "bad input is no outage: " << output;
  }
  // Asked for JSON logs, a log collector gets bad input as JSON lines too (and no secret).
  const std::vector<Case> json_cases = {
      {{"index", "--rpc", "ws://u:topsecret@127.0.0.1:9", "--db", db, "--log-format", "json"},
       {},
       "WebSocket"},
      {{"index", "--rpc", "http://127.0.0.1:9", "--db", db, "--batch", "ten"},
       {"GAPLESS_LOG_FORMAT=json"},
       "--batch ten"},
      {{"index", "--rpc", "http://127.0.0.1:9", "--db", db, "--no-such-flag"},
       {"GAPLESS_LOG_FORMAT=json"},
       "--no-such-flag"},
      {{"verify", "--db", db, "--config", dir + "/to.conf", "--log-format=json"}, {}, "to.conf"},
  };
  for (const Case& c : json_cases) {
    auto [code, output] = RunAll(c.args, 10'000, c.env);
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find(c.names), std::string::npos) << output;
    EXPECT_EQ(output.find("topsecret"), std::string::npos) << output;
    ASSERT_FALSE(output.empty());
    std::istringstream lines(output);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_TRUE(line.starts_with("{\"time\":") && line.ends_with("}")) << "not JSON: " << line;
      EXPECT_NE(line.find("\"level\":\"error\""), std::string::npos) << line;
    }
  }
  // The log format itself the bad input: plain text will do.
  auto bad_format =
      RunAll({"index", "--rpc", "http://127.0.0.1:9", "--db", db, "--log-format", "xml"});
  EXPECT_EQ(bad_format.first, 2) << bad_format.second;
  EXPECT_NE(bad_format.second.find("gapless: "), std::string::npos) << bad_format.second;
  EXPECT_EQ(Count("blocks"), 0);
}

// verify and export of a database gapless never wrote (empty, or the wrong one) create nothing
// in it; an export of blocks that are not indexed says which they are.
TEST_F(BadInputTest, VerifyAndExportOnlyReadAndExportNamesTheMissingBlocks) {
  PgTestDb empty;
  ASSERT_FALSE(empty.failed());
  for (const char* command : {"verify", "export"}) {
    std::vector<std::string> args = {command, "--db", empty.url()};
    if (std::string(command) == "export") args.insert(args.end(), {"--table", "blocks"});
    auto [code, output] = RunAll(args);
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find("no gapless tables"), std::string::npos) << output;
  }
  auto conn = empty.Connect();
  ASSERT_TRUE(conn.ok());
  auto tables = (*conn)->Query(
      "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'");
  ASSERT_TRUE(tables.ok());
  EXPECT_EQ(tables->GetInt64(0, 0).value(), 0) << "verify and export must not write";

  ReplayTransport replay;
  replay.SetChainId(1);
  ASSERT_TRUE(
      replay.AddFile("eth_getBlockByNumber", R"(["0x1036640",true])", kMainnet + "block.json")
          .ok());
  ASSERT_TRUE(
      replay.AddFile("eth_getBlockReceipts", R"(["0x1036640"])", kMainnet + "receipts.json").ok());
  ASSERT_TRUE(IndexWith(&replay, pool_.get(), 17000000, 17000000, 1).ok());
  auto [code, output] = RunAll(
      {"export", "--db", db_.url(), "--table", "blocks", "--from", "16999990", "--to", "17000005"});
  EXPECT_EQ(code, 1) << output;
  EXPECT_NE(output.find("blocks 16999990..16999999, 17000001..17000005 of 16999990..17000005 "
                        "are not indexed"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("\n17000000,"), std::string::npos) << "the block it has: " << output;
  auto whole = RunAll({"export", "--db", db_.url(), "--table", "blocks", "--from", "17000000"});
  EXPECT_EQ(whole.first, 0) << whole.second;
  EXPECT_EQ(whole.second.find("not indexed"), std::string::npos) << whole.second;
}

// A run with an end does not wait forever for a server that never answers: the event bus (index
// --events, after the blocks are committed), the coordination Redis (run), the node (every
// endpoint of a pool named).
TEST_F(BadInputTest, WaitsOnServersThatNeverAnswerAreBoundedAndNameThem) {
  // A bus that accepts connections and never answers.
  const int silent = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(silent, 64), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(silent, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string bus = "redis://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto events = RunAll({"index", "--rpc", GAPLESS_TEST_ANVIL_URL, "--db", db_.url(), "--to", "2",
                        "--events", bus, "--events-timeout", "500", "--progress", "off"},
                       60'000);
  close(silent);
  EXPECT_EQ(events.first, 1) << "not interrupted: " << events.second;
  EXPECT_NE(events.second.find("the event bus " + bus + " confirmed no event"), std::string::npos)
      << events.second;
  EXPECT_EQ(Count("blocks"), 3) << "the blocks are committed";

  const std::string dead_redis = "redis://127.0.0.1:" + std::to_string(FreePort());
  auto run = RunAll({"run", "--rpc", GAPLESS_TEST_ANVIL_URL, "--db", db_.url(), "--redis",
                     dead_redis, "--to", "2", "--startup-timeout", "1000", "--progress", "off"},
                    60'000);
  EXPECT_EQ(run.first, 1) << "not interrupted: " << run.second;
  EXPECT_NE(run.second.find("gave up after 1.0 s"), std::string::npos) << run.second;
  EXPECT_NE(run.second.find(dead_redis.substr(8)), std::string::npos) << run.second;

  auto pool = RunAll({"index", "--rpc", "http://127.0.0.1:9, http://127.0.0.1:10", "--db",
                      db_.url(), "--max-attempts", "1"});
  EXPECT_EQ(pool.first, 1) << pool.second;
  const std::string last = pool.second.substr(pool.second.rfind("error"));
  EXPECT_NE(last.find("127.0.0.1:9"), std::string::npos) << last;
  EXPECT_NE(last.find("127.0.0.1:10"), std::string::npos) << last;
}

}  // namespace
}  // namespace gapless::e2e
