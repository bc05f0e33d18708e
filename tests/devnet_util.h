// Helpers shared by the tests that run against an anvil devnet (devnet_itest, chaos_itest): the
// devnet's manifest, a single-process reference index, table checksums, and running the gapless
// binary as a child process (spawn, wait with a bound, inspect, clear its Redis keys).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "coord/keys.h"
#include "coord/redis.h"
#include "e2e_util.h"
#include "rpc/curl_transport.h"
#include "store/queries.h"
#include "store/state.h"
#include "testing/child_process.h"
#include "testing/devnet_manifest.h"
#include "testing/free_port.h"
#include "testing/pg_test_db.h"
#include "testing/wait_for.h"

namespace gapless::e2e {

// A devnet: its node and what traffic.js sent to it.
struct Devnet {
  std::string url;
  const DevnetManifest* manifest = nullptr;
  uint64_t chain_id() const { return manifest->chain_id; }
  uint64_t last_block() const { return manifest->last_block; }
};

// The devnet at url whose manifest is at path; a test that cannot read the manifest cannot compare
// anything, so the process stops there.
inline Devnet OpenDevnet(const std::string& url, const std::string& manifest_path) {
  auto m = LoadDevnetManifest(manifest_path);
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
    std::abort();
  }
  return Devnet{url, *m};
}

inline RpcClientFactory ClientsFor(const std::string& url) {
  return [url] { return std::make_unique<JsonRpcClient>(std::make_unique<CurlTransport>(url)); };
}

// Indexes blocks 0..to in-process, without Redis: the reference run.
inline Status IndexDevnet(const Devnet& devnet, PgPool* pool, uint64_t to,
                          WriteMode mode = WriteMode::kStagingUpsert, uint32_t fetch_workers = 3) {
  {
    auto conn = pool->Acquire();
    GAPLESS_RETURN_IF_ERROR(EnsureChainId(*conn, devnet.chain_id()));
  }
  IndexerOptions options;
  options.from = 0;
  options.to = to;
  options.range_size = 20;
  options.fetch_workers = fetch_workers;
  options.chain_id = devnet.chain_id();
  options.write_mode = mode;
  Indexer indexer(options, ClientsFor(devnet.url), pool);
  GAPLESS_ASSIGN_OR_RETURN(uint64_t planned, indexer.Plan());
  (void)planned;
  return indexer.Run();
}

inline std::map<std::string, std::string> Checksums(PgPool* pool, uint64_t to) {
  return DataChecksums(pool, 0, to);
}

// Rows of every table equal those of a clean single-process run (with one fetch worker) into
// another database.
inline void ExpectEqualsACleanRun(const Devnet& devnet, PgPool* pool, uint64_t last_block) {
  PgTestDb clean_db;
  ASSERT_FALSE(clean_db.failed());
  auto clean_pool = OpenPool(clean_db.url(), 3);
  Status st = IndexDevnet(devnet, clean_pool.get(), last_block, WriteMode::kStagingUpsert, 1);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Checksums(pool, last_block), Checksums(clean_pool.get(), last_block));
}

// A test with a fresh database of its own (PgTestDb) and a pool on it, schema applied.
class DbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (db_.skipped()) {
      GTEST_SKIP() << "GAPLESS_TEST_PG_URL not set";
    }
    ASSERT_FALSE(db_.failed()) << db_.error().ToString();
    pool_ = OpenPool(db_.url(), 3);
    ASSERT_NE(pool_, nullptr);
  }
  PgTestDb db_;
  std::unique_ptr<PgPool> pool_;
};

// DbTest plus the shared test redis-server (GAPLESS_TEST_REDIS_URL, skipped without it).
class DbRedisTest : public DbTest {
 protected:
  void SetUp() override {
    DbTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const char* url = std::getenv("GAPLESS_TEST_REDIS_URL");
    if (url == nullptr) {
      GTEST_SKIP() << "GAPLESS_TEST_REDIS_URL not set";
    }
    redis_url_ = url;
  }
  std::string redis_url_;
};

inline std::string GaplessBinary() { return std::string(GAPLESS_BINARY_DIR) + "/src/cli/gapless"; }

// The flags that differ between the fleet processes the tests start.
struct FleetFlags {
  std::string range_size = "2";
  std::string workers = "1";
  std::string lease_ttl_ms = "3000";
  std::string rpc_timeout_ms = "1000";
  std::string log_level = "error";
  std::vector<std::string> extra{};  // more flags, e.g. {"--lock-nodes", "redis://..."}
};

