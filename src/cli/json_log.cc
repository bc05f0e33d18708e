#include "cli/json_log.h"

#include <fmt/format.h>
#include <spdlog/details/log_msg.h>

#include <array>
#include <ctime>
#include <regex>

#include "events/event.h"

namespace gapless {
namespace {

// The roles whose messages start "<role> ...: " (node/, coord/, events/).
constexpr std::array<std::string_view, 14> kModules = {
    "worker", "leader",    "elector", "relay",   "consumer", "events",    "kafka",
    "index",  "reconcile", "status",  "mempool", "produce",  "failpoint", "chaos"};

std::string_view ModuleOf(std::string_view message) {
  size_t space = message.find_first_of(" :");
  std::string_view first = message.substr(0, space);
  for (std::string_view m : kModules) {
    if (first == m) return m;
  }
  return "gapless";
}

}  // namespace

std::string JsonLogLine(std::chrono::system_clock::time_point time, std::string_view level,
                        std::string_view message) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch());
  std::time_t seconds = static_cast<std::time_t>(ms.count() / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out = fmt::format("{{\"time\":\"{}.{:03}Z\",\"level\":", stamp, ms.count() % 1000);
  AppendJsonString(out, level);
  out += ",\"module\":";
  AppendJsonString(out, ModuleOf(message));
  const std::string text(message);
  static const std::regex kWorker(R"(\bworker (\S+): )");
  static const std::regex kEpoch(R"(\bepoch (\d+)\b)");
  static const std::regex kRange(R"(\b(?:task|range|ranges?|blocks?) (\d+)(?:-|\.\.)(\d+)\b)");
  std::smatch m;
  if (std::regex_search(text, m, kWorker)) {
    out += ",\"worker\":";
    AppendJsonString(out, m[1].str());
  }
  if (std::regex_search(text, m, kEpoch)) out += ",\"epoch\":" + m[1].str();
  if (std::regex_search(text, m, kRange)) {
    out += ",\"range\":";
    AppendJsonString(out, m[1].str() + "-" + m[2].str());
  }
  out += ",\"message\":";
  AppendJsonString(out, message);
  out += "}\n";
  return out;
}

bool AsksForJsonLog(const std::vector<std::string>& args) {
  std::string format;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--log-format" && i + 1 < args.size()) format = args[++i];
    if (args[i].starts_with("--log-format=")) format = args[i].substr(13);
  }
  return format == "json";
}

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  const auto level = spdlog::level::to_string_view(msg.level);
  std::string line = JsonLogLine(msg.time, std::string_view(level.data(), level.size()),
                                 std::string_view(msg.payload.data(), msg.payload.size()));
  dest.append(line.data(), line.data() + line.size());
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

}  // namespace gapless
