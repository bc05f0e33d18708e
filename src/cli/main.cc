// gapless: the command-line entry point. Parses layered configuration (flags > GAPLESS_* env >
// config file), sets up logging, and runs one subcommand: index, verify or export.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli/fleet_commands.h"
#include "cli/layered_args.h"
#include "coord/keys.h"
#include "coord/rate_limiter.h"
#include "coord/redis.h"
#include "core/status.h"
#include "decode/decode.h"
#include "node/indexer.h"
#include "node/leader.h"
#include "node/reconcile.h"
#include "node/worker.h"
#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "store/export.h"
#include "store/migrate.h"
#include "store/pg.h"
#include "store/queries.h"
#include "store/state.h"
#include "store/writer.h"

namespace gapless {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInterrupted = 130;

std::atomic<Indexer*> g_running_indexer{nullptr};

std::atomic<bool> g_stop_fleet{false};

void OnSignal(int) {
  if (Indexer* indexer = g_running_indexer.load()) indexer->Stop();
  g_stop_fleet.store(true);
}

struct CommonArgs {
  std::string config;
  std::string log_level = "info";
  std::string db;
};

struct IndexArgs {
  std::string rpc;
  std::string from = "0";
  std::string to = "finalized";
  uint64_t chain_id = 0;
  uint64_t range_size = 50;
  uint32_t batch = 10;
  uint32_t concurrency = 4;
  uint32_t db_connections = 2;
  int max_attempts = 5;
  int rpc_timeout_ms = 20'000;
  int connect_timeout_ms = 5'000;
  std::string write_mode = "staging";
  std::string progress = "auto";
};

struct RunArgs {
  std::string redis;
  uint32_t workers = 4;
  int64_t lease_ttl_ms = 30'000;
  double rate_limit = 0;  // requests per second per endpoint, fleet-wide; 0 = none
  bool follow = false;
  uint64_t confirmations = 0;
  int64_t max_lease_expiries = 10;
};

struct VerifyArgs {
  uint64_t from = 0;
  std::string to = "max";
};

struct ExportArgs {
  std::string table;
  uint64_t from = 0;
  std::string to = "max";
  std::string format = "csv";
  std::string output = "-";
  std::string token_standards = "erc20,erc721";
};

void AddCommon(CLI::App* sub, CommonArgs* common) {
  sub->add_option("--config", common->config,
                  "Config file of `key = value` lines; keys are the long option names");
  sub->add_option("--log-level", common->log_level, "trace|debug|info|warn|error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  sub->add_option("--db", common->db,
                  "PostgreSQL URL, e.g. postgresql://user@127.0.0.1:5432/gapless")
      ->required();
}

// Appends "[env: GAPLESS_X]" to every option's help so --help documents the environment too.
void DocumentEnv(CLI::App* sub) {
  for (CLI::Option* opt : sub->get_options()) {
    if (opt->get_lnames().empty() || opt->get_lnames()[0] == "help") continue;
    opt->description(opt->get_description() + " [env: " + EnvNameForKey(opt->get_lnames()[0]) +
                     "]");
  }
}

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("gapless");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  spdlog::set_level(spdlog::level::from_str(level));
}

int Report(const Status& st) {
  if (st.ok()) return kExitOk;
  spdlog::error("{}", st.ToString());
  return st.code() == Code::kFailedPrecondition ? kExitUsage : kExitError;
}

Result<uint64_t> ParseBlockBound(const std::string& text, const std::string& flag,
                                 JsonRpcClient* rpc) {
  if (!text.empty() && std::all_of(text.begin(), text.end(), ::isdigit)) {
    return static_cast<uint64_t>(std::stoull(text));
  }
  if (rpc != nullptr &&
      (text == "latest" || text == "safe" || text == "finalized" || text.rfind("0x", 0) == 0)) {
    return rpc->ResolveBlockTag(text);
  }
  return FailedPrecondition(fmt::format("{} {}: expected a block number{}", flag, text,
                                        rpc != nullptr ? " or latest|safe|finalized" : ""));
}

