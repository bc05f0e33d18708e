// End-to-end against a real anvil devnet (started by the CTest fixture `anvil`, with traffic of
// every transaction type and all three token standards) and a real PostgreSQL:
//  - every indexed row equals what the node answers, and the token transfers equal what the
//    traffic generator sent (its manifest);
//  - writing the same blocks again (both write modes) leaves every table's checksum unchanged;
//  - the gapless binary killed with SIGKILL mid-run, several times, then rerun: no gap, no
//    duplicate, and rows identical to a clean run.
//  - the fleet as processes: SIGKILLed at random (leader included), a Redis restarted without
//    persistence, the fleet-wide rate limit measured at the node, a worker SIGSTOPped past its
//    lease and fenced off when resumed, and `run --follow` tracking head minus confirmations.
// The 2,000-block chaos test is chaos_itest.cc, on a devnet of its own.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "devnet_util.h"
#include "store/partition_indexes.h"
#include "store/partitions.h"
#include "store/state.h"
#include "testing/http_test_server.h"

namespace gapless::e2e {
namespace {

const std::string kAnvilUrl = GAPLESS_TEST_ANVIL_URL;
const std::string kManifest = GAPLESS_TEST_DEVNET_MANIFEST;
const Devnet& TheDevnet() {
  static const Devnet devnet = OpenDevnet(kAnvilUrl, kManifest);
  return devnet;
}

using DevnetTest = DbTest;
using DevnetTestWithRedis = DbRedisTest;

std::string Hex(std::string_view column) {
  return "'0x' || encode(" + std::string(column) + ", 'hex')";
}

TEST_F(DevnetTest, IndexedRowsEqualWhatTheNodeSays) {
  const Devnet& devnet = TheDevnet();
  Status st = IndexDevnet(devnet, pool_.get(), devnet.last_block());
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto conn = pool_->Acquire();

  JsonRpcClient rpc(std::make_unique<CurlTransport>(kAnvilUrl));
  simdjson::dom::parser parser;
  uint64_t txs_seen = 0, logs_seen = 0;
  for (uint64_t n = 0; n <= devnet.last_block(); ++n) {
    SCOPED_TRACE("block " + std::to_string(n));
    auto block_json =
        rpc.Call("eth_getBlockByNumber", "[\"" + U256(n).ToHexQuantity() + "\",true]");
    auto receipts_json = rpc.Call("eth_getBlockReceipts", "[\"" + U256(n).ToHexQuantity() + "\"]");
    ASSERT_TRUE(block_json.ok() && receipts_json.ok());
    simdjson::dom::element block = parser.parse(*block_json);
    auto row = conn->Query("SELECT " + Hex("hash") + ", " + Hex("parent_hash") + ", " +
                               Hex("miner") + ", gas_used, gas_limit, timestamp, " +
                               "transaction_count, base_fee_per_gas::text, size " +
                               "FROM blocks WHERE number = $1",
                           {std::to_string(n)});
    ASSERT_TRUE(row.ok()) << row.status().ToString();
    ASSERT_EQ(row->rows(), 1);
    EXPECT_EQ(row->Get(0, 0), Str(block["hash"]));
    EXPECT_EQ(row->Get(0, 1), Str(block["parentHash"]));
    EXPECT_EQ(row->Get(0, 2), Str(block["miner"]));
    EXPECT_EQ(U256::FromDecimal(row->Get(0, 3)), U256::FromHexQuantity(Str(block["gasUsed"])));
    EXPECT_EQ(U256::FromDecimal(row->Get(0, 4)), U256::FromHexQuantity(Str(block["gasLimit"])));
    EXPECT_EQ(U256::FromDecimal(row->Get(0, 5)), U256::FromHexQuantity(Str(block["timestamp"])));
    EXPECT_EQ(U256::FromDecimal(row->Get(0, 7)),
              U256::FromHexQuantity(Str(block["baseFeePerGas"])));
    EXPECT_EQ(U256::FromDecimal(row->Get(0, 8)), U256::FromHexQuantity(Str(block["size"])));
    simdjson::dom::array txs = block["transactions"];
    EXPECT_EQ(row->Get(0, 6), std::to_string(txs.size()));

    simdjson::dom::parser receipt_parser;
    simdjson::dom::array receipts = receipt_parser.parse(*receipts_json);
    ASSERT_EQ(receipts.size(), txs.size());
    auto tx_rows = conn->Query(
        "SELECT " + Hex("hash") + ", " + Hex("from_address") + ", coalesce(" + Hex("to_address") +
            ", ''), value::text, nonce, transaction_type, gas, status, gas_used, " + "coalesce(" +
            Hex("contract_address") + ", ''), effective_gas_price::text, " +
            "cumulative_gas_used, log_count, " + Hex("input") +
            " FROM transactions WHERE block_number = $1 ORDER BY transaction_index",
        {std::to_string(n)});
    ASSERT_TRUE(tx_rows.ok()) << tx_rows.status().ToString();
    ASSERT_EQ(static_cast<size_t>(tx_rows->rows()), txs.size());
    size_t i = 0;
    for (simdjson::dom::element tx : txs) {
      simdjson::dom::element receipt = receipts.at(i);
      int r = static_cast<int>(i++);
      SCOPED_TRACE("tx " + Str(tx["hash"]));
      EXPECT_EQ(tx_rows->Get(r, 0), Str(tx["hash"]));
      EXPECT_EQ(tx_rows->Get(r, 1), Str(tx["from"]));
      EXPECT_EQ(tx_rows->Get(r, 2), Str(tx["to"]));
      EXPECT_EQ(U256::FromDecimal(tx_rows->Get(r, 3)), U256::FromHexQuantity(Str(tx["value"])));
      EXPECT_EQ(U256::FromDecimal(tx_rows->Get(r, 4)), U256::FromHexQuantity(Str(tx["nonce"])));
      EXPECT_EQ(U256::FromDecimal(tx_rows->Get(r, 5)), U256::FromHexQuantity(Str(tx["type"])));
      EXPECT_EQ(U256::FromDecimal(tx_rows->Get(r, 6)), U256::FromHexQuantity(Str(tx["gas"])));
      EXPECT_EQ(tx_rows->Get(r, 13), Str(tx["input"]));
      EXPECT_EQ(U256::FromDecimal(tx_rows->Get(r, 7)),
                U256::FromHexQuantity(Str(receipt["status"])));
      EXPECT_EQ(U256::FromDecimal(tx_rows->Get(r, 8)),
                U256::FromHexQuantity(Str(receipt["gasUsed"])));
      EXPECT_EQ(tx_rows->Get(r, 9), Str(receipt["contractAddress"]));
      EXPECT_EQ(U256::FromDecimal(tx_rows->Get(r, 10)),
                U256::FromHexQuantity(Str(receipt["effectiveGasPrice"])));
      EXPECT_EQ(U256::FromDecimal(tx_rows->Get(r, 11)),
                U256::FromHexQuantity(Str(receipt["cumulativeGasUsed"])));
      simdjson::dom::array logs = receipt["logs"];
      EXPECT_EQ(tx_rows->Get(r, 12), std::to_string(logs.size()));
      ++txs_seen;
      for (simdjson::dom::element log : logs) {
        auto log_row = conn->Query(
            "SELECT " + Hex("address") + ", " + Hex("data") + ", concat_ws(',', " + Hex("topic0") +
                ", " + Hex("topic1") + ", " + Hex("topic2") + ", " + Hex("topic3") + "), " +
                Hex("transaction_hash") + " FROM logs WHERE block_number = $1 AND log_index = $2",
            {std::to_string(n), U256::FromHexQuantity(Str(log["logIndex"]))->ToDecimal()});
        ASSERT_TRUE(log_row.ok()) << log_row.status().ToString();
        ASSERT_EQ(log_row->rows(), 1);
        EXPECT_EQ(log_row->Get(0, 0), Str(log["address"]));
        EXPECT_EQ(log_row->Get(0, 1), Str(log["data"]));
        std::string topics;
        for (simdjson::dom::element t : log["topics"].get_array()) {
          topics += (topics.empty() ? "" : ",") + Str(t);
        }
        EXPECT_EQ(log_row->Get(0, 2), topics);
        EXPECT_EQ(log_row->Get(0, 3), Str(tx["hash"]));
        ++logs_seen;
      }
    }
  }
  auto counts = conn->Query(
      "SELECT (SELECT count(*) FROM transactions), (SELECT count(*) FROM logs),"
      " (SELECT count(*) FROM transactions WHERE status = 0)");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->Get(0, 0), std::to_string(txs_seen));
  EXPECT_EQ(counts->Get(0, 1), std::to_string(logs_seen));
  EXPECT_EQ(counts->Get(0, 2), std::to_string(devnet.manifest->failed));
  EXPECT_GT(txs_seen, 500u);

