#include "cli/layered_args.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace gapless {
namespace {

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
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
      return FailedPrecondition(
          fmt::format("config file {} line {}: expected `key = value`, got `{}`", path, number, t));
    }
    ConfigEntry e;
    e.key = Trim(t.substr(0, eq));
    e.value = Trim(t.substr(eq + 1));
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
    const std::string& config_path, const std::function<const char*(const char*)>& getenv) {
  std::vector<std::string> out;
  for (const auto& e : config) {
    if (known_keys.count(e.key)) {
      out.push_back(fmt::format("--{}={}", e.key, e.value));
    } else if (!all_keys.count(e.key)) {
      return FailedPrecondition(
          fmt::format("config file {} line {}: unknown key `{}`", config_path, e.line, e.key));
    }
  }
  for (const auto& key : known_keys) {
    if (key == "config") continue;
    if (const char* v = getenv(EnvNameForKey(key).c_str()); v != nullptr) {
      out.push_back(fmt::format("--{}={}", key, v));
    }
  }
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace gapless