Result<std::unique_ptr<PgPool>> OpenDatabase(const std::string& url, size_t connections) {
  GAPLESS_ASSIGN_OR_RETURN(auto pool, PgPool::Open(url, connections));
  {
    auto conn = pool->Acquire();
    GAPLESS_RETURN_IF_ERROR(Migrate(*conn));
  }
  return pool;
}

// One JSON-RPC client per caller (clients are not thread-safe), with the flags' timeouts.
RpcClientFactory ClientFactory(const IndexArgs& args) {
  JsonRpcClientOptions rpc_options;
  rpc_options.max_attempts = args.max_attempts;
  CurlTransportOptions curl_options;
  curl_options.connect_timeout_ms = args.connect_timeout_ms;
  curl_options.request_timeout_ms = args.rpc_timeout_ms;
  return [url = args.rpc, rpc_options, curl_options]() {
    return std::make_unique<JsonRpcClient>(std::make_unique<CurlTransport>(url, curl_options),
                                           rpc_options);
  };
}

WriteMode ParseWriteMode(const std::string& mode) {
  return mode == "replace" ? WriteMode::kReplaceRange : WriteMode::kStagingUpsert;
}

struct NodeCheck {
  uint64_t chain_id;
  uint64_t from;
  uint64_t to;
  std::unique_ptr<PgPool> pool;
};

// Checks the node (chain id, --from/--to against its head, block 0) before touching the database,
// so a bad --rpc writes nothing; then opens the database, migrates it and checks it holds this
// chain (chain id and block 0 hash).
Result<NodeCheck> CheckNode(const CommonArgs& common, const IndexArgs& args, JsonRpcClient* rpc,
                            size_t db_connections) {
  // Check the node before touching the database, so a bad --rpc writes nothing.
  auto chain_id = rpc->ChainId();
  if (!chain_id.ok()) return chain_id.status();  // names the endpoint, redacted
  if (args.chain_id != 0 && *chain_id != args.chain_id) {
    return FailedPrecondition(fmt::format("--chain-id {}: the node at {} serves chain {}",
                                          args.chain_id, rpc->Describe(), *chain_id));
  }
  auto from = ParseBlockBound(args.from, "--from", rpc);
  if (!from.ok()) return from.status();
  auto to = ParseBlockBound(args.to, "--to", rpc);
  if (!to.ok()) return to.status();
  auto head = rpc->BlockNumber();
  if (!head.ok()) return head.status();
  if (*to > *head) {
    return FailedPrecondition(
        fmt::format("--to {}: above the node's head block {}; use --to latest to stop at the head",
                    *to, *head));
  }
  if (*from > *to) {
    return FailedPrecondition(fmt::format("--from {} is above --to {}", *from, *to));
  }

  // Block 0's hash tells this chain apart from another one with the same chain id.
  auto genesis_json = rpc->Call("eth_getBlockByNumber", R"(["0x0",false])");
  if (!genesis_json.ok()) return genesis_json.status();
  auto genesis_block = DecodeBlockHeader(*genesis_json, 0);
  if (!genesis_block.ok()) return genesis_block.status();
  const std::string* genesis = &genesis_block->hash;

  auto pool = OpenDatabase(common.db, db_connections);
  if (!pool.ok()) return pool.status();
  {
    auto conn = (*pool)->Acquire();
    if (Status st = EnsureChainId(*conn, *chain_id); !st.ok()) return st;
    if (Status st = EnsureGenesisHash(*conn, *genesis); !st.ok()) return st;
  }
  return NodeCheck{*chain_id, *from, *to, std::move(pool).value()};
}

