// consumer_status: the consumer's status report as text (ConsumerStatus::ToString, seed 003's
// report). EventConsumer fills the report (consumer.cc); this file only words it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ctime>
#include <string>

#include "events/consumer.h"

namespace gapless {
namespace {

std::string Percent(double ratio) { return fmt::format("{:.1f}%", ratio * 100.0); }

std::string Duration(int64_t ms) {
  int64_t s = ms / 1000;
  return fmt::format("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
}

std::string WallTime(int64_t wall_micros) {
  time_t t = static_cast<time_t>(wall_micros / 1'000'000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string ConsumerStatus::ToString() const {
  std::string out = fmt::format("consumer {} status:\n", name);
  double load = capacity == 0 ? 0.0 : static_cast<double>(active) / static_cast<double>(capacity);
  out += fmt::format("  active tasks: {}/{} ({} capacity), {} resting after a failure\n", active,
                     capacity, Percent(load), resting);
  out += fmt::format(
      "  queue length: {} waiting for a slot ({} behind an earlier event of their partition), {} "
      "scheduled for a retry\n",
      queued, blocked, scheduled);
  out += fmt::format(
      "  total processed: {} ({:.2f}/min average), {} duplicates, {} dead-lettered, {} acked\n",
      processed, per_minute, duplicates, dead_lettered, acked);
  out += fmt::format("  success rate: {} ({} failures)\n", Percent(success_ratio), failures);
  out += fmt::format("  uptime: {} (started {})\n", Duration(uptime_ms),
                     WallTime(started_wall_micros));
  out += fmt::format("  partitions: [{}], paused: [{}]\n", fmt::join(partitions, ", "),
                     fmt::join(paused, ", "));
  if (last_error.empty()) {
    out += "  last error: none\n";
  } else {
    out += fmt::format("  last error: \"{}\" ({} s ago)\n", last_error, last_error_age_ms / 1000);
  }
  out += fmt::format("  memory: {:.1f} MB resident\n",
                     static_cast<double>(rss_bytes) / (1024.0 * 1024.0));
  out += lag ? fmt::format("  consumer lag: {}", *lag) : std::string("  consumer lag: unknown");
  return out;
}

}  // namespace gapless
