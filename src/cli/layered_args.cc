#include "cli/layered_args.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "core/redact.h"

namespace gapless {
namespace {

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

// The value of a `key = value` line without its trailing comment: a '#' after a space or tab.
// A '#' right after another character stays (a PostgreSQL or Redis URL's password may hold a raw
// one, input_checks.h), and so does one inside a value's double quotes.
std::string WithoutComment(const std::string& value) {
  size_t from = value.find_first_not_of(" \t");
  if (from == std::string::npos) return value;
  if (value[from] == '"') {
    size_t close = value.find('"', from + 1);
    if (close != std::string::npos) from = close + 1;
  }
  for (size_t i = std::max<size_t>(from, 1); i < value.size(); ++i) {
    if (value[i] == '#' && (value[i - 1] == ' ' || value[i - 1] == '\t')) return value.substr(0, i);
  }
  return value;
}

}  // namespace

std::string EnvNameForKey(const std::string& key) {
  std::string out = "GAPLESS_";
  for (char c : key) out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
  return out;
}

Result<std::vector<ConfigEntry>> ParseConfigText(const std::string& text, const std::string& path) {
  std::vector<ConfigEntry> out;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::string t = Trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';' || t[0] == '[') continue;
    size_t eq = t.find('=');
    if (eq == std::string::npos) {
      return FailedPrecondition(fmt::format(
          "config file {} line {}: expected `key = value`, got `{}`", path, number, RedactText(t)));
    }
    ConfigEntry e;
    e.key = Trim(t.substr(0, eq));
    e.value = Trim(WithoutComment(t.substr(eq + 1)));
    e.line = number;
    if (e.value.size() >= 2 && e.value.front() == '"' && e.value.back() == '"') {
      e.value = e.value.substr(1, e.value.size() - 2);
    }
    if (e.key.empty()) {
      return FailedPrecondition(fmt::format("config file {} line {}: empty key", path, number));
    }
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<ConfigEntry>> ReadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return FailedPrecondition(fmt::format("cannot read config file {}", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseConfigText(buffer.str(), path);
}

Result<std::vector<std::string>> LayerArguments(
    const std::vector<std::string>& argv, const std::set<std::string>& known_keys,
    const std::set<std::string>& all_keys, const std::vector<ConfigEntry>& config,
    const std::string& config_path, const std::function<const char*(const char*)>& getenv,
    ValueOrigins* origins) {
  std::vector<std::string> out;
  ValueOrigins from;
  // "db-file" sets "db": the origin is the secret option's.
  auto option_of = [](std::string key) {
    if (key.size() > 5 && key.ends_with("-file") &&
        SecretKeys().count(key.substr(0, key.size() - 5))) {
      key.resize(key.size() - 5);
    }
    return key;
  };
  for (const auto& e : config) {
    if (known_keys.count(e.key)) {
      out.push_back(fmt::format("--{}={}", e.key, e.value));
      from[option_of(e.key)] = fmt::format("config file {} line {}", config_path, e.line);
    } else if (!all_keys.count(e.key)) {
      return FailedPrecondition(fmt::format("config file {} line {}: unknown key `{}`", config_path,
                                            e.line, RedactText(e.key)));
    }
  }
  for (const auto& key : known_keys) {
    if (key == "config") continue;
    if (const char* v = getenv(EnvNameForKey(key).c_str()); v != nullptr) {
      out.push_back(fmt::format("--{}={}", key, v));
      from[option_of(key)] = EnvNameForKey(key);
    }
  }
  for (const std::string& arg : argv) {
    if (!arg.starts_with("--")) continue;
    from.erase(option_of(
        arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2)));
  }
  out.insert(out.end(), argv.begin(), argv.end());
  if (origins != nullptr) *origins = std::move(from);
  return out;
}

const std::set<std::string>& SecretKeys() {
  static const std::set<std::string> kKeys = {"db",  "redis",      "rpc",          "events",
                                              "bus", "lock-nodes", "redis-replica"};
  return kKeys;
}

Result<std::vector<std::string>> ReadSecretFiles(
    const std::vector<std::string>& args, const std::set<std::string>& secret_keys,
    const std::function<std::optional<std::string>(const std::string&)>& read_file) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) {
      out.push_back(arg);
      continue;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    bool file_flag = name.size() > 5 && name.compare(name.size() - 5, 5, "-file") == 0 &&
                     secret_keys.count(name.substr(0, name.size() - 5)) > 0;
    if (!file_flag && secret_keys.count(name) == 0) {
      out.push_back(arg);
      continue;
    }
    std::string value;
    bool has_value = eq != std::string::npos;
    if (has_value) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
      has_value = true;
    }
    std::string key = file_flag ? name.substr(0, name.size() - 5) : name;
    std::string path;
    if (file_flag) {
      if (!has_value || value.empty()) {
        return FailedPrecondition(fmt::format("--{}: expected a file path", name));
      }
      path = value;
    } else if (has_value && !value.empty() && value[0] == '@') {
      path = value.substr(1);
    } else {
      out.push_back("--" + key);
      if (has_value) out.push_back(value);
      continue;
    }
    std::optional<std::string> content = read_file(path);
    if (!content) {
      return FailedPrecondition(fmt::format("--{}: cannot read the file {}", name, path));
    }
    while (!content->empty() && std::isspace(static_cast<unsigned char>(content->back()))) {
      content->pop_back();
    }
    if (content->empty()) {
      return FailedPrecondition(fmt::format("--{}: the file {} is empty", name, path));
    }
    out.push_back(fmt::format("--{}={}", key, *content));
  }
  return out;
}

std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace gapless
