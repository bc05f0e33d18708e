#include "node/readiness.h"

#include <fmt/format.h>

#include <thread>

namespace gapless {

ReadinessProber::ReadinessProber(std::chrono::milliseconds interval)
    : interval_(interval), state_(std::make_shared<State>()) {}

ReadinessProber::~ReadinessProber() { Stop(); }

void ReadinessProber::Stop() {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->quit = true;
  state_->wake.notify_all();
  state_->wake.wait_for(lock, std::chrono::seconds(3),
                        [this] { return state_->threads_running == 0; });
}

void ReadinessProber::Add(std::string name, Probe probe, std::chrono::milliseconds every) {
  std::lock_guard<std::mutex> lock(state_->mu);
  Entry& e = state_->entries.emplace_back();
  e.name = std::move(name);
  e.probe = std::move(probe);
  e.every = std::max(every, interval_);
  if (state_->running) StartLocked(&e);
}

void ReadinessProber::SetStarting(std::string what) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->starting = std::move(what);
}

void ReadinessProber::SetStarted() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->started = true;
}

void ReadinessProber::Start() {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->running) return;
  state_->running = true;
  for (Entry& e : state_->entries) StartLocked(&e);
}

void ReadinessProber::StartLocked(Entry* e) {
  ++state_->threads_running;
  std::thread(Loop, state_, e).detach();
}

void ReadinessProber::Loop(std::shared_ptr<State> state, Entry* e) {
  std::unique_lock<std::mutex> lock(state->mu);
  while (!state->quit) {
    lock.unlock();
    Result<std::string> result = e->probe();  // only this thread touches probe
    lock.lock();
    e->probed = true;
    e->ok = result.ok();
    e->detail = result.ok() ? *result : result.status().message();
    e->at = std::chrono::steady_clock::now();
    state->wake.wait_for(lock, e->every, [&] { return state->quit; });
  }
  --state->threads_running;
  state->wake.notify_all();
}

ReadinessProber::Report ReadinessProber::Read() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  const auto now = std::chrono::steady_clock::now();
  bool ready = state_->started;
  std::string lines;
  if (!state_->started) lines += "starting: " + state_->starting + "\n";
  for (const Entry& e : state_->entries) {
    if (!e.probed) {
      ready = false;
      lines += e.name + ": not probed yet\n";
      continue;
    }
    const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - e.at);
    // Three rounds missed (the probe hangs past its own timeouts): no longer trusted.
    if (age > 3 * e.every + std::chrono::seconds(2)) {
      ready = false;
      lines += fmt::format("{}: FAILED: no result for {:.1f} s (last: {})\n", e.name,
                           static_cast<double>(age.count()) / 1e3, e.detail);
      continue;
    }
    if (!e.ok) ready = false;
    lines += fmt::format("{}: {}{}\n", e.name, e.ok ? "ok: " : "FAILED: ", e.detail);
  }
  return Report{ready, std::string(ready ? "ready\n" : "not ready\n") + lines};
}

}  // namespace gapless
