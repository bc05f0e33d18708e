#include "node/progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdio>

namespace gapless {

Progress::Progress(const IndexCounters* counters, uint64_t total_blocks, bool tty, Env* env,
                   int plain_interval_seconds)
    : counters_(counters),
      total_(total_blocks),
      tty_(tty),
      env_(env),
      plain_interval_(plain_interval_seconds),
      start_micros_(env->NowMicros()) {}

Progress::~Progress() { Stop(); }

void Progress::Start() {
  start_micros_ = env_->NowMicros();
  thread_ = std::thread([this] { Loop(); });
}

void Progress::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (tty_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
}

void Progress::Loop() {
  auto period = tty_ ? std::chrono::milliseconds(250) : std::chrono::seconds(plain_interval_);
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", Line(true).c_str());
      std::fflush(stderr);
    } else {
      spdlog::info("{}", Line(false));
    }
  }
}

std::string Progress::Thousands(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count > 0 && count % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++count;
  }
  return out;
}

std::string Progress::Duration(double seconds) {
  if (seconds < 0) seconds = 0;
  auto s = static_cast<uint64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string Progress::Line(bool tty) const {
  uint64_t blocks = counters_->blocks.load();
  uint64_t txs = counters_->transactions.load();
  double elapsed = static_cast<double>(env_->NowMicros() - start_micros_) / 1e6;
  double bps = elapsed > 0 ? static_cast<double>(blocks) / elapsed : 0;
  double tps = elapsed > 0 ? static_cast<double>(txs) / elapsed : 0;
  double fraction = total_ > 0 ? static_cast<double>(blocks) / static_cast<double>(total_) : 1.0;
  std::string eta =
      bps > 0 && blocks < total_ ? Duration(static_cast<double>(total_ - blocks) / bps) : "--:--";
  std::string text =
      fmt::format("{:5.1f}% {}/{} blocks  {:.1f} blk/s  {:.0f} tx/s  ETA {}", fraction * 100,
                  Thousands(blocks), Thousands(total_), bps, tps, eta);
  if (counters_->retries.load() > 0) text += fmt::format("  retries {}", counters_->retries.load());
  if (!tty) return "progress " + text;
  constexpr int kWidth = 24;
  int filled = static_cast<int>(fraction * kWidth);
  if (filled > kWidth) filled = kWidth;
  return "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] " + text;
}

std::string Progress::Summary() const {
  double elapsed = static_cast<double>(env_->NowMicros() - start_micros_) / 1e6;
  uint64_t blocks = counters_->blocks.load();
  uint64_t txs = counters_->transactions.load();
  return fmt::format(
      "{} blocks, {} transactions, {} logs, {} token transfers in {:.1f} s ({:.1f} blocks/s, "
      "{:.0f} "
      "tx/s, {} retries)",
      Thousands(blocks), Thousands(txs), Thousands(counters_->logs.load()),
      Thousands(counters_->token_transfers.load()), elapsed,
      elapsed > 0 ? static_cast<double>(blocks) / elapsed : 0.0,
      elapsed > 0 ? static_cast<double>(txs) / elapsed : 0.0, counters_->retries.load());
}

}  // namespace gapless