int RunIndex(const CommonArgs& common, const IndexArgs& args) {
  RpcClientFactory make_client = ClientFactory(args);
  if (args.write_mode != "staging" && args.write_mode != "replace") {
    return Report(
        FailedPrecondition("--write-mode " + args.write_mode + ": expected staging or replace"));
  }

  auto rpc = make_client();
  auto node = CheckNode(common, args, rpc.get(), args.db_connections);
  if (!node.ok()) return Report(node.status());
  auto& [chain_id, from, to, pool] = *node;

  IndexerOptions options;
  options.from = from;
  options.to = to;
  options.range_size = args.range_size;
  options.blocks_per_request = args.batch;
  options.fetch_workers = args.concurrency;
  options.max_attempts = args.max_attempts;
  options.chain_id = chain_id;
  options.write_mode = ParseWriteMode(args.write_mode);
  Indexer indexer(options, make_client, pool.get());
  auto planned = indexer.Plan();
  if (!planned.ok()) return Report(planned.status());
  uint64_t requested = to >= from ? to - from + 1 : 0;
  spdlog::info("indexing blocks {}..{} of chain {}: {} to do, {} already committed", from, to,
               chain_id, *planned, requested - *planned);

  bool tty = args.progress == "tty" || (args.progress == "auto" && isatty(STDERR_FILENO));
  Progress progress(&indexer.counters(), *planned, tty, Env::Default());
  if (args.progress != "off") progress.Start();
  g_running_indexer.store(&indexer);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  Status st = indexer.Run();
  g_running_indexer.store(nullptr);
  progress.Stop();
  spdlog::info("{}", progress.Summary());
  if (IsInterrupted(st)) {
    spdlog::warn("interrupted: committed ranges are kept; rerun the same command to continue");
    return kExitInterrupted;
  }
  if (st.ok()) spdlog::info("done: blocks {}..{} are committed", from, to);
  return Report(st);
}

std::string HostName() {
  char buffer[256] = {0};
  if (gethostname(buffer, sizeof(buffer) - 1) != 0) return "localhost";
  return buffer;
}