  // Token transfers: exactly the ones the traffic generator sent, every field.
  std::map<std::tuple<std::string, uint64_t, uint64_t>, std::string> indexed;
  auto rows = conn->Query(
      "SELECT " + Hex("transaction_hash") + ", log_index, batch_index, " +
      "CASE token_standard WHEN 20 THEN 'erc20' WHEN 721 THEN 'erc721' ELSE 'erc1155' END, " +
      Hex("token_address") + ", " + Hex("from_address") + ", " + Hex("to_address") +
      ", coalesce(token_id::text, ''), value::text FROM token_transfers");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  for (int r = 0; r < rows->rows(); ++r) {
    indexed[{std::string(rows->Get(r, 0)), std::stoull(std::string(rows->Get(r, 1))),
             std::stoull(std::string(rows->Get(r, 2)))}] =
        std::string(rows->Get(r, 3)) + " " + std::string(rows->Get(r, 4)) + " " +
        std::string(rows->Get(r, 5)) + " " + std::string(rows->Get(r, 6)) + " " +
        std::string(rows->Get(r, 7)) + " " + std::string(rows->Get(r, 8));
  }
  EXPECT_EQ(indexed.size(), devnet.manifest->transfers.size());
  EXPECT_TRUE(indexed == devnet.manifest->transfers);
  for (const auto& [key, want] : devnet.manifest->transfers) {
    auto it = indexed.find(key);
    if (it == indexed.end()) {
      ADD_FAILURE() << "missing transfer " << std::get<0>(key) << " log " << std::get<1>(key);
    } else {
      EXPECT_EQ(it->second, want);
    }
  }

