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
#include <vector>

#include "cli/fleet_commands.h"
#include "cli/layered_args.h"
#include "core/status.h"
#include "decode/decode.h"
#include "node/indexer.h"
#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "store/export.h"
#include "store/migrate.h"
#include "store/pg.h"
#include "store/queries.h"
#include "store/writer.h"

namespace gapless {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInterrupted = 130;

std::atomic<Indexer*> g_running_indexer{nullptr};

void OnSignal(int) {
  if (Indexer* indexer = g_running_indexer.load()) indexer->Stop();
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

int RunIndex(const CommonArgs& common, const IndexArgs& args) {
  JsonRpcClientOptions rpc_options;
  rpc_options.max_attempts = args.max_attempts;
  CurlTransportOptions curl_options;
  curl_options.connect_timeout_ms = args.connect_timeout_ms;
  curl_options.request_timeout_ms = args.rpc_timeout_ms;
  auto make_client = [&]() {
    return std::make_unique<JsonRpcClient>(std::make_unique<CurlTransport>(args.rpc, curl_options),
                                           rpc_options);
  };
  if (args.write_mode != "staging" && args.write_mode != "replace") {
    return Report(
        FailedPrecondition("--write-mode " + args.write_mode + ": expected staging or replace"));
  }

  // Check the node before touching the database, so a bad --rpc writes nothing.
  auto rpc = make_client();
  auto chain_id = rpc->ChainId();
  if (!chain_id.ok()) return Report(chain_id.status());  // names the endpoint, redacted
  if (args.chain_id != 0 && *chain_id != args.chain_id) {
    return Report(FailedPrecondition(fmt::format("--chain-id {}: the node at {} serves chain {}",
                                                 args.chain_id, rpc->Describe(), *chain_id)));
  }
  auto from = ParseBlockBound(args.from, "--from", rpc.get());
  if (!from.ok()) return Report(from.status());
  auto to = ParseBlockBound(args.to, "--to", rpc.get());
  if (!to.ok()) return Report(to.status());
  auto head = rpc->BlockNumber();
  if (!head.ok()) return Report(head.status());
  if (*to > *head) {
    return Report(FailedPrecondition(
        fmt::format("--to {}: above the node's head block {}; use --to latest to stop at the head",
                    *to, *head)));
  }
  if (*from > *to) {
    return Report(FailedPrecondition(fmt::format("--from {} is above --to {}", *from, *to)));
  }

  // Block 0's hash tells this chain apart from another one with the same chain id.
  auto genesis_json = rpc->Call("eth_getBlockByNumber", R"(["0x0",false])");
  if (!genesis_json.ok()) return Report(genesis_json.status());
  auto genesis_block = DecodeBlockHeader(*genesis_json, 0);
  if (!genesis_block.ok()) return Report(genesis_block.status());
  const std::string* genesis = &genesis_block->hash;

  auto pool = OpenDatabase(common.db, args.db_connections);
  if (!pool.ok()) return Report(pool.status());
  {
    auto conn = (*pool)->Acquire();
    if (Status st = EnsureChainId(*conn, *chain_id); !st.ok()) return Report(st);
    if (Status st = EnsureGenesisHash(*conn, *genesis); !st.ok()) return Report(st);
  }

  IndexerOptions options;
  options.from = *from;
  options.to = *to;
  options.range_size = args.range_size;
  options.blocks_per_request = args.batch;
  options.fetch_workers = args.concurrency;
  options.max_attempts = args.max_attempts;
  options.chain_id = *chain_id;
  options.write_mode =
      args.write_mode == "replace" ? WriteMode::kReplaceRange : WriteMode::kStagingUpsert;
  Indexer indexer(options, make_client, pool->get());
  auto planned = indexer.Plan();
  if (!planned.ok()) return Report(planned.status());
  uint64_t requested = *to >= *from ? *to - *from + 1 : 0;
  spdlog::info("indexing blocks {}..{} of chain {}: {} to do, {} already committed", *from, *to,
               *chain_id, *planned, requested - *planned);

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
  if (st.code() == Code::kAborted && st.message() == "interrupted") {
    spdlog::warn("interrupted: committed ranges are kept; rerun the same command to continue");
    return kExitInterrupted;
  }
  if (st.ok()) spdlog::info("done: blocks {}..{} are committed", *from, *to);
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
  AddCommon(index, &common);
  index->add_option("--rpc", index_args.rpc, "JSON-RPC URL of an EVM node (http or https)")
      ->required();
  index->add_option("--from", index_args.from, "First block")->capture_default_str();
  index->add_option("--to", index_args.to, "Last block: a number, latest, safe or finalized")
      ->capture_default_str();
  index
      ->add_option("--chain-id", index_args.chain_id,
                   "Expected chain id; refuse to run against another chain (0: take the node's)")
      ->capture_default_str();
  index
      ->add_option("--range-size", index_args.range_size,
                   "Blocks per committed range (one database transaction)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  index->add_option("--batch", index_args.batch, "Blocks per JSON-RPC batch request")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  index
      ->add_option("--concurrency", index_args.concurrency,
                   "Fetch workers, i.e. the most JSON-RPC requests in flight at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  index->add_option("--db-connections", index_args.db_connections, "PostgreSQL connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  index
      ->add_option("--max-attempts", index_args.max_attempts,
                   "Attempts per request and per range before the run stops with the error")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  index->add_option("--rpc-timeout", index_args.rpc_timeout_ms, "JSON-RPC request timeout, ms")
      ->capture_default_str();
  index
      ->add_option("--connect-timeout", index_args.connect_timeout_ms,
                   "TCP/TLS connect timeout, ms")
      ->capture_default_str();
  index
      ->add_option("--write-mode", index_args.write_mode,
                   "staging: COPY into staging tables + INSERT ON CONFLICT DO NOTHING; replace: "
                   "delete the range's rows and COPY straight into the tables")
      ->capture_default_str()
      ->check(CLI::IsMember({"staging", "replace"}));
  index
      ->add_option("--progress", index_args.progress,
                   "auto: a live bar on a terminal, plain lines every 10 s otherwise; tty; "
                   "plain; off")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "tty", "plain", "off"}));
  DocumentEnv(index);

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
  const std::vector<CLI::App*> subcommands = {index, verify, exp, status, dlq};

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