// `run` (leader + workers in one process, the single-machine default) and `worker` (workers only,
// for a fleet whose leader runs elsewhere). Returns when the fixed range is done (run), on SIGINT /
// SIGTERM, or on a fatal error.
int RunFleet(const CommonArgs& common, const IndexArgs& args, const RunArgs& run,
             bool with_leader) {
  if (args.rpc_timeout_ms >= run.lease_ttl_ms) {
    return Report(FailedPrecondition(fmt::format(
        "--rpc-timeout {} must be below --lease-ttl {}: a healthy worker must not lose its lease "
        "to one slow request",
        args.rpc_timeout_ms, run.lease_ttl_ms)));
  }
  RpcClientFactory make_client = ClientFactory(args);
  auto rpc = make_client();
  auto node =
      CheckNode(common, args, rpc.get(), std::max<size_t>(args.db_connections, run.workers + 1));
  if (!node.ok()) return Report(node.status());
  auto& [chain_id, from, to, pool] = *node;

  auto redis = RedisConn::Connect(run.redis);
  if (!redis.ok()) return Report(redis.status());
  if (Status st = (*redis)->CheckNoEviction(); !st.ok()) return Report(st);
  auto database_id = [&] {
    auto conn = pool->Acquire();
    return EnsureDatabaseId(*conn);
  }();
  if (!database_id.ok()) return Report(database_id.status());
  Keys keys(static_cast<int64_t>(chain_id), *database_id);

  std::unique_ptr<RedisConn> limiter_conn;
  std::unique_ptr<RateLimiter> limiter;
  if (run.rate_limit > 0) {
    auto conn = RedisConn::Connect(run.redis);
    if (!conn.ok()) return Report(conn.status());
    limiter_conn = std::move(conn).value();
    RateLimiterOptions limiter_options;
    limiter_options.limit = std::max<int64_t>(1, static_cast<int64_t>(run.rate_limit));
    limiter_options.window_ms = 1000;
    limiter = std::make_unique<RateLimiter>(limiter_conn.get(), keys.rate_limit(rpc->Describe()),
                                            limiter_options);
  }

  std::string host = HostName();
  std::string process_id = fmt::format("{}:{}", host, getpid());
  std::unique_ptr<Leader> leader;
  if (with_leader) {
    LeaderOptions leader_options;
    leader_options.from = from;
    leader_options.range_size = args.range_size;
    leader_options.holder_id = process_id;
    leader_options.max_lease_expiries = run.max_lease_expiries;
    if (run.follow) {
      leader_options.follow = true;
      leader_options.to_tag = args.to;
      leader_options.confirmations = run.confirmations;
    } else {
      leader_options.to = to;
    }
    leader = std::make_unique<Leader>(leader_options, run.redis, keys, pool.get(), rpc.get());
  }

  std::vector<std::unique_ptr<Worker>> workers;
  for (uint32_t i = 0; i < run.workers; ++i) {
    WorkerOptions worker_options;
    worker_options.worker_id = fmt::format("{}:{}", process_id, i);
    worker_options.lease_ttl_ms = run.lease_ttl_ms;
    worker_options.rpc_timeout_ms = args.rpc_timeout_ms;
    worker_options.max_attempts = args.max_attempts;
    worker_options.blocks_per_request = args.batch;
    worker_options.chain_id = chain_id;
    worker_options.write_mode = ParseWriteMode(args.write_mode);
    worker_options.limiter = limiter.get();
    if (leader != nullptr && !run.follow) {
      Leader* l = leader.get();
      worker_options.done = [l] { return l->done(); };
    }
    workers.push_back(
        std::make_unique<Worker>(worker_options, make_client, run.redis, keys, pool.get()));
  }

  uint64_t total = to >= from ? to - from + 1 : 0;
  spdlog::info("{} blocks {}..{} of chain {} with {} workers{} (coordination: redis {})",
               with_leader ? "indexing" : "working on", from,
               run.follow ? "(following)" : std::to_string(to), chain_id, run.workers,
               with_leader ? " and the seeder/janitor/frontier role" : "", (*redis)->Describe());

  IndexCounters totals;
  bool tty = args.progress == "tty" || (args.progress == "auto" && isatty(STDERR_FILENO));
  Progress progress(&totals, total, tty, Env::Default(), /*plain_interval_seconds=*/30);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  g_stop_fleet.store(false);

  std::mutex mu;
  Status first_error;
  auto record = [&](const Status& st) {
    if (st.ok()) return;
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.ok()) first_error = st;
    g_stop_fleet.store(true);
  };
  std::vector<std::thread> threads;
  std::atomic<int> running{0};
  for (auto& w : workers) {
    ++running;
    threads.emplace_back([&, worker = w.get()] {
      record(worker->Run(g_stop_fleet));
      --running;
    });
  }
  if (leader != nullptr) {
    ++running;
    threads.emplace_back([&] {
      // Returns when a fixed range is done (the workers see done() and return by themselves too),
      // on a signal, or on an error, which record() turns into a stop of every worker.
      record(leader->Run(g_stop_fleet));
      --running;
    });
  }
  if (args.progress != "off") progress.Start();
  // The status report every 30 s (in logs; a terminal has the live bar instead): tasks done, rate,
  // success ratio, last error.
  auto next_report = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto started = std::chrono::steady_clock::now();
  while (running.load() > 0) {
    if (!tty && std::chrono::steady_clock::now() >= next_report) {
      next_report += std::chrono::seconds(30);
      uint64_t done = 0, failed = 0, blocks = 0;
      std::string last_error;
      for (auto& w : workers) {
        done += w->counters().tasks.load();
        failed += w->counters().failed.load();
        blocks += w->counters().blocks.load();
        if (std::string e = w->last_error(); !e.empty()) last_error = e;
      }
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      spdlog::info(
          "status: {} ranges done, {} failed attempts handed back, success {:.1f}%, {:.1f} "
          "blocks/s, last error: {}",
          done, failed, done + failed > 0 ? 100.0 * done / (done + failed) : 100.0,
          elapsed > 0 ? blocks / elapsed : 0.0, last_error.empty() ? "none" : last_error);
    }
    uint64_t blocks = 0, txs = 0, logs = 0, transfers = 0, tasks = 0, retries = 0;
    for (auto& w : workers) {
      blocks += w->counters().blocks.load();
      txs += w->counters().transactions.load();
      logs += w->counters().logs.load();
      transfers += w->counters().token_transfers.load();
      tasks += w->counters().tasks.load();
      retries += w->counters().retries.load();
    }
    totals.blocks = blocks;
    totals.transactions = txs;
    totals.logs = logs;
    totals.token_transfers = transfers;
    totals.ranges = tasks;
    totals.retries = retries;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  g_stop_fleet.store(true);
  for (auto& t : threads) t.join();
  progress.Stop();
  spdlog::info("{}", progress.Summary());
  uint64_t dead = 0, lost = 0;
  for (auto& w : workers) {
    dead += w->counters().dead_lettered.load();
    lost += w->counters().leases_lost.load();
  }
  if (dead > 0) {
    spdlog::warn(
        "{} ranges were dead-lettered: see `gapless dlq list`, re-queue with `gapless dlq retry`",
        dead);
  }
  if (lost > 0) spdlog::info("{} tasks were dropped after their lease was lost", lost);
  if (!first_error.ok()) return Report(first_error);
  if (leader != nullptr && leader->done()) {
    spdlog::info("done: blocks {}..{} are committed (frontier {})", from, to, leader->frontier());
    return kExitOk;
  }
  return kExitInterrupted;
}