  auto report = Verify(*conn, 0, devnet.last_block());
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->Render();
}

TEST_F(DevnetTest, WritingTheSameBlocksAgainChangesNothing) {
  const Devnet& devnet = TheDevnet();
  ASSERT_TRUE(IndexDevnet(devnet, pool_.get(), devnet.last_block()).ok());
  auto before = Checksums(pool_.get(), devnet.last_block());
  ASSERT_EQ(before.size(), 7u);  // every data table (contracts, tokens)
  for (WriteMode mode : {WriteMode::kStagingUpsert, WriteMode::kReplaceRange}) {
    {
      // Forget that the ranges were committed, so the indexer writes every block again.
      auto conn = pool_->Acquire();
      ASSERT_TRUE(conn->Exec("DELETE FROM indexed_ranges").ok());
    }
    Status st = IndexDevnet(devnet, pool_.get(), devnet.last_block(), mode);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(Checksums(pool_.get(), devnet.last_block()), before);
  }
}

// `index --verify --verify-senders`: every devnet block (transaction types 0-4, blob and EIP-7702
// ones) proves against its own header and every sender recovers, through the binary; the rows
// equal an unverified run's. (Against anvil the blob blocks' transactionsRoot is skipped:
// verify/verify.h anvil_blob_sidecar_quirk, chosen from web3_clientVersion.)
TEST_F(DevnetTest, IndexWithVerifyProvesEveryBlockAgainstItsHeader) {
  const Devnet& devnet = TheDevnet();
  const std::string to = std::to_string(devnet.last_block());
  auto [code, out] = RunForOutput({GaplessBinary(), "index", "--rpc", kAnvilUrl, "--db", db_.url(),
                                   "--from", "0", "--to", to, "--verify", "--verify-senders",
                                   "--progress", "off", "--log-level", "warn"});
  ASSERT_EQ(code, 0) << out;
  ExpectEqualsACleanRun(devnet, pool_.get(), devnet.last_block());
}

// `index` over small partitions with --index-near-head 0: partitions are filled with their
// primary key alone, and the run ends only once every partition it wrote has its secondary
// indexes (node/index_builder.h); the rows equal a clean run's.
TEST_F(DevnetTest, IndexEndsWithEveryPartitionItWroteIndexed) {
  const Devnet& devnet = TheDevnet();
  const std::string to = std::to_string(devnet.last_block());
  auto [code, out] = RunForOutput({GaplessBinary(),
                                   "index",
                                   "--rpc",
                                   kAnvilUrl,
                                   "--db",
                                   db_.url(),
                                   "--from",
                                   "0",
                                   "--to",
                                   to,
                                   "--partition-blocks",
                                   "4",
                                   "--index-near-head",
                                   "0",
                                   "--range-size",
                                   "2",
                                   "--progress",
                                   "off",
                                   "--log-level",
                                   "info"});
  ASSERT_EQ(code, 0) << out;
  auto conn = pool_->Acquire();
  auto starts = PartitionStarts(*conn);
  ASSERT_TRUE(starts.ok()) << starts.status().ToString();
  EXPECT_EQ(starts->size(), devnet.last_block() / 4 + 1);
  auto missing = PartitionsMissingIndexes(*conn);
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_TRUE(missing->empty()) << missing->size() << " partitions lack indexes\n" << out;
  ExpectEqualsACleanRun(devnet, pool_.get(), devnet.last_block());
  // A bad value is refused, naming the flag.
  auto [bad, bad_out] =
      RunForOutput({"/bin/sh", "-c",
                    GaplessBinary() + " index --rpc " + kAnvilUrl + " --db '" + db_.url() +
                        "' --to " + to + " --index-near-head soon 2>&1"});
  EXPECT_EQ(bad, 2) << bad_out;
  EXPECT_NE(bad_out.find("--index-near-head soon"), std::string::npos) << bad_out;
}

TEST_F(DevnetTest, KilledWithSigkillMidRunThenRerunLeavesNoGapAndNoDuplicate) {
  const Devnet& devnet = TheDevnet();
  const std::string binary = GaplessBinary();
  const std::string to = std::to_string(devnet.last_block());
  std::vector<std::string> args = {
      binary,          "index", "--rpc",      kAnvilUrl, "--db",         db_.url(),
      "--from",        "0",     "--to",       to,        "--range-size", "2",
      "--concurrency", "2",     "--progress", "off",     "--log-level",  "warn"};
  int64_t total_ranges = static_cast<int64_t>(devnet.last_block() / 2 + 1);
  int kills = 0;
  for (int round = 0; round < 3; ++round) {
    int64_t start = CommittedRangeCount(pool_.get());
    pid_t pid = Spawn(args);
    ASSERT_GT(pid, 0);
    // Let it commit a few more ranges, then kill it without warning.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int status = 0;
    bool exited = false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        break;
      }
      if (CommittedRangeCount(pool_.get()) >= start + 8) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (!exited) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ++kills;
    }
    if (CommittedRangeCount(pool_.get()) >= total_ranges) break;
  }
  EXPECT_GE(kills, 1) << "the run finished before it could be killed";
  EXPECT_LT(CommittedRangeCount(pool_.get()), total_ranges);

  // Rerun to completion.
  ASSERT_EQ(WaitForExit(Spawn(args), 300), 0);
  EXPECT_EQ(WaitForExit(Spawn({binary, "verify", "--db", db_.url(), "--from", "0", "--to", to,
                               "--log-level", "warn"}),
                        60),
            0)
      << "gapless verify found gaps or duplicates";

  // Rows equal those of a clean run into another database.
  ExpectEqualsACleanRun(devnet, pool_.get(), devnet.last_block());
}

