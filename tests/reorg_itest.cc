// Chain re-orgs while following the tip (issue 10), end to end: a private anvil (the shared devnet
// must not re-org under other tests), `gapless run --follow --to latest` plus two `gapless worker`
// processes, all real. Asserted, as a user of the database sees it:
//  - re-orgs of depth 1 and 5 (anvil_reorg, with other transactions in the new blocks), 30
//    (anvil_rollback, then a longer fork) and 3 (evm_revert to a snapshot, then another fork),
//    workers SIGKILLed across them: afterwards every stored block equals the node's canonical
//    chain hash by hash, no row of an orphaned block remains in any table, every re-org is
//    recorded, and `gapless verify --deep` (every stored block proven against its header) passes;
//  - a re-org deeper than --max-reorg-depth stops the run with an error naming the fork point and
//    the flag, and changes nothing;
//  - a worker paused (SIGSTOP) with the old fork's blocks in hand, across the re-org, and resumed
//    afterwards: nothing of the old fork lands.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "devnet_util.h"
#include "events/balances.h"
#include "node/head_tracker.h"
#include "testing/redis_server.h"
#include "testing/wait_for.h"

namespace gapless::e2e {
namespace {

using testing_util::WaitFor;

class ReorgTest : public DbRedisTest {
 protected:
  void SetUp() override {
    DbRedisTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ClearChainKeys(redis_url_, 31337);
    log_prefix_ = std::string(GAPLESS_BINARY_DIR) + "/reorg_itest-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-";
  }

  void TearDown() override {
    for (pid_t pid : pids_) {
      kill(pid, SIGCONT);
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }

  void StartChain(uint64_t blocks) {
    chain_ = StartPrivateChain(blocks, 5, "reorg-anvil");
    if (chain_ == nullptr) GTEST_SKIP() << "GAPLESS_ANVIL not set";
    rpc_ = ClientsFor(chain_->url)();
  }

  std::vector<std::string> Command(const std::string& role, const std::string& workers,
                                   std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {
        GaplessBinary(), role,       "--rpc",      chain_->url, "--db",        db_.url(),
        "--redis",       redis_url_, "--from",     "0",         "--to",        "latest",
        "--range-size",  "5",        "--workers",  workers,     "--lease-ttl", "3000",
        "--rpc-timeout", "2000",     "--progress", "off",       "--log-level", "info"};
    if (role != "worker") args.insert(args.end(), {"--follow", "--leader-ttl", "1500"});
    // Traces (and the contracts they show) re-org with their blocks too.
    args.push_back("--traces");
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  pid_t Start(const std::vector<std::string>& args, const std::string& log,
              const std::vector<std::string>& env = {}) {
    pid_t pid = Spawn(args, log_prefix_ + log, env);
    pids_.push_back(pid);
    return pid;
  }

  std::string Log(const std::string& name) { return ReadFile(log_prefix_ + name); }

  uint64_t Tip() {
    auto n = rpc_->BlockNumber();
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? *n : 0;
  }

  void Call(const std::string& method, const std::string& params) {
    auto r = rpc_->Call(method, params);
    ASSERT_TRUE(r.ok()) << method << ": " << r.status().ToString();
  }

  // Deploys a contract that emits an ERC-20 Transfer(caller, to, amount) log on every call, with
  // calldata (amount, to): token transfers in every block the test mines, so the rows of the
  // token_transfers table re-org too. Hand-assembled: CALLDATACOPY the amount to memory, LOG3 with
  // the Transfer topic, the caller and calldata[32..64].
  void DeployEmitter() {
    const std::string runtime =
        "6020600060003760203533"
        "7fddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
        "60206000a300";
    const std::string init = "603280600b6000396000f3";
    auto sent = rpc_->Call("eth_sendTransaction", R"([{"from":")" + Account(0) + R"(","data":"0x)" +
                                                      init + runtime + R"("}])");
    ASSERT_TRUE(sent.ok()) << sent.status().ToString();
    const std::string hash = sent->substr(1, sent->size() - 2);
    Result<std::string> receipt = std::string("null");
    ASSERT_TRUE(WaitFor(
        [&] {
          receipt = rpc_->Call("eth_getTransactionReceipt", "[\"" + hash + "\"]");
          return receipt.ok() && *receipt != "null";
        },
        10'000))
        << "the emitter's deployment was not mined";
    size_t at = receipt->find("\"contractAddress\":\"");
    ASSERT_NE(at, std::string::npos) << *receipt;
    emitter_ = receipt->substr(at + 19, 42);
  }

  std::string Account(int i) {
    auto accounts = rpc_->Call("eth_accounts", "[]");
    EXPECT_TRUE(accounts.ok());
    size_t at = 0;
    for (int k = 0; k <= i; ++k) at = accounts->find("0x", k == 0 ? 0 : at + 42);
    return accounts->substr(at, 42);
  }

  // A token transfer call to the emitter, as eth_sendTransaction and anvil_reorg take it.
  std::string TokenCall(uint64_t amount, int to_account) {
    char word[65];
    std::snprintf(word, sizeof word, "%064llx", static_cast<unsigned long long>(amount));
    return R"({"from":")" + Account(0) + R"(","to":")" + emitter_ + R"(","data":"0x)" + word +
           std::string(24, '0') + Account(to_account).substr(2) + R"("})";
  }