int RunReconcile(const CommonArgs& common, const RunArgs& run, uint64_t from, uint64_t to,
                 uint64_t range_size) {
  auto pool = OpenDatabase(common.db, 1);
  if (!pool.ok()) return Report(pool.status());
  auto conn = (*pool)->Acquire();
  auto chain = LoadChainId(*conn);
  if (!chain.ok()) return Report(chain.status());
  if (!chain->has_value()) return Report(FailedPrecondition("the database holds no chain yet"));
  auto redis = RedisConn::Connect(run.redis);
  if (!redis.ok()) return Report(redis.status());
  if (Status st = (*redis)->CheckNoEviction(); !st.ok()) return Report(st);
  auto database_id = EnsureDatabaseId(*conn);
  if (!database_id.ok()) return Report(database_id.status());
  Keys keys(static_cast<int64_t>(**chain), *database_id);
  Status st = Reconcile(**redis, keys, *conn, from, to, range_size);
  if (st.ok()) spdlog::info("reconciled blocks {}..{} of chain {}", from, to, **chain);
  return Report(st);
}

Result<uint64_t> UpperBound(PgConn& conn, const std::string& to) {
  if (to == "max") {
    GAPLESS_ASSIGN_OR_RETURN(auto max, MaxBlock(conn));
    if (!max.has_value()) return FailedPrecondition("the database holds no blocks yet");
    return *max;
  }
  return ParseBlockBound(to, "--to", nullptr);
}

int RunVerify(const CommonArgs& common, const VerifyArgs& args) {
  auto pool = OpenDatabase(common.db, 1);
  if (!pool.ok()) return Report(pool.status());
  auto conn = (*pool)->Acquire();
  auto to = UpperBound(*conn, args.to);
  if (!to.ok()) return Report(to.status());
  auto report = Verify(*conn, args.from, *to);
  if (!report.ok()) return Report(report.status());
  std::cout << report->Render();
  return report->ok() ? kExitOk : kExitError;
}

int RunExport(const CommonArgs& common, const ExportArgs& args) {
  auto table = ParseExportTable(args.table);
  if (!table.ok()) return Report(table.status());
  if (args.format != "csv") {
    return Report(FailedPrecondition("--format " + args.format + ": only csv is supported"));
  }
  ExportOptions options;
  auto standards = ParseTokenStandards(args.token_standards);
  if (!standards.ok()) return Report(standards.status());
  options.token_standards = *standards;
  auto pool = OpenDatabase(common.db, 1);
  if (!pool.ok()) return Report(pool.status());
  auto conn = (*pool)->Acquire();
  auto to = UpperBound(*conn, args.to);
  if (!to.ok()) return Report(to.status());
  Status st;
  if (args.output == "-") {
    st = ExportCsv(*conn, *table, args.from, *to, std::cout, options);
    std::cout.flush();
  } else {
    std::ofstream out(args.output, std::ios::binary | std::ios::trunc);
    if (!out) return Report(FailedPrecondition("--output " + args.output + ": cannot open"));
    st = ExportCsv(*conn, *table, args.from, *to, out, options);
  }
  return Report(st);
}

}  // namespace
}  // namespace gapless