// Ctrl-C (SIGINT) mid-run: `gapless index` stops cleanly, keeps the committed ranges, says so and
// exits 130; the same command then finishes the job. A proxy slows the node down so the signal
// lands mid-run.
TEST_F(DevnetTest, InterruptedBySigintExits130AndTheSameCommandFinishes) {
  const Devnet& devnet = TheDevnet();
  std::mutex mu;
  CurlTransport upstream(kAnvilUrl);
  HttpTestServer slow_node([&](const HttpTestServer::Request& req) {
    std::lock_guard<std::mutex> lock(mu);
    auto r = upstream.Post(req.body);
    if (!r.ok()) return HttpTestServer::Response::Json(r.status().ToString(), 502);
    auto response = HttpTestServer::Response::Json(std::move(r->body), static_cast<int>(r->status));
    response.delay_ms = 100;
    return response;
  });
  const std::string binary = GaplessBinary();
  const std::string to = std::to_string(devnet.last_block());
  std::vector<std::string> args = {binary,          "index",   "--rpc",        slow_node.url(),
                                   "--db",          db_.url(), "--from",       "0",
                                   "--to",          to,        "--range-size", "2",
                                   "--concurrency", "2",       "--progress",   "off",
                                   "--log-level",   "info"};
  const std::string log = std::string(GAPLESS_BINARY_DIR) + "/devnet_itest_sigint.log";
  std::remove(log.c_str());
  pid_t pid = Spawn(args, log);
  ASSERT_GT(pid, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (CommittedRangeCount(pool_.get()) < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGINT);
  EXPECT_EQ(WaitForExit(pid, 30), 130) << ReadFile(log);
  EXPECT_NE(ReadFile(log).find("interrupted: committed ranges are kept"), std::string::npos)
      << ReadFile(log);
  int64_t total_ranges = static_cast<int64_t>(devnet.last_block() / 2 + 1);
  int64_t kept = CommittedRangeCount(pool_.get());
  EXPECT_GE(kept, 3);
  EXPECT_LT(kept, total_ranges) << "the run finished before the signal";

  args[3] = kAnvilUrl;  // full speed for the rest
  ASSERT_EQ(WaitForExit(Spawn(args, log), 300), 0) << ReadFile(log);
  EXPECT_EQ(CommittedRangeCount(pool_.get()), total_ranges);
  // index runs the leader's duties in process (node/duties.h): the frontier is persisted too.
  {
    auto conn = pool_->Acquire();
    EXPECT_EQ(LoadFrontier(*conn).value(), std::optional<uint64_t>(devnet.last_block() + 1));
  }
  EXPECT_EQ(WaitForExit(Spawn({binary, "verify", "--db", db_.url(), "--from", "0", "--to", to,
                               "--log-level", "warn"}),
                        60),
            0)
      << "gapless verify found gaps or duplicates";
}

TEST_F(DevnetTest, ARestartedDevnetWithTheSameChainIdIsRefused) {
  // The database was filled from another chain with the same chain id (e.g. before anvil
  // restarted).
  {
    auto conn = pool_->Acquire();
    ASSERT_TRUE(EnsureChainId(*conn, TheDevnet().chain_id()).ok());
    ASSERT_TRUE(EnsureGenesisHash(*conn, "0x" + std::string(64, 'e')).ok());
  }
  const std::string binary = GaplessBinary();
  std::string out_path = std::string(GAPLESS_BINARY_DIR) + "/devnet_itest_restarted.log";
  pid_t pid = fork();
  if (pid == 0) {
    FILE* out = freopen(out_path.c_str(), "w", stderr);
    (void)out;
    execl(binary.c_str(), binary.c_str(), "index", "--rpc", kAnvilUrl.c_str(), "--db",
          db_.url().c_str(), "--to", "latest", "--progress", "off", nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::string log = ReadFile(out_path);
  EXPECT_NE(log.find("different chain"), std::string::npos) << log;
  auto conn = pool_->Acquire();
  auto r = conn->Query("SELECT count(*) FROM blocks");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->GetInt64(0, 0).value(), 0) << "nothing may be written";
}

// The fleet as separate processes: `gapless run` (the seeder/janitor/frontier role and one worker)
// and three `gapless worker` processes, while the test SIGKILLs a random one of the four every
// 300 ms and restarts it. At the end every block is committed exactly once, the rows equal a clean
// single-process run, and the persisted frontier is the last block + 1.
TEST_F(DevnetTestWithRedis, FleetProcessesKilledAtRandomLeaveNoGapAndNoDuplicate) {
  const Devnet& devnet = TheDevnet();
  ClearChainKeys(redis_url_, devnet.chain_id());
  auto command = [&](const char* role) {
    return FleetCommand(role, devnet, db_.url(), redis_url_, devnet.last_block());
  };
  std::vector<std::vector<std::string>> commands = {command("run"), command("worker"),
                                                    command("worker"), command("worker")};
  std::vector<pid_t> pids;
  for (const auto& c : commands) pids.push_back(Spawn(c));

  std::mt19937 rng(12345);
  int kills = 0;
  int leader_status = -1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pids[0], &status, WNOHANG) == pids[0]) {
      if (WIFEXITED(status)) {
        leader_status = WEXITSTATUS(status);
        break;
      }
      pids[0] = Spawn(commands[0]);  // killed: restart it
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    size_t victim = rng() % pids.size();
    if (kill(pids[victim], SIGKILL) == 0) {
      waitpid(pids[victim], &status, 0);
      ++kills;
      pids[victim] = Spawn(commands[victim]);
    }
  }
  for (size_t i = 1; i < pids.size(); ++i) {
    kill(pids[i], SIGTERM);
    int status = 0;
    waitpid(pids[i], &status, 0);
  }
  if (leader_status < 0) {
    kill(pids[0], SIGKILL);
    waitpid(pids[0], nullptr, 0);
  }
  std::printf("fleet chaos: %d processes killed with SIGKILL and restarted\n", kills);
  ASSERT_EQ(leader_status, 0) << "the run did not finish (" << kills << " kills)";
  EXPECT_GE(kills, 3);

  auto conn = pool_->Acquire();
  auto report = Verify(*conn, 0, devnet.last_block());
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->Render();
  EXPECT_EQ(LoadFrontier(*conn).value(), std::optional<uint64_t>(devnet.last_block() + 1));

  ExpectEqualsACleanRun(devnet, pool_.get(), devnet.last_block());
}