// `gapless run|leader|worker` indexing blocks 0..to of the devnet into db_url, coordinated through
// redis_url, without a progress display.
inline std::vector<std::string> FleetCommand(const std::string& role, const Devnet& devnet,
                                             const std::string& db_url,
                                             const std::string& redis_url, uint64_t to,
                                             const FleetFlags& flags = {}) {
  std::vector<std::string> args = {GaplessBinary(), role,
                                   "--rpc",         devnet.url,
                                   "--db",          db_url,
                                   "--redis",       redis_url,
                                   "--from",        "0",
                                   "--to",          std::to_string(to),
                                   "--range-size",  flags.range_size,
                                   "--workers",     flags.workers,
                                   "--lease-ttl",   flags.lease_ttl_ms,
                                   "--rpc-timeout", flags.rpc_timeout_ms,
                                   "--progress",    "off",
                                   "--log-level",   flags.log_level};
  args.insert(args.end(), flags.extra.begin(), flags.extra.end());
  return args;
}

// Runs a program (normally GaplessBinary()); returns its pid (testing/child_process.h).
inline pid_t Spawn(const std::vector<std::string>& args, const std::string& log = "",
                   const std::vector<std::string>& env = {}) {
  return SpawnChild(args, log, env);
}

// Runs a program to completion and returns its exit code (-1 if killed by a signal) and stdout;
// stderr is left alone.
inline std::pair<int, std::string> RunForOutput(const std::vector<std::string>& args) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, ""};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The process state letter of /proc/PID/stat ('T' = stopped by a signal), or 0 if unreadable.
inline char ProcessState(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : 0;
}

// The gapless binary keys Redis by the real chain id and the database's id: clear every namespace
// of the chain that earlier tests left behind (they only cost memory, since every test has a
// database, and so a namespace, of its own; this keeps the test Redis small).
inline void ClearChainKeys(const std::string& redis_url, uint64_t chain_id) {
  auto redis = RedisConn::Connect(redis_url);
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  const std::string pattern = "gapless:{chain-" + std::to_string(chain_id) + "[-}]*";
  std::string cursor = "0";
  do {
    auto page = (*redis)->Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    ASSERT_TRUE(page.ok());
    cursor = page->elements[0].str;
    for (const auto& key : page->elements[1].elements) {
      ASSERT_TRUE((*redis)->Command({"DEL", key.str}).ok());
    }
  } while (cursor != "0");
}

// The coordination keys the gapless binary uses for this database.
inline Keys FleetKeys(PgPool* pool, uint64_t chain_id) {
  auto conn = pool->Acquire();
  auto id = EnsureDatabaseId(*conn);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return Keys(static_cast<int64_t>(chain_id), id.ok() ? *id : "");
}

inline int64_t CommittedRangeCount(PgPool* pool) {
  auto conn = pool->Acquire();
  auto r = conn->Query("SELECT count(*) FROM indexed_ranges");
  return r.ok() ? r->GetInt64(0, 0).value() : -1;
}

// A private anvil (GAPLESS_ANVIL) for a test that changes its chain (the shared devnet must not
// re-org under other tests): `blocks` blocks mined in steps of `every`, with three value transfers
// (each mined in a block of its own by anvil's automine) before each step. Killed with the object.
struct PrivateChain {
  pid_t pid = -1;
  std::string url;
  DevnetManifest manifest;
  ~PrivateChain() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      WaitForExit(pid, 10);
    }
  }
  Devnet devnet() const { return Devnet{url, &manifest}; }
};

// nullptr when GAPLESS_ANVIL is not set. `log` names the anvil's log in the test's temp dir.
inline std::unique_ptr<PrivateChain> StartPrivateChain(uint64_t blocks, uint64_t every = 100,
                                                       const std::string& log = "private-anvil") {
  const char* anvil = std::getenv("GAPLESS_ANVIL");
  if (anvil == nullptr || *anvil == 0) return nullptr;
  auto chain = std::make_unique<PrivateChain>();
  const int port = FreePort();
  chain->url = "http://127.0.0.1:" + std::to_string(port);
  chain->pid = Spawn({anvil, "--port", std::to_string(port), "--silent"},
                     ::testing::TempDir() + log + ".log");
  auto rpc = ClientsFor(chain->url)();
  EXPECT_TRUE(testing_util::WaitFor([&] { return rpc->ChainId().ok(); }, 30'000));
  auto accounts = rpc->Call("eth_accounts", "[]");
  EXPECT_TRUE(accounts.ok());
  const std::string from = accounts->substr(accounts->find("0x"), 42);
  const std::string to = accounts->substr(accounts->find("0x", accounts->find("0x") + 42), 42);
  for (uint64_t mined = 0; mined < blocks; mined += every) {
    for (int i = 0; i < 3; ++i) {
      auto sent = rpc->Call("eth_sendTransaction",
                            R"([{"from":")" + from + R"(","to":")" + to + R"(","value":"0x1"}])");
      EXPECT_TRUE(sent.ok()) << sent.status().ToString();
    }
    auto mine = rpc->Call("anvil_mine", "[\"" + HexQuantity(every) + "\"]");
    EXPECT_TRUE(mine.ok()) << mine.status().ToString();
  }
  chain->manifest.chain_id = 31337;
  chain->manifest.last_block = blocks;
  return chain;
}

}  // namespace gapless::e2e