  // A value transfer as anvil_reorg takes it: {tx, block offset}.
  std::string Transfer(uint64_t value, uint64_t offset) {
    auto accounts = rpc_->Call("eth_accounts", "[]");
    EXPECT_TRUE(accounts.ok());
    const std::string from = accounts->substr(accounts->find("0x"), 42);
    const std::string to = accounts->substr(accounts->rfind("0x"), 42);
    return R"([{"from":")" + from + R"(","to":")" + to + R"(","value":")" + HexQuantity(value) +
           R"("},)" + std::to_string(offset) + "]";
  }

  // Stored block hashes by height.
  std::map<uint64_t, std::string> Stored() {
    std::map<uint64_t, std::string> out;
    auto conn = pool_->Acquire();
    auto r = conn->Query("SELECT number, '0x' || encode(hash, 'hex') FROM blocks ORDER BY number");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return out;
    for (int i = 0; i < r->rows(); ++i) {
      out[static_cast<uint64_t>(r->GetInt64(i, 0).value())] = std::string(r->Get(i, 1));
    }
    return out;
  }

  // Empty when the database holds exactly the node's chain 0..tip; else the first difference.
  std::string DifferenceFromChain(uint64_t tip) {
    auto headers = FetchHeaders(*rpc_, 0, tip);
    if (!headers.ok()) return headers.status().ToString();
    auto stored = Stored();
    for (const HeadEntry& h : *headers) {
      auto it = stored.find(h.height);
      if (it == stored.end()) return "block " + std::to_string(h.height) + " is not stored";
      if (it->second != h.hash) {
        return "block " + std::to_string(h.height) + " is " + it->second + ", the node has " +
               h.hash;
      }
    }
    if (stored.size() != headers->size()) {
      return "the database holds blocks above " + std::to_string(tip) + " (" +
             std::to_string(stored.rbegin()->first) + ")";
    }
    return "";
  }

  void ExpectFollowsChain(const std::string& when) {
    uint64_t tip = Tip();
    std::string difference = "not checked";
    EXPECT_TRUE(WaitFor(
        [&] {
          difference = DifferenceFromChain(tip);
          return difference.empty();
        },
        90'000))
        << when << ": " << difference << "\n"
        << Log("run.log").substr(Log("run.log").size() > 6000 ? Log("run.log").size() - 6000 : 0);
    // No row of an orphaned block anywhere: every transaction and log belongs to a stored block
    // with its hash.
    auto conn = pool_->Acquire();
    for (const char* table : {"transactions", "logs"}) {
      auto r = conn->Query(std::string("SELECT count(*) FROM ") + table +
                           " t WHERE NOT EXISTS (SELECT 1 FROM blocks b WHERE b.number = "
                           "t.block_number AND b.hash = t.block_hash)");
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->GetInt64(0, 0).value(), 0) << when << ": orphaned rows in " << table;
    }
    for (const char* table : {"token_transfers", "withdrawals"}) {
      auto r = conn->Query(std::string("SELECT count(*) FROM ") + table +
                           " t WHERE NOT EXISTS (SELECT 1 FROM blocks b WHERE b.number = "
                           "t.block_number)");
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->GetInt64(0, 0).value(), 0) << when << ": orphaned rows in " << table;
    }
    // Issue 18's tables: every trace and contract belongs to a stored transaction of its block,
    // every transaction has its top-level trace, and every token row's block shows the token.
    for (const auto& [what, sql] : std::vector<std::pair<std::string, std::string>>{
             {"traces of no stored transaction",
              "SELECT count(*) FROM traces t WHERE t.transaction_hash IS NOT NULL AND NOT EXISTS "
              "(SELECT 1 FROM transactions x WHERE x.hash = t.transaction_hash AND "
              "x.block_number = t.block_number)"},
             {"transactions without their top-level trace",
              "SELECT count(*) FROM transactions x WHERE NOT EXISTS (SELECT 1 FROM traces t WHERE "
              "t.transaction_hash = x.hash AND t.trace_address = '{}')"},
             {"contracts of no stored transaction",
              "SELECT count(*) FROM contracts c WHERE NOT EXISTS (SELECT 1 FROM transactions x "
              "WHERE x.hash = c.transaction_hash AND x.block_number = c.block_number)"},
             {"tokens whose block does not show them",
              "SELECT count(*) FROM tokens k WHERE NOT EXISTS (SELECT 1 FROM token_transfers x "
              "WHERE x.token_address = k.address AND x.block_number = k.block_number) AND NOT "
              "EXISTS (SELECT 1 FROM contracts c WHERE c.address = k.address AND "
              "c.block_number = k.block_number)"}}) {
      auto r = conn->Query(sql);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->GetInt64(0, 0).value(), 0) << when << ": " << what;
    }
  }

  // The re-orgs recorded: fork point -> depth.
  std::vector<std::pair<uint64_t, uint64_t>> Reorgs() {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    auto conn = pool_->Acquire();
    auto r = conn->Query("SELECT fork_point, depth FROM reorgs ORDER BY id");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return out;
    for (int i = 0; i < r->rows(); ++i) {
      out.emplace_back(r->GetInt64(i, 0).value(), r->GetInt64(i, 1).value());
    }
    return out;
  }

  bool Recorded(uint64_t fork_point, uint64_t min_depth) {
    for (const auto& [fork, depth] : Reorgs()) {
      if (fork == fork_point && depth >= min_depth) return true;
    }
    return false;
  }

  void ExpectTooDeepStops(bool shorter);

  std::unique_ptr<PrivateChain> chain_;
  std::unique_ptr<JsonRpcClient> rpc_;
  std::string emitter_;
  std::vector<pid_t> pids_;
  std::string log_prefix_;
};

