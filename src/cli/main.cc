// gapless: the command-line entry point. Defines the program (its description, --version, the
// exit codes' footer) and its subcommands' flags (cli/flags.h), layers them (flags > GAPLESS_*
// env > config file, cli/input_checks.h), refuses bad input with exit code 2 before anything is
// contacted (a JSON log line when --log-format json is asked for), sets up logging, and runs the
// chosen subcommand (cli/from_flags.h: its flags become node/commands.h's options; node/ wires
// everything), whose end becomes the exit code (cli/exit_code.h). Nothing here opens a connection.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/block_bounds.h"
#include "cli/exit_code.h"
#include "cli/flags.h"
#include "cli/from_flags.h"
#include "cli/input_checks.h"
#include "cli/json_log.h"
#include "cli/layered_args.h"
#include "core/status.h"

namespace gapless::cli {
namespace {

void SetUpLogging(const std::string& level, const std::string& format) {
  auto logger = spdlog::stderr_color_mt("gapless");
  spdlog::set_default_logger(logger);
  if (format == "json") {
    spdlog::set_formatter(std::make_unique<JsonLogFormatter>());
  } else {
    spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  }
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace
}  // namespace gapless::cli

int main(int argc, char** argv) {
  using namespace gapless;
  using namespace gapless::cli;
  CLI::App app{
      "gapless: a crash-safe EVM blockchain indexer. Pulls blocks, transactions, receipts and "
      "logs from a JSON-RPC node into PostgreSQL with no gap and no duplicate.\n"
      "Every option can also be set with a GAPLESS_<OPTION> environment variable or in a "
      "--config file (`key = value`); flags beat the environment, which beats the file."};
  app.name("gapless");
  app.set_version_flag("--version", "gapless " GAPLESS_VERSION);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 done; 1 an error or problems found; 2 bad input (a flag, variable, "
      "config line or URL to fix; nothing written); 130 interrupted.");
  Args a;
  const Subcommands sub = DefineSubcommands(&app, &a);

  ValueOrigins origins;
  auto layered = LayeredCommandLine(argc, argv, sub.all(), &origins);
  Status checked = layered.status();
  // The command line in the order given (app.parse consumes the layered one), with
  // GAPLESS_LOG_FORMAT under it when the layered one (which holds the config file's too) could
  // not be built: whether a bad-input error is to be a JSON log line.
  std::vector<std::string> given(argv + 1, argv + argc);
  if (layered.ok()) {
    given.assign(layered->rbegin(), layered->rend());
  } else if (const char* env = std::getenv("GAPLESS_LOG_FORMAT"); env != nullptr) {
    given.insert(given.begin(), std::string("--log-format=") + env);
  }
  try {
    if (checked.ok()) app.parse(*layered);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    checked = FailedPrecondition(ParseErrorMessage(e, origins) +
                                 "\nRun with --help for more information.");
  }
  for (CLI::App* chosen : sub.all()) {
    if (checked.ok() && chosen->parsed()) checked = CheckServerUrls(*chosen, origins);
    if (checked.ok() && chosen->parsed()) checked = CheckBlockBounds(*chosen, origins);
  }
  if (!checked.ok()) {
    if (AsksForJsonLog(given)) {
      SetUpLogging("info", "json");
      spdlog::error("{}", checked.message());  // redacted where it was made
    } else {
      std::fprintf(stderr, "gapless: %s\n", checked.message().c_str());
    }
    return kExitUsage;
  }

  SetUpLogging(a.common.log_level, a.common.log_format);
  return RunParsedSubcommand(sub, a);
}
