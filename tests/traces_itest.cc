// `gapless index --traces` against the test devnet (anvil), both tracing APIs: trace_block
// directly, and debug_traceBlockByHash (callTracer) through a node that lacks trace_block. Every
// transaction gets its one top-level trace (checked against it before the write), both APIs give
// the same rows apart from the columns the tracers define differently (gas, gas_used, output),
// and `gapless export --table traces` writes them in ethereum-etl's format. Against the devnet's
// manifest (devnet/traffic.js: forwarders, a CREATE/CREATE2 factory, self-destructs, reverted
// inner calls, odd tokens): every internal value transfer is a trace, every contract created is
// in `contracts` (factory-made ones with --traces only), every token in `tokens` with its NULLs.
// A trace_block answer of another fork's block at the same height is refused by its blockHash
// and fetched again (issue 35 item 3).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "devnet_util.h"
#include "fake_node.h"
#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "store/pg.h"
#include "store/queries.h"
#include "testing/devnet_manifest.h"
#include "testing/pg_test_db.h"

namespace gapless::e2e {
namespace {

// The rows both tracers define alike, one text line per trace, in order.
std::string ComparableRows(PgConn& conn) {
  auto r = conn.Query(
      "SELECT string_agg(concat_ws('|', block_number, encode(transaction_hash, 'hex'),"
      " transaction_index, encode(from_address, 'hex'), encode(to_address, 'hex'), value,"
      " encode(input, 'hex'), trace_type, call_type, subtraces, trace_address::text,"
      " error IS NULL, status, trace_id), E'\\n' ORDER BY block_number, trace_index) FROM traces");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::string(r->Get(0, 0)) : "";
}

std::vector<std::string> Rows(PgConn& conn, const std::string& sql) {
  std::vector<std::string> out;
  auto r = conn.Query(sql);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return out;
  for (int i = 0; i < r->rows(); ++i) out.emplace_back(r->Get(i, 0));
  std::sort(out.begin(), out.end());
  return out;
}

// The devnet's internal value transfers, contracts and tokens, as the manifest says, in the rows
// of the database `conn` indexed (with or without --traces).
void ExpectTheDevnetsContractsAndTokens(PgConn& conn, bool traces) {
  auto loaded = LoadDevnetManifest(GAPLESS_TEST_DEVNET_MANIFEST);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const DevnetManifest& m = **loaded;
  ASSERT_FALSE(m.internal_transfers.empty());
  if (traces) {
    // Every frame below the top that carried value: moved (status 1) or not (a reverted frame or
    // one below it: status 0).
    for (bool reverted : {false, true}) {
      std::vector<std::string> expected;
      for (const auto& t : m.internal_transfers) {
        if (t.reverted == reverted) {
          expected.push_back(t.tx_hash + " " + t.from + " " + t.to + " " + t.value);
        }
      }
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(Rows(conn,
                     "SELECT concat_ws(' ', '0x' || encode(transaction_hash, 'hex'), '0x' || "
                     "encode(from_address, 'hex'), '0x' || encode(to_address, 'hex'), value)"
                     " FROM traces WHERE trace_address <> '{}' AND value > 0 AND status = " +
                         std::string(reverted ? "0" : "1")),
                expected)
          << (reverted ? "reverted" : "moved") << " internal transfers";
    }
  }
  // Contracts: every creation with traces; the deployment transactions' alone without.
  std::vector<std::string> expected;
  for (const auto& c : m.created_contracts) {
    if (!traces && c.via != "transaction") continue;
    expected.push_back(c.address + " " + std::to_string(c.block) + " " + c.tx_hash + " " +
                       c.creator + " " + (c.via == "transaction" ? "create" : c.via));
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Rows(conn,
                 "SELECT concat_ws(' ', '0x' || encode(address, 'hex'), block_number, '0x' || "
                 "encode(transaction_hash, 'hex'), '0x' || encode(creator_address, 'hex'), "
                 "creation_type) FROM contracts"),
            expected);
  // Deployed code known for every one (the trace's output, or eth_getCode at its block).
  EXPECT_EQ(QueryCount(conn, "SELECT count(*) FROM contracts WHERE bytecode IS NULL"), 0);
  // Tokens, with NULL where a method is missing or reverts; bytes32 names decoded.
  ASSERT_FALSE(m.tokens.empty());
  std::vector<std::string> tokens;
  for (const auto& [address, t] : m.tokens) {
    tokens.push_back(address + " " + t.standard + " " + t.name.value_or("NULL") + " " +
                     t.symbol.value_or("NULL") + " " +
                     (t.decimals.has_value() ? std::to_string(*t.decimals) : "NULL"));
  }
  std::sort(tokens.begin(), tokens.end());
  EXPECT_EQ(Rows(conn,
                 "SELECT concat_ws(' ', '0x' || encode(address, 'hex'), standard, "
                 "coalesce(name, 'NULL'), coalesce(symbol, 'NULL'), coalesce(decimals::text, "
                 "'NULL')) FROM tokens"),
            tokens);
}

class TracesTest : public DbTest {};

TEST_F(TracesTest, BothTracingApisGiveTheSameCheckedRows) {
  JsonRpcClient rpc(std::make_unique<CurlTransport>(GAPLESS_TEST_ANVIL_URL));
  auto head = rpc.BlockNumber();
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  const std::string to = std::to_string(*head);

  // trace_block, from anvil itself.
  auto [code, out] = RunAll({"index", "--rpc", GAPLESS_TEST_ANVIL_URL, "--db", db_.url(), "--from",
                             "0", "--to", to, "--traces", "--progress", "off"},
                            120'000);
  ASSERT_EQ(code, 0) << out;
  auto conn = PgConn::Connect(db_.url());
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  const int64_t transactions = QueryCount(**conn, "SELECT count(*) FROM transactions");
  ASSERT_GT(transactions, 0);
  // One top-level trace per transaction, agreeing with it (the rest was checked before the write).
  EXPECT_EQ(QueryCount(**conn,
                       "SELECT count(*) FROM traces WHERE trace_address = '{}' AND "
                       "transaction_hash IS NOT NULL"),
            transactions);
  EXPECT_EQ(QueryCount(**conn,
                       "SELECT count(*) FROM transactions x LEFT JOIN traces t ON "
                       "t.transaction_hash = x.hash AND t.trace_address = '{}' WHERE "
                       "t.from_address IS DISTINCT FROM x.from_address OR t.value IS DISTINCT "
                       "FROM x.value OR (t.error IS NULL) IS DISTINCT FROM (x.status = 1)"),
            0);
  // A failed transaction's trace and every trace below it have status 0.
  EXPECT_EQ(QueryCount(**conn,
                       "SELECT count(*) FROM traces t JOIN traces p ON p.transaction_hash = "
                       "t.transaction_hash AND p.trace_address = '{}' WHERE p.status = 0 AND "
                       "t.status <> 0"),
            0);
  const std::string from_trace_block = ComparableRows(**conn);
  ExpectTheDevnetsContractsAndTokens(**conn, /*traces=*/true);

  // debug_traceBlockByHash, through a node without trace_block.
  PgTestDb second;
  ASSERT_FALSE(second.failed()) << second.error().ToString();
  FakeNode node;
  node.Set(FakeNode::Mode::kProxyWithoutTraceBlock);
  auto [code2, out2] =
      RunAll({"index", "--rpc", node.SecretUrl(), "--db", second.url(), "--from", "0", "--to", to,
              "--traces", "--progress", "off", "--log-level", "info"},
             120'000);
  ASSERT_EQ(code2, 0) << out2;
  EXPECT_NE(out2.find("does not serve trace_block"), std::string::npos) << out2;
  // Asked by the block's hash, so an answer is of that very block (issue 35 item 3).
  const std::vector<std::string> methods = node.methods();
  EXPECT_NE(std::find(methods.begin(), methods.end(), "debug_traceBlockByHash"), methods.end());
  EXPECT_EQ(std::find(methods.begin(), methods.end(), "debug_traceBlockByNumber"), methods.end());
  auto conn2 = PgConn::Connect(second.url());
  ASSERT_TRUE(conn2.ok()) << conn2.status().ToString();
  EXPECT_EQ(QueryCount(**conn2, "SELECT count(*) FROM traces WHERE trace_type = 'reward'"), 0);
  // The same rows, rewards aside (only trace_block reports them).
  auto no_rewards = (*conn)->Exec("DELETE FROM traces WHERE trace_type = 'reward'");
  ASSERT_TRUE(no_rewards.ok()) << no_rewards.ToString();
  EXPECT_EQ(ComparableRows(**conn2), ComparableRows(**conn));
  EXPECT_FALSE(from_trace_block.empty());
  ExpectTheDevnetsContractsAndTokens(**conn2, /*traces=*/true);

  // Exported in ethereum-etl's columns, one line per trace.
  auto [exported, csv] = RunForOutput({GaplessBinary(), "export", "--db", second.url(), "--table",
                                       "traces", "--from", "0", "--to", to});
  ASSERT_EQ(exported, 0) << csv;
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "block_number,transaction_hash,transaction_index,from_address,to_address,value,"
            "input,output,trace_type,call_type,reward_type,gas,gas_used,subtraces,trace_address,"
            "error,status,trace_id");
  EXPECT_EQ(static_cast<int64_t>(std::count(csv.begin(), csv.end(), '\n')) - 1,
            QueryCount(**conn2, "SELECT count(*) FROM traces"));
}

// Every row of the tables traces fill (traces, contracts), in order, one text line each.
std::string TraceTables(PgConn& conn) {
  std::string out;
  for (const char* sql :
       {"SELECT string_agg(t::text, E'\\n' ORDER BY block_number, trace_index) FROM traces t",
        "SELECT string_agg((to_jsonb(c) - 'bytecode')::text, E'\\n' ORDER BY address) FROM "
        "contracts c",
        "SELECT count(*)::text FROM traces WHERE trace_address <> '{}' AND value > 0"}) {
    auto r = conn.Query(sql);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) out += std::string(r->Get(0, 0)) + "\n--\n";
  }
  return out;
}

// Issue 35 item 3: trace_block is asked by number, so its answer can be another fork's block at
// that height (another backend behind the URL, or a re-org between the block and its traces):
// the same top-level frames, which the checks against the block accept, with an internal call
// and a blockHash of its own. It is refused by its hash and fetched again: the rows equal a run
// that never met it, without the other fork's internal call.
TEST_F(TracesTest, TracesOfAnotherForksBlockAreRefusedAndFetchedAgain) {
  JsonRpcClient rpc(std::make_unique<CurlTransport>(GAPLESS_TEST_ANVIL_URL));
  auto head = rpc.BlockNumber();
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  const std::string to = std::to_string(std::min<uint64_t>(*head, 60));

  auto [clean_code, clean_out] =
      RunAll({"index", "--rpc", GAPLESS_TEST_ANVIL_URL, "--db", db_.url(), "--from", "0", "--to",
              to, "--traces", "--progress", "off"},
             120'000);
  ASSERT_EQ(clean_code, 0) << clean_out;
  auto clean = PgConn::Connect(db_.url());
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  const std::string expected = TraceTables(**clean);
  ASSERT_GT(QueryCount(**clean, "SELECT count(*) FROM traces"), 0);

  PgTestDb forked_db;
  ASSERT_FALSE(forked_db.failed()) << forked_db.error().ToString();
  FakeNode node;
  node.Set(FakeNode::Mode::kProxyOtherForkTracesOnce);
  auto [code, out] = RunAll({"index", "--rpc", node.SecretUrl(), "--db", forked_db.url(), "--from",
                             "0", "--to", to, "--traces", "--progress", "off"},
                            120'000);
  ASSERT_EQ(code, 0) << out;
  ASSERT_EQ(node.forked_answers(), 1) << "the other fork's traces were never served";
  EXPECT_NE(out.find(FakeNode::OtherForkHash()), std::string::npos)
      << "the refusal does not name the other fork's hash: " << out;
  auto conn = PgConn::Connect(forked_db.url());
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  EXPECT_EQ(QueryCount(**conn,
                       "SELECT count(*) FROM traces WHERE to_address = "
                       "'\\x00000000000000000000000000000000000e1e1e'"),
            0)
      << "the other fork's internal call was stored";
  EXPECT_EQ(TraceTables(**conn), expected);
}

// Without --traces: the deployment transactions' contracts (code from eth_getCode at their
// block) and every token; `gapless export` writes both tables in ethereum-etl's columns.
TEST_F(TracesTest, WithoutTracesContractsComeFromReceipts) {
  JsonRpcClient rpc(std::make_unique<CurlTransport>(GAPLESS_TEST_ANVIL_URL));
  auto head = rpc.BlockNumber();
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  const std::string to = std::to_string(*head);
  auto [code, out] = RunAll({"index", "--rpc", GAPLESS_TEST_ANVIL_URL, "--db", db_.url(), "--from",
                             "0", "--to", to, "--progress", "off"},
                            120'000);
  ASSERT_EQ(code, 0) << out;
  auto conn = PgConn::Connect(db_.url());
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  EXPECT_EQ(QueryCount(**conn, "SELECT count(*) FROM traces"), 0);
  ExpectTheDevnetsContractsAndTokens(**conn, /*traces=*/false);
  for (const char* table : {"contracts", "tokens"}) {
    auto [exported, csv] = RunForOutput({GaplessBinary(), "export", "--db", db_.url(), "--table",
                                         table, "--from", "0", "--to", to});
    ASSERT_EQ(exported, 0) << csv;
    EXPECT_EQ(static_cast<int64_t>(std::count(csv.begin(), csv.end(), '\n')) - 1,
              QueryCount(**conn, std::string("SELECT count(*) FROM ") + table))
        << table;
  }
}

// A node that serves neither tracing API: the run stops with an error that says so, and writes
// no block without its traces.
TEST_F(TracesTest, ANodeWithoutTracingIsRefusedWithAClearError) {
  FakeNode node;
  node.Set(FakeNode::Mode::kProxyWithoutTracing);
  auto [code, out] = RunAll({"index", "--rpc", node.SecretUrl(), "--db", db_.url(), "--from", "0",
                             "--to", "3", "--traces", "--progress", "off"},
                            60'000);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("serves neither trace_block nor debug_traceBlockByNumber"), std::string::npos)
      << out;
  auto conn = PgConn::Connect(db_.url());
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  EXPECT_EQ(QueryCount(**conn, "SELECT count(*) FROM blocks"), 0);
}

// Turning --traces on for a database indexed without it (issue 35): `index 0..mid`, then `index
// 0..head --traces` used to skip 0..mid as committed, leaving traces for mid+1..head only while
// verify said OK. Now the committed ranges that lack traces are written again with them (cut
// differently from the first run's ranges, so a longer recorded range is cut too): every table
// equals a --traces run from empty, a third run finds nothing to do, verify --deep is OK. A fleet
// is refused over such a database, naming the `index` run that backfills it.
TEST_F(TracesTest, TracesTurnedOnLaterAreBackfilled) {
  JsonRpcClient rpc(std::make_unique<CurlTransport>(GAPLESS_TEST_ANVIL_URL));
  auto head = rpc.BlockNumber();
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  ASSERT_GE(*head, 10u);
  const std::string to = std::to_string(*head);
  const std::string mid = std::to_string(*head * 2 / 3);
  auto index = [&](const std::string& db, const std::string& last, const std::string& range_size,
                   bool traces) {
    std::vector<std::string> args = {
        "index", "--rpc", GAPLESS_TEST_ANVIL_URL, "--db",     db,           "--from", "0",
        "--to",  last,    "--range-size",         range_size, "--progress", "off",    "--log-level",
        "info"};
    if (traces) args.push_back("--traces");
    return RunAll(args, 120'000);
  };
  auto [code1, out1] = index(db_.url(), mid, "7", /*traces=*/false);
  ASSERT_EQ(code1, 0) << out1;
  auto conn = PgConn::Connect(db_.url());
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  ASSERT_EQ(QueryCount(**conn, "SELECT count(*) FROM traces"), 0);

  // Before the backfill a fleet asking for traces is refused, naming the run that backfills.
  auto [refused, refusal] =
      RunAll({"run", "--rpc", GAPLESS_TEST_ANVIL_URL, "--db", db_.url(), "--redis",
              "redis://127.0.0.1:1", "--from", "0", "--to", to, "--traces", "--progress", "off"});
  EXPECT_NE(refused, 0) << refusal;
  EXPECT_NE(refusal.find("blocks 0-" + mid + " lack traces"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("gapless index --from 0 --to " + mid + " --traces"), std::string::npos)
      << refusal;

  auto [code2, out2] = index(db_.url(), to, "5", /*traces=*/true);
  ASSERT_EQ(code2, 0) << out2;
  EXPECT_NE(out2.find(std::to_string(*head * 2 / 3 + 1) +
                      " of those to do are committed without all of (token_metadata, traces)"),
            std::string::npos)
      << out2;
  EXPECT_GT(QueryCount(**conn, "SELECT count(*) FROM traces WHERE block_number <= " + mid), 0);

  PgTestDb clean;
  ASSERT_FALSE(clean.failed()) << clean.error().ToString();
  auto [code3, out3] = index(clean.url(), to, "5", /*traces=*/true);
  ASSERT_EQ(code3, 0) << out3;
  auto clean_conn = PgConn::Connect(clean.url());
  ASSERT_TRUE(clean_conn.ok()) << clean_conn.status().ToString();
  auto clean_pool = OpenPool(clean.url(), 1);
  ASSERT_NE(clean_pool, nullptr);
  EXPECT_EQ(DataChecksums(pool_.get(), 0, *head), DataChecksums(clean_pool.get(), 0, *head));
  auto traces = TableChecksum(**conn, "traces", 0, *head);
  auto clean_traces = TableChecksum(**clean_conn, "traces", 0, *head);
  ASSERT_TRUE(traces.ok() && clean_traces.ok()) << traces.status().ToString();
  EXPECT_EQ(*traces, *clean_traces);

  // Nothing left to do, nothing missing.
  auto [code4, out4] = index(db_.url(), to, "5", /*traces=*/true);
  ASSERT_EQ(code4, 0) << out4;
  EXPECT_NE(out4.find(": 0 to do"), std::string::npos) << out4;
  auto [verified, report] = RunForOutput({GaplessBinary(), "verify", "--db", db_.url(), "--from",
                                          "0", "--deep", "--anvil-blob-roots"});
  EXPECT_EQ(verified, 0) << report;
  EXPECT_EQ(report.find("missing dataset"), std::string::npos) << report;
}

// The Kafka block stream carries no traces: --traces with it is refused at the start.
TEST_F(TracesTest, TracesAreRefusedWithTheKafkaSource) {
  auto [code, out] = RunAll({"run", "--rpc", GAPLESS_TEST_ANVIL_URL, "--db", db_.url(), "--redis",
                             "redis://127.0.0.1:1", "--source", "kafka", "--brokers", "127.0.0.1:1",
                             "--traces", "--progress", "off"});
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("--traces: not with --source kafka"), std::string::npos) << out;
}

}  // namespace
}  // namespace gapless::e2e