TEST_F(ReorgTest, FollowingARe_orgingChainLeavesTheDatabaseEqualToTheCanonicalChain) {
  StartChain(5);
  if (IsSkipped()) return;
  // The emitter low in the chain: no re-org below reaches its deployment.
  DeployEmitter();
  for (uint64_t i = 1; i <= 3; ++i) Call("eth_sendTransaction", "[" + TokenCall(100 * i, 1) + "]");
  Call("anvil_mine", R"(["0x28"])");
  auto bus = RedisServer::Start();
  ASSERT_TRUE(bus.ok()) << bus.status().ToString();
  Start(Command("run", "1", {"--events", (*bus)->url()}), "run.log");
  pid_t w1 = Start(Command("worker", "1"), "workers.log");
  pid_t w2 = Start(Command("worker", "1"), "workers.log");
  ExpectFollowsChain("initial sync");

  // Depth 1: the tip replaced by a block with another transfer, then one more block.
  uint64_t tip = Tip();
  Call("anvil_reorg", "[1, [" + Transfer(7, 0) + ",[" + TokenCall(7, 2) + ",0]]]");
  Call("anvil_mine", R"(["0x1"])");
  ExpectFollowsChain("re-org of depth 1");
  EXPECT_TRUE(Recorded(tip - 1, 1)) << "no re-org recorded at block " << tip - 1;

  // Depth 5, with a worker killed before it and another during it.
  tip = Tip();
  kill(w1, SIGKILL);
  waitpid(w1, nullptr, 0);
  Call("anvil_reorg",
       "[5, [" + Transfer(8, 1) + "," + Transfer(9, 3) + ",[" + TokenCall(8, 3) + ",2]]]");
  kill(w2, SIGKILL);
  waitpid(w2, nullptr, 0);
  w1 = Start(Command("worker", "1"), "workers.log");
  Call("anvil_mine", R"(["0x2"])");
  w2 = Start(Command("worker", "1"), "workers.log");
  ExpectFollowsChain("re-org of depth 5");
  EXPECT_TRUE(Recorded(tip - 5, 5)) << "no re-org recorded at block " << tip - 5;

  // Depth 30: the chain rolled back 30 blocks, then a longer fork with a transfer of its own.
  tip = Tip();
  Call("anvil_rollback", "[30]");
  ASSERT_EQ(Tip(), tip - 30);
  auto accounts = rpc_->Call("eth_accounts", "[]");
  ASSERT_TRUE(accounts.ok());
  Call("eth_sendTransaction", R"([{"from":")" + accounts->substr(accounts->find("0x"), 42) +
                                  R"(","to":")" + accounts->substr(accounts->rfind("0x"), 42) +
                                  R"(","value":"0xb"}])");
  Call("eth_sendTransaction", "[" + TokenCall(30, 2) + "]");
  Call("anvil_mine", R"(["0x1e"])");
  ExpectFollowsChain("re-org of depth 30");
  EXPECT_TRUE(Recorded(tip - 30, 1)) << "no re-org recorded at block " << tip - 30;

  // evm_revert to a snapshot three blocks down, then another fork.
  auto snapshot = rpc_->Call("evm_snapshot", "[]");
  ASSERT_TRUE(snapshot.ok());
  const uint64_t at_snapshot = Tip();
  Call("anvil_mine", R"(["0x3"])");
  ExpectFollowsChain("before evm_revert");
  Call("evm_revert", "[" + *snapshot + "]");
  Call("eth_sendTransaction", R"([{"from":")" + accounts->substr(accounts->find("0x"), 42) +
                                  R"(","to":")" + accounts->substr(accounts->rfind("0x"), 42) +
                                  R"(","value":"0xc"}])");
  Call("anvil_mine", R"(["0x3"])");
  ExpectFollowsChain("evm_revert and another fork");
  EXPECT_TRUE(Recorded(at_snapshot, 1)) << "no re-org recorded at block " << at_snapshot;

  {
    // The token transfers re-orged too: the stored ones are exactly the canonical chain's.
    auto conn = pool_->Acquire();
    auto r = conn->Query("SELECT count(*) FROM token_transfers");
    ASSERT_TRUE(r.ok());
    EXPECT_GE(r->GetInt64(0, 0).value(), 4);
  }
  auto [code, out] = RunForOutput({GaplessBinary(), "verify", "--deep", "--db", db_.url()});
  EXPECT_EQ(code, 0) << out;
  // The events: one block.reverted per orphaned block, highest first within each re-org, and the
  // balances consumer over the whole stream ends equal to the canonical chain's transfers.
  auto events = RedisConn::Connect((*bus)->url());
  ASSERT_TRUE(events.ok());
  std::vector<uint64_t> reverted;
  ASSERT_TRUE(WaitFor(
      [&] {
        reverted.clear();
        auto entries = (*events)->Command({"XRANGE", "block.reverted.31337", "-", "+"});
        if (!entries.ok()) return false;
        for (const RedisReply& e : entries->elements) {
          for (const RedisReply& f : e.elements[1].elements) {
            size_t at = f.str.find("\"block_number\":");
            if (at != std::string::npos) reverted.push_back(std::stoull(f.str.substr(at + 15)));
          }
        }
        uint64_t depths = 0;
        for (const auto& [fork, depth] : Reorgs()) depths += depth;
        return reverted.size() == depths;
      },
      30'000))
      << reverted.size() << " block.reverted events";
  size_t runs = reverted.empty() ? 0 : 1;
  for (size_t i = 1; i < reverted.size(); ++i) runs += reverted[i] > reverted[i - 1] ? 1 : 0;
  size_t rolled_back = 0;
  for (const auto& [fork, depth] : Reorgs()) rolled_back += depth > 0 ? 1 : 0;
  EXPECT_EQ(runs, rolled_back) << "block.reverted not highest first within each re-org";
  pid_t consumer = Start(
      {GaplessBinary(), "consume", "balances", "--bus", (*bus)->url(), "--db", db_.url(), "--redis",
       redis_url_, "--chain-id", "31337", "--group", "balances", "--log-level", "warn"},
      "consumer.log");
  auto balances_differ = [&]() -> int64_t {
    auto conn = pool_->Acquire();
    auto check = CheckBalancesAgainstTransfers(*conn);
    return check.ok() ? check->differing : -1;
  };
  auto applied = [&]() -> int64_t {
    auto conn = pool_->Acquire();
    auto r = conn->Query("SELECT count(*) FROM applied_events WHERE reverted_at IS NULL");
    return r.ok() ? r->GetInt64(0, 0).value() : -1;
  };
  auto transfers = [&]() -> int64_t {
    auto conn = pool_->Acquire();
    auto r = conn->Query("SELECT count(*) FROM token_transfers");
    return r.ok() ? r->GetInt64(0, 0).value() : -2;
  };
  // Caught up: every stored transfer applied, and every block.reverted (each is recorded as an
  // applied event of its own).
  const int64_t done = static_cast<int64_t>(reverted.size());
  EXPECT_TRUE(
      WaitFor([&] { return applied() == transfers() + done && balances_differ() == 0; }, 60'000))
      << applied() << " events applied and not reverted, " << transfers() << " transfers stored, "
      << done << " block.reverted; " << balances_differ() << " balances differ from the aggregate\n"
      << Log("consumer.log");
  kill(consumer, SIGTERM);
  WaitForExit(consumer, 30);

  auto [status_code, status] =
      RunForOutput({GaplessBinary(), "status", "--db", db_.url(), "--redis", redis_url_});
  EXPECT_EQ(status_code, 0) << status;
  EXPECT_GE(rolled_back, 4u);
  EXPECT_NE(status.find("re-orgs rolled back    " + std::to_string(rolled_back)), std::string::npos)
      << status;
  EXPECT_NE(Log("run.log").find("re-org"), std::string::npos);
  // The checks above were not vacuous: the emitter's deployment and its token are stored.
  auto conn = pool_->Acquire();
  for (const char* table : {"traces", "contracts", "tokens"}) {
    auto r = conn->Query(std::string("SELECT count(*) FROM ") + table);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_GT(r->GetInt64(0, 0).value(), 0) << table;
  }
}

// A re-org more than 3 blocks deep, at the same height or to a shorter chain: the run under
// --max-reorg-depth 3 stops (exit 2) naming the bound and where the fork lies, and leaves the
// database as it was.
void ReorgTest::ExpectTooDeepStops(bool shorter) {
  StartChain(20);
  if (IsSkipped()) return;
  pid_t run = Start(Command("run", "2", {"--max-reorg-depth", "3"}), "run.log");
  ExpectFollowsChain("initial sync");
  const auto before = Stored();
  const uint64_t tip = Tip();
  if (shorter) {
    Call("anvil_rollback", "[6]");
    Call("anvil_mine", R"(["0x1"])");  // 5 blocks shorter, and different at its tip
  } else {
    Call("anvil_reorg", "[6, []]");
    Call("anvil_mine", R"(["0x1"])");
  }
  int code = WaitForExit(run, 60);
  EXPECT_EQ(code, 2) << "the run did not stop on a re-org deeper than the bound (exit 2)";
  const std::string log = Log("run.log");
  EXPECT_NE(log.find("--max-reorg-depth 3"), std::string::npos) << log;
  EXPECT_NE(log.find("fork point below " + std::to_string(tip - 3)), std::string::npos) << log;
  EXPECT_EQ(Stored(), before) << "the database changed";
  EXPECT_TRUE(Reorgs().empty());
}

TEST_F(ReorgTest, AReorgDeeperThanTheBoundStopsTheRunAndChangesNothing) {
  ExpectTooDeepStops(/*shorter=*/false);
}

TEST_F(ReorgTest, AShorterForkDeeperThanTheBoundStopsTheRunToo) {
  ExpectTooDeepStops(/*shorter=*/true);
}

// A worker stops itself (failpoint worker-stop-before-write) with the old fork's blocks 0..4 in
// hand and a long lease; the rest is indexed by another worker, which then dies; the chain re-orgs
// above block 2 and the leader rolls back. The paused worker resumes and writes: nothing stops it
// but the re-org fence (its range was never written by anyone else, and no stored neighbour shows
// the break), which refuses it; it claims the range again and indexes the new fork.
TEST_F(ReorgTest, AWorkerPausedAcrossTheReorgCannotCommitTheOldFork) {
  StartChain(30);
  if (IsSkipped()) return;
  Start(Command("leader", "0"), "run.log");
  pid_t late = Start(Command("worker", "1", {"--lease-ttl", "120000"}), "late.log",
                     {"GAPLESS_FAILPOINTS=worker-stop-before-write"});
  ASSERT_TRUE(WaitFor([&] { return ProcessState(late) == 'T'; }, 60'000))
      << "the worker never reached its write\n"
      << Log("late.log");
  const uint64_t tip = Tip();
  pid_t other = Start(Command("worker", "1"), "workers.log");
  ASSERT_TRUE(WaitFor([&] { return Stored().size() == tip + 1 - 5; }, 60'000))
      << Stored().size() << " blocks stored, expected all but the paused worker's 0..4";
  ASSERT_EQ(Stored().count(0), 0u);
  kill(other, SIGKILL);
  waitpid(other, nullptr, 0);

  Call("anvil_reorg", "[" + std::to_string(tip - 2) + ", [" + Transfer(5, 0) + "]]");
  Call("anvil_mine", R"(["0x1"])");
  ASSERT_TRUE(WaitFor([&] { return Recorded(2, tip - 4); }, 30'000))
      << "no rollback above block 2\n"
      << Log("run.log");
  kill(late, SIGCONT);
  ASSERT_TRUE(WaitFor(
      [&] { return Log("late.log").find("before the re-org above block 2") != std::string::npos; },
      30'000))
      << "the paused worker's write was not refused by the re-org fence\n"
      << Log("late.log");
  Start(Command("worker", "1"), "workers.log");
  ExpectFollowsChain("after the paused worker resumed");
}

}  // namespace
}  // namespace gapless::e2e