// FLUSHALL, then a redis-server restarted without persistence, in the middle of one `gapless run`:
// each time every lease, the queue, the fencing counter and the lock are gone. The run must
// reconcile from PostgreSQL (a new term floors the counter above every recorded token and re-seeds
// the gaps) and finish with no gap, no token issued twice, and rows equal to a clean run.
TEST_F(DevnetTest, RedisFlushallAndRestartMidRunAreReconciled) {
  const Devnet& devnet = TheDevnet();
  const std::string redis_sh = std::string(GAPLESS_SOURCE_DIR) + "/scripts/redis.sh";
  const std::string env = "GAPLESS_RUN_DIR=" + std::string(GAPLESS_BINARY_DIR) +
                          "/run-redis-restart GAPLESS_REDIS_PORT=56479 ";
  ASSERT_EQ(std::system((env + redis_sh + " stop").c_str()), 0);
  ASSERT_EQ(std::system((env + redis_sh + " start").c_str()), 0);
  const std::string redis_url = "redis://127.0.0.1:56479";
  const std::string binary = GaplessBinary();
  // Rate-limited to 60 requests/s so the run lasts a few seconds.
  pid_t pid = Spawn({binary,         "run",     "--rpc",        kAnvilUrl,
                     "--db",         db_.url(), "--redis",      redis_url,
                     "--from",       "0",       "--to",         std::to_string(devnet.last_block()),
                     "--range-size", "2",       "--batch",      "1",
                     "--workers",    "2",       "--rate-limit", "60",
                     "--progress",   "off",     "--log-level",  "info"},
                    std::string(GAPLESS_BINARY_DIR) + "/devnet_itest_flushall.log");
  auto wait_for_ranges = [&](int64_t n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (CommittedRangeCount(pool_.get()) < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  // First FLUSHALL (this server is the test's own): every key gone, the server still up.
  wait_for_ranges(10);
  {
    auto redis = RedisConn::Connect(redis_url);
    ASSERT_TRUE(redis.ok()) << redis.status().ToString();
    ASSERT_TRUE((*redis)->Command({"FLUSHALL"}).ok());
  }
  int64_t at_flush = CommittedRangeCount(pool_.get());
  // Then a restart without persistence: every connection broken as well.
  wait_for_ranges(at_flush + 10);
  int64_t before_restart = CommittedRangeCount(pool_.get());
  ASSERT_EQ(std::system((env + redis_sh + " stop").c_str()), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(std::system((env + redis_sh + " start").c_str()), 0);
  int exit_code = WaitForExit(pid, 120);
  ASSERT_EQ(std::system((env + redis_sh + " stop").c_str()), 0);
  ASSERT_EQ(exit_code, 0) << "the run failed or did not finish within 120 s after the restart";
  EXPECT_GT(before_restart, at_flush) << "the run did not go on after FLUSHALL";
  EXPECT_LT(before_restart, static_cast<int64_t>(devnet.last_block() / 2))
      << "the restart came after the run was done";

  auto conn = pool_->Acquire();
  auto report = Verify(*conn, 0, devnet.last_block());
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->Render();
  auto tokens = conn->Query(
      "SELECT count(*), count(DISTINCT fence_token) FROM indexed_ranges WHERE fence_token IS NOT "
      "NULL");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(tokens->Get(0, 0), tokens->Get(0, 1)) << "a fencing token was issued twice";
  EXPECT_EQ(LoadFrontier(*conn).value(), std::optional<uint64_t>(devnet.last_block() + 1));

  ExpectEqualsACleanRun(devnet, pool_.get(), devnet.last_block());
}

// The fleet-wide rate limit, measured where it matters: at the node. A recording proxy in front of
// anvil logs when each block request arrives while `gapless run` indexes with 4 workers and
// --rate-limit 20; no sliding one-second window may hold more than 20 of them.
TEST_F(DevnetTestWithRedis, FleetRateLimitHoldsAtTheNode) {
  const Devnet& devnet = TheDevnet();
  ClearChainKeys(redis_url_, devnet.chain_id());
  std::mutex mu;
  CurlTransport upstream(kAnvilUrl);
  std::vector<int64_t> arrivals;
  HttpTestServer proxy([&](const HttpTestServer::Request& req) {
    std::lock_guard<std::mutex> lock(mu);
    if (req.body.find("eth_getBlockReceipts") != std::string::npos) {
      arrivals.push_back(req.arrival_micros);
    }
    auto r = upstream.Post(req.body);
    if (!r.ok()) return HttpTestServer::Response::Json(r.status().ToString(), 502);
    return HttpTestServer::Response::Json(std::move(r->body), static_cast<int>(r->status));
  });
  constexpr int kLimit = 20;
  const std::string binary = GaplessBinary();
  pid_t pid = Spawn({binary,         "run",     "--rpc",        proxy.url(),
                     "--db",         db_.url(), "--redis",      redis_url_,
                     "--from",       "0",       "--to",         std::to_string(devnet.last_block()),
                     "--range-size", "5",       "--batch",      "1",
                     "--workers",    "4",       "--rate-limit", std::to_string(kLimit),
                     "--progress",   "off",     "--log-level",  "info"},
                    std::string(GAPLESS_BINARY_DIR) + "/devnet_itest_flushall.log");
  ASSERT_EQ(WaitForExit(pid, 120), 0) << "the run failed or did not finish within 120 s";
  proxy.Stop();

  std::lock_guard<std::mutex> lock(mu);
  std::sort(arrivals.begin(), arrivals.end());
  ASSERT_GE(arrivals.size(), devnet.last_block() + 1) << "every block is fetched at least once";
  size_t most = 0;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    // Arrivals at the proxy trail their admissions by network and scheduling delay (up to a few
    // hundred ms in the sanitizer build on a loaded machine), so the window measured here is
    // shorter than the limiter's second: any D-bounded delay keeps L arrivals per (1 s - D).
    auto end = std::lower_bound(arrivals.begin() + static_cast<long>(i), arrivals.end(),
                                arrivals[i] + 800'000);
    most = std::max(most, static_cast<size_t>(end - (arrivals.begin() + static_cast<long>(i))));
  }
  std::printf("rate limit: %zu block requests, at most %zu in any 0.8 s window (limit %d/s)\n",
              arrivals.size(), most, kLimit);
  EXPECT_LE(most, static_cast<size_t>(kLimit));
  // And the limit is what slowed the run down: at 20/s it cannot be faster than this.
  double seconds = static_cast<double>(arrivals.back() - arrivals.front()) / 1e6;
  EXPECT_GE(seconds, static_cast<double>(arrivals.size()) / kLimit - 1.5);
}

// A worker process SIGSTOPped past its lease TTL, at the worst moment: after its last lease renewal
// and before its fenced write (the failpoint worker-stop-before-write makes it stop itself there,
// as a GC pause or an operator's SIGSTOP could). Meanwhile the janitor requeues its range and
// another worker commits it. Resumed with SIGCONT, the stopped worker goes on to write: the fence
// in PostgreSQL must refuse it, and nothing may be doubled.
TEST_F(DevnetTestWithRedis, AWorkerStoppedPastItsLeaseIsFencedOffWhenResumed) {
  const Devnet& devnet = TheDevnet();
  ClearChainKeys(redis_url_, devnet.chain_id());
  auto command = [&](const char* role) {
    return FleetCommand(role, devnet, db_.url(), redis_url_, devnet.last_block(),
                        {.range_size = "10", .lease_ttl_ms = "2000", .log_level = "info"});
  };
  // The worker that will stop first: it waits for work while the run starts.
  const std::string stopped_log = std::string(GAPLESS_BINARY_DIR) + "/devnet_itest_sigstop.log";
  std::remove(stopped_log.c_str());
  pid_t stopped =
      Spawn(command("worker"), stopped_log, {"GAPLESS_FAILPOINTS=worker-stop-before-write"});
  ASSERT_GT(stopped, 0);
  pid_t run =
      Spawn(command("run"), std::string(GAPLESS_BINARY_DIR) + "/devnet_itest_sigstop_run.log");
  ASSERT_GT(run, 0);

  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ProcessState(stopped) != 'T' && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(ProcessState(stopped), 'T') << "the worker never reached its write:\n"
                                        << ReadFile(stopped_log);
  // While it stands still its lease expires, the janitor requeues the range, and the run's own
  // worker commits it with a newer token; the run then finishes the whole range on its own.
  int run_exit = WaitForExit(run, 180);
  if (run_exit != 0) {
    kill(stopped, SIGKILL);
    waitpid(stopped, nullptr, 0);
  }
  ASSERT_EQ(run_exit, 0) << "the run did not finish without the stopped worker";

  // Resume it: it writes with its old token, which the fence must refuse.
  ASSERT_EQ(kill(stopped, SIGCONT), 0);
  std::string log;
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    log = ReadFile(stopped_log);
    if (log.find("lost, dropping it") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(stopped, SIGTERM);
  EXPECT_EQ(WaitForExit(stopped, 30), 130) << "a worker stopped by SIGTERM exits 130\n" << log;
  std::printf("resumed worker's log:\n%s", log.c_str());
  // "lease of task 10-19 (token 2) lost, dropping it: Aborted: ... stale fence token 2: the range
  // was already written with token 9"
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      log, m,
      std::regex(R"(lease of task (\d+)-(\d+) \(token (\d+)\) lost, dropping it: Aborted: .*)"
                 R"(stale fence token (\d+): the range was already written with token (\d+))")))
      << "the resumed worker's write was not refused by the fence:\n"
      << log;
  EXPECT_EQ(m[3], m[4]);
  EXPECT_GT(std::stoll(m[5]), std::stoll(m[4])) << "the refusing token must be newer";
  EXPECT_EQ(log.find("committed but not completed"), std::string::npos) << log;

  // The range holds the newer token, and nothing is doubled.
  auto conn = pool_->Acquire();
  auto recorded = conn->Query("SELECT fence_token FROM indexed_ranges WHERE from_block = $1",
                              {std::string(m[1])});
  ASSERT_TRUE(recorded.ok());
  ASSERT_EQ(recorded->rows(), 1);
  EXPECT_EQ(std::string(recorded->Get(0, 0)), std::string(m[5]));
  auto report = Verify(*conn, 0, devnet.last_block());
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->Render();
  ExpectEqualsACleanRun(devnet, pool_.get(), devnet.last_block());
}

// The head of the devnet, by eth_blockNumber.
uint64_t Head(JsonRpcClient& rpc) {
  auto answer = rpc.Call("eth_blockNumber", "[]");
  EXPECT_TRUE(answer.ok()) << answer.status().ToString();
  if (!answer.ok()) return 0;
  // The answer is a JSON string: "\"0x9f\"".
  auto n = U256::FromHexQuantity(answer->substr(1, answer->size() - 2));
  EXPECT_TRUE(n.has_value()) << *answer;
  return n.has_value() ? n->low64() : 0;
}

// Waits up to `seconds` for the persisted frontier to reach `want`; returns the last one seen.
uint64_t WaitForFrontier(PgPool* pool, uint64_t want, int seconds) {
  uint64_t seen = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    auto conn = pool->Acquire();
    auto frontier = LoadFrontier(*conn);
    if (frontier.ok() && frontier->has_value()) seen = **frontier;
    if (seen >= want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return seen;
}

// `gapless run --follow --to latest --confirmations 3`: the fleet indexes up to the head minus 3
// and no further, then follows new blocks as the chain grows, until stopped.
TEST_F(DevnetTestWithRedis, FollowModeTracksTheHeadMinusConfirmations) {
  const Devnet& devnet = TheDevnet();
  ClearChainKeys(redis_url_, devnet.chain_id());
  JsonRpcClient rpc(std::make_unique<CurlTransport>(kAnvilUrl));
  const uint64_t head = Head(rpc);
  ASSERT_GE(head, devnet.last_block());
  const std::string log = std::string(GAPLESS_BINARY_DIR) + "/devnet_itest_follow.log";
  std::remove(log.c_str());
  pid_t pid = Spawn({GaplessBinary(),
                     "run",
                     "--rpc",
                     kAnvilUrl,
                     "--db",
                     db_.url(),
                     "--redis",
                     redis_url_,
                     "--from",
                     "0",
                     "--to",
                     "latest",
                     "--follow",
                     "--confirmations",
                     "3",
                     "--range-size",
                     "5",
                     "--workers",
                     "2",
                     "--progress",
                     "off",
                     "--log-level",
                     "info"},
                    log);
  ASSERT_GT(pid, 0);

  // Up to head - 3: the frontier (the next block to index) reaches head - 2.
  uint64_t frontier = WaitForFrontier(pool_.get(), head - 2, 120);
  EXPECT_EQ(frontier, head - 2) << ReadFile(log);
  // ... and no further while the chain stands still.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto max_block = [&] {
    auto conn = pool_->Acquire();
    auto max = MaxBlock(*conn);
    return max.ok() && max->has_value() ? static_cast<int64_t>(**max) : int64_t{-1};
  };
  EXPECT_EQ(max_block(), static_cast<int64_t>(head - 3)) << "indexed inside the confirmations";

  // The chain grows by 12 blocks: the fleet follows.
  ASSERT_TRUE(rpc.Call("anvil_mine", "[\"0xc\"]").ok());
  frontier = WaitForFrontier(pool_.get(), head + 12 - 2, 120);
  EXPECT_EQ(frontier, head + 12 - 2) << ReadFile(log);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_EQ(max_block(), static_cast<int64_t>(head + 12 - 3));

  // Following ends only when stopped.
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), 0) << "a following run exited by itself";
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitForExit(pid, 30), 130) << ReadFile(log);

  auto conn = pool_->Acquire();
  auto report = Verify(*conn, 0, head + 12 - 3);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->Render();
  ExpectEqualsACleanRun(devnet, pool_.get(), head + 12 - 3);
}

