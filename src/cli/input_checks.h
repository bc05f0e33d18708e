// input_checks: what the gapless binary refuses before it contacts anything, and how it says so;
// and the command line layered from flags, GAPLESS_* variables and the config file.
//
// Bad input is the user's to fix, so it ends the command at once with exit code 2 (kExitBadInput)
// and one message that names the option and where its value came from (the command line, a
// GAPLESS_* variable, or the config file's line), never an outage retried for minutes (issue 35,
// item 12). And every message that echoes what the user typed passes through the redactor
// (core/redact.h RedactText), including input that does not parse: a URL's password, API key or
// query never shows (item 10).
//
// The checks:
//  - server URLs (--db, --rpc, --redis, --redis-replica, --lock-nodes, --events, --bus): a scheme
//    the option takes (http/https for --rpc: ws:// is refused, not retried), a host, a port of
//    1..65535, and no raw '@' or '/' in the user info (percent-encode it), nor a raw '?' or '#'
//    but in a PostgreSQL or Redis URL (libpq and the Redis client read it as the password's);
//  - numbers: a value of a numeric option that is not a number ("zero"), or a negative one for an
//    option that takes none (--memory-budget -1, which CLI11 would wrap to 2^64 - 1);
//  - CLI11's own parse errors, reworded into the same shape and exit code.
// Pure functions over the parsed CLI::App; not thread-safe (neither is CLI11).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "cli/layered_args.h"
#include "core/status.h"

namespace gapless {

// The one exit code for input the user must fix: a flag, a config line, an environment variable,
// a URL that cannot be right, and (FailedPrecondition) a database or node that contradicts the
// flags. Documented in the README ("Using it") and docs/operations.md.
inline constexpr int kExitBadInput = 2;

// The command line with the config file and the environment layered under the real arguments of
// the chosen subcommand (layered_args.h), in the reverse order CLI11 takes, its numbers checked
// (CheckNumbers); `origins` gets where each value came from. An error (unreadable config file, an
// unknown key in it, a number that is none) names the file and line or the variable.
Result<std::vector<std::string>> LayeredCommandLine(int argc, char** argv,
                                                    const std::vector<CLI::App*>& subcommands,
                                                    ValueOrigins* origins);

// " (from GAPLESS_X)" / " (from config file F line N)" for option `key`, "" for the command line.
std::string OriginSuffix(const ValueOrigins& origins, const std::string& key);

// Checks one server URL option's value (a list for --rpc, --lock-nodes, --events, --bus). The
// option is named by its long name without "--"; other options pass. FailedPrecondition naming
// the option and the redacted URL otherwise.
Status CheckServerUrl(std::string_view option, std::string_view value);

// CheckServerUrl for every option of `sub` that was given (on the command line, in the
// environment or in the config file).
Status CheckServerUrls(const CLI::App& sub, const ValueOrigins& origins);

// Checks the numeric options' values in `args` (the layered arguments of `sub`, before CLI11
// parses them): each must be a number, and not negative for an unsigned option.
Status CheckNumbers(const CLI::App& sub, const std::vector<std::string>& args,
                    const ValueOrigins& origins);

// CLI11's message for a parse error, redacted, with the origin of the option it names.
std::string ParseErrorMessage(const CLI::ParseError& error, const ValueOrigins& origins);

}  // namespace gapless
