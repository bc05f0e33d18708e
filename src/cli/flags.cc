// flags.cc: the options several families of subcommands share (--config, --log-level,
// --log-format, --db, --metrics-addr, --rpc's help and check), the [env: ...] notes every option's
// help ends with, and DefineSubcommands, which adds each family in --help's order (cli/flags.h).
#include "cli/flags.h"

#include <string>

#include "cli/layered_args.h"
#include "rpc/endpoint_pool.h"

namespace gapless::cli {

const char* const kRpcHelp =
    "JSON-RPC URL of an EVM node (http or https), or several separated by commas, each with "
    "optional settings after a space, e.g. \"https://a/KEY weight=3 rate-limit=50, "
    "https://b/KEY\": "
    "a pool that routes by weight and health, fails over, hedges slow requests and learns each "
    "endpoint's limits; an endpoint on another chain than the first listed that answers is "
    "taken out and named (docs/rpc-pool.md)";

// The list is checked where it is given, so a typo stops the command before anything starts.
CLI::Validator RpcListCheck() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        auto parsed = gapless::ParseEndpointList(value);
        return parsed.ok() ? std::string() : parsed.status().message();
      },
      "URL[ weight=W][ rate-limit=R][,URL...]");
}

void AddConfigAndLogging(CLI::App* sub, CommonArgs* common) {
  sub->add_option("--config", common->config,
                  "Config file of `key = value` lines; keys are the long option names");
  sub->add_option("--log-level", common->log_level, "trace|debug|info|warn|error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  sub->add_option("--log-format", common->log_format,
                  "text, or json: one object per line (time, level, module, message, and the "
                  "worker, epoch and block range where the message names them)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
}

void AddMetricsAddr(CLI::App* sub, CommonArgs* common) {
  sub->add_option("--metrics-addr", common->metrics_addr,
                  "Serve /metrics (Prometheus), /healthz and /readyz on HOST:PORT, e.g. "
                  "127.0.0.1:9464 (0.0.0.0:9464: every interface); off when not given");
}

void AddCommon(CLI::App* sub, CommonArgs* common) {
  AddConfigAndLogging(sub, common);
  sub->add_option(
         "--db", common->db,
         "PostgreSQL URL, e.g. postgresql://user@127.0.0.1:5432/gapless; a server off "
         "the loopback is verified (sslmode=verify-full, the system's CAs) unless the "
         "URL sets sslmode; sslrootcert=PATH names a private CA; a password holding @ or / "
         "percent-encoded (%40, %2F)")
      ->required();
}

void DocumentEnv(CLI::App* sub) {
  for (CLI::Option* opt : sub->get_options()) {
    if (opt->get_lnames().empty() || opt->get_lnames()[0] == "help") continue;
    const std::string& key = opt->get_lnames()[0];
    std::string doc = opt->get_description() + " [env: " + EnvNameForKey(key) + "]";
    if (SecretKeys().count(key) > 0) {
      doc += " [or from a file, out of `ps`: --" + key + "-file PATH, --" + key + " @PATH, " +
             EnvNameForKey(key + "-file") + "]";
    }
    opt->description(doc);
  }
}

Subcommands DefineSubcommands(CLI::App* app, Args* a) {
  Subcommands s{};
  DefineNodeSubcommands(app, a, &s);
  DefineDbSubcommands(app, a, &s);
  DefineFleetSubcommands(app, a, &s);
  DefineEventsSubcommands(app, a, &s);
  return s;
}

}  // namespace gapless::cli