// Two databases indexing the same chain through the same Redis: each has a coordination namespace
// of its own (store/state.h EnsureDatabaseId), so the second run is not confused by the first one's
// frontier, queue or fence counter, and both end complete.
TEST_F(DevnetTestWithRedis, TwoDatabasesOfOneChainShareARedisWithoutMixingUp) {
  const Devnet& devnet = TheDevnet();
  PgTestDb other_db;
  ASSERT_FALSE(other_db.failed()) << other_db.error().ToString();
  auto other_pool = OpenPool(other_db.url(), 2);
  ASSERT_NE(other_pool, nullptr);
  for (const std::string& url : {db_.url(), other_db.url()}) {
    SCOPED_TRACE(url);
    ASSERT_EQ(WaitForExit(Spawn(FleetCommand("run", devnet, url, redis_url_, devnet.last_block(),
                                             {.range_size = "10", .workers = "2"})),
                          120),
              0)
        << "gapless run did not finish";
  }
  for (PgPool* pool : {pool_.get(), other_pool.get()}) {
    auto conn = pool->Acquire();
    auto report = Verify(*conn, 0, devnet.last_block());
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->ok()) << report->Render();
    EXPECT_EQ(LoadFrontier(*conn).value(), std::optional<uint64_t>(devnet.last_block() + 1));
  }
  EXPECT_NE(FleetKeys(pool_.get(), devnet.chain_id()).prefix(),
            FleetKeys(other_pool.get(), devnet.chain_id()).prefix());
  EXPECT_EQ(DataChecksums(pool_.get(), 0, devnet.last_block()),
            DataChecksums(other_pool.get(), 0, devnet.last_block()));
}

