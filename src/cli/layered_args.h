// Layered configuration: flags override GAPLESS_* environment variables, which override the
// config file.
//
// CLI11 reads a config file after the environment, the opposite of what an operator expects, so we
// layer ourselves: the config file's `key = value` lines and the matching GAPLESS_KEY variables are
// turned into `--key=value` arguments placed before the real ones, and every option takes the last
// value it is given. Unknown keys in the config file are errors that name the file, line and key;
// unknown GAPLESS_* variables are ignored (tests and wrappers set their own). Pure functions.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace gapless {

// "rpc-timeout" -> "GAPLESS_RPC_TIMEOUT"
std::string EnvNameForKey(const std::string& key);

struct ConfigEntry {
  std::string key;
  std::string value;
  int line = 0;
};

// Parses `key = value` lines; a line starting with '#' or ';' is a comment, and so is the end of a
// value from a '#' that follows a space or tab (`db = URL   # primary`); a '#' right after another
// character is the value's (a password may hold one raw), as is one inside double quotes, which
// may wrap a value; blank lines and [section] headers are ignored. An error names the file and
// line, and quotes the line redacted (core/redact.h RedactText): `db: postgresql://u:pw@h` shows no
// password.
Result<std::vector<ConfigEntry>> ParseConfigText(const std::string& text, const std::string& path);
Result<std::vector<ConfigEntry>> ReadConfigFile(const std::string& path);

// Where each option's value came from, by long name without "--": "config file PATH line N" or
// "GAPLESS_X". An option given on the command line (which beats both) is absent.
using ValueOrigins = std::map<std::string, std::string>;

// Builds the layered argument list for one subcommand.
//   argv:        the real arguments after the subcommand name
//   known_keys:  long option names of the subcommand (and global options), without "--"
//   all_keys:    long option names of every subcommand (a key known to another subcommand is
//                skipped silently, so one file can configure every subcommand)
//   config:      entries from the config file (may be empty)
//   getenv:      environment lookup
//   origins:     (nullable) filled with where each option's winning value came from
// Returns config args, then env args, then argv. Errors quote the config file's key redacted
// (core/redact.h RedactText): a mangled line may hold a secret.
Result<std::vector<std::string>> LayerArguments(
    const std::vector<std::string>& argv, const std::set<std::string>& known_keys,
    const std::set<std::string>& all_keys, const std::vector<ConfigEntry>& config,
    const std::string& config_path, const std::function<const char*(const char*)>& getenv,
    ValueOrigins* origins = nullptr);

// The options whose values hold credentials (URLs with passwords or API keys). Each can also be
// read from a file, so the secret stays out of argv, where every user sees it in `ps`:
// `--db-file PATH` (also GAPLESS_DB_FILE and `db-file = PATH` in a config file) or `--db @PATH`.
const std::set<std::string>& SecretKeys();

// Rewrites the layered arguments so that every `--KEY-file PATH`, `--KEY-file=PATH`, `--KEY @PATH`
// and `--KEY=@PATH` of a key in secret_keys becomes `--KEY=<the file's content>` (trailing
// whitespace and newlines removed). read_file returns nullopt when the file cannot be read; the
// error names the option and the path, never the content.
Result<std::vector<std::string>> ReadSecretFiles(
    const std::vector<std::string>& args, const std::set<std::string>& secret_keys,
    const std::function<std::optional<std::string>(const std::string&)>& read_file);

// read_file for ReadSecretFiles: the whole file, nullopt when it cannot be opened.
std::optional<std::string> ReadWholeFile(const std::string& path);

}  // namespace gapless