int main(int argc, char** argv) {
  using namespace gapless;
  CLI::App app{
      "gapless: a crash-safe EVM blockchain indexer. Pulls blocks, transactions, receipts and "
      "logs from a JSON-RPC node into PostgreSQL with no gap and no duplicate.\n"
      "Every option can also be set with a GAPLESS_<OPTION> environment variable or in a "
      "--config file (`key = value`); flags beat the environment, which beats the file."};
  app.name("gapless");
  app.set_version_flag("--version", "gapless " GAPLESS_VERSION);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(1);

  CommonArgs common;
  IndexArgs index_args;
  VerifyArgs verify_args;
  ExportArgs export_args;

  CLI::App* index = app.add_subcommand(
      "index", "Index blocks FROM..TO (TO may be latest, safe or finalized) into PostgreSQL");
  auto add_index_options = [&](CLI::App* sub, bool single) {
    AddCommon(sub, &common);
    sub->add_option("--rpc", index_args.rpc, "JSON-RPC URL of an EVM node (http or https)")
        ->required();
    sub->add_option("--from", index_args.from, "First block")->capture_default_str();
    sub->add_option("--to", index_args.to, "Last block: a number, latest, safe or finalized")
        ->capture_default_str();
    sub->add_option("--chain-id", index_args.chain_id,
                    "Expected chain id; refuse to run against another chain (0: take the node's)")
        ->capture_default_str();
    sub->add_option("--range-size", index_args.range_size,
                    "Blocks per committed range (one database transaction)")
        ->capture_default_str()
        ->check(CLI::Range(1, 100000));
    sub->add_option("--batch", index_args.batch, "Blocks per JSON-RPC batch request")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    if (single) {
      sub->add_option("--concurrency", index_args.concurrency,
                      "Fetch workers, i.e. the most JSON-RPC requests in flight at once")
          ->capture_default_str()
          ->check(CLI::Range(1, 256));
    }
    sub->add_option("--db-connections", index_args.db_connections, "PostgreSQL connections")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
    sub->add_option("--max-attempts", index_args.max_attempts,
                    "Attempts per request and per range before the run stops with the error")
        ->capture_default_str()
        ->check(CLI::Range(1, 100));
    sub->add_option("--rpc-timeout", index_args.rpc_timeout_ms, "JSON-RPC request timeout, ms")
        ->capture_default_str();
    sub->add_option("--connect-timeout", index_args.connect_timeout_ms,
                    "TCP/TLS connect timeout, ms")
        ->capture_default_str();
    sub->add_option("--write-mode", index_args.write_mode,
                    "staging: COPY into staging tables + INSERT ON CONFLICT DO NOTHING; replace: "
                    "delete the range's rows and COPY straight into the tables")
        ->capture_default_str()
        ->check(CLI::IsMember({"staging", "replace"}));
    sub->add_option("--progress", index_args.progress,
                    "auto: a live bar on a terminal, plain lines every 10 s otherwise; tty; "
                    "plain; off")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "tty", "plain", "off"}));
  };
  add_index_options(index, /*single=*/true);
  DocumentEnv(index);

  RunArgs run_args;
  auto add_run_options = [&](CLI::App* sub) {
    add_index_options(sub, /*single=*/false);
    sub->add_option("--redis", run_args.redis,
                    "Coordination Redis URL (maxmemory-policy must be noeviction)")
        ->required();
    sub->add_option("--workers", run_args.workers,
                    "Worker threads in this process (run: 0 = only the seeder/janitor/frontier "
                    "role, for a fleet whose workers all run elsewhere)")
        ->capture_default_str()
        ->check(CLI::Range(0, 256));
    sub->add_option("--lease-ttl", run_args.lease_ttl_ms,
                    "Lease of a claimed range, ms; --rpc-timeout must be below it")
        ->capture_default_str();
    sub->add_option("--rate-limit", run_args.rate_limit,
                    "Fleet-wide JSON-RPC requests per second to this endpoint (0: unlimited)")
        ->capture_default_str();
  };
  CLI::App* run = app.add_subcommand(
      "run",
      "Index FROM..TO with N workers plus the seeder/janitor/frontier role in one process, "
      "coordinated through Redis (the single-machine default)");
  add_run_options(run);
  run->add_flag("--follow", run_args.follow,
                "Keep following the chain: TO is a tag (latest|safe|finalized) that moves");
  run->add_option("--confirmations", run_args.confirmations,
                  "With --follow --to latest: stay this many blocks behind the head")
      ->capture_default_str();
  run->add_option("--max-lease-expiries", run_args.max_lease_expiries,
                  "Dead-letter a range whose lease expired this many times (its workers died or "
                  "stalled on it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  DocumentEnv(run);
  CLI::App* worker = app.add_subcommand(
      "worker", "Run N workers that claim ranges from the Redis queue until stopped (SIGTERM)");
  add_run_options(worker);
  DocumentEnv(worker);
  CLI::App* reconcile = app.add_subcommand(
      "reconcile",
      "Rebuild the Redis queue, fencing counter and frontier of FROM..TO from "
      "PostgreSQL (after Redis lost its data; also done automatically at start)");
  AddCommon(reconcile, &common);
  uint64_t reconcile_from = 0, reconcile_to = 0, reconcile_range = 50;
  reconcile->add_option("--redis", run_args.redis, "Coordination Redis URL")->required();
  reconcile->add_option("--from", reconcile_from, "First block")->capture_default_str();
  reconcile->add_option("--to", reconcile_to, "Last block")->required();
  reconcile->add_option("--range-size", reconcile_range, "Blocks per range task")
      ->capture_default_str();
  DocumentEnv(reconcile);

  CLI::App* verify = app.add_subcommand(
      "verify",
      "Check blocks FROM..TO in PostgreSQL: each present once, parent hashes chain, "
      "counts consistent. Exits 1 and lists the problems otherwise");
  AddCommon(verify, &common);
  verify->add_option("--from", verify_args.from, "First block")->capture_default_str();
  verify->add_option("--to", verify_args.to, "Last block (max: the highest indexed block)")
      ->capture_default_str();
  DocumentEnv(verify);

  CLI::App* exp = app.add_subcommand(
      "export", "Write a table as CSV with ethereum-etl's columns and formatting");
  AddCommon(exp, &common);
  exp->add_option("--table", export_args.table, "blocks|transactions|logs|token_transfers|receipts")
      ->required()
      ->check(CLI::IsMember({"blocks", "transactions", "logs", "token_transfers", "receipts"}));
  exp->add_option("--from", export_args.from, "First block")->capture_default_str();
  exp->add_option("--to", export_args.to, "Last block (max: the highest indexed block)")
      ->capture_default_str();
  exp->add_option("--format", export_args.format, "Output format (csv)")->capture_default_str();
  exp->add_option("--output", export_args.output, "Output file (- for stdout)")
      ->capture_default_str();
  exp->add_option("--token-standards", export_args.token_standards,
                  "For token_transfers: comma-separated subset of erc20,erc721,erc1155 "
                  "(ethereum-etl knows only erc20 and erc721)")
      ->capture_default_str();
  DocumentEnv(exp);

  FleetArgs fleet_args;
  std::string dlq_action, dlq_task;
  auto add_fleet = [&](CLI::App* sub) {
    AddCommon(sub, &common);
    sub->add_option("--redis", fleet_args.redis,
                    "Coordination Redis URL, e.g. redis://127.0.0.1:6379")
        ->required();
    sub->add_option("--chain-id", fleet_args.chain_id,
                    "Chain whose coordination state to use (0: the one recorded in the database)")
        ->capture_default_str();
  };
  CLI::App* status = app.add_subcommand(
      "status",
      "Show the fleet at a glance: frontier, queue depths, leases, dead letters, live "
      "workers with their ranges and rates, lag to the chain head");
  add_fleet(status);
  status->add_option("--rpc", fleet_args.rpc, "JSON-RPC URL, to show the head and the lag");
  DocumentEnv(status);
  CLI::App* dlq = app.add_subcommand(
      "dlq", "Dead-lettered ranges: `dlq list`, or `dlq retry FROM-TO|all` to re-queue them");
  add_fleet(dlq);
  dlq->add_option("action", dlq_action, "list or retry")
      ->required()
      ->check(CLI::IsMember({"list", "retry"}));
  dlq->add_option("task", dlq_task, "with retry: the range FROM-TO, or all");
  DocumentEnv(dlq);
  const std::vector<CLI::App*> subcommands = {index, verify, exp,    status,
                                              dlq,   run,    worker, reconcile};

  // Layer config file and environment under the real arguments of the chosen subcommand.
  std::vector<std::string> raw(argv + 1, argv + argc);
  CLI::App* chosen = nullptr;
  size_t sub_pos = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    for (CLI::App* sub : subcommands) {
      if (raw[i] == sub->get_name()) {
        chosen = sub;
        sub_pos = i;
        break;
      }
    }
    if (chosen != nullptr) break;
  }
  std::vector<std::string> layered(raw.begin(), raw.end());
  if (chosen != nullptr) {
    std::set<std::string> known, all;
    for (CLI::App* sub : subcommands) {
      for (CLI::Option* opt : sub->get_options()) {
        if (opt->get_lnames().empty()) continue;
        all.insert(opt->get_lnames()[0]);
        if (sub == chosen) known.insert(opt->get_lnames()[0]);
      }
    }
    std::vector<std::string> rest(raw.begin() + static_cast<long>(sub_pos) + 1, raw.end());
    std::string config_path;
    if (const char* env_config = std::getenv("GAPLESS_CONFIG")) config_path = env_config;
    for (size_t i = 0; i < rest.size(); ++i) {
      if (rest[i] == "--config" && i + 1 < rest.size()) config_path = rest[i + 1];
      if (rest[i].rfind("--config=", 0) == 0) config_path = rest[i].substr(9);
    }
    std::vector<ConfigEntry> config;
    if (!config_path.empty()) {
      auto read = ReadConfigFile(config_path);
      if (!read.ok()) {
        std::fprintf(stderr, "gapless: %s\n", read.status().message().c_str());
        return kExitUsage;
      }
      config = std::move(read).value();
    }
    auto args = LayerArguments(rest, known, all, config, config_path, std::getenv);
    if (!args.ok()) {
      std::fprintf(stderr, "gapless: %s\n", args.status().message().c_str());
      return kExitUsage;
    }
    layered.assign(raw.begin(), raw.begin() + static_cast<long>(sub_pos) + 1);
    layered.insert(layered.end(), args->begin(), args->end());
  }
  std::reverse(layered.begin(), layered.end());  // CLI11 takes the vector in reverse order
  try {
    app.parse(layered);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  SetUpLogging(common.log_level);
  if (index->parsed()) return RunIndex(common, index_args);
  if (run->parsed()) return RunFleet(common, index_args, run_args, /*with_leader=*/true);
  if (worker->parsed()) {
    if (run_args.workers == 0) {
      return Report(FailedPrecondition("worker: --workers must be at least 1 (0 is for run only)"));
    }
    return RunFleet(common, index_args, run_args, /*with_leader=*/false);
  }
  if (reconcile->parsed()) {
    return RunReconcile(common, run_args, reconcile_from, reconcile_to, reconcile_range);
  }
  if (verify->parsed()) return RunVerify(common, verify_args);
  if (exp->parsed()) return RunExport(common, export_args);
  fleet_args.db = common.db;
  if (status->parsed()) return RunStatus(fleet_args);
  if (dlq->parsed()) {
    if (dlq_action == "retry" && dlq_task.empty()) {
      spdlog::error("dlq retry: name a range FROM-TO, or all");
      return kExitUsage;
    }
    return RunDlq(fleet_args, dlq_action, dlq_task);
  }
  return kExitUsage;
}