// `gapless status` and `gapless dlq` against a live fleet: a range whose blocks the node answers
// with garbage ends in the DLQ; `dlq list` names it with its error, `status` shows the fleet (its
// frontier waiting below the range, the dead letter, the live workers), and after the node heals,
// `dlq retry` requeues it and the run completes.
TEST_F(DevnetTestWithRedis, StatusAndDlqShowTheFleetAndRetryCompletesIt) {
  const Devnet& devnet = TheDevnet();
  std::atomic<bool> healed{false};
  std::mutex mu;
  CurlTransport upstream(kAnvilUrl);
  HttpTestServer proxy([&](const HttpTestServer::Request& req) {
    // Block 40 with its transactions, as workers fetch it (the leader's head tracker asks for
    // headers alone, which this node serves well).
    if (!healed.load() && req.body.find("\"0x28\",true") != std::string::npos) {
      return HttpTestServer::Response::Json("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{tru");
    }
    std::lock_guard<std::mutex> lock(mu);
    auto r = upstream.Post(req.body);
    if (!r.ok()) return HttpTestServer::Response::Json(r.status().ToString(), 502);
    return HttpTestServer::Response::Json(std::move(r->body), static_cast<int>(r->status));
  });
  const Devnet through_proxy{proxy.url(), devnet.manifest};
  std::vector<std::string> run = FleetCommand("run", through_proxy, db_.url(), redis_url_,
                                              devnet.last_block(), {.range_size = "10"});
  // --dlq-wait: the run must still be waiting when the test retries the range, however loaded
  // the machine (30 s, the default, was not always enough in CI).
  run.insert(run.end(), {"--max-attempts", "2", "--batch", "10", "--dlq-wait", "600000"});
  const std::string log = std::string(GAPLESS_BINARY_DIR) + "/devnet_itest_dlq.log";
  std::remove(log.c_str());
  pid_t pid = Spawn(run, log);
  const std::vector<std::string> fleet = {"--db", db_.url(), "--redis", redis_url_};
  auto command = [&](std::vector<std::string> head) {
    head.insert(head.begin(), GaplessBinary());
    head.insert(head.end(), fleet.begin(), fleet.end());
    return head;
  };

  std::string dlq;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (dlq.find("40-49") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    dlq = RunForOutput(command({"dlq", "list"})).second;
  }
  std::printf("gapless dlq list:\n%s", dlq.c_str());
  EXPECT_NE(dlq.find("1 dead-lettered ranges"), std::string::npos) << dlq;
  EXPECT_NE(dlq.find("40-49"), std::string::npos) << dlq;
  EXPECT_NE(dlq.find("attempts 2"), std::string::npos) << dlq;
  EXPECT_NE(dlq.find("InvalidData"), std::string::npos) << dlq;

  // Everything but the dead range commits; the frontier waits at block 39.
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const int64_t ranges = static_cast<int64_t>(devnet.last_block() / 10 + 1);
  while (CommittedRangeCount(pool_.get()) < ranges - 1 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // a leader tick or two
  auto [status_exit, status] = RunForOutput(command({"status", "--rpc", kAnvilUrl}));
  std::printf("gapless status:\n%s", status.c_str());
  EXPECT_EQ(status_exit, 0);
  EXPECT_NE(status.find("frontier (PostgreSQL)  block 39 "), std::string::npos) << status;
  EXPECT_NE(status.find("0 pending, 0 processing, 1 dead-lettered"), std::string::npos) << status;
  EXPECT_NE(status.find("live workers (1)"), std::string::npos) << status;
  EXPECT_NE(status.find("chain head"), std::string::npos) << status;

  healed.store(true);
  auto [retry_exit, retried] = RunForOutput(command({"dlq", "retry", "40-49"}));
  EXPECT_EQ(retry_exit, 0) << retried;
  EXPECT_NE(retried.find("re-queued 40-49"), std::string::npos) << retried;
  EXPECT_EQ(WaitForExit(pid, 60), 0) << ReadFile(log);
  proxy.Stop();
  auto conn = pool_->Acquire();
  auto report = Verify(*conn, 0, devnet.last_block());
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->Render();
}

}  // namespace
}  // namespace gapless::e2e
