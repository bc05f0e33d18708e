// json_log: --log-format json. One JSON object per line, for log shippers (Loki, Elasticsearch,
// CloudWatch) that parse lines rather than read them:
//   {"time":"2026-11-27T16:31:30.454Z","level":"info","module":"worker","worker":"vm:14586:2",
//    "message":"worker vm:14586:2: the fence counter was missing from Redis; started at 0"}
//
// The message is the text line's, whole. module, worker, epoch and range are read from it, where
// the message names them in gapless's usual forms ("worker ID: ...", "epoch N", "task A-B",
// "blocks A..B"); a field the message does not name is left out. Messages are already redacted
// (core/redact.h), so nothing here has to hide anything. Pure functions, and a spdlog formatter.
#pragma once

#include <spdlog/formatter.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gapless {

// The JSON line (with its newline) of one log record.
std::string JsonLogLine(std::chrono::system_clock::time_point time, std::string_view level,
                        std::string_view message);

// Whether `args` (a command line in the order given, the layered one when it could be built) ask
// for --log-format json: the last --log-format's value is "json". The command line's own errors
// (bad input, exit code 2) are then JSON lines too, so a collector that parses lines gets no plain
// one; a log format that is itself the bad input is not asked for, and its error is plain text.
bool AsksForJsonLog(const std::vector<std::string>& args);

// A spdlog formatter writing JsonLogLine.
class JsonLogFormatter : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

}  // namespace gapless
